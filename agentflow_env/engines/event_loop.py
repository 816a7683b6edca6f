"""One asyncio event loop per process for every HTTP engine call, on a daemon thread that owns an aiohttp session.

The session pools keep-alive connections per host (one TLS context for all of them); a request is a coroutine
on the loop, never a thread. Code that runs synchronously (an env's step calling its LLM modules, a notebook)
submits a coroutine with :meth:`EventLoopThread.run` and waits for its result; code already on the loop awaits
the coroutine itself. :func:`shared_loop` is the process's loop (made on first use, made again after a fork).

The loop is uvloop's when uvloop is installed (the ``engines`` extra brings it; its scheduling, timers and sockets
run in C, so a request costs the client less CPU), else asyncio's;
``AGENTFLOW_EVENT_LOOP=asyncio`` (or ``uvloop``) chooses. Replies, and so results, are the same with either.
"""

from __future__ import annotations

import _thread
import asyncio
import atexit
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from agentflow_env.error import ConfigError, DependencyNotInstalled, EngineError

__all__ = ["EventLoopThread", "shared_loop"]

T = TypeVar("T")


class EventLoopThread:
    """An asyncio loop running on its own daemon thread, with one lazily made ``aiohttp.ClientSession``."""

    def __init__(self, name: str = "agentflow-http") -> None:
        self.loop = new_event_loop()
        self.pid = os.getpid()
        self._session: Any = None
        self._origins: dict[str, dict[str, Any]] = {}  # see ``request_options``
        self._running: dict[asyncio.Task[Any], _Waiter] = {}  # ``run`` calls in flight (strong refs to their tasks)
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def alive(self) -> bool:
        return not self._closed and self.pid == os.getpid() and self._thread.is_alive()

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the loop; the returned future is safe to wait on from any other thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro``'s result (or its exception), waited for on the calling thread (which must not be the loop's own).

        Leaner than ``submit(coro).result()``: the coroutine hands its outcome to the waiting thread in its own last
        step (no done-callback turn of the loop, no chained futures), through a lock the caller blocks on."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a blocking HTTP call on the event loop's own thread would deadlock; await it instead")
        waiter = _Waiter()
        try:
            self.loop.call_soon_threadsafe(self._start, coro, waiter)
        except RuntimeError:  # the loop is closed
            coro.close()
            raise EngineError("the HTTP event loop is closed") from None
        return waiter.wait()  # type: ignore[no-any-return]

    def _start(self, coro: Coroutine[Any, Any, Any], waiter: _Waiter) -> None:
        if self._closed:
            coro.close()
            waiter.settle(None, EngineError("the HTTP event loop is closed"))
            return
        self._running[self.loop.create_task(self._settle(coro, waiter))] = waiter

    async def _settle(self, coro: Coroutine[Any, Any, Any], waiter: _Waiter) -> None:
        try:
            result = await coro
        except BaseException as exc:  # CancelledError included: the caller sees it, as ``Future.result`` raises it
            waiter.settle(None, exc)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        else:
            waiter.settle(result, None)
        finally:
            self._running.pop(asyncio.current_task(), None)  # type: ignore[arg-type]

    async def session(self) -> Any:
        """The loop's ``aiohttp.ClientSession`` (call on the loop): keep-alive pooled, no limit of its own
        (each engine limits its requests in flight)."""
        if self._session is None or self._session.closed:
            try:
                import aiohttp
            except ImportError as exc:
                raise DependencyNotInstalled("aiohttp", "engines") from exc
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60.0, ttl_dns_cache=300)
            # no trust_env: request_options reads the proxy settings once per URL instead
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self._session

    def request_options(self, url: str) -> dict[str, Any]:
        """The proxy that ``HTTP(S)_PROXY`` / ``NO_PROXY`` give a request to ``url`` (``proxy`` and ``proxy_auth``,
        as the openai client and aiohttp's ``trust_env`` read them; empty without one), read once per URL at
        its first request (call on the loop). ``trust_env`` reads the environment and ``~/.netrc`` again for every
        request, each on a worker thread: two thread hops that cost more of a loopback request's client CPU than
        the request itself. (The engines send their own ``Authorization`` header, so a netrc login never applies.)"""
        found = self._origins.get(url)
        if found is None:
            found = self._origins[url] = _proxy_options(url)
        return found

    def close(self) -> None:
        """Close the session and stop the loop (pending calls fail); a no-op when already closed."""
        if self._closed:
            return
        self._closed = True
        if self.pid != os.getpid() or not self._thread.is_alive():
            return

        async def shutdown() -> None:
            if self._session is not None and not self._session.closed:
                await self._session.close()

        try:
            self.submit(shutdown()).result(timeout=5)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
            if not self._thread.is_alive():
                self.loop.close()
                for waiter in list(self._running.values()):  # calls still waiting fail rather than hang
                    waiter.settle(None, EngineError("the HTTP event loop was closed before the call finished"))
                self._running.clear()


class _Waiter:
    """One ``run`` call's outcome, handed from the loop to the thread blocked in :meth:`wait` (settled once)."""

    __slots__ = ("_error", "_lock", "_result")

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()
        self._result: Any = None
        self._error: BaseException | None = None

    def settle(self, result: Any, error: BaseException | None) -> None:
        if not self._lock.locked():
            return  # settled already
        self._result, self._error = result, error
        try:
            self._lock.release()
        except RuntimeError:  # released by another settle meanwhile: the first outcome stands
            pass

    def wait(self) -> Any:
        self._lock.acquire()
        self._lock.release()  # stays open: a second wait returns at once
        if self._error is not None:
            raise self._error
        return self._result


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop when installed, else asyncio's; ``AGENTFLOW_EVENT_LOOP`` = ``uvloop`` or ``asyncio``
    chooses (``uvloop`` without it installed is an error)."""
    choice = os.environ.get("AGENTFLOW_EVENT_LOOP", "").strip().lower() or "auto"
    if choice not in ("auto", "uvloop", "asyncio"):
        raise ConfigError(f"AGENTFLOW_EVENT_LOOP must be auto, uvloop or asyncio, not {choice!r}")
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError as exc:
            if choice == "uvloop":
                raise DependencyNotInstalled("uvloop", "engines") from exc
        else:
            return uvloop.new_event_loop()  # type: ignore[no-any-return]
    return asyncio.new_event_loop()


def _proxy_options(url: str) -> dict[str, Any]:
    """``request_options`` of ``url``, read from the environment now."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    try:
        proxy, proxy_auth = get_env_proxy_for_url(URL(url))  # LookupError: no proxy for it, or NO_PROXY names its host
    except LookupError:
        return {}
    return {"proxy": proxy} if proxy_auth is None else {"proxy": proxy, "proxy_auth": proxy_auth}


_SHARED: EventLoopThread | None = None
_SHARED_LOCK = threading.Lock()


def shared_loop() -> EventLoopThread:
    """The process's HTTP event loop (a child process after ``fork`` gets a loop of its own)."""
    global _SHARED
    loop = _SHARED
    if loop is not None and loop.alive:
        return loop
    with _SHARED_LOCK:
        if _SHARED is None or not _SHARED.alive:
            _SHARED = EventLoopThread()
            atexit.register(_SHARED.close)  # the session's connections close cleanly at exit
        return _SHARED
