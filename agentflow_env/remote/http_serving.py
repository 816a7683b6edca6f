"""The HTTP/1.1 serving both servers share (``env-server`` and ``sandbox-server``): JSON over keep-alive connections
on one asyncio loop, work on a bounded thread pool, and the same safety rules.

- Binding beyond loopback needs a token (``Authorization: Bearer <token>``, at least 16 characters); on loopback
  it is optional. The check is constant-time.
- At most ``max_connections`` connections are open (more get a 503 and are closed); a request must arrive whole
  within ``read_timeout_s``; an idle keep-alive connection is closed after ``idle_connection_s``.
- A ``Content-Length`` that is not a plain number, or over :data:`MAX_BODY_BYTES`, is refused without reading the
  body; chunked bodies are refused; after any 4xx the connection is closed, so an unread body is never taken for
  the next request. Each reply is one write (``TCP_NODELAY``).

A server subclasses :class:`JsonHttpServer` and implements ``_route(method, path, raw) -> bytes`` (raise
:class:`HTTPError` for a 4xx/5xx); errors come back as ``{"error": "..."}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.remote.exposure import authorized, check_exposure, expected_header, is_loopback

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_HEADER_BYTES",
    "HTTPError",
    "Held",
    "JsonHttpServer",
    "add_serving_arguments",
    "dumps",
    "error_body",
    "is_loopback",
    "json_body",
    "serving_kwargs",
    "to_jsonable",
]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024  # an action is capped far below this by the env itself
MAX_HEADER_BYTES = 64 * 1024


def add_serving_arguments(
    parser: argparse.ArgumentParser, *, port: int, token_env: str, max_connections: int, token_help: str = ""
) -> None:
    """The command-line options every server of this package has: where it binds, its token, its connections."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=port, help="port (0: any free port, printed at start)")
    parser.add_argument(
        "--token",
        default=None,
        help=f"require `Authorization: Bearer TOKEN`{token_help} (default: ${token_env}); needed to bind beyond "
        "loopback",
    )
    parser.add_argument(
        "--max-connections", type=int, default=max_connections, help="connections open at once (more get 503)"
    )
    parser.add_argument(
        "--read-timeout", type=float, default=30.0, help="seconds for a request to arrive whole once it has begun"
    )
    parser.add_argument(
        "--idle-connection", type=float, default=120.0, help="seconds an idle keep-alive connection stays open"
    )


def serving_kwargs(args: argparse.Namespace, token_env: str) -> dict[str, Any]:
    """The server keyword arguments of the options :func:`add_serving_arguments` added (the token from the flag
    or ``$token_env``)."""
    return {
        "token": args.token or os.environ.get(token_env) or None,
        "max_connections": args.max_connections,
        "read_timeout_s": args.read_timeout,
        "idle_connection_s": args.idle_connection,
    }


def to_jsonable(value: Any) -> Any:
    """``value`` with numpy scalars/arrays, tuples and dataclass-like objects turned into JSON types."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if hasattr(value, "tolist"):  # numpy scalar or array
        return value.tolist()
    if hasattr(value, "to_dict"):
        return to_jsonable(value.to_dict())
    return str(value)


class HTTPError(Exception):
    """A request answered with ``status`` and ``{"error": message}``."""

    def __init__(self, status: HTTPStatus, message: str):
        super().__init__(message)
        self.status = status


_REASONS = {s.value: s.phrase for s in HTTPStatus}


def response(status: int, data: bytes, close: bool) -> bytes:
    """One buffer, headers and body together: two small writes wait out Nagle and delayed ACKs (~40 ms)."""
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n"
        f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    return head.encode("ascii") + data


def error_body(message: str) -> bytes:
    return json.dumps({"error": message}).encode("utf-8")


@dataclass(kw_only=True)
class Held:
    """What a client holds on a server between its requests (an env-server episode, a sandbox session)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    closed: bool = False


class JsonHttpServer:
    """The listening socket, the loop and the pool; ``start()`` serves in a daemon thread, ``serve_forever()`` here.

    Subclasses set ``server_name`` (threads and logs) and ``token_env`` (named in refusals), and implement
    ``_route``. What clients hold between requests goes in ``_held`` (id -> :class:`Held`, under ``_table_lock``):
    with ``idle_timeout_s`` set, a reaper thread ends what no request touched for that long (``_release`` frees
    it), and ``close()`` ends the rest.
    """

    server_name = "server"
    token_env = "TOKEN"
    idle_timeout_s = 0.0  # 0: nothing held expires

    def __init__(
        self,
        host: str,
        port: int,
        *,
        token: str | None = None,
        max_connections: int = 256,
        workers: int | None = None,
        read_timeout_s: float = 30.0,
        idle_connection_s: float = 120.0,
    ):
        if max_connections <= 0 or read_timeout_s <= 0 or idle_connection_s <= 0:
            raise ConfigError("max_connections, read_timeout_s and idle_connection_s must be positive")
        if workers is not None and workers <= 0:
            raise ConfigError("workers must be positive")
        check_exposure(host, token, self.token_env)
        self.max_connections = int(max_connections)
        self.read_timeout_s = float(read_timeout_s)
        self.idle_connection_s = float(idle_connection_s)
        self.workers = int(workers or min(32, 4 * (os.cpu_count() or 1)))
        self._token = expected_header(token)
        self._stop = threading.Event()
        self.refused_connections = 0  # connections turned away at the cap
        self._connections = 0
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
            self._sock.listen(1024)  # a burst of clients connecting at once is queued, not reset
        except OSError:
            self._sock.close()
            raise
        self._sock.setblocking(False)
        self.server_address = self._sock.getsockname()
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"{self.server_name}-worker")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._closed = False
        self._held: dict[str, Held] = {}
        self._table_lock = threading.Lock()
        self.expired = 0  # held things ended by the idle reaper
        self._reaper: threading.Thread | None = None

    @property
    def needs_token(self) -> bool:
        """Whether requests must carry ``Authorization: Bearer <token>``."""
        return self._token is not None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else host
        return f"http://{host!s}:{port}"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Any:
        """Serve in a daemon thread; returns ``self`` once the server accepts connections."""
        ready = threading.Event()
        self._loop_thread = threading.Thread(
            target=self._run_loop, args=(ready,), name=f"{self.server_name}-loop", daemon=True
        )
        self._loop_thread.start()
        ready.wait(30)
        self._on_start()
        return self

    def serve_forever(self) -> None:
        self._on_start()
        try:
            self._run_loop(threading.Event())
        finally:
            self.close()

    def _on_start(self) -> None:
        if self.idle_timeout_s > 0:
            self._reaper = threading.Thread(target=self._reap_loop, name=f"{self.server_name}-reaper", daemon=True)
            self._reaper.start()

    def _on_close(self) -> None:
        """End everything held, after the loop stopped."""
        with self._table_lock:
            held = list(self._held.values())
            self._held.clear()
        for item in held:
            self._end_held(item)

    # ------------------------------------------------------------------ what clients hold
    def _reap_loop(self) -> None:
        period = min(max(self.idle_timeout_s / 4, 0.05), 5.0)
        while not self._stop.wait(period):
            self.reap()

    def reap(self) -> int:
        """End what was held idle for longer than ``idle_timeout_s``; returns how many."""
        now = time.monotonic()
        with self._table_lock:
            # one busy in a long request is not idle: its lock is held
            stale = [
                k
                for k, item in self._held.items()
                if now - item.last_used > self.idle_timeout_s and not item.lock.locked()
            ]
            dead = [self._held.pop(k) for k in stale]
        for item in dead:
            self._end_held(item)
        self.expired += len(dead)
        return len(dead)

    def _end_held(self, item: Held) -> None:
        with item.lock:
            if item.closed:
                return
            item.closed = True
            try:
                self._release(item)
            except Exception:
                logger.exception("%s: releasing %s failed", self.server_name, type(item).__name__)

    def _release(self, item: Held) -> None:
        """Free one held thing (close its env, kill its worker)."""

    def _run_loop(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        server = loop.run_until_complete(
            asyncio.start_server(self._serve_connection, sock=self._sock, limit=MAX_HEADER_BYTES)
        )
        ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.wait(tasks, timeout=5))
            loop.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        if self._loop_thread is not None and self._loop_thread is not threading.current_thread():
            self._loop_thread.join(30)
        self._sock.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._on_close()

    def _authorized(self, headers: dict[str, str], path: str) -> bool:
        """Whether a request carries the token (only asked when the server has one)."""
        assert self._token is not None
        return authorized(headers.get("authorization", "").encode("latin-1"), self._token)

    async def _route(self, method: str, path: str, raw: bytes) -> bytes:
        """The reply body of one request (raise :class:`HTTPError` for anything but 200)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ HTTP
    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._connections >= self.max_connections:
            self.refused_connections += 1
            writer.write(
                response(503, error_body(f"the server has its maximum of {self.max_connections} connections"), True)
            )
            await self._close_writer(reader, writer)
            return
        self._connections += 1
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                close = await self._serve_request(reader, writer)
                if close:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError, asyncio.CancelledError):
            pass
        except Exception:
            logger.exception("%s: a connection failed", self.server_name)
        finally:
            self._connections -= 1
            await self._close_writer(reader, writer)

    @staticmethod
    async def _close_writer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Send what is written, then close. Unread bytes (a refused body) are drained for a moment first:
        closing over them sends a reset, which can destroy the error reply before the client reads it."""
        try:
            await asyncio.wait_for(writer.drain(), 5)
            if writer.can_write_eof():
                writer.write_eof()
            deadline = time.monotonic() + 1.0
            drained = 0
            while drained < MAX_BODY_BYTES and (left := deadline - time.monotonic()) > 0:
                chunk = await asyncio.wait_for(reader.read(65536), left)
                if not chunk:
                    break
                drained += len(chunk)
        except Exception:
            pass
        writer.close()

    async def _serve_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read, answer and write one request; True when the connection is to be closed.

        Timeouts are timers on the loop (no task per read): an idle connection is closed after
        ``idle_connection_s``; once a request has begun it must arrive whole within ``read_timeout_s``.
        """
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.idle_connection_s, writer.transport.abort)
        try:
            first = await reader.read(1)
        finally:
            timer.cancel()
        if not first:
            return True  # the client closed it, or it idled out
        timer = loop.call_later(self.read_timeout_s, self._too_slow, writer)
        try:
            head = first + await reader.readuntil(b"\r\n\r\n")
            method, path, close, length = self._parse_head(head)
            raw = await reader.readexactly(length) if length else b""
        except (asyncio.LimitOverrunError, ValueError):
            writer.write(response(431, error_body(f"request headers over {MAX_HEADER_BYTES} bytes"), True))
            return True
        except HTTPError as exc:
            writer.write(response(int(exc.status), error_body(str(exc)), True))
            return True
        finally:
            timer.cancel()
        try:
            status, data = 200, await self._route(method, path, raw)
        except HTTPError as exc:
            status, data = int(exc.status), error_body(str(exc))
        except Exception as exc:  # an env bug answers 500 and leaves the server up
            logger.exception("%s: %s %s failed", self.server_name, method, path)
            status, data = 500, error_body(f"{type(exc).__name__}: {exc}")
        close = close or 400 <= status < 500  # after a 4xx the rest of the stream cannot be trusted
        writer.write(response(status, data, close))
        if writer.transport.get_write_buffer_size():
            await writer.drain()
        return close

    def _too_slow(self, writer: asyncio.StreamWriter) -> None:
        if not writer.transport.is_closing():
            writer.write(
                response(408, error_body(f"the request did not arrive within {self.read_timeout_s:g} s"), True)
            )
            writer.transport.close()  # the pending read ends; the reply is flushed first

    def _parse_head(self, head: bytes) -> tuple[str, str, bool, int]:
        try:
            text = head.decode("latin-1")
            request_line, *lines = text[:-4].split("\r\n")
            method, path, version = request_line.split(" ")
        except ValueError:
            raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed request line") from None
        if version not in ("HTTP/1.1", "HTTP/1.0") or not path.startswith("/"):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed request line")
        headers: dict[str, str] = {}
        for line in lines:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed header line")
            key = name.lower()
            if key in headers and key in ("content-length", "authorization", "transfer-encoding"):
                raise HTTPError(HTTPStatus.BAD_REQUEST, f"repeated {name} header")
            headers[key] = value.strip()
        if "transfer-encoding" in headers:
            raise HTTPError(HTTPStatus.LENGTH_REQUIRED, "chunked bodies are not accepted; send a Content-Length")
        raw_length = headers.get("content-length", "0")
        if not raw_length.isdigit() or not raw_length.isascii() or len(raw_length) > 12:
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"bad Content-Length {raw_length[:20]!r}")
        length = int(raw_length)
        if length > MAX_BODY_BYTES:
            raise HTTPError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY_BYTES} bytes")
        if self._token is not None:
            if not self._authorized(headers, path):
                raise HTTPError(
                    HTTPStatus.UNAUTHORIZED, f"this server needs `Authorization: Bearer <token>` (${self.token_env})"
                )
        connection = headers.get("connection", "").lower()
        close = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
        return method, path, close, length


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalar or array
        return value.tolist()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return str(value)


_ENCODE = json.JSONEncoder(default=_json_default).encode  # json.dumps(default=) builds an encoder per call


def dumps(payload: Any) -> bytes:
    """JSON of a reply: numpy values, tuples and ``to_dict`` objects as :func:`to_jsonable` gives them."""
    try:
        return _ENCODE(payload).encode("utf-8")
    except (TypeError, ValueError):  # e.g. keys that JSON cannot take: the slow walk makes them strings
        return json.dumps(to_jsonable(payload)).encode("utf-8")


def json_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw.decode("utf-8")) if raw else {}
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise HTTPError(HTTPStatus.BAD_REQUEST, "the request body is not valid UTF-8 JSON") from None
    if not isinstance(body, dict):
        raise HTTPError(HTTPStatus.BAD_REQUEST, "the request body must be a JSON object")
    return body
