"""The planner prompt (``obs["prompt"]``): question, tool cards, memory, action format, turns left."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["PlannerPrompt"]

_INTRO = (
    "You are the planner of a team that answers questions step by step with tools. "
    "Each turn you either pick one tool and say what it should do, or give the final answer. "
    "An executor runs the tool and the result is added to the memory below."
)

_FORMAT_DIRECT = """Reply in exactly this format (one tool call per turn):
Justification: <why this step helps>
Context: <facts from memory the tool needs>
Sub-Goal: <what this step should achieve>
Tool Name: <one of: {tool_names}>
Command: <the exact input for the tool>

Example:
Justification: The memory has no result yet, so compute the product first.
Context: none
Sub-Goal: Multiply the two numbers.
Tool Name: {example_tool}
Command: {example_command}

When the memory holds enough to answer, reply instead with:
Final Answer: <the answer only>"""

_FORMAT_LLM = """Reply in exactly this format (one tool call per turn):
Justification: <why this step helps>
Context: <facts from memory the tool needs>
Sub-Goal: <what this step should achieve, precise enough for the executor to write the command>
Tool Name: <one of: {tool_names}>

Example:
Justification: The memory has no result yet, so look up the first fact.
Context: none
Sub-Goal: Find the year the company was founded.
Tool Name: {example_tool}

When the memory holds enough to answer, reply instead with:
Final Answer: <the answer only>"""


class PlannerPrompt:
    """Builds the planner prompt; the static part (intro, tool cards, format) is rendered once."""

    def __init__(
        self,
        tool_cards: Sequence[str],
        tool_names: Sequence[str],
        examples: Sequence[str],
        direct: bool = True,
        instructions: str = "",
    ):
        names = ", ".join(tool_names) if tool_names else "(no tools: give the final answer)"
        example_tool = tool_names[0] if tool_names else "Tool"
        example_command = examples[0] if examples else "..."
        template = _FORMAT_DIRECT if direct else _FORMAT_LLM
        self.tools_text = "\n".join(tool_cards) if tool_cards else "(no tools)"
        self.format_text = template.format(tool_names=names, example_tool=example_tool, example_command=example_command)
        extra = f"\n\n{instructions.strip()}" if instructions.strip() else ""
        self._head = f"{_INTRO}{extra}\n\nAvailable tools:\n{self.tools_text}\n\n"
        # the fixed text around the question and the memory, joined once
        self._before_question = f"{self._head}Question:\n"
        self._after_memory = f"\n\n{self.format_text}\n\n"

    def render(self, question: str, memory: str, turns_left: int) -> str:
        if turns_left <= 1:
            turns = _LAST_TURN
        elif turns_left < len(_TURNS_LEFT):
            turns = _TURNS_LEFT[turns_left]
        else:
            turns = _turns_left(turns_left)
        return f"{self._before_question}{question}\n\nMemory:\n{memory}{self._after_memory}{turns}"


def _turns_left(n: int) -> str:
    return f"Turns left: {n} (including this one)."


_LAST_TURN = "This is your last turn: reply with 'Final Answer:' now."
_TURNS_LEFT = tuple(_turns_left(n) for n in range(101))  # the line of each turn count up to 100, built once
