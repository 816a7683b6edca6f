"""The env's memory: ordered steps, rendered within a character budget.

Over budget, the oldest tool results are shortened first; the newest step is never dropped, and
anything cut says so in the text. In order:

1. older results are shortened, oldest first, just enough to fit, but never below a short head
   and tail (``_MIN_RESULT`` characters);
2. if every older result is that short and the text is still too long, the oldest steps are folded
   into one line, ``(steps 1-K omitted to fit the memory budget)``, never the newest step;
3. then the newest result itself is shortened, and last, a budget too small for even the newest
   step's header cuts the text.

Rendering is incremental: the lengths of every step's block, whole and with its result shortened,
are kept (the whole ones as steps are added, the shortened ones once a rendering over budget needs
them), so a rendering only builds the text it returns (at most the budget, plus the newest step) and
its cost per added step does not grow with the number of steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

from agentflow_env.types import MemoryStep

__all__ = ["Memory", "StepDict", "shorten"]

_MIN_RESULT = 60  # characters of a result kept when it has to be shortened
_RESULT_LABEL = "\n  Result: "


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


def _fold_marker(folded: int) -> str:
    return f"(steps 1-{folded} omitted to fit the memory budget)"


_FOLD_MARKER_BASE = len(_fold_marker(0)) - 1  # its length without the number


class StepDict(dict):  # type: ignore[type-arg]
    """One memory step as a read-only dict.

    ``info["memory_steps"]`` shares these between the infos of one episode (copying every step at
    every turn would make a step's cost grow with the episode), so they refuse changes; ``dict(step)``
    gives a copy to change. JSON and pickle see a plain dict.
    """

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("memory steps in info are read-only; copy one with dict(step) to change it")

    __setitem__ = _read_only
    __delitem__ = _read_only
    __ior__ = _read_only  # type: ignore[assignment]
    clear = _read_only
    pop = _read_only  # type: ignore[assignment]
    popitem = _read_only
    setdefault = _read_only  # type: ignore[assignment]
    update = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (StepDict, (dict(self),))


class Memory:
    """Ordered :class:`MemoryStep` records with a budgeted text rendering."""

    def __init__(self, steps: Iterable[MemoryStep] = ()):
        self._steps: list[MemoryStep] = []  # built from ``_dicts`` when ``steps`` is read
        self._blocks: list[str] = []  # each step's block: its header, the result label and its whole result
        self._dicts: list[StepDict] = []
        self._sum_full = 0  # the length of every block
        # _short_prefix[i]: the length of blocks 0..i-1 with results shortened to _MIN_RESULT, a
        # newline after each, so any run of short blocks is measured in O(1); extended by the renders
        # over budget (``_short_lengths``), as far as they read
        self._short_prefix: list[int] = [0]
        self._short_blocks: dict[int, str] = {}  # a block with its result shortened to _MIN_RESULT, once needed
        self._text: tuple[int, int, str] = (-1, 0, "")  # (steps, budget, text) of the last ``text`` call
        self._joined = ""  # the whole text of the first _joined_n steps, extended while it fits the budget
        self._joined_n = 0
        for step in steps:
            self.add(step)

    def __len__(self) -> int:
        return len(self._dicts)

    @property
    def steps(self) -> list[MemoryStep]:
        """The steps, oldest first (read-only: add steps with :meth:`add`)."""
        steps, dicts = self._steps, self._dicts
        for i in range(len(steps), len(dicts)):  # only the steps added since the last read
            steps.append(MemoryStep(**dicts[i]))
        return steps

    def clear(self) -> None:
        self._steps.clear()
        self._blocks.clear()
        self._dicts = []  # a new list: infos already handed out keep theirs
        self._sum_full = 0
        self._short_prefix = [0]
        self._short_blocks.clear()
        self._joined, self._joined_n = "", 0
        self._text = (-1, 0, "")

    def add(self, step: MemoryStep) -> None:
        steps = self.steps  # every earlier step built, so this one keeps its place
        self._append(f"{_header(step)}{_RESULT_LABEL}{step.result}", StepDict(step.to_dict()))
        steps.append(step)

    def add_step(
        self,
        turn: int,
        tool: str | None,
        sub_goal: str,
        command: str,
        result: str,
        ok: bool = True,
        error: str | None = None,
    ) -> None:
        """``add(MemoryStep(...))`` from the fields, without building the step (the env's turn loop)."""
        if ok and sub_goal and command:  # the common case, as _header writes it, in one string
            name = tool or "no tool"
            block = f"Step {turn}: {name}\n  Sub-goal: {sub_goal}\n  Command: {command}{_RESULT_LABEL}{result}"
        else:
            header = f"Step {turn}: {tool or 'no tool'}" if ok else f"Step {turn}: {tool or 'no tool'} (failed)"
            if sub_goal:
                header = f"{header}\n  Sub-goal: {sub_goal}"
            if command:
                header = f"{header}\n  Command: {command}"
            block = f"{header}{_RESULT_LABEL}{result}"
        # _append, inlined (the env's turn loop)
        self._blocks.append(block)
        # dict's own constructor takes the keywords (the read-only update is not called)
        self._dicts.append(
            StepDict(turn=turn, tool=tool, sub_goal=sub_goal, command=command, result=result, ok=ok, error=error)
        )
        self._sum_full += len(block)

    def _append(self, block: str, as_dict: StepDict) -> None:
        self._blocks.append(block)
        self._dicts.append(as_dict)
        self._sum_full += len(block)

    def to_list(self) -> list[dict[str, Any]]:
        """The steps as read-only dicts (:class:`StepDict`), in a new list; the dicts are shared."""
        return list(self._dicts)

    @classmethod
    def from_list(cls, items: Iterable[dict[str, Any]]) -> Memory:
        return cls(MemoryStep.from_dict(dict(d)) for d in items)

    def text(self, budget: int = 8000) -> str:
        """:meth:`render`, kept until a step is added (or the budget changes): read it as often as needed."""
        cached = self._text
        n = len(self._dicts)
        if cached[0] == n and cached[1] == budget:
            return cached[2]
        if n and self._joined_n == n - 1 and self._sum_full + n - 1 <= budget:  # render's common case, inlined
            block = self._blocks[n - 1]
            text = self._joined = f"{self._joined}\n{block}" if self._joined_n else block
            self._joined_n = n
        else:
            text = self.render(budget)
        self._text = (n, budget, text)
        return text

    def render(self, budget: int = 8000) -> str:
        """Text of all steps within ``budget`` characters (see the module docstring)."""
        n = len(self._dicts)
        if n == 0:
            return "(no steps yet)"
        last = n - 1
        blocks = self._blocks
        total = self._sum_full + last  # the blocks and the newlines between them
        if total <= budget:  # every step whole: extend the text of the steps already joined
            if self._joined_n != n:
                new = "\n".join(blocks[self._joined_n : n])
                self._joined = f"{self._joined}\n{new}" if self._joined_n else new
                self._joined_n = n
            return self._joined
        prefix, newest = self._short_lengths(n), len(blocks[last])
        if prefix[last] + newest <= budget:  # fits once every older result is short
            # 1. shorten older results, oldest first, just enough (every step fits: n is small here)
            parts = []
            excess = total - budget
            for i in range(n):
                result = self._dicts[i]["result"]
                if excess > 0 and i < last:
                    limit = max(len(result) - excess, _MIN_RESULT)
                    if limit < len(result):
                        excess -= len(result) - limit
                        parts.append(self._block(i, shorten(result, limit)))
                        continue
                parts.append(blocks[i])
            return "\n".join(parts)

        # 2. every older result is short and the text still too long: fold the oldest steps, never
        # the newest. The text with steps 1..k folded shrinks as k grows: bisect for the least k
        # that fits (k = last when none does).
        def size(k: int) -> int:  # marker, newline, short blocks k..last-1 with newlines, the newest
            return _FOLD_MARKER_BASE + len(str(k)) + 1 + prefix[last] - prefix[k] + newest

        low, high = 1, last
        while low < high:
            middle = (low + high) // 2
            if size(middle) <= budget:
                high = middle
            else:
                low = middle + 1
        folded = low if last else 0
        total = size(folded) if folded else newest
        parts = [_fold_marker(folded)] if folded else []
        parts.extend(self._short_block(i) for i in range(folded, last))
        if total > budget:
            # 3. then shorten the newest result itself
            result = self._dicts[last]["result"]
            parts.append(self._block(last, shorten(result, max(len(result) - (total - budget), 0))))
        else:
            parts.append(blocks[last])
        text = "\n".join(parts)
        # 4. a budget too small for even the newest step's header: cut the text, keep its start
        return text if len(text) <= budget else shorten(text, budget)

    def _short_lengths(self, n: int) -> list[int]:
        """``_short_prefix``, extended to the first ``n`` steps (only a render over budget needs it)."""
        prefix, blocks, dicts = self._short_prefix, self._blocks, self._dicts
        for i in range(len(prefix) - 1, n):
            kept = len(dicts[i]["result"])
            prefix.append(prefix[-1] + len(blocks[i]) - kept + (kept if kept < _MIN_RESULT else _MIN_RESULT) + 1)
        return prefix

    def _header(self, index: int) -> str:
        block = self._blocks[index]
        return block[: len(block) - len(self._dicts[index]["result"]) - len(_RESULT_LABEL)]

    def _short_block(self, index: int) -> str:
        block = self._short_blocks.get(index)
        if block is None:
            block = self._block(index, shorten(self._dicts[index]["result"], _MIN_RESULT))
            self._short_blocks[index] = block
        return block

    def _block(self, index: int, result: str) -> str:
        return f"{self._header(index)}{_RESULT_LABEL}{result}"
