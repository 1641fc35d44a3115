"""Worker threads for an in-process model: it is loaded once (lazily) off the event loop, and every inference
runs off it too, so the event loop never blocks.

Two lanes: ``run`` uses a pool of ``workers`` threads (document batches, several at once: onnxruntime's
``InferenceSession.run`` is thread-safe, and with one intra-op thread each call keeps one core busy);
``run_query`` uses a thread of its own, so a single query's embedding never waits behind a queue of
document batches. With ``workers=1`` and no query lane (the reranker), one thread does everything.
"""

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
    def __init__(self, thread_name: str, load: Callable[[], M], *, workers: int = 1, query_lane: bool = False) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self._thread_name = thread_name
        self._load = load
        self._workers = workers
        self._query_lane = query_lane
        self._executor: ThreadPoolExecutor | None = None
        self._query_executor: ThreadPoolExecutor | None = None
        self._model: M | None = None
        self._lock = asyncio.Lock()

    @property
    def loaded(self) -> M | None:
        """The model if it is loaded, else None (nothing is loaded by asking)."""
        return self._model

    async def model(self) -> M:
        """The loaded model (loading it in a worker thread the first time). Idempotent."""
        if self._model is not None:
            return self._model
        async with self._lock:
            if self._model is None:
                self._model = await asyncio.get_running_loop().run_in_executor(self._pool(), self._load)
        return self._model

    async def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn(*args)`` on the batch pool (after :meth:`model`)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool(), lambda: fn(*args, **kwargs))

    async def run_query(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn(*args)`` on the query lane (the batch pool when there is none)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._query_pool(), lambda: fn(*args, **kwargs))

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=self._thread_name)
        return self._executor

    def _query_pool(self) -> ThreadPoolExecutor:
        if not self._query_lane:
            return self._pool()
        if self._query_executor is None:
            self._query_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self._thread_name}-query")
        return self._query_executor

    async def aclose(self) -> None:
        """Drop the model and stop the threads; a later call loads it again."""
        executors = (self._executor, self._query_executor)
        self._executor = self._query_executor = None
        self._model = None
        loop = asyncio.get_running_loop()
        for executor in executors:
            if executor is not None:
                await loop.run_in_executor(None, executor.shutdown)
