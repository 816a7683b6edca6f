"""AgentFlow's memory format: a dict of ``"Action Step N"`` entries, each with the tool, sub-goal, command
and result; every string inside a result is cut to ``RESULT_LIMIT`` characters.

Prompts show it the way AgentFlow's f-strings do: the dict's ``str()``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RESULT_LIMIT", "ActionMemory", "cut_result"]

RESULT_LIMIT = 100_000  # AgentFlow's per-value cut on tool results


def cut_result(value: Any, limit: int = RESULT_LIMIT) -> Any:
    """A JSON-friendly copy of ``value`` whose strings (and long numbers) fit in ``limit`` characters.

    Over-long strings keep their first ``limit - 3`` characters followed by ``...``; lists and dicts are
    cut element by element; any other object becomes its (cut) ``str``.
    """
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        text = str(value)
        return value if len(text) <= limit else text[: limit - 3] + "..."
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 3] + "..."
    if isinstance(value, dict):
        return {cut_result(k, limit): cut_result(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [cut_result(v, limit) for v in value]
    if hasattr(value, "__dict__"):
        return cut_result(vars(value), limit)
    return cut_result(str(value), limit)


class ActionMemory:
    """Ordered action steps keyed ``"Action Step N"``; ``get_actions()`` is what every prompt prints."""

    def __init__(self) -> None:
        self.actions: dict[str, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self.actions)

    def clear(self) -> None:
        self.actions = {}

    def add_action(self, step: int, tool_name: str | None, sub_goal: str | None, command: str, result: Any) -> None:
        self.actions[f"Action Step {step}"] = {
            "tool_name": tool_name,
            "sub_goal": sub_goal,
            "command": command,
            "result": result,
        }

    def get_actions(self) -> dict[str, dict[str, Any]]:
        return self.actions

    def text(self) -> str:
        """The memory as the prompts print it."""
        return str(self.actions)
