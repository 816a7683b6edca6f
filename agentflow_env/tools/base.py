"""The tool protocol, the base class built-ins share, and tool cards for the planner prompt."""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

from agentflow_env.types import ToolResult

_perf_counter = time.perf_counter

__all__ = ["BaseTool", "Tool", "ToolResult", "normalize_tool_name", "render_card"]


@runtime_checkable
class Tool(Protocol):
    """What the executor calls. ``name``/``description``/``input_spec``/``examples`` make the card."""

    name: str
    description: str
    input_spec: str
    examples: Sequence[str]

    def run(self, command: str, timeout: float) -> ToolResult: ...

    def close(self) -> None: ...


class BaseTool:
    """Convenience base: subclasses implement ``_run``; ``run`` adds timing and never raises.

    ``reset()`` is called at the start of every episode (tools with state recycle it there).
    """

    name: str = "Tool"
    description: str = ""
    input_spec: str = "a string"
    examples: Sequence[str] = ()

    def run(self, command: str, timeout: float = 30.0) -> ToolResult:
        start = _perf_counter()
        try:
            result = self._run(command, timeout)
        except Exception as exc:  # a tool bug must cost the turn, not crash the episode
            result = ToolResult(text=f"Error: {type(exc).__name__}: {exc}", ok=False, error=str(exc))
        result.seconds = _perf_counter() - start
        return result

    def _run(self, command: str, timeout: float) -> ToolResult:
        raise NotImplementedError

    def reset(self) -> None:
        """Start of an episode: drop any per-episode state."""

    def close(self) -> None:
        """Release processes, files and sockets."""

    def card(self) -> str:
        return render_card(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def render_card(tool: Tool) -> str:
    """The tool card the planner prompt shows."""
    lines = [f"- {tool.name}: {tool.description.strip()}", f"  Input: {tool.input_spec.strip()}"]
    for ex in tool.examples:
        lines.append(f"  Example command: {ex}")
    return "\n".join(lines)


@lru_cache(maxsize=4096)
def normalize_tool_name(name: str) -> str:
    """Compare tool names loosely: case, spaces, underscores, quotes and a ``_tool`` suffix."""
    key = "".join(ch for ch in name.lower() if ch.isalnum())
    if key.endswith("tool") and len(key) > 4:
        key = key[:-4]
    return key
