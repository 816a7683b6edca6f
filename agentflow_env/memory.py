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
        self._dicts: list[dict[str, Any]] = [s.to_dict() for s in self.steps]

    def __len__(self) -> int:
        return len(self.steps)

    def clear(self) -> None:
        self.steps.clear()
        self._headers.clear()
        self._dicts.clear()

    def add(self, step: MemoryStep) -> None:
        self.steps.append(step)
        self._headers.append(_header(step))
        self._dicts.append(step.to_dict())

    def to_list(self) -> list[dict[str, Any]]:
        """The steps as dicts (shallow copies: steps are never changed after they are added)."""
        return [dict(d) for d in self._dicts]

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
        # 1. shorten older results, oldest first, down to a short head and tail each
        last = len(results) - 1
        for i in range(last):
            if total <= budget:
                break
            limit = max(len(results[i]) - (total - budget), _MIN_RESULT)
            if limit < len(results[i]):
                results[i] = shorten(results[i], limit)
                total += self._replace(blocks, i, results[i])
        # 2. still over: fold the oldest steps into one line, never the newest
        folded = 0
        marker = ""
        while total > budget and folded < last:
            total -= len(blocks[folded]) + 1
            folded += 1
            new_marker = f"(steps 1-{folded} omitted to fit the memory budget)"
            total += len(new_marker) - len(marker) + (0 if marker else 1)
            marker = new_marker
        # 3. then shorten the newest result itself
        if total > budget:
            limit = max(len(results[last]) - (total - budget), 0)
            results[last] = shorten(results[last], limit)
            total += self._replace(blocks, last, results[last])
        text = "\n".join(([marker] if marker else []) + blocks[folded:])
        # 4. a budget too small for even the newest step's header: cut the text, keep its start
        return text if len(text) <= budget else shorten(text, budget)

    def _replace(self, blocks: list[str], index: int, result: str) -> int:
        new_block = self._block(index, result)
        delta = len(new_block) - len(blocks[index])
        blocks[index] = new_block
        return delta

    def _block(self, index: int, result: str) -> str:
        return f"{self._headers[index]}\n  Result: {result}"
