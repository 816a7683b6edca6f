"""What one Python cell came to (:class:`CellOutcome`) and the tool's words for it (:func:`outcome_result`).

The local sandbox, the remote backend (``sandbox="remote:URL"``) and ``agentflow-env sandbox-server`` all describe
a cell with a ``CellOutcome``; the tool turns it into the turn's text with one function, so a cell reads the same
whichever of them ran it. On the wire (the sandbox server's ``agentflow`` reply field) it is :meth:`to_wire`.
"""

from __future__ import annotations

import os
import signal
from dataclasses import asdict, dataclass
from typing import Any

from agentflow_env.types import ToolResult

__all__ = ["FAILURES", "CellOutcome", "describe_status", "outcome_result"]

NO_OUTPUT = "(no output: the code ran without printing; use print() or end the code with an expression)"
#: how a cell can fail outside its own code: past its timeout; its process died; its processes went past the
#: memory cap; no isolation to run it in (refused); the remote sandbox could not run it (unreachable, refused)
FAILURES = ("timeout", "died", "memory", "no sandbox", "remote")


def describe_status(status: int | None) -> str:
    """A wait status in words, with the likely cause."""
    if status is None:
        return "exit status unknown"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        cause = {
            "SIGSEGV": "a crash, often recursion too deep for the C stack",
            "SIGXCPU": "the CPU time limit",
            "SIGKILL": "killed by a limit",
            "SIGABRT": "an abort",
            "SIGXFSZ": "the file size limit",
        }.get(name)
        return f"killed by {name}" + (f": {cause}" if cause else "")
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


@dataclass
class CellOutcome:
    """One cell: what it printed (``output``, ``dropped`` characters past the cap), the traceback it raised
    (``error``, ``exc`` its type), or how it failed outside its code (``failure`` in :data:`FAILURES`, with
    ``detail``: how the process died, the refusal, the remote error). A failure other than an exception means
    the worker was replaced: nothing of the episode's state is left."""

    output: str = ""
    dropped: int = 0
    error: str | None = None
    exc: str | None = None
    failure: str | None = None
    detail: str = ""

    @property
    def state_lost(self) -> bool:
        """Whether the worker that held the episode's state is gone (its next cell starts afresh)."""
        return self.failure in ("timeout", "died", "memory")

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_wire(cls, data: Any, limit: int) -> CellOutcome | None:
        """An outcome a server sent, type-checked and cut to ``limit`` characters; ``None`` when malformed."""
        if not isinstance(data, dict) or not isinstance(data.get("output", ""), str):
            return None
        failure = data.get("failure")
        if failure is not None and failure not in FAILURES:
            return None
        dropped = data.get("dropped", 0)
        dropped = dropped if isinstance(dropped, int) and not isinstance(dropped, bool) and dropped >= 0 else 0
        output = data.get("output", "")
        if len(output) > limit:
            dropped, output = dropped + len(output) - limit, output[:limit]
        error, exc, detail = data.get("error"), data.get("exc"), data.get("detail", "")
        return cls(
            output=output,
            dropped=dropped,
            error=error[-4000:] if isinstance(error, str) else None,
            exc=exc[:200] if isinstance(exc, str) else None,
            failure=failure,
            detail=detail[:2000] if isinstance(detail, str) else "",
        )


def outcome_result(outcome: CellOutcome, *, max_output_chars: int, memory_mb: int, timeout: float) -> ToolResult:
    """The turn's text for a cell, the same for every backend."""
    failure = outcome.failure
    if failure == "no sandbox":
        return ToolResult(text=f"Error: {outcome.detail}", ok=False, error="no sandbox")
    if failure == "remote":
        return ToolResult(text=f"Error: {outcome.detail}", ok=False, error="remote sandbox failed")
    if failure == "timeout":
        return ToolResult(
            text=f"Error: TimeoutError: the code did not finish within {timeout:g} s and was "
            "stopped; the Python worker was restarted.",
            ok=False,
            error="timeout",
        )
    if failure == "memory":
        return ToolResult(
            text=f"Error: MemoryError: the code and the processes it started used more than "
            f"{memory_mb} MB together; they were stopped and the Python worker was restarted.",
            ok=False,
            error="memory limit",
        )
    if failure == "died":
        how, _, why = outcome.detail.partition("; ")
        return ToolResult(
            text=f"Error: the Python process died ({how}); it was restarted. Common causes: "
            "os._exit or abort, recursion too deep, or a resource limit.",
            ok=False,
            error=f"worker died: {how}; {why}" if why else f"worker died: {how}",
        )
    output = outcome.output[:max_output_chars]
    if outcome.dropped:
        output = (
            output.rstrip("\n") + f"\n[output cut: {outcome.dropped} more characters were not shown; "
            "print less, e.g. a summary or a slice]\n"
        )
    error = outcome.error
    if error:
        text = (output.rstrip("\n") + "\n" if output.strip() else "") + f"Error: {error}"
        last = str(error).strip().splitlines()[-1] if str(error).strip() else str(outcome.exc)
        return ToolResult(text=text, ok=False, error=last)
    return ToolResult(text=output.rstrip("\n") if output.strip() else NO_OUTPUT, ok=True)
