"""The calculator tool: exact rational arithmetic without ``eval``; sympy, in a killable helper, for the rest.

Plain arithmetic is evaluated in this process by :mod:`agentflow_env.scoring.arith`, whose sizes are bounded before
each operation. Anything symbolic goes to a helper process (:mod:`agentflow_env.tools.calculator.symbolic`) that bounds
every size before evaluating and is killed when it overruns, so no input can hold this process's CPU or GIL:
a call never runs much past its ``timeout``.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from agentflow_env.scoring.arith import ArithmeticError_, evaluate, format_fraction
from agentflow_env.tools.base import BaseTool
from agentflow_env.tools.calculator.symbolic import prepare
from agentflow_env.types import ToolResult

__all__ = ["CalculatorTool", "SymbolicAnswer"]

SYMBOLIC_TIMEOUT_S = 3.0  # per expression, within the call's own timeout
HELPER_START_TIMEOUT_S = 120.0  # importing sympy in a new helper, on a busy machine (in the background)
MAX_HELPERS = max(1, min(4, os.cpu_count() or 1))  # helpers alive at once (concurrent calls share them)
_MAX_REPLY_BYTES = 64 * 1024


class CalculatorTool(BaseTool):
    """Evaluates arithmetic exactly (fractions, not floats); several expressions may be given, one per line."""

    name = "Calculator_Tool"
    description = (
        "Evaluates arithmetic exactly with fractions: numbers, + - * / ** and parentheses "
        "(also x, ×, ÷), and symbolic maths with sympy (sqrt, log, pi, factorial, simplify, solve). "
        "Several expressions may be given, one per line or separated by ';'."
    )
    input_spec = "one or more arithmetic expressions"
    examples = ("(13 - 1) * (8 / 4)",)
    max_expressions = 64

    def reset(self) -> None:
        """Start of an episode: have a symbolic helper importing sympy in the background (a no-op when one is idle)."""
        _POOL.prestart()

    def _run(self, command: str, timeout: float) -> ToolResult:
        deadline = time.monotonic() + max(0.0, timeout)
        exprs = [e.strip() for e in command.replace(";", "\n").splitlines() if e.strip()]
        if not exprs:
            return ToolResult(
                text="Error: empty command; give an arithmetic expression such as 3*(4+4)",
                ok=False,
                error="empty command",
            )
        if len(exprs) > self.max_expressions:
            return ToolResult(
                text=f"Error: {len(exprs)} expressions; give at most {self.max_expressions} per call",
                ok=False,
                error="too many expressions",
            )
        lines, errors = [], []
        for expr in exprs:
            try:
                lines.append(f"{expr} = {format_fraction(evaluate(expr))}")
                continue
            except ArithmeticError_ as exc:
                message = str(exc)
            answer = self._symbolic(expr, SYMBOLIC_TIMEOUT_S, deadline)
            if answer.text is not None:
                lines.append(f"{expr} = {answer.text}")
                continue
            message = answer.error or message
            lines.append(f"{expr} -> Error: {message}")
            errors.append(message)
        ok = len(errors) < len(exprs)
        return ToolResult(text="\n".join(lines), ok=ok, error="; ".join(errors) or None)

    @staticmethod
    def _symbolic(expr: str, timeout: float = SYMBOLIC_TIMEOUT_S, deadline: float | None = None) -> SymbolicAnswer:
        """Symbolic fallback (sqrt, log, pi, simplify, ...) with sympy, in a helper process killed on overrun.

        The text is first checked here against a whitelist (known function and constant names, one-letter
        symbols, numbers and operators: no attributes, strings, brackets or dunders). In the helper, sympy's
        parser turns it into code whose sizes are bounded before anything is evaluated (power towers, huge
        factorials and literals, also inside function arguments); the evaluation then runs under ``timeout``,
        and never past ``deadline`` (the whole call's end).
        """
        return symbolic_answer(expr, timeout, deadline)


# ------------------------------------------------------------------------------ the symbolic helper processes


@dataclass
class SymbolicAnswer:
    """The symbolic side's answer: ``text`` when it evaluated; else ``error`` (why) or neither (not maths)."""

    text: str | None = None
    error: str | None = None


class _Helper:
    """One helper process that answers one JSON request per line.

    See :func:`agentflow_env.tools.calculator.symbolic.serve`.
    """

    # the helper imports this very copy of the package, whatever its working directory holds
    _CODE = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r}); "
        "from agentflow_env.tools.calculator.symbolic import serve; serve()"
    )

    def __init__(self) -> None:
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # numpy comes with the package
            env[var] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self._CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env=env,
        )
        self.ready = False
        self._buffer = b""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def read_line(self, deadline: float) -> bytes | None:
        """One reply line, or ``None`` when none came by ``deadline`` (or the helper died)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or len(self._buffer) > _MAX_REPLY_BYTES:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:  # the helper exited
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def wait_ready(self, deadline: float) -> bool:
        if not self.ready:
            line = self.read_line(deadline)
            self.ready = line is not None and b"ready" in line
        return self.ready

    def ask(self, expr: str, timeout: float) -> dict[str, str] | None:
        """The reply, or ``None`` when the helper overran ``timeout`` or died (then it is no longer usable)."""
        assert self.proc.stdin is not None
        deadline = time.monotonic() + timeout
        try:
            self.proc.stdin.write(json.dumps({"e": expr, "t": timeout}).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return None
        line = self.read_line(deadline)
        if line is None:
            return None
        try:
            reply = json.loads(line)
        except ValueError:
            return None
        return reply if isinstance(reply, dict) else None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class _HelperPool:
    """Up to :data:`MAX_HELPERS` helpers; a call borrows an idle one, and one that overran is killed and replaced.

    Helpers start in the background (a thread waits for each to import sympy) and join the idle list once
    ready, so a call takes whichever helper is free first: it never waits on one particular helper that is
    still importing while another one comes free (on a busy machine an import can take longer than a call).
    Waiting calls are served first come, first served: a thread that gives a helper back cannot take it again
    ahead of calls already waiting (it used to, and then held it through a slow expression).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._idle: list[_Helper] = []  # ready helpers only
        self._count = 0  # alive or starting, idle or busy
        self._starting = 0
        self._queue: collections.deque[object] = collections.deque()  # waiting calls, oldest first
        self._pid = os.getpid()

    def _forked(self) -> None:
        """In a forked child the helpers are the parent's: close this copy of their pipes (so a helper still sees
        end-of-input when the parent exits) and start afresh."""
        for helper in self._idle:
            for stream in (helper.proc.stdin, helper.proc.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        self._cond = threading.Condition()
        self._idle, self._count, self._starting, self._pid = [], 0, 0, os.getpid()
        self._queue = collections.deque()

    def _start_locked(self) -> None:
        """Start one helper in the background (the caller holds the lock and checked ``_count``)."""
        self._count += 1
        self._starting += 1
        try:
            helper = _Helper()
        except BaseException:
            self._count -= 1
            self._starting -= 1
            raise
        threading.Thread(target=self._await_ready, args=(helper, self._cond), daemon=True).start()

    def _await_ready(self, helper: _Helper, cond: threading.Condition) -> None:
        ready = helper.wait_ready(time.monotonic() + HELPER_START_TIMEOUT_S)
        if not ready:
            helper.kill()
        with cond:
            if cond is not self._cond:  # forked meanwhile: this helper belongs to the parent's pool
                return
            self._starting -= 1
            if ready:
                self._idle.append(helper)
            else:
                self._count -= 1
            cond.notify_all()

    def _take(self, deadline: float) -> _Helper | str:
        """A ready helper, or why there is none by ``deadline`` ("busy" or "starting")."""
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            try:
                while True:
                    if self._queue[0] is ticket:
                        while self._idle:
                            helper = self._idle.pop()
                            if helper.alive():
                                return helper
                            helper.kill()
                            self._count -= 1
                    if self._count < MAX_HELPERS:
                        self._start_locked()
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return "starting" if self._starting else "busy"
                    self._cond.wait(left)
            finally:
                self._queue.remove(ticket)
                self._cond.notify_all()  # the next in line may take a helper now

    def _give_back(self, helper: _Helper, usable: bool) -> None:
        if not usable:
            helper.kill()
        with self._cond:
            if usable:
                self._idle.append(helper)
            else:
                self._count -= 1
            self._cond.notify_all()
        if not usable:
            self.prestart()  # the next call finds a helper that has already imported sympy

    def prestart(self) -> None:
        """Start a helper now (it imports sympy in the background) unless one is idle or starting already."""
        if os.getpid() != self._pid:
            self._forked()
        with self._cond:
            if self._idle or self._starting or self._count >= MAX_HELPERS:
                return
            try:
                self._start_locked()
            except OSError:
                return

    def ask(self, expr: str, timeout: float, deadline: float) -> SymbolicAnswer:
        """Evaluate in a helper for at most ``timeout`` seconds, and never past ``deadline`` (the call's end).

        Waiting for a free helper, or for a new one to import sympy, counts against the deadline only.
        """
        if os.getpid() != self._pid:
            self._forked()
        helper = self._take(deadline)
        if isinstance(helper, str):
            if helper == "starting":
                return SymbolicAnswer(error="the symbolic engine is still starting; try again in a moment")
            return SymbolicAnswer(error="the symbolic engine is busy with other calls; try again")
        left = min(timeout, deadline - time.monotonic())
        if left <= 0:
            self._give_back(helper, True)
            return SymbolicAnswer(error="the call's time limit ran out before this expression")
        reply = helper.ask(expr, left)
        if reply is None:
            self._give_back(helper, False)  # killed: whatever it was computing stops now
            return SymbolicAnswer(error=f"the symbolic computation took longer than {left:.1f} s and was stopped")
        self._give_back(helper, True)
        kind, text = reply.get("kind"), str(reply.get("text", ""))
        if kind == "value":
            return SymbolicAnswer(text=text)
        if kind == "size":
            return SymbolicAnswer(error=text)
        return SymbolicAnswer()

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for helper in idle:
            helper.kill()


_POOL = _HelperPool()
atexit.register(_POOL.close)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL._forked)


def symbolic_answer(text: str, timeout: float = SYMBOLIC_TIMEOUT_S, deadline: float | None = None) -> SymbolicAnswer:
    """Evaluate ``text`` with sympy in a helper process, killed after ``timeout`` seconds or at ``deadline``
    (a :func:`time.monotonic` time; by default ``timeout`` from now)."""
    expr = prepare(text)
    if expr is None:
        return SymbolicAnswer()
    if deadline is None:
        deadline = time.monotonic() + timeout
    if min(timeout, deadline - time.monotonic()) <= 0:
        return SymbolicAnswer(error="the call's time limit ran out before this expression")
    try:
        return _POOL.ask(expr, timeout, deadline)
    except OSError as exc:  # no process could be started (limits, a missing interpreter)
        return SymbolicAnswer(error=f"the symbolic engine could not start ({exc})")


def _symbolic_eval(text: str, timeout: float = SYMBOLIC_TIMEOUT_S) -> str | None:
    """The symbolic answer's text, or ``None`` (not accepted, too large, or over ``timeout``)."""
    return symbolic_answer(text, timeout).text
