"""``sandbox="remote:URL"``: the Python tool's cells run by a SandboxFusion-compatible service.

For machines where no local isolation works (containers without ``CAP_SYS_ADMIN``, Kubernetes pods): each call
is one ``POST URL/run_code`` in SandboxFusion's format (see ``agentflow_env.tools.python.wire``), sent
to SandboxFusion itself or to ``agentflow-env sandbox-server`` on a host that allows namespaces. Nothing runs
here, and a service that cannot be reached costs that turn a tool error: never a crash, never a local run.

**An episode's state.** The local tool keeps, within an episode, what cells leave in imported modules and
in /tmp (each cell has fresh globals), and loses it when the worker is replaced (a timeout, a crash, the memory
cap). The remote backend keeps the same, two ways in one request:

- ``agentflow-env sandbox-server`` keeps a session: the request's ``agentflow`` field names the episode's
  session and how many cells it has run; the server runs the new cell in that session's worker, exactly as the
  local tool does. When the server no longer holds that state (restarted, the session expired, a retried request
  ran twice), it replays the cells first, as below, and goes on.
- Any other SandboxFusion service runs ``code``, a script that replays the episode's earlier cells (each in
  fresh globals, their output thrown away, errors ignored) and then runs the new cell with the local tool's
  notebook semantics. Replayed cells run again: what they compute is recomputed (random draws, timings and
  clocks may differ), and the service's ``run_timeout`` grows by their recorded time.

Either way the cells replayed are those since the worker was last replaced, the ones that raised included (their
effects up to the error are state locally too); a timeout, a crash or the memory cap clears them as it clears
the local worker. ``reset()`` starts a new session.

**Limits.** ``run_timeout`` is the call's timeout (plus the replay's time); ``memory_limit_MB`` is the tool's
``memory_mb`` (``sandbox-server`` reads it as the local tool does: the cell's processes together, above the
interpreter; SandboxFusion counts the interpreter in it too). The tool's output cap is applied here again.

**Transport.** Keep-alive connections, pooled per service and process (:data:`POOL_IDLE` idle at most).
Connection failures and 429/502/503/504 answers are retried :data:`RETRIES` times with exponential backoff
(0.25 s doubling, with jitter: about 4 s in all); a reply that does not come within the call's timeout plus
:data:`ANSWER_GRACE_S` is not retried (the cell may be running). The token (``remote_token=`` or
``$AGENTFLOW_SANDBOX_TOKEN``) goes in ``Authorization: Bearer``.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import secrets
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from agentflow_env.error import ConfigError, ToolError
from agentflow_env.remote.connection import KeepAliveConnection
from agentflow_env.tools.python.outcome import CellOutcome
from agentflow_env.tools.python.sandbox.launcher import SandboxInfo, SandboxLimits
from agentflow_env.tools.python.wire import parse_replay_reply, replay_program

__all__ = ["ANSWER_GRACE_S", "POOL_IDLE", "RETRIES", "TOKEN_ENV", "RemoteSandbox"]

#: the environment variable the client and ``sandbox-server`` read the token from
TOKEN_ENV = "AGENTFLOW_SANDBOX_TOKEN"
RETRIES = 4
BACKOFF_S = 0.25
ANSWER_GRACE_S = 60.0  # beyond run_timeout: queueing on a loaded service, the transfer, a replay
CONNECT_TIMEOUT_S = 10.0
POOL_IDLE = 64
MAX_REPLAY_CHARS = 4_000_000
REPLAY_SLACK_S = 2.0
_TRANSIENT = (429, 502, 503, 504)


class _Pool:
    """Idle keep-alive connections to one service, shared by the tools of this process."""

    def __init__(self, url: str, token: str):
        self.url, self.token = url, token
        self.idle: list[KeepAliveConnection] = []
        self.lock = threading.Lock()

    def take(self) -> KeepAliveConnection:
        with self.lock:
            if self.idle:
                return self.idle.pop()
        return KeepAliveConnection(self.url, CONNECT_TIMEOUT_S, self.token)

    def give(self, transport: KeepAliveConnection) -> None:
        with self.lock:
            if transport._sock is not None and len(self.idle) < POOL_IDLE:
                self.idle.append(transport)
                return
        transport.close()


_POOLS: dict[tuple[str, str], _Pool] = {}
_POOLS_LOCK = threading.Lock()
_POOLS_PID = [os.getpid()]


def _pool(url: str, token: str) -> _Pool:
    with _POOLS_LOCK:
        if _POOLS_PID[0] != os.getpid():  # a forked child must not share its parent's sockets
            _POOLS.clear()
            _POOLS_PID[0] = os.getpid()
        pool = _POOLS.get((url, token))
        if pool is None:
            pool = _POOLS[(url, token)] = _Pool(url, token)
        return pool


def split_url(url: str) -> tuple[str, str]:
    """``(http://host:port, path prefix)`` of a service URL; a trailing ``/run_code`` is accepted and dropped."""
    parts = urlsplit(url.strip())
    if parts.scheme != "http" or not parts.hostname:
        raise ConfigError(f"sandbox='remote:{url}': expected remote:http://HOST:PORT[/PATH] (https: put a proxy here)")
    if parts.query or parts.fragment:
        raise ConfigError(
            f"sandbox='remote:{url}': no query or fragment; the token goes in remote_token= or ${TOKEN_ENV}"
        )
    path = parts.path.rstrip("/")
    if path.endswith("/run_code"):
        path = path[: -len("/run_code")]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"http://{host}:{parts.port or 80}", path


class RemoteSandbox:
    """One tool's link to a sandbox service: its episode's session and cells, and the requests."""

    def __init__(
        self,
        url: str,
        limits: SandboxLimits,
        max_output_chars: int,
        *,
        token: str | None = None,
        preload: Sequence[str] = (),
    ):
        self.base, self.prefix = split_url(url)
        self.url = self.base + self.prefix
        self.limits = limits
        self.max_output_chars = int(max_output_chars)
        self.preload = list(preload)  # the service's own preloads apply; kept for the tool's configuration
        self._ours = False  # the service answered as agentflow-env sandbox-server (it keeps sessions)
        self._limits = {
            "memory_mb": limits.memory_mb,
            "nproc": limits.nproc,
            "fsize_mb": limits.fsize_mb,
            "nofile": limits.nofile,
            "tmp_mb": limits.tmp_mb,
            "keep_background": limits.keep_background,
        }
        self._token = token if token is not None else os.environ.get(TOKEN_ENV, "")
        self._session = secrets.token_hex(16)
        self._cells: list[tuple[str, float]] = []  # the cells the session's worker has run, with their seconds
        self._ended: list[str] = []  # sessions of past episodes, closed with the next request

    # ------------------------------------------------------------------ episode
    def reset(self) -> None:
        """A new session; the server ends the last one now, in the background (its worker and all it started)."""
        if self._cells:
            self._ended.append(self._session)
            self._session = secrets.token_hex(16)
        self._cells = []
        if self._ended and self._ours:
            ended, self._ended = self._ended, []
            threading.Thread(target=self._end, args=(ended,), name="remote-sandbox-end", daemon=True).start()

    def _end(self, sessions: list[str]) -> None:
        try:  # best effort: sessions the server never hears of end after its idle timeout
            self._send({"agentflow": {"ends": sessions}}, CONNECT_TIMEOUT_S, retries=0)
        except Exception:
            pass

    def close(self) -> None:
        ours, self._ours = self._ours, False
        self.reset()
        if self._ended and ours:
            self._end(self._ended)
        self._ended = []

    # ------------------------------------------------------------------ calls
    def execute(self, code: str, timeout: float) -> CellOutcome:
        replay = [cell for cell, _ in self._cells]
        if sum(map(len, replay)) + len(code) > MAX_REPLAY_CHARS:
            return CellOutcome(
                failure="remote",
                detail=f"this episode's cells pass {MAX_REPLAY_CHARS} characters together, more than the remote "
                "sandbox replays; start a new episode",
            )
        replay_s = sum(seconds for _, seconds in self._cells)
        run_timeout = timeout + (1.5 * replay_s + REPLAY_SLACK_S if replay else 0.0)
        body = {
            "code": replay_program(replay, code, self.max_output_chars),
            "language": "python",
            "compile_timeout": 10,
            "run_timeout": round(run_timeout, 3),
            "memory_limit_MB": self.limits.memory_mb,
            "stdin": "",
            "files": {},
            "fetch_files": [],
            # read by agentflow-env sandbox-server, ignored by SandboxFusion (see the module docstring)
            "agentflow": {
                "session": self._session,
                "seq": len(replay),
                "cell": code,
                "replay": replay,
                "timeout": timeout,
                "limits": self._limits,
                "max_output_chars": self.max_output_chars,
                "ends": self._ended,
            },
        }
        start = time.monotonic()
        try:
            reply = self._send(body, run_timeout + ANSWER_GRACE_S)
        except ToolError as exc:
            return CellOutcome(failure="remote", detail=str(exc))
        self._ended = []
        outcome = self._outcome(reply)
        if outcome.state_lost:
            self._cells = []
        elif outcome.failure is None:
            self._cells.append((code, min(time.monotonic() - start, timeout)))
        return outcome

    def _outcome(self, reply: dict[str, Any]) -> CellOutcome:
        ours = reply.get("agentflow")
        if isinstance(ours, dict):  # agentflow-env sandbox-server: the cell's outcome as the local tool has it
            self._ours = True
            outcome = CellOutcome.from_wire(ours.get("outcome"), self.max_output_chars)
            if outcome is None:
                return CellOutcome(failure="remote", detail=f"the sandbox server at {self.url} sent a malformed reply")
            if outcome.failure == "no sandbox":
                outcome.detail = f"the sandbox server at {self.url} has no isolation: {outcome.detail}"
            return outcome
        return parse_replay_reply(reply, self.max_output_chars)

    def _send(self, body: dict[str, Any], timeout_s: float, retries: int = RETRIES) -> dict[str, Any]:
        """POST ``body`` to ``/run_code``; the reply's JSON, or :class:`ToolError` saying why there is none."""
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        pool = _pool(self.base, self._token)
        path = f"{self.prefix}/run_code"
        why = ""
        for attempt in range(retries + 1):
            if attempt:
                time.sleep(BACKOFF_S * 2 ** (attempt - 1) * (0.5 + random.random()))
            transport = pool.take()
            try:
                status, data = transport.exchange("POST", path, payload, timeout_s)
            except TimeoutError:
                transport.close()
                raise ToolError(
                    f"the remote Python sandbox at {self.url} did not answer within {timeout_s:g} s; the cell's "
                    "outcome is unknown"
                ) from None
            except (OSError, http.client.HTTPException) as exc:
                transport.close()
                why = f"{type(exc).__name__}: {exc}"
                continue
            pool.give(transport)
            if status in _TRANSIENT:
                why = f"it answered {status}: {_error_text(data)}"
                continue
            if status != 200:
                raise ToolError(
                    f"the remote Python sandbox at {self.url} refused the call ({status}): {_error_text(data)}"
                )
            try:
                reply = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise ToolError(
                    f"the remote Python sandbox at {self.url} answered with something that is not JSON"
                ) from None
            if not isinstance(reply, dict):
                raise ToolError(f"the remote Python sandbox at {self.url} answered with a {type(reply).__name__}")
            return reply
        raise ToolError(
            f"the remote Python sandbox at {self.url} could not run the code ({why}; tried {retries + 1} times); "
            "the code did not run here either. Is the sandbox service up?"
        )

    # ------------------------------------------------------------------ isolation
    def info(self) -> SandboxInfo:
        """What the service says of its isolation (``agentflow-env sandbox-server``), or that it is unknown."""
        transport = _pool(self.base, self._token).take()
        try:
            status, data = transport.exchange("GET", f"{self.prefix}/v1/health", b"", CONNECT_TIMEOUT_S)
        except (OSError, http.client.HTTPException) as exc:
            transport.close()
            raise ToolError(f"the remote Python sandbox at {self.url} cannot be reached: {exc}") from None
        transport.close()
        try:
            sandbox = json.loads(data.decode("utf-8")).get("sandbox") if status == 200 else None
        except (UnicodeDecodeError, ValueError, AttributeError):
            sandbox = None
        if not isinstance(sandbox, dict):
            return SandboxInfo(
                mode="remote",
                network_isolated=False,
                private_uids=False,
                pid_namespace=False,
                readonly_root=False,
                notes=(f"a SandboxFusion-compatible service at {self.url}: its isolation is its own, unknown here",),
            )
        return SandboxInfo(
            mode="remote",
            network_isolated=bool(sandbox.get("network_isolated")),
            private_uids=bool(sandbox.get("private_uids")),
            pid_namespace=bool(sandbox.get("pid_namespace")),
            readonly_root=bool(sandbox.get("readonly_root")),
            interfaces=tuple(str(i) for i in sandbox.get("interfaces", ())),
            notes=(f"agentflow-env sandbox-server at {self.url}, isolating with {sandbox.get('mode')}",),
            resource_control=str(sandbox.get("resource_control", "polled")),
        )


def _error_text(data: bytes) -> str:
    try:
        out = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return data[:200].decode("utf-8", "replace")
    message = out.get("error") or out.get("message") or out.get("detail") if isinstance(out, dict) else None
    return str(message or out)[:300]
