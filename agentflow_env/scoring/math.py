"""Math answer equivalence with ``math-verify``, safe in threads and subprocesses, with a hard time bound.

Before any comparison the single-commitment rule applies (:mod:`agentflow_env.scoring.commitment`): an answer
naming several values ("205 or 204", "1, 2, 3, 204", ``\\boxed{205, 204}``) scores 0, and in ``x = 12*17 = 204``
only the last side is compared.

math-verify's own timeouts use ``signal.alarm`` (main thread only), so they are switched off here; the
bound comes from running the check in a helper process that is killed when it overruns ("process"),
or from waiting on a helper thread ("thread": the caller is bounded, a runaway check is abandoned).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import logging
import os
import queue
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from agentflow_env.error import ConfigError, DependencyNotInstalled
from agentflow_env.scoring.commitment import read_commitment
from agentflow_env.scoring.extract import number_with_unit
from agentflow_env.scoring.qa import gold_aliases, unwrap_answer
from agentflow_env.types import Task

__all__ = ["MathScorer", "math_equal", "shared_pool", "verify_in_process", "warm_up"]

logger = logging.getLogger(__name__)

_ISOLATION = ("auto", "process", "thread")
_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+|[-+]?\d+/\d+")
_TRIM = re.compile(r"^\$+|\$+$|\\[,;!]|\\text\{\s*\}|\.$")


def _plain_number(text: str) -> Fraction | None:
    """Exact value of a bare integer, decimal or ``a/b`` (``1,000`` allowed); ``None`` for anything else."""
    text = _TRIM.sub("", text.strip()).strip()
    if not _PLAIN_NUMBER.fullmatch(text):
        return None
    try:
        return Fraction(text.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


def _fast_verdict(prediction: str, golds: Sequence[str]) -> bool | None:
    """Decide without math-verify when both sides are plain numbers (units, thousands separators and
    scientific notation aside) or identical text; else ``None``."""
    squeeze = "".join(prediction.split())
    if any(squeeze == "".join(g.split()) for g in golds):
        return True
    value = _plain_number(prediction)
    if value is None:
        read = number_with_unit(prediction)
        value = read[0] if read is not None and read[1] not in ("%", "\\%") else None
    gold_values = [_plain_number(g) for g in golds]
    if value is not None and all(v is not None for v in gold_values):
        return any(value == v for v in gold_values)
    return None


# ------------------------------------------------------------------ the math-verify call itself
def _quiet_math_verify() -> tuple[Any, Any]:
    try:
        import math_verify
        from math_verify import grader, parser
    except ImportError:
        raise DependencyNotInstalled("math-verify", "math") from None
    # we bound time ourselves; silence its "timeout disabled" warning
    parser.TIMEOUT_WARNING_SHOWN = True
    grader.TIMEOUT_WARNING_SHOWN = True
    return math_verify.parse, math_verify.verify


_PERCENT = re.compile(r"(\d(?:\.\d+)?)\s*\\?%")


def _parses(parse: Any, text: str) -> list[list[Any]]:
    """Every way math-verify reads ``text``: as given (it picks the last value) and, without delimiters,
    as LaTeX math (it picks the first): one list per reading that found something, less a reading whose
    text is a part of another's."""
    readings = [list(parse(text, parsing_timeout=None))]
    if "$" not in text and "\\boxed" not in text and "\\(" not in text:
        readings.append(list(parse(f"${text}$", parsing_timeout=None)))
    readings = [r for r in readings if r]
    texts = ["".join(str(r[-1]).split()) for r in readings]
    # a reading that read only part of another's text (``2`` of ``2^{10}``, ``10`` of ``10\\%``) misread it
    return [r for i, r in enumerate(readings) if not any(t != texts[i] and texts[i] in t for t in texts)]


def math_equal(prediction: str, golds: Sequence[str]) -> bool:
    """Whether ``prediction`` equals a gold answer per math-verify in **every** way it parses (no signals:
    runs in any thread). Two readings of one answer that disagree (``\\frac{34}{1} ou \\frac{33}{1}``
    reads 34 one way and 33 the other) are two answers, and do not pass.

    This call has no time bound of its own; :class:`MathScorer` adds one.
    """
    parse, verify = _quiet_math_verify()
    # a percent sign is a factor of 1/100 in the answer (one parse drops it, the other keeps it)
    readings = _parses(parse, _PERCENT.sub(r"\1/100", prediction))
    if not readings:
        return False
    gold_readings = [g for gold in golds for g in _parses(parse, gold)]
    if not gold_readings:
        return False
    return all(any(verify(gold, reading, timeout_seconds=None) for gold in gold_readings) for reading in readings)


# ------------------------------------------------------------------ bounded execution
START_TIMEOUT_S = 120.0  # how long a helper may take to start (import sympy/math-verify); not the check's budget
WALL_CAP = 12.0  # a check is also cut off after this many times its budget in wall time
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") and "SC_CLK_TCK" in os.sysconf_names else 100


def _cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used, from ``/proc`` (``None`` where there is none)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return None


class _Worker:
    """A helper Python process that answers one JSON request per line; killed and replaced on overrun.

    It starts **warm**: :meth:`start` launches it and returns at once; the helper imports math-verify, runs
    one check, and then says ``{"ready": true}``. :meth:`ask` waits for that line first (up to
    :data:`START_TIMEOUT_S`), and only then starts the check's clock, so the budget counts verification
    only. A check that overruns kills the helper, and a fresh one starts at once, so a hostile answer costs
    one bounded call and the next check finds a helper warming or warm, never a cold start on its clock.

    Started with ``subprocess`` (not ``multiprocessing``), so it works from daemonic processes and never
    re-imports the caller's ``__main__``.
    """

    _CODE = "from agentflow_env.scoring.math import _serve; _serve()"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._pid = os.getpid()
        self.restarts = 0

    def _spawn(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", self._CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self._ready = False

    def _check_fork(self) -> None:
        if self._pid != os.getpid():  # forked: the pipes belong to the parent's helper
            self._proc, self._ready, self._pid = None, False, os.getpid()

    def start(self) -> None:
        """Launch the helper if none is running (returns at once; it warms up in the background)."""
        with self._lock:
            self._check_fork()
            if self._proc is None or self._proc.poll() is not None:
                self._spawn()

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> bool:
        assert proc.stdout is not None
        while not self._ready:
            ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
            line = proc.stdout.readline() if ready else b""
            if not line:
                return False
            self._ready = bool(json.loads(line).get("ready", False))
        return True

    def ask(self, prediction: str, golds: Sequence[str], timeout: float) -> bool | None:
        """The verdict, or ``None`` when the check overran ``timeout`` seconds (the helper is killed and
        a fresh one started). Waiting for a helper to start does not count against ``timeout``."""
        with self._lock:
            self._check_fork()
            if self._proc is None or self._proc.poll() is not None:
                self._spawn()
            proc = self._proc
            assert proc is not None and proc.stdin is not None and proc.stdout is not None
            try:
                if not self._wait_ready(proc):
                    self._kill(restart=False)
                    return None
                proc.stdin.write(json.dumps({"p": prediction, "g": list(golds)}).encode() + b"\n")
                proc.stdin.flush()
                line = self._reply(proc, timeout)
            except (BrokenPipeError, OSError, ValueError):
                line = b""
            if not line:
                self._kill(restart=True)
                return None
            return bool(json.loads(line).get("ok", False))

    @staticmethod
    def _reply(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
        """The helper's reply line, or ``b""`` once the check has used ``timeout`` seconds of the helper's
        CPU time (wall time where the OS does not say; and never more than ``WALL_CAP`` x ``timeout``
        of wall time), so a busy machine slows a check down without failing it."""
        assert proc.stdout is not None
        cpu0 = _cpu_seconds(proc.pid)
        start = time.monotonic()
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], 0.05 if cpu0 is not None else timeout)
            if ready:
                return proc.stdout.readline()
            wall = time.monotonic() - start
            cpu = _cpu_seconds(proc.pid)
            used = (cpu - cpu0) if cpu is not None and cpu0 is not None else wall
            if used >= timeout or wall >= WALL_CAP * timeout:
                return b""

    def _kill(self, restart: bool) -> None:
        proc, self._proc, self._ready = self._proc, None, False
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if restart:
            self.restarts += 1
            self._spawn()  # warm again before the next check arrives

    def close(self) -> None:
        with self._lock:
            self._kill(restart=False)


def _serve() -> None:
    """Helper-process loop: warm up, say ``{"ready": true}``, then read ``{"p", "g"}`` lines from stdin
    and write ``{"ok": bool}`` lines."""
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the reply channel
    _quiet_math_verify()
    for pred, gold in (("\\frac{1}{2}", "0.5"), ("\\sqrt{12}", "2\\sqrt{3}"), ("(x+1)^2", "x^2+2x+1")):
        try:  # the first checks pay sympy's lazy imports and caches: pay them now
            math_equal(pred, [gold])
        except Exception:
            pass
    out.write(b'{"ready": true}\n')
    out.flush()
    for raw in sys.stdin.buffer:
        try:
            req = json.loads(raw)
            ok = math_equal(str(req["p"]), [str(g) for g in req["g"]])
        except Exception:  # a bad request must not kill the helper
            ok = False
        out.write(json.dumps({"ok": ok}).encode() + b"\n")
        out.flush()


class _Pool:
    """``size`` warm helpers; a check takes a free one (or waits for one)."""

    def __init__(self, size: int) -> None:
        self.workers = [_Worker() for _ in range(max(1, size))]
        self._free: queue.Queue[_Worker] = queue.Queue()
        for w in self.workers:
            self._free.put(w)

    def start(self) -> None:
        for w in self.workers:
            w.start()

    def ask(self, prediction: str, golds: Sequence[str], timeout: float) -> bool | None:
        worker = self._free.get()
        try:
            return worker.ask(prediction, golds, timeout)
        finally:
            self._free.put(worker)

    @property
    def restarts(self) -> int:
        return sum(w.restarts for w in self.workers)

    def close(self) -> None:
        for w in self.workers:
            w.close()


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()
POOL_SIZE = int(os.environ.get("AGENTFLOW_MATH_WORKERS", "1") or 1)


def shared_pool() -> _Pool:
    """The process-wide pool of math-verify helpers (``$AGENTFLOW_MATH_WORKERS`` of them, default 1)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = _Pool(POOL_SIZE)
            atexit.register(_POOL.close)
        return _POOL


def warm_up() -> None:
    """Start the helpers now (an env does this when its math scorer is built), so no check waits on a
    cold start."""
    shared_pool().start()


def verify_in_process(prediction: str, golds: Sequence[str], timeout: float = 5.0) -> bool | None:
    """``math_equal`` in a warm helper process; ``None`` when the check itself overran ``timeout``."""
    return shared_pool().ask(prediction, golds, timeout)


def _verify_in_thread(prediction: str, golds: Sequence[str], timeout: float) -> bool | None:
    box: dict[str, bool] = {}

    def run() -> None:
        try:
            box["ok"] = math_equal(prediction, golds)
        except Exception:
            logger.debug("math-verify failed", exc_info=True)
            box["ok"] = False

    thread = threading.Thread(target=run, name="math-verify", daemon=True)
    thread.start()
    clock = _thread_cpu_clock(thread)
    start = time.monotonic()
    while True:  # the check's own CPU time counts (where the OS says), not its wait for the GIL or a core
        thread.join(0.05 if clock is not None else timeout)
        if not thread.is_alive():
            return box.get("ok")
        wall = time.monotonic() - start
        used = _clock_seconds(clock, wall)
        if used >= timeout or wall >= WALL_CAP * timeout:
            return None


def _thread_cpu_clock(thread: threading.Thread) -> int | None:
    """The CPU-time clock of ``thread`` (POSIX), or ``None`` where there is none."""
    try:
        return time.pthread_getcpuclockid(thread.ident)  # type: ignore[arg-type]
    except (AttributeError, OSError, TypeError, OverflowError):
        return None


def _clock_seconds(clock: int | None, fallback: float) -> float:
    try:
        return time.clock_gettime(clock) if clock is not None else fallback
    except OSError:  # the thread has just ended
        return fallback


class MathScorer:
    """1.0 when the prediction is mathematically equal to a gold answer (per math-verify), else 0.0.

    Plain numbers are compared exactly without math-verify. Other checks run under ``timeout_s``;
    ``isolation`` is ``process`` (a pool of warm helper processes started when the scorer is built, see
    :class:`_Worker`; killed and restarted on overrun), ``thread`` (a helper thread, abandoned on overrun)
    or ``auto`` (process on POSIX, thread elsewhere). ``timeout_s`` counts the check only, never a
    helper's start, and it is the check's CPU time (the helper process's, from ``/proc``; the helper
    thread's, from its POSIX CPU clock), so a loaded machine slows checks without failing them (wall time
    is capped at ``WALL_CAP`` times the budget). An overrun scores 0 for that answer alone.
    """

    def __init__(self, timeout_s: float = 5.0, isolation: str = "auto", warm: bool = True):
        if isolation not in _ISOLATION:
            raise ConfigError(f"isolation={isolation!r}; choose one of {', '.join(_ISOLATION)}")
        if timeout_s <= 0:
            raise ConfigError(f"timeout_s must be positive seconds, got {timeout_s}")
        if importlib.util.find_spec("math_verify") is None:
            raise DependencyNotInstalled("math-verify", "math")
        if isolation == "auto":
            isolation = "process" if os.name == "posix" else "thread"
        self.timeout_s = float(timeout_s)
        self.isolation = isolation
        self.overruns = 0
        if isolation == "process" and warm:
            warm_up()  # the helpers start now, with the env, not on the first check's clock

    def __call__(self, prediction: str, task: Task) -> float:
        return 1.0 if self.equal(prediction, gold_aliases(task.answer), task.question) else 0.0

    def equal(self, prediction: str, golds: Sequence[str], question: str = "") -> bool:
        """Whether ``prediction`` commits to one value and it equals a gold (``question`` lets working
        lines restate its numbers)."""
        golds = [unwrap_answer(g) for g in golds]
        committed = read_commitment(prediction, golds, question)
        if committed.hedge is not None:
            return False
        pred = committed.text if any("=" in g for g in golds) else committed.value
        if not pred or not golds:
            return False
        fast = _fast_verdict(pred, golds)
        if fast is not None:
            return fast
        if self.isolation == "process":
            verdict = verify_in_process(pred, golds, self.timeout_s)
        else:
            verdict = _verify_in_thread(pred, golds, self.timeout_s)
        if verdict is None:
            self.overruns += 1
            logger.warning("math-verify overran %.1fs on %r; scored 0", self.timeout_s, pred[:80])
            return False
        return verdict

    def __repr__(self) -> str:
        return f"MathScorer(timeout_s={self.timeout_s}, isolation={self.isolation!r})"
