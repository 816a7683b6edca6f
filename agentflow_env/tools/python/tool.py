"""The Python coder tool: runs model-written code in pre-forked, sandboxed workers with notebook-cell semantics.

A shared zygote (see ``sandbox``) preloads numpy/sympy once per process; each tool owns its workers,
recycled at every episode start, killed on timeout and respawned. Code is untrusted: with no isolation
available the tool refuses to run it, unless the caller (never the action) chose ``sandbox="none"``.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.tools.base import BaseTool
from agentflow_env.tools.python.outcome import CellOutcome, describe_status, outcome_result
from agentflow_env.tools.python.sandbox.launcher import (
    REMOTE_PREFIX,
    SANDBOX_ENV,
    SANDBOX_MODES,
    SandboxInfo,
    SandboxLimits,
    SandboxUnavailable,
    Worker,
    WorkerLost,
    acquire_zygote,
    current_zygote,
    release_zygote,
    resolve_mode,
)
from agentflow_env.types import ToolResult

__all__ = ["PythonCoderTool", "describe_status", "strip_code_fences"]

logger = logging.getLogger(__name__)

_FENCE = re.compile(r"^\s*```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)\n?```\s*$", re.DOTALL | re.IGNORECASE)


def strip_code_fences(command: str) -> str:
    """Accept code wrapped in a Markdown fence (```python ... ```), as models often write it."""
    match = _FENCE.match(command)
    return match.group(1) if match else command


_REFUSALS: set[str] = set()


def _warn_refusal(message: str) -> None:
    if message not in _REFUSALS:
        _REFUSALS.add(message)
        logger.error("%s", message)


class _State:
    """What the finalizer and the background thread need, kept apart from the tool so it can be garbage-collected."""

    def __init__(self, key: tuple[str, tuple[str, ...]], limits: SandboxLimits):
        self.key = key
        self.limits = limits
        self.lock = threading.Condition()
        self.idle: list[Worker] = []
        self.busy = 0
        self.registered = False  # this tool's claim on the shared zygote is counted
        self.acquiring = False  # the prestart thread is starting (or joining) the zygote
        self.closed = False
        self.epoch = 0
        self.spare: Worker | None = None  # forked for the next episode while this one runs
        self.doomed: list[Worker] = []  # used workers the background thread kills
        self.maintainer: threading.Thread | None = None
        self.starter: threading.Thread | None = None


def _release(state: _State) -> None:
    """Kill every worker of a tool and drop its claim on the shared zygote (close, GC, or interpreter exit).

    Never waits for a zygote that is still starting: the prestart thread drops its claim itself when it finds the
    tool closed."""
    with state.lock:
        state.closed = True
        maintainer = state.maintainer
    if maintainer is not None and maintainer is not threading.current_thread():
        maintainer.join(timeout=60)  # it finishes the kill or fork in hand (milliseconds), then sees ``closed``
    with state.lock:
        workers, state.idle = state.idle, []
        workers += state.doomed
        state.doomed = []
        if state.spare is not None:
            workers.append(state.spare)
            state.spare = None
        registered, state.registered = state.registered, False
        state.epoch += 1
    for worker in _keep_fresh(state, workers):
        worker.kill()
    if registered:
        release_zygote(state.key)


# Workers that never ran code, left by closed tools, by (zygote key, limits): the next tool built with the same
# sandbox takes one instead of forking. Each fork and kill is a round trip to the one zygote of the key, which
# serves them one at a time, so a run that builds and closes an env per episode (64 at once) otherwise queues on
# it. A worker that ran code is never kept; one whose zygote has gone is dropped when met.
_FRESH: dict[tuple[Any, str], list[Worker]] = {}
_FRESH_LOCK = threading.Lock()
_FRESH_PID = [os.getpid()]
_FRESH_KEPT = 64  # per key


def _fresh_key(state: _State) -> tuple[Any, str]:
    return state.key, repr(state.limits)


def _fresh_list(state: _State) -> list[Worker]:
    """The kept workers of ``state``'s key (call with ``_FRESH_LOCK`` held; a forked child keeps none)."""
    if _FRESH_PID[0] != os.getpid():
        _FRESH.clear()
        _FRESH_PID[0] = os.getpid()
    return _FRESH.setdefault(_fresh_key(state), [])


def _keep_fresh(state: _State, workers: list[Worker]) -> list[Worker]:
    """Keep the workers that never ran code for the next tool of the same sandbox; returns the ones to kill."""
    kill = []
    with _FRESH_LOCK:
        kept = _fresh_list(state)
        for worker in workers:
            if worker.calls == 0 and len(kept) < _FRESH_KEPT and _usable(worker, state):
                kept.append(worker)
            else:
                kill.append(worker)
    return kill


def _spawn(state: _State, zygote: Any) -> Worker:
    """A worker that never ran code: one a closed tool left (same zygote and limits), else forked now."""
    with _FRESH_LOCK:
        kept = _fresh_list(state)
        while kept:
            worker = kept.pop()
            if worker.zygote is zygote and zygote.alive():
                return worker
            worker.sock.close()  # its zygote is gone, and it with it
    return zygote.spawn(state.limits)


_RELEASES: queue.SimpleQueue[_State] = queue.SimpleQueue()
_RELEASER: list[Any] = [None, 0]  # the thread that releases collected tools, and the pid it runs in


def _release_later(state: _State) -> None:
    """The finalizer of a tool nobody closed. The garbage collector runs it in whatever thread allocated, and that
    thread may hold the very locks ``_release`` takes (a zygote's channel lock in the middle of a request, the
    shared zygote table in the middle of a start): releasing here could deadlock that thread. So it only queues
    the release (``SimpleQueue.put`` is safe in a finalizer) for the releaser thread."""
    _RELEASES.put(state)


def _releaser() -> None:
    while True:
        state = _RELEASES.get()
        try:
            _release(state)
        except Exception:  # one tool's failed release must not stop the others'
            logger.debug("releasing a collected Python tool failed", exc_info=True)


def _start_releaser() -> None:
    """Start the releaser thread once per process (again in a forked child, which has no threads)."""
    if _RELEASER[1] != os.getpid():
        thread = threading.Thread(target=_releaser, name="python-tool-release", daemon=True)
        thread.start()
        _RELEASER[:] = [thread, os.getpid()]


def _usable(worker: Worker, state: _State) -> bool:
    return worker.zygote is current_zygote(state.key) and worker.zygote.alive()


_MAX_DOOMED = 2  # used workers left alive (stopped) while spares are forked first; beyond it they are killed first


def _maintain(state: _State) -> None:
    """Background: fork the spare for the next episode, then kill the used workers of past episodes.

    The spare comes first: with episodes back to back a reset waits for it, and killing a used worker (its
    namespaces and cgroup go with it) takes about as long as forking one, so killing first would add the one
    to the other on every such reset. Used workers are stopped since their last call; more than
    ``_MAX_DOOMED`` of them are killed before the next fork. Never starts a zygote (the tool's calls and its
    prestart do): a spare is forked only from the live zygote.
    """
    can_fork = True
    while True:
        with state.lock:
            need_spare = can_fork and state.registered and not state.closed and state.spare is None
            if len(state.doomed) > _MAX_DOOMED or not need_spare:
                doomed, state.doomed = state.doomed, []
            else:
                doomed = []
            if not doomed and not need_spare:
                state.maintainer = None
                state.lock.notify_all()
                return
        for worker in doomed:
            try:
                worker.kill()
            except Exception:  # the zygote went away: its workers went with it
                logger.debug("killing a used Python worker failed", exc_info=True)
        if doomed or not need_spare:
            continue
        zygote = current_zygote(state.key)
        worker = None  # type: ignore[assignment]
        if zygote is not None and zygote.alive():
            try:
                worker = _spawn(state, zygote)
            except Exception:  # the next reset or call forks one itself and reports what is wrong
                logger.debug("pre-forking a spare Python worker failed", exc_info=True)
        with state.lock:
            keep = worker is not None and state.registered and not state.closed and state.spare is None
            if keep:
                state.spare = worker
                state.lock.notify_all()  # a reset may be waiting for it
        if worker is not None and not keep:
            worker.kill()
        can_fork = worker is not None  # none could be forked now: kill what is left, then stop


def _kick(state: _State) -> None:
    """Start the background thread unless it runs already (call with ``state.lock`` held)."""
    if state.maintainer is None and not state.closed:
        state.maintainer = threading.Thread(target=_maintain, args=(state,), name="python-tool-prefork", daemon=True)
        state.maintainer.start()


def _prestart(state: _State) -> None:
    """Background, at build: start (or join) the shared zygote and fork the first worker and the spare."""
    with state.lock:
        if state.closed or state.registered:
            return
        state.acquiring = True
    try:
        zygote = acquire_zygote(state.key, True)
    except Exception:  # no sandbox here, or it failed: the first call reports it
        logger.debug("prestarting the Python sandbox failed", exc_info=True)
        with state.lock:
            state.acquiring = False
        return
    with state.lock:
        state.acquiring = False
        closed = state.closed
        if not closed:
            state.registered = True
    if closed:  # closed meanwhile: the claim just counted is ours to drop
        release_zygote(state.key)
        return
    try:
        worker = _spawn(state, zygote)
    except Exception:
        logger.debug("prestarting a Python worker failed", exc_info=True)
        return
    with state.lock:  # the spare for the next episode is forked once this worker runs code (see _checkout)
        keep = not state.closed and not state.idle and state.busy == 0
        if keep:
            state.idle.append(worker)
    if not keep:
        worker.kill()


class PythonCoderTool(BaseTool):
    """Runs Python code in a sandboxed, pre-forked worker; returns printed output plus the last expression's value.

    Each call gets fresh globals; numpy and sympy are already imported in the worker process, so
    ``import sympy`` is free. Within an episode, changes to imported modules and files in /tmp carry over
    from call to call (like a notebook kernel); workers are recycled at every ``reset()`` (episode start),
    so nothing carries over between episodes.

    Isolation (``sandbox``): ``auto`` uses bubblewrap, else the kernel's namespaces directly
    (``namespaces``), and refuses to run code when neither works; ``none`` runs without isolation, for
    trusted code only (``AGENTFLOW_SANDBOX`` sets the mode when the argument is ``auto``). Isolated
    workers see only the interpreter, its standard library and the allowed packages, each in its own
    network, IPC, pid and mount namespaces with its own size-capped /tmp, a private uid when running as
    root, no capabilities, a seccomp filter (no nested namespaces, no ptrace, no memfd) and rlimits (address
    space, CPU, processes, file size, open files); ``memory_mb`` also caps all of a worker's processes
    together (their PSS, polled by the worker's supervisor while a cell runs). The host kills a worker past
    its timeout, and its whole pid namespace with it. Replies reach the host through the supervisor, which
    the code cannot reach, and the host caps them again.

    Between calls nothing of a worker runs: when a call returns, the processes its cell started are killed
    (``keep_background=True`` keeps them for later calls) and the kernel, its threads and anything kept are
    stopped until the next call. Where a delegated cgroup v2 is writable, each worker also has its own
    ``memory.max``/``cpu.max``/``pids.max`` (``sandbox_info.resource_control``). With ``prestart`` (default)
    the shared zygote starts in the background when the tool is built and ``reset()`` waits for it, so no
    call's budget includes it; during an episode the next episode's worker is forked in the background.

    ``sandbox="remote:http://HOST:PORT"`` (or ``AGENTFLOW_SANDBOX=remote:...``), for machines where no local
    isolation works: each call goes to a SandboxFusion-compatible service, such as ``agentflow-env sandbox-server``
    on a host that allows namespaces, with the same episode semantics and the same texts; an unreachable service
    is that turn's tool error, never a local run (``remote_token`` or ``$AGENTFLOW_SANDBOX_TOKEN`` authenticates;
    see :mod:`agentflow_env.tools.python.remote`).
    """

    name = "Python_Coder_Tool"
    description = (
        "Runs Python 3 code and returns what it prints plus the value of the last expression, like a notebook "
        "cell. numpy and sympy are available (also math, fractions, itertools, collections, re). No network, no "
        "input(), no files outside /tmp; variables do not persist between calls, but changes to imported modules "
        "and files in /tmp last until the episode ends. Use it for exact arithmetic, algebra, counting and "
        "simulation."
    )
    input_spec = "Python source code (a ```python fence is accepted); print() what you need or end with an expression"
    examples = ("import sympy as sp; x = sp.symbols('x'); sp.solve(x**2 - 5*x + 6, x)",)

    def __init__(
        self,
        *,
        max_output_chars: int = 8000,
        memory_mb: int = 1024,
        nproc: int = 8,
        fsize_mb: int = 64,
        nofile: int = 64,
        tmp_mb: int = 64,
        pool_size: int = 1,
        recycle: str = "episode",
        sandbox: str = "auto",
        preload: Sequence[str] = (),
        max_code_chars: int = 200_000,
        keep_background: bool = False,
        prestart: bool = True,
        remote_token: str | None = None,
    ):
        self._config: dict[str, Any] = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        if sandbox not in SANDBOX_MODES and not sandbox.startswith(REMOTE_PREFIX):
            raise ConfigError(
                f"sandbox={sandbox!r}; choose one of {SANDBOX_MODES}, or '{REMOTE_PREFIX}http://HOST:PORT'"
            )
        try:
            mode = resolve_mode(sandbox)
        except Exception as exc:
            raise ConfigError(str(exc)) from None
        if mode == "none":
            logger.warning(
                "Python_Coder_Tool runs code WITHOUT a sandbox (sandbox='none' or %s=none): it can read and change "
                "everything this process can; use it only for trusted code",
                SANDBOX_ENV,
            )
        if recycle not in ("episode", "call"):
            raise ConfigError(f"recycle={recycle!r}; choose 'episode' (reuse a worker within an episode) or 'call'")
        if min(max_output_chars, memory_mb, nproc, fsize_mb, nofile, tmp_mb, pool_size, max_code_chars) < 1:
            raise ConfigError(
                "max_output_chars, memory_mb, nproc, fsize_mb, nofile, tmp_mb, pool_size and max_code_chars "
                "must all be positive"
            )
        if nofile < 16:
            raise ConfigError(f"nofile={nofile} is too small for Python to run; use at least 16")
        self.limits = SandboxLimits(
            memory_mb=memory_mb,
            nproc=nproc,
            fsize_mb=fsize_mb,
            nofile=nofile,
            tmp_mb=tmp_mb,
            keep_background=bool(keep_background),
        )
        self.max_output_chars = int(max_output_chars)
        self.max_code_chars = int(max_code_chars)
        self.pool_size = int(pool_size)
        self.recycle = recycle
        self._remote: Any = None
        if mode.startswith(REMOTE_PREFIX):  # each call goes to a sandbox service; nothing runs here
            from agentflow_env.tools.python.remote import RemoteSandbox

            self._remote = RemoteSandbox(
                mode[len(REMOTE_PREFIX) :], self.limits, self.max_output_chars, token=remote_token, preload=preload
            )
        self._state = _State((mode, tuple(preload)), self.limits)
        _start_releaser()
        self._finalizer = weakref.finalize(self, _release_later, self._state)
        self._finalizer.atexit = False  # at exit the launcher stops every zygote, and their workers with them
        # the zygote's start (seconds: it imports numpy and sympy) is never inside a call's budget
        if prestart and self._remote is None:
            starter = threading.Thread(target=_prestart, args=(self._state,), name="python-tool-start", daemon=True)
            self._state.starter = starter
            starter.start()

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the configuration only (e.g. into a vector-env subprocess); workers are never shared."""
        return {"config": self._config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["config"])  # type: ignore[misc]

    # ------------------------------------------------------------------ public
    @property
    def sandbox_info(self) -> SandboxInfo:
        """The isolation actually in force (starts the shared zygote if needed; asks a remote sandbox server)."""
        if self._remote is not None:
            return self._remote.info()
        return self._zygote().info

    def warm_up(self) -> None:
        """Start the zygote and one worker now, so the first call does not pay for it (remote: nothing to start)."""
        if self._remote is not None:
            return
        self._join_prestart()
        worker = self._checkout()
        self._checkin(worker, self._state.epoch)

    def reset(self) -> None:
        """Episode start: workers that ran code are replaced by fresh ones (with nothing they started).

        The spare forked in the background during the last episode takes a used worker's place at once; the used
        one is killed, and the next spare forked, in the background. Without a spare, a worker is forked here.
        The first reset waits for the zygote started when the tool was built, so no call pays for its start.
        Remote: the next call starts a new session (see :mod:`~agentflow_env.tools.python.remote`).
        """
        if self._remote is not None:
            self._remote.reset()
            return
        self._join_prestart()
        state = self._state
        with state.lock:
            state.epoch += 1
            used = [w for w in state.idle if w.calls]
            state.idle = [w for w in state.idle if not w.calls]
            if used and state.spare is None and state.maintainer is not None and not state.doomed:
                # the spare is being forked now (episodes back to back): waiting for it beats forking another
                state.lock.wait_for(lambda: state.spare is not None or state.maintainer is None, timeout=5.0)
            spare, state.spare = state.spare, None
            if spare is not None and not _usable(spare, state):
                used.append(spare)
                spare = None
            if spare is not None and len(state.idle) + state.busy < self.pool_size:
                state.idle.append(spare)
                spare = None
            if spare is not None:
                state.spare = spare  # nothing to replace: keep it for the next episode
            missing = self.pool_size - len(state.idle) - state.busy if (used or not state.idle) else 0
            background = state.registered and not state.closed
            overflow: list[Worker] = []
            if background and used:  # they are stopped since their last call returned: killed in the background
                state.doomed += used
                # resets outpacing the background thread (a loaded machine) kill the excess here, so the used
                # workers left alive stay bounded whatever the timing
                excess = len(state.doomed) - (_MAX_DOOMED + 1)
                if excess > 0:
                    overflow, state.doomed = state.doomed[:excess], state.doomed[excess:]
                _kick(state)
        for worker in overflow if background else used:
            worker.kill()
        if missing > 0:
            self._refill(missing)

    def _join_prestart(self) -> None:
        starter = self._state.starter
        if starter is not None:
            starter.join()
            self._state.starter = None

    def close(self) -> None:
        """Kill this tool's workers; the shared zygote stops when its last tool closes. Safe to call twice."""
        self._finalizer.detach()
        _release(self._state)
        if self._remote is not None:
            self._remote.close()

    # ------------------------------------------------------------------ internals
    def _zygote(self) -> Any:
        self._join_prestart()  # one claim per tool: never beside the prestart thread's
        state = self._state
        with state.lock:
            register = not state.registered
            state.registered = True
        try:
            return acquire_zygote(state.key, register)
        except BaseException:
            if register:
                with state.lock:
                    state.registered = False
            raise

    def _checkout(self) -> Worker:
        state = self._state
        with state.lock:
            while not state.idle and state.busy >= self.pool_size:
                state.lock.wait()
            worker = state.idle.pop() if state.idle else None
            state.busy += 1
        try:
            if worker is None or not _usable(worker, state):
                if worker is not None:
                    worker.kill()
                worker = _spawn(self._state, self._zygote())
            if not worker.calls:
                # a fresh worker's first call: the next episode will need another, forked now in the background
                # (a tool that never runs code forks none beyond the one started with it)
                with state.lock:
                    _kick(state)
            return worker
        except BaseException:
            with state.lock:
                state.busy -= 1
                state.lock.notify()
            raise

    def _refill(self, count: int) -> None:
        """Fork replacement workers now, so the next call does not wait for one (failures wait for that call)."""
        state = self._state
        for _ in range(count):
            with state.lock:
                if not state.registered or len(state.idle) + state.busy >= self.pool_size:
                    return
                epoch = state.epoch
            try:
                worker = _spawn(self._state, self._zygote())
            except Exception:  # the next call will try again and report what is wrong
                logger.debug("pre-forking a Python worker failed", exc_info=True)
                return
            with state.lock:
                keep = epoch == state.epoch and state.registered and len(state.idle) + state.busy < self.pool_size
                if keep:
                    state.idle.append(worker)
            if not keep:
                worker.kill()

    def _checkin(self, worker: Worker | None, epoch: int) -> int | None:
        """Return a worker to the pool, or kill it (``None`` = it is already gone); returns a kill's wait status."""
        state = self._state
        status = None
        keep = worker is not None and epoch == state.epoch and self.recycle == "episode"
        if worker is not None and not keep:
            status = worker.kill()
        with state.lock:
            state.busy -= 1
            if keep and worker is not None:
                state.idle.append(worker)
            state.lock.notify()
        return status

    def _run(self, command: str, timeout: float) -> ToolResult:
        code = strip_code_fences(command)
        if not code.strip():
            return ToolResult(
                text="Error: empty command; give Python code to run, e.g. print(2**10)", ok=False, error="empty command"
            )
        if len(code) > self.max_code_chars:
            return ToolResult(
                text=f"Error: the code is {len(code)} characters; send at most {self.max_code_chars}",
                ok=False,
                error="code too long",
            )
        timeout = max(float(timeout), 0.05)
        outcome = self._remote.execute(code, timeout) if self._remote is not None else self.execute(code, timeout)
        return outcome_result(
            outcome, max_output_chars=self.max_output_chars, memory_mb=self.limits.memory_mb, timeout=timeout
        )

    def execute(self, code: str, timeout: float) -> CellOutcome:
        """Run one cell of code (no fences, no length check) in this episode's worker; what it came to.

        ``sandbox-server`` runs its requests with this; a worker that timed out, died or went past the memory cap
        is replaced (``outcome.state_lost``). Exceptions only for a sandbox that cannot start."""
        if self._remote is not None:
            return self._remote.execute(code, timeout)
        self._join_prestart()  # without a reset first: wait for the worker the tool's build began (outside the budget)
        epoch = self._state.epoch
        try:
            worker = self._checkout()
        except SandboxUnavailable as exc:
            _warn_refusal(str(exc))
            return CellOutcome(failure="no sandbox", detail=str(exc))
        try:
            reply = worker.call(code, timeout, self.max_output_chars)
        except TimeoutError:
            self._checkin(worker, -1)
            return CellOutcome(failure="timeout")
        except WorkerLost as exc:
            over = exc.reason == "memory" or worker.oom_killed()
            status = self._checkin(worker, -1)
            status = exc.status if exc.status is not None else status
            self._refill(1)
            if over:
                return CellOutcome(failure="memory")
            return CellOutcome(failure="died", detail=f"{describe_status(status)}; {exc}")
        except BaseException:
            self._checkin(worker, -1)
            raise
        if worker.oom_killed():  # cgroup: the kernel killed a process past memory.max (the cell may have gone on)
            self._checkin(worker, -1)
            self._refill(1)
            return CellOutcome(failure="memory")
        self._checkin(worker, epoch)
        if self.recycle == "call":
            self._refill(1)
        return CellOutcome(
            output=str(reply.get("output", "")),
            dropped=int(reply.get("dropped", 0) or 0),
            error=reply.get("error") or None,
            exc=reply.get("exc"),
        )
