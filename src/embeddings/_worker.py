"""One worker thread per in-process model: loaded there once (lazily), every inference run there, so the
event loop never blocks and the model (onnxruntime session, tokenizer) is only ever touched by one thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, ParamSpec, TypeVar

__all__ = ["ModelWorker"]

M = TypeVar("M")
R = TypeVar("R")
P = ParamSpec("P")


class ModelWorker(Generic[M]):
    def __init__(self, thread_name: str, load: Callable[[], M]) -> None:
        self._thread_name = thread_name
        self._load = load
        self._executor: ThreadPoolExecutor | None = None
        self._model: M | None = None
        self._lock = asyncio.Lock()

    async def model(self) -> M:
        """The loaded model (loading it in the worker thread the first time). Idempotent."""
        if self._model is not None:
            return self._model
        async with self._lock:
            if self._model is None:
                self._model = await asyncio.get_running_loop().run_in_executor(self._pool(), self._load)
        return self._model

    async def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn(*args)`` in the worker thread (after :meth:`model`)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool(), lambda: fn(*args, **kwargs))

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._thread_name)
        return self._executor

    async def aclose(self) -> None:
        """Drop the model and stop the thread; a later call loads it again."""
        executor, self._executor = self._executor, None
        self._model = None
        if executor is not None:
            await asyncio.get_running_loop().run_in_executor(None, executor.shutdown)
