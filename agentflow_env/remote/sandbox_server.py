"""``agentflow-env sandbox-server``: this project's Python sandbox served in SandboxFusion's ``/run_code`` format.

Run it on a host that allows namespaces; training nodes that do not (containers without ``CAP_SYS_ADMIN``) point
their Python tool at it with ``sandbox="remote:http://HOST:PORT"`` (or ``AGENTFLOW_SANDBOX=remote:...``), and
verl's SandboxFusion tool with ``sandbox_fusion_url: http://HOST:PORT/run_code``. Every cell runs in the local
sandbox (bubblewrap or namespaces, seccomp, no capabilities, rlimits, the memory cap): the server never runs code
without isolation, and refuses to start where none works.

Routes:

- ``POST /run_code`` (also ``/<anything>/run_code``): a SandboxFusion request. Plain, ``code`` runs as a script
  (``python main.py``: ``stdin``, ``files`` written before, ``fetch_files`` read after, stdout and stderr apart,
  the exit code) in a fresh worker. With this project's ``agentflow`` field (the remote backend sends it), the
  cell runs in the episode's session worker instead, exactly as the local tool runs it, and the reply carries its
  outcome under ``agentflow`` (see :mod:`agentflow_env.tools.python.remote` for the semantics, replay included).
- ``GET /v1/health``: the isolation in force, sessions, cells running and queued. ``GET /v1/ping``: ``"pong"``.

Bounds: at most ``concurrency`` cells run at once (default: one per CPU) and ``queue`` more wait (default: four
per running cell); a request beyond that is answered at once with 503 and ``{"error": "... busy ..."}``, which the
remote backend retries with backoff. At most ``max_sessions`` sessions are open (one stopped worker each); one no
request touched for ``idle_timeout_s`` is ended. ``run_timeout`` is capped at ``max_run_timeout_s``, memory at
``max_memory_mb``, output at ``max_output_chars``.

Safety is env-server's (:mod:`agentflow_env.remote.http_serving`): loopback by default; any other bind needs a
token (``--token`` or ``$AGENTFLOW_SANDBOX_TOKEN``), sent as ``Authorization: Bearer <token>``, or, for clients
that cannot send headers (verl's tool), as the path prefix ``/token/<token>/run_code``.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import logging
import os
import re
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from http import HTTPStatus
from typing import Any, cast

from agentflow_env.error import ConfigError, ToolError
from agentflow_env.remote.http_serving import (
    Held,
    HTTPError,
    JsonHttpServer,
    add_serving_arguments,
    dumps,
    json_body,
    serving_kwargs,
)
from agentflow_env.tools.python.outcome import CellOutcome
from agentflow_env.tools.python.remote import TOKEN_ENV
from agentflow_env.tools.python.sandbox.launcher import SANDBOX_ENV, UID_SLOTS, resolve_mode
from agentflow_env.tools.python.tool import PythonCoderTool
from agentflow_env.tools.python.wire import parse_script_output, script_program

__all__ = ["SandboxServer", "configure"]

logger = logging.getLogger(__name__)

_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
_MEMORY_STEP_MB = 64  # plain requests' memory limits are rounded up to this (one worker pool per distinct value)
_PLAIN_POOLS = 4
_MAX_REPLAY = 1000  # cells of one episode a request may ask to replay
_SCRIPT_OUTPUT_CHARS = 4_000_000  # the envelope of a plain request: stdout, stderr and fetched files
#: the limits a session's client may choose besides memory: (default, lowest, highest)
_LIMIT_CAPS = {"nproc": (8, 1, 64), "fsize_mb": (64, 1, 1024), "nofile": (64, 16, 1024), "tmp_mb": (64, 1, 1024)}


@dataclass(kw_only=True)
class _Session(Held):
    make: Callable[[], PythonCoderTool]  # a fresh tool (one worker) for this session's limits
    tool: PythonCoderTool
    limits: dict[str, Any]
    cells: int = 0  # cells run in the session's current worker


class SandboxServer(JsonHttpServer):
    """The sandbox behind ``/run_code`` (``start()`` in a thread, or ``serve_forever()``)."""

    server_name = "sandbox-server"
    token_env = TOKEN_ENV

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        token: str | None = None,
        sandbox: str = "auto",
        concurrency: int | None = None,
        queue: int | None = None,
        max_sessions: int = 256,
        idle_timeout_s: float = 300.0,
        max_run_timeout_s: float = 300.0,
        max_memory_mb: int = 4096,
        default_memory_mb: int = 1024,
        max_output_chars: int = 65536,
        preload: tuple[str, ...] = (),
        max_connections: int = 512,
        read_timeout_s: float = 30.0,
        idle_connection_s: float = 120.0,
    ):
        try:
            mode = resolve_mode(sandbox)  # "auto" reads AGENTFLOW_SANDBOX, which must not weaken the server either
        except ToolError as exc:
            raise ConfigError(str(exc)) from None
        if mode not in ("auto", "bwrap", "namespaces"):
            raise ConfigError(
                f"sandbox={sandbox!r} (as {mode!r}): the sandbox server runs others' code, always isolated here "
                f"(auto, bwrap or namespaces; unset {SANDBOX_ENV} or set it to one of them)"
            )
        concurrency = int(concurrency or os.cpu_count() or 1)
        queue = 4 * concurrency if queue is None else int(queue)
        if concurrency < 1 or queue < 0 or idle_timeout_s <= 0 or max_run_timeout_s <= 0:
            raise ConfigError("concurrency, idle_timeout_s and max_run_timeout_s must be positive, queue at least 0")
        room = UID_SLOTS - _PLAIN_POOLS * concurrency - 8
        if not 1 <= max_sessions <= room:
            raise ConfigError(f"max_sessions must be 1..{room} (a sandbox holds {UID_SLOTS} workers)")
        if not 64 <= default_memory_mb <= max_memory_mb or max_output_chars < 100:
            raise ConfigError("need 64 <= default_memory_mb <= max_memory_mb and max_output_chars >= 100")
        super().__init__(
            host,
            port,
            token=token,
            max_connections=max_connections,
            workers=concurrency,  # the pool's threads are the cells running at once
            read_timeout_s=read_timeout_s,
            idle_connection_s=idle_connection_s,
        )
        self.sandbox = mode
        self.concurrency, self.queue = concurrency, queue
        self.max_sessions = int(max_sessions)
        self.idle_timeout_s = float(idle_timeout_s)
        self.max_run_timeout_s = float(max_run_timeout_s)
        self.max_memory_mb, self.default_memory_mb = int(max_memory_mb), int(default_memory_mb)
        self.max_output_chars = int(max_output_chars)
        self.preload = tuple(preload)
        self._path_token = None if token is None else f"/token/{token}/"
        self._sessions = cast("dict[str, _Session]", self._held)
        self._plain: OrderedDict[int, PythonCoderTool] = OrderedDict()
        self._in_flight = 0  # requests running or queued; touched on the loop thread only
        self.busy_refusals = 0
        try:  # the isolation is checked now: a server that cannot isolate refuses to start
            probe = self._plain_tool(self.default_memory_mb)
            self.sandbox_info = probe.sandbox_info
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ lifecycle
    def _on_close(self) -> None:
        super()._on_close()  # the sessions
        with self._table_lock:
            plain, self._plain = list(self._plain.values()), OrderedDict()
        for tool in plain:
            tool.close()

    def _release(self, item: Held) -> None:
        cast(_Session, item).tool.close()

    # ------------------------------------------------------------------ HTTP
    def _authorized(self, headers: dict[str, str], path: str) -> bool:
        if super()._authorized(headers, path):
            return True
        prefix = self._path_token
        return prefix is not None and hmac.compare_digest(path[: len(prefix)].encode(), prefix.encode())

    async def _route(self, method: str, path: str, raw: bytes) -> bytes:
        path = path.split("?")[0]
        if self._path_token is not None and path.startswith(self._path_token):
            path = path[len(self._path_token) - 1 :]
        parts = [p for p in path.split("/") if p]
        if method == "GET" and parts[-2:] == ["v1", "health"]:
            return dumps(self.health())
        if method == "GET" and parts[-2:] == ["v1", "ping"]:
            return dumps("pong")
        if method != "POST" or parts[-1:] != ["run_code"]:
            raise HTTPError(HTTPStatus.NOT_FOUND, f"no route {method[:20]} {path[:200]}; POST /run_code runs code")
        if len(raw) < _SMALL_BODY and _ends_only(raw):  # ending past sessions frees workers: never refused as busy
            return await asyncio.get_running_loop().run_in_executor(self._pool, self._run_code, raw)
        if self._in_flight >= self.concurrency + self.queue:
            self.busy_refusals += 1
            raise HTTPError(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"the sandbox server is busy: {self.concurrency} cells running and {self.queue} waiting, its "
                "maximum (--concurrency, --queue); retry later",
            )
        self._in_flight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, self._run_code, raw)
        finally:
            self._in_flight -= 1

    def health(self) -> dict[str, Any]:
        with self._table_lock:
            sessions = len(self._sessions)
        return {
            "ok": True,
            "server": "agentflow-env sandbox-server",
            "sandbox": asdict(self.sandbox_info),
            "sessions": sessions,
            "max_sessions": self.max_sessions,
            "expired": self.expired,
            "in_flight": self._in_flight,
            "concurrency": self.concurrency,
            "queue": self.queue,
            "busy_refusals": self.busy_refusals,
        }

    # ------------------------------------------------------------------ running code
    def _run_code(self, raw: bytes) -> bytes:
        body = json_body(raw)
        code = body.get("code")
        language = body.get("language", "python")
        if language not in ("python", "python3"):
            return dumps(_sandbox_error(f"language {str(language)[:40]!r}: this server runs Python only"))
        timeout = _number(body.get("run_timeout"), 10.0, 0.05, self.max_run_timeout_s, "run_timeout")
        memory = body.get("memory_limit_MB", -1)
        ext = body.get("agentflow")
        try:
            if isinstance(ext, dict):
                return dumps(self._run_session(ext))
            if not isinstance(code, str):
                raise HTTPError(HTTPStatus.BAD_REQUEST, "code must be a string")
            return dumps(self._run_plain(code, body, timeout, memory))
        except ToolError as exc:  # the sandbox could not start a worker: the service's fault, as SandboxFusion says
            return dumps(_sandbox_error(str(exc)))

    def _memory(self, value: Any) -> int:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            return self.default_memory_mb
        return int(min(max(value, 64), self.max_memory_mb))

    def _plain_tool(self, memory_mb: int) -> PythonCoderTool:
        """The shared tool that runs plain requests with this memory limit: a fresh worker for every request."""
        memory_mb = -(-memory_mb // _MEMORY_STEP_MB) * _MEMORY_STEP_MB
        old = None
        with self._table_lock:
            tool = self._plain.get(memory_mb)
            if tool is None:
                tool = self._plain[memory_mb] = PythonCoderTool(
                    sandbox=self.sandbox,
                    memory_mb=memory_mb,
                    max_output_chars=_SCRIPT_OUTPUT_CHARS,
                    pool_size=self.concurrency,
                    recycle="call",
                    preload=self.preload,
                    prestart=False,
                )
                if len(self._plain) > _PLAIN_POOLS:
                    _, old = self._plain.popitem(last=False)
            else:
                self._plain.move_to_end(memory_mb)
        if old is not None:
            old.close()  # its calls in flight end; their workers are killed when they come back
        return tool

    def _run_plain(self, code: str, body: dict[str, Any], timeout: float, memory: Any) -> dict[str, Any]:
        stdin = body.get("stdin") or ""
        files = body.get("files") or {}
        fetch = body.get("fetch_files") or []
        if not isinstance(stdin, str):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "stdin must be a string or null")
        if not isinstance(files, dict) or not all(isinstance(v, (str, type(None))) for v in files.values()):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "files must map paths to base64 strings")
        if not isinstance(fetch, list) or not all(isinstance(p, str) for p in fetch):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "fetch_files must be a list of paths")
        tool = self._plain_tool(self._memory(memory))
        program = script_program(code, stdin, files, fetch, self.max_output_chars)
        start = time.monotonic()
        outcome = tool.execute(program, timeout)
        seconds = round(time.monotonic() - start, 4)
        if outcome.failure == "timeout":
            return _reply("Failed", "TimeLimitExceeded", seconds, None, "", "")
        if outcome.failure in ("memory", "died"):
            text = "MemoryError: over the memory limit" if outcome.failure == "memory" else outcome.detail
            return _reply("Failed", "Finished", seconds, 137 if outcome.failure == "memory" else 1, "", text + "\n")
        if outcome.failure is not None:
            return _sandbox_error(outcome.detail)
        result = parse_script_output(outcome.output) if not outcome.error else None
        if result is None or "sandbox_error" in result:
            why = (
                (result or {}).get("sandbox_error")
                or outcome.error
                or (f"the output went past the server's cap of {self.max_output_chars} characters")
            )
            return _sandbox_error(str(why))
        stdout = result.get("prefix", "") + str(result.get("stdout", ""))
        return_code = int(result.get("return_code") or 0)
        reply = _reply(
            "Success" if return_code == 0 else "Failed",
            "Finished",
            seconds,
            return_code,
            stdout[: self.max_output_chars],
            str(result.get("stderr", "")),
        )
        reply["files"] = result.get("files") or {}
        return reply

    def _run_session(self, ext: dict[str, Any]) -> dict[str, Any]:
        ends = ext.get("ends") or []
        if isinstance(ends, list):
            with self._table_lock:
                gone = [self._sessions.pop(e) for e in ends[:64] if isinstance(e, str) and e in self._sessions]
            for session in gone:
                self._end_held(session)
        sid = ext.get("session")
        if sid is None and "cell" not in ext:
            return {"status": "Success", "message": "", "run_result": None, "agentflow": {"ended": len(ends)}}
        cell, replay, seq = ext.get("cell"), ext.get("replay") or [], ext.get("seq", 0)
        if not isinstance(sid, str) or not _SESSION_ID.match(sid):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "agentflow.session must be 8-64 letters, digits, - or _")
        if not isinstance(cell, str) or not isinstance(replay, list) or not all(isinstance(c, str) for c in replay):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "agentflow.cell must be a string, agentflow.replay a list of them")
        if len(replay) > _MAX_REPLAY:
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"at most {_MAX_REPLAY} cells in agentflow.replay")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq != len(replay):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "agentflow.seq must be the number of cells in agentflow.replay")
        timeout = _number(ext.get("timeout"), 10.0, 0.05, self.max_run_timeout_s, "agentflow.timeout")
        limits = self._limits(ext.get("limits"))
        cap = self.max_output_chars
        limit = int(_number(ext.get("max_output_chars"), 8000, 100, cap, "agentflow.max_output_chars"))
        session = self._session(sid, limits, limit)
        start = time.monotonic()
        replayed = 0
        with session.lock:
            if session.closed:
                raise HTTPError(HTTPStatus.CONFLICT, "the session ended while this request waited; send it again")
            session.last_used = time.monotonic()
            tool = session.tool
            tool.max_output_chars = limit
            outcome: CellOutcome | None = None
            if session.cells != seq:  # the worker does not hold the state the client expects: rebuild it
                if session.cells:  # a new tool, not reset(): that would fork a spare beside the new worker
                    tool.close()
                    tool = session.tool = session.make()
                for past in replay:
                    result = tool.execute(past, timeout)
                    replayed += 1
                    if result.state_lost:
                        outcome = result  # the replay itself timed out or died: the state is gone
                        break
                session.cells = 0 if outcome is not None else seq
            if outcome is None:
                outcome = tool.execute(cell, timeout)
            session.cells = 0 if outcome.state_lost else session.cells + 1
            session.last_used = time.monotonic()
        seconds = round(time.monotonic() - start, 4)
        reply = self._session_reply(outcome, seconds)
        reply["agentflow"] = {"session": sid, "outcome": outcome.to_wire(), "replayed": replayed, "seconds": seconds}
        return reply

    def _limits(self, asked: Any) -> dict[str, Any]:
        """A session's limits: what the client asked for, within the server's caps (``_LIMIT_CAPS``)."""
        asked = asked if isinstance(asked, dict) else {}
        limits: dict[str, Any] = {"memory_mb": self._memory(asked.get("memory_mb"))}
        for name, (default, low, high) in _LIMIT_CAPS.items():
            limits[name] = int(_number(asked.get(name), default, low, high, f"agentflow.limits.{name}"))
        limits["keep_background"] = bool(asked.get("keep_background"))
        return limits

    def _session(self, sid: str, limits: dict[str, Any], limit: int) -> _Session:
        with self._table_lock:
            session = self._sessions.get(sid)
            if session is not None and session.limits == limits:
                return session
            if session is None and len(self._sessions) >= self.max_sessions:
                raise HTTPError(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    f"the sandbox server holds its maximum of {self.max_sessions} sessions; retry later",
                )
            old = self._sessions.pop(sid, None)

            def make() -> PythonCoderTool:
                return PythonCoderTool(
                    sandbox=self.sandbox, max_output_chars=limit, preload=self.preload, prestart=False, **limits
                )

            session = self._sessions[sid] = _Session(make=make, tool=make(), limits=limits)
        if old is not None:
            self._end_held(old)
        return session

    @staticmethod
    def _session_reply(outcome: CellOutcome, seconds: float) -> dict[str, Any]:
        if outcome.failure == "timeout":
            return _reply("Failed", "TimeLimitExceeded", seconds, None, outcome.output, "")
        if outcome.failure in ("no sandbox", "remote"):
            return _sandbox_error(outcome.detail)
        code = 0 if outcome.failure is None and not outcome.error else 1
        status = "Success" if code == 0 else "Failed"
        return _reply(status, "Finished", seconds, code, outcome.output, outcome.error or "")


_SMALL_BODY = 8192


def _ends_only(raw: bytes) -> bool:
    """Whether a request only ends sessions (what a client sends at ``reset()`` and ``close()``)."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    ext = body.get("agentflow") if isinstance(body, dict) else None
    return isinstance(ext, dict) and "code" not in body and "cell" not in ext and "session" not in ext


def _number(value: Any, default: float, low: float, high: float, name: str) -> float:
    if value is None:
        return min(max(default, low), high)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
        raise HTTPError(HTTPStatus.BAD_REQUEST, f"{name} must be a number")
    return float(min(max(value, low), high))


def _reply(status: str, run_status: str, seconds: float, code: int | None, stdout: str, stderr: str) -> dict[str, Any]:
    return {
        "status": status,
        "message": "",
        "compile_result": None,
        "run_result": {
            "status": run_status,
            "execution_time": seconds,
            "return_code": code,
            "stdout": stdout,
            "stderr": stderr,
        },
        "files": {},
    }


def _sandbox_error(message: str) -> dict[str, Any]:
    return {"status": "SandboxError", "message": message, "compile_result": None, "run_result": None, "files": {}}


# ------------------------------------------------------------------ CLI
def configure(parser: argparse.ArgumentParser) -> None:
    add_serving_arguments(
        parser, port=8080, token_env=TOKEN_ENV, max_connections=512, token_help=" or the path /token/TOKEN/run_code"
    )
    parser.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "namespaces"), help="isolation")
    parser.add_argument("--concurrency", type=int, default=None, help="cells running at once (default: one per CPU)")
    parser.add_argument("--queue", type=int, default=None, help="requests waiting beyond those (default: 4 per cell)")
    parser.add_argument("--max-sessions", type=int, default=256, help="episode sessions open at once")
    parser.add_argument("--idle-timeout", type=float, default=300.0, help="seconds before an untouched session ends")
    parser.add_argument("--max-run-timeout", type=float, default=300.0, help="the longest run_timeout granted")
    parser.add_argument("--max-memory", type=int, default=4096, help="the largest memory_limit_MB granted")
    parser.add_argument("--memory", type=int, default=1024, help="memory (MB) when a request gives none")
    parser.add_argument("--max-output", type=int, default=65536, help="characters of output a cell may return")
    parser.add_argument("--preload", default="", help="comma-separated extra packages the workers may import")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    server = SandboxServer(
        args.host,
        args.port,
        sandbox=args.sandbox,
        concurrency=args.concurrency,
        queue=args.queue,
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout,
        max_run_timeout_s=args.max_run_timeout,
        max_memory_mb=args.max_memory,
        default_memory_mb=args.memory,
        max_output_chars=args.max_output,
        preload=tuple(p for p in args.preload.split(",") if p),
        **serving_kwargs(args, TOKEN_ENV),
    )

    def stop(signum: int, frame: Any) -> None:  # SIGTERM (a pod stopping) or Ctrl-C: end sessions, stop the sandbox
        threading.Thread(target=server.close, name="sandbox-server-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    auth = "token required" if server.needs_token else "no token"
    print(
        f"agentflow sandbox server on {server.url} ({server.sandbox_info.mode}, {server.concurrency} cells at once, "
        f"{server.queue} queued, {auth})",
        flush=True,
    )
    server.serve_forever()
    return 0
