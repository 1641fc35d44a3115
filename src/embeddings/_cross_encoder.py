"""A cross-encoder reranker run in-process on onnxruntime, from a local model directory.

The directory holds an ONNX export of a sequence-classification model (``model.onnx``, or the only
``*.onnx`` file; e.g. ``cross-encoder/ms-marco-MiniLM-L-6-v2`` exported with Optimum) and its
``tokenizer.json``. No PyPI package ships cross-encoder weights, so there is no bundled default: bring
your own directory (``RERANKER_PROVIDER=cross-encoder``, ``RERANKER_MODEL_DIR=/path``).

Each (query, document) pair is tokenized as a pair (the document side truncated to ``max_length``
tokens), the model's first output is read as the relevance logit: shape ``[n, 1]`` or ``[n]`` directly,
``[n, 2]`` (two-class heads) as the positive class minus the negative one. Inference runs in one worker
thread, off the event loop.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._errors import InvalidResponse, ProviderConfigError
from ._rerank import check_inputs, validate_scores
from ._worker import ModelWorker

__all__ = ["CrossEncoderReranker"]

#: BERT-style cross-encoders were trained on at most 512 word pieces.
DEFAULT_MAX_LENGTH = 512
#: Pairs per inference call: 16 x 512 tokens keeps peak memory well under 1 GB for a MiniLM-size model.
DEFAULT_BATCH_SIZE = 16


def _model_file(directory: Path) -> Path:
    if (directory / "model.onnx").is_file():
        return directory / "model.onnx"
    found = sorted(directory.glob("*.onnx"))
    if len(found) != 1:
        raise ProviderConfigError(
            f"{directory} must hold model.onnx (or exactly one *.onnx file); found {[p.name for p in found]}"
        )
    return found[0]


class _Model:
    """The loaded tokenizer + ONNX session; used from one worker thread only."""

    def __init__(self, directory: Path, threads: int, max_length: int) -> None:
        if not directory.is_dir():
            raise ProviderConfigError(f"reranker model directory {directory} does not exist")
        tokenizer_path = directory / "tokenizer.json"
        if not tokenizer_path.is_file():
            raise ProviderConfigError(f"{directory} has no tokenizer.json")
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(
                str(_model_file(directory)), options, providers=["CPUExecutionProvider"]
            )
            self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except ProviderConfigError:
            raise
        except Exception as exc:  # onnxruntime / tokenizers raise their own types for unreadable files
            raise ProviderConfigError(f"cannot load the reranker model from {directory}: {exc}") from exc
        self.tokenizer.enable_truncation(max_length=max_length, strategy="only_second")
        self.tokenizer.enable_padding()
        self.inputs = {i.name for i in self.session.get_inputs()}
        if "input_ids" not in self.inputs:
            raise ProviderConfigError(f"{directory}: the model takes no input_ids; not a text cross-encoder")

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        encodings = self.tokenizer.encode_batch([(query, d) for d in documents])
        feed = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64)}
        if "attention_mask" in self.inputs:
            feed["attention_mask"] = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        logits = np.asarray(self.session.run(None, feed)[0], dtype=np.float64)
        if logits.ndim == 2 and logits.shape[1] == 2:
            logits = logits[:, 1] - logits[:, 0]
        elif logits.ndim == 2 and logits.shape[1] == 1:
            logits = logits[:, 0]
        elif logits.ndim != 1:
            raise InvalidResponse(f"cross-encoder output has shape {logits.shape}; expected [n], [n, 1] or [n, 2]")
        scores: list[float] = logits.tolist()
        return scores


class CrossEncoderReranker:
    """Scores (query, document) pairs with a local ONNX cross-encoder (see the module docstring)."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        threads: int = 1,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = DEFAULT_BATCH_SIZE,
        model_id: str | None = None,
    ) -> None:
        if threads < 1 or max_length < 8 or batch_size < 1:
            raise ProviderConfigError("threads >= 1, max_length >= 8 and batch_size >= 1 are required")
        self._dir = Path(model_dir)
        self._threads, self._max_length, self._batch = threads, max_length, batch_size
        self._model_id = model_id or f"cross-encoder:{self._dir.name}"
        self._worker = ModelWorker("rerank-local", lambda: _Model(self._dir, self._threads, self._max_length))

    @property
    def model_id(self) -> str:
        return self._model_id

    def __repr__(self) -> str:
        return f"CrossEncoderReranker(model_dir={str(self._dir)!r}, threads={self._threads})"

    async def load(self) -> None:
        """Load the model now (otherwise the first call does); a bad directory is a ProviderConfigError."""
        await self._worker.model()

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        check_inputs(documents)
        if not documents:
            return []
        model = await self._worker.model()
        out: list[float] = []
        for start in range(0, len(documents), self._batch):
            batch = list(documents[start : start + self._batch])
            raw = await self._worker.run(model.score, query, batch)
            out += validate_scores(enumerate(raw), count=len(batch), offset=start)
        return out

    async def aclose(self) -> None:
        await self._worker.aclose()
