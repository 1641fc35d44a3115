"""One :class:`SearchClient`, called from synchronous and asynchronous code, from any thread, inside or
outside a running event loop — without ``nest_asyncio``.

A client lives on one event loop (its connection pool, its locks). The bridge runs every call there:

- **owned** (``ClientBridge(factory=...)``, what ``from_settings`` builds): the client is made on a loop of
  the bridge's own, in a daemon thread, and every call — sync or async, from any thread or loop — is
  handed to it. A synchronous call inside a running loop (a notebook, an async web handler calling sync
  code) blocks only its caller, never a loop the client needs.
- **given** (``ClientBridge(client)``): every call runs on the loop the client lives on
  (:attr:`SearchClient.entered_loop`: entered with ``async with``, or first used on) — awaited directly when
  that is the caller's loop, else handed to it, from any loop or thread. A synchronous call *on* the client's
  own loop cannot complete without blocking that loop: it raises a :class:`ConfigurationError` saying what to
  do instead. A client never used yet runs on a loop of its own (one per client, shared by every bridge
  given it: two retrievers sharing one client drive it on one loop, never two).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from .._client import SearchClient
from .._errors import ConfigurationError

__all__ = ["ClientBridge", "close_client"]

T = TypeVar("T")


class _Portal:
    """An event loop running in a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="hybrid-search-bridge", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        if not self.loop.is_running():
            self.loop.close()


def _shutdown(portal: _Portal, holder: list[SearchClient]) -> None:
    """Close an owned client on its loop and stop the loop (at close, or when the bridge is collected)."""
    if holder and not portal.loop.is_closed() and portal.loop.is_running():
        client = holder.pop()
        with contextlib.suppress(Exception):  # best effort at shutdown: the process may be exiting
            asyncio.run_coroutine_threadsafe(client.aclose(), portal.loop).result(timeout=30)
    portal.stop()


#: The loop of its own a given client runs on when no caller's loop holds it: one per client, shared by every
#: bridge (every retriever and store) given that client, and stopped when the client is collected. One client
#: on two loops would have its connections used from both (aiohttp refuses; the breaker would count it).
_CLIENT_PORTALS: weakref.WeakKeyDictionary[SearchClient, _Portal] = weakref.WeakKeyDictionary()
_PORTALS_LOCK = threading.Lock()


def _client_portal(client: SearchClient, *, create: bool) -> asyncio.AbstractEventLoop | None:
    with _PORTALS_LOCK:
        portal = _CLIENT_PORTALS.get(client)
        if portal is None and create:
            portal = _CLIENT_PORTALS[client] = _Portal()
            weakref.finalize(client, portal.stop)
        return portal.loop if portal is not None else None


def close_client(client: SearchClient) -> None:
    """Close a client given to retrievers and called from synchronous code, on the loop of its own it runs
    on (then stop that loop). A client that lives on a loop of the caller's (``async with``) is closed there,
    by its owner: this refuses it."""
    with _PORTALS_LOCK:
        portal = _CLIENT_PORTALS.pop(client, None)
    if portal is None:
        if client.entered_loop is not None and not client.closed:
            raise ConfigurationError(
                "this SearchClient lives on a loop of yours: close it there (`await client.aclose()`, or leave "
                "its `async with` block)"
            )
        return
    _shutdown(portal, [client])


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class ClientBridge:
    """Runs ``SearchClient`` calls on the loop the client lives on, from sync or async callers."""

    def __init__(self, client: SearchClient | None = None, *, factory: Callable[[], SearchClient] | None = None):
        if (client is None) == (factory is None):
            raise ConfigurationError("give a SearchClient or a factory that makes one, not both")
        self._given = client
        self._factory = factory
        self._owned: list[SearchClient] = []  # (a list: the finalizer closes what it holds)
        self._portal: _Portal | None = None
        self._lock = threading.Lock()
        self._finalizer: Any = None  # a weakref.finalize once the bridge has a loop of its own

    @property
    def owns_client(self) -> bool:
        return self._factory is not None

    def _portal_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._portal is None:
                self._portal = _Portal()
                self._finalizer = weakref.finalize(self, _shutdown, self._portal, self._owned)
            return self._portal.loop

    def _home_loop(self, caller: asyncio.AbstractEventLoop | None) -> asyncio.AbstractEventLoop:
        """Where the client lives: the bridge's own loop for an owned client; for a given one, the loop it
        lives on (entered with ``async with``, or first used on directly), else a loop of the client's own —
        shared by every bridge given it, made at the first call, sync or async: a client the bridges start
        is never bound to a caller's loop that may end before it (an ``asyncio.run``, a test's loop)."""
        if self._factory is not None:
            return self._portal_loop()
        client = self._given
        assert client is not None
        return client.entered_loop or _client_portal(client, create=True) or self._portal_loop()  # (never the last)

    async def _with_client(self, call: Callable[[SearchClient], Awaitable[T]]) -> T:
        """``call(client)``, on the client's loop (an owned client is made there the first time)."""
        if self._factory is not None and not self._owned:
            self._owned.append(self._factory())
        client = self._owned[0] if self._factory is not None else self._given
        assert client is not None
        return await call(client)

    def run(self, call: Callable[[SearchClient], Awaitable[T]]) -> T:
        """``call(client)`` from synchronous code: blocks this thread (never a loop the client needs)."""
        caller = _running_loop()
        home = self._home_loop(None)
        if home is caller:
            raise ConfigurationError(
                "a synchronous call on the event loop its SearchClient lives on would block that loop: await the "
                "asynchronous method instead (ainvoke / aretrieve / run_async), or build the retriever with "
                "from_settings(...), which runs its client on a loop of its own"
            )
        if not home.is_running():
            raise ConfigurationError(
                "the event loop this SearchClient lives on is not running (it was closed, or belongs to an "
                "asyncio.run() that has ended): use the client inside that loop, or build the retriever with "
                "from_settings(...)"
            )
        future = asyncio.run_coroutine_threadsafe(self._coro(call), home)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise asyncio.CancelledError() from None

    async def arun(self, call: Callable[[SearchClient], Awaitable[T]]) -> T:
        """``call(client)`` from asynchronous code, on whichever loop is calling."""
        caller = asyncio.get_running_loop()
        home = self._home_loop(caller)
        if home is caller:
            return await self._with_client(call)
        if not home.is_running():
            raise ConfigurationError("the event loop this SearchClient lives on is not running")
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._coro(call), home))

    def _coro(self, call: Callable[[SearchClient], Awaitable[T]]) -> Coroutine[Any, Any, T]:
        return self._with_client(call)

    def close(self) -> None:
        """Close an owned client and stop the bridge's loop (a given client stays open: it is the caller's).
        Idempotent."""
        if self._finalizer is not None:
            self._finalizer()

    async def aclose(self) -> None:
        if self._finalizer is not None and self._finalizer.alive:
            await asyncio.get_running_loop().run_in_executor(None, self._finalizer)
