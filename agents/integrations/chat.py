"""A multi-turn env episode as one growing chat: the first user message is the env's planner
prompt; after each planner turn, a user message carries what that turn added to memory (the tool's
result, or what was wrong with the action). The chat stacks (TRL, SkyRL, verl) generate each turn
with the whole conversation as context, so this is the view they train on.

Flow-GRPO as the paper writes it (and :mod:`agents.flow_grpo`) instead re-renders the planner
prompt every turn, so turn t's context is the current memory, not the chat so far. Both train
every planner turn with the trajectory's outcome; only the context of later turns differs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["step_message"]


def step_message(info: dict[str, Any], turns_left: int | None = None) -> str:
    """The user message after a planner turn: the newest memory step, as the planner reads it next."""
    steps = info.get("memory_steps") or []
    if not steps:
        text = "(nothing was added to memory)"
    else:
        step = steps[-1]
        fields = [
            ("Tool", step.get("tool") or step.get("tool_name")),
            ("Sub-Goal", step.get("sub_goal")),
            ("Command", step.get("command")),
            ("Result", step.get("result")),
        ]
        error = step.get("error")
        if error and error not in str(step.get("result") or ""):
            fields.append(("Error", error))
        text = "\n".join(f"{name}: {value}" for name, value in fields if value not in (None, ""))
    left = info.get("turns_left") if turns_left is None else turns_left
    suffix = f"\n\nTurns left: {left}." if left is not None else ""
    return f"Step {len(steps)} result:\n{text}{suffix}"
