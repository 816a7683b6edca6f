"""The env's memory: ordered steps, rendered within a character budget.

Over budget, the oldest tool results are shortened first; the newest step is never dropped, and
anything cut says so in the text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentflow_env.types import MemoryStep

__all__ = ["Memory", "shorten"]

_MIN_RESULT = 60  # characters of a result kept when it has to be shortened


def shorten(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    limit = max(limit, 0)
    marker = f" …[{len(text) - limit} chars cut]… "
    keep = max(limit - len(marker), 0)
    head = (keep * 2) // 3
    tail = keep - head
    return text[:head] + marker + (text[-tail:] if tail else "")


def _header(step: MemoryStep) -> str:
    status = "" if step.ok else " (failed)"
    lines = [f"Step {step.turn}: {step.tool or 'no tool'}{status}"]
    if step.sub_goal:
        lines.append(f"  Sub-goal: {step.sub_goal}")
    if step.command:
        lines.append(f"  Command: {step.command}")
    return "\n".join(lines)


class Memory:
    """Ordered :class:`MemoryStep` records with a budgeted text rendering."""

    def __init__(self, steps: Iterable[MemoryStep] = ()):
        self.steps: list[MemoryStep] = list(steps)
        self._headers: list[str] = [_header(s) for s in self.steps]

    def __len__(self) -> int:
        return len(self.steps)

    def clear(self) -> None:
        self.steps.clear()
        self._headers.clear()

    def add(self, step: MemoryStep) -> None:
        self.steps.append(step)
        self._headers.append(_header(step))

    def to_list(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.steps]

    @classmethod
    def from_list(cls, items: Iterable[dict[str, Any]]) -> Memory:
        return cls(MemoryStep.from_dict(d) for d in items)

    def render(self, budget: int = 8000) -> str:
        """Text of all steps within ``budget`` characters (see the module docstring)."""
        if not self.steps:
            return "(no steps yet)"
        results = [s.result for s in self.steps]
        blocks = [self._block(i, r) for i, r in enumerate(results)]
        total = sum(len(b) for b in blocks) + len(blocks) - 1
        if total <= budget:
            return "\n".join(blocks)
        # 1. shorten results from the oldest, the newest last
        for i in range(len(results)):
            if total <= budget:
                break
            over = total - budget
            limit = max(len(results[i]) - over, _MIN_RESULT if i < len(results) - 1 else 0)
            if limit < len(results[i]):
                results[i] = shorten(results[i], limit)
                new_block = self._block(i, results[i])
                total += len(new_block) - len(blocks[i])
                blocks[i] = new_block
        # 2. still over: fold the oldest steps into one line, never the newest
        folded = 0
        while total > budget and folded < len(blocks) - 1:
            total -= len(blocks[folded]) + 1
            folded += 1
        out = blocks[folded:]
        if folded:
            out.insert(0, f"(steps 1-{folded} omitted to fit the memory budget)")
        text = "\n".join(out)
        # 3. a budget too small for even the newest step: cut its text, keep its start
        return text if len(text) <= budget else shorten(text, max(budget, 80))

    def _block(self, index: int, result: str) -> str:
        return f"{self._headers[index]}\n  Result: {result}"
