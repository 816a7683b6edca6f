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
import re
import select
import subprocess
import sys
import threading
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from agentflow_env.error import ConfigError, DependencyNotInstalled
from agentflow_env.scoring.commitment import read_commitment
from agentflow_env.scoring.extract import number_with_unit
from agentflow_env.scoring.qa import gold_aliases, unwrap_answer
from agentflow_env.types import Task

__all__ = ["MathScorer", "math_equal", "verify_in_process"]

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
    as LaTeX math (it picks the first): one list per reading that found something."""
    readings = [list(parse(text, parsing_timeout=None))]
    if "$" not in text and "\\boxed" not in text and "\\(" not in text:
        readings.append(list(parse(f"${text}$", parsing_timeout=None)))
    return [r for r in readings if r]


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
    return all(
        any(verify(gold, reading, timeout_seconds=None) for gold in gold_readings) for reading in readings
    )


# ------------------------------------------------------------------ bounded execution
class _Worker:
    """A helper Python process that answers one JSON request per line; killed and replaced on overrun.

    Started with ``subprocess`` (not ``multiprocessing``), so it works from daemonic processes and never
    re-imports the caller's ``__main__``.
    """

    _CODE = "from agentflow_env.scoring.math import _serve; _serve()"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = os.getpid()

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-c", self._CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )

    def ask(self, prediction: str, golds: Sequence[str], timeout: float) -> bool | None:
        """The verdict, or ``None`` when the check overran ``timeout`` seconds (the helper is killed)."""
        with self._lock:
            if self._pid != os.getpid():  # forked: the pipes belong to the parent's helper
                self._proc, self._pid = None, os.getpid()
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(json.dumps({"p": prediction, "g": list(golds)}).encode() + b"\n")
                proc.stdin.flush()
                ready, _, _ = select.select([proc.stdout], [], [], timeout)
                line = proc.stdout.readline() if ready else b""
            except (BrokenPipeError, OSError, ValueError):
                line = b""
            if not line:
                self._kill()
                return None
            return bool(json.loads(line).get("ok", False))

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        with self._lock:
            self._kill()


def _serve() -> None:
    """Helper-process loop: read ``{"p", "g"}`` lines from stdin, write ``{"ok": bool}`` lines."""
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the reply channel
    _quiet_math_verify()
    for raw in sys.stdin.buffer:
        try:
            req = json.loads(raw)
            ok = math_equal(str(req["p"]), [str(g) for g in req["g"]])
        except Exception:  # a bad request must not kill the helper
            ok = False
        out.write(json.dumps({"ok": ok}).encode() + b"\n")
        out.flush()


_WORKER: _Worker | None = None
_WORKER_LOCK = threading.Lock()


def _shared_worker() -> _Worker:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = _Worker()
            atexit.register(_WORKER.close)
        return _WORKER


def verify_in_process(prediction: str, golds: Sequence[str], timeout: float = 5.0) -> bool | None:
    """``math_equal`` in the shared helper process; ``None`` when it overran ``timeout``."""
    return _shared_worker().ask(prediction, golds, timeout)


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
    thread.join(timeout)
    return box.get("ok") if not thread.is_alive() else None


class MathScorer:
    """1.0 when the prediction is mathematically equal to a gold answer (per math-verify), else 0.0.

    Plain numbers are compared exactly without math-verify. Other checks run under ``timeout_s``;
    ``isolation`` is ``process`` (a helper process, killed on overrun), ``thread`` (a helper thread,
    abandoned on overrun) or ``auto`` (process on POSIX, thread elsewhere). An overrun scores 0.
    """

    def __init__(self, timeout_s: float = 5.0, isolation: str = "auto"):
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
