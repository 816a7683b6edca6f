"""Reading the modules' replies the way AgentFlow's code reads them (same outcomes, this project's code).

- planner: the last ``Context: … Sub-Goal: … Tool Name: …`` block (``**`` removed), or a JSON object with
  ``justification``/``context``/``sub_goal``/``tool_name``; the tool name is matched to the toolbox
  ignoring case and treating runs of spaces/underscores alike;
- executor: a JSON ``command``, else the code after ``Generated Command:``, else the longest python block;
- verifier: a JSON ``stop_signal``, else the last ``Conclusion: WORD``; with no STOP/CONTINUE there, any
  "stop" in the reply means STOP, else any "continue" means CONTINUE, else CONTINUE;
- commands: split into blocks, each ending in an ``execution = tool.execute(...)`` line.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "NO_COMMAND",
    "ToolCall",
    "match_tool_name",
    "parse_blocks",
    "read_command",
    "read_next_step",
    "read_verdict",
    "split_blocks",
]

NO_COMMAND = "No command found."

_STEP_BLOCK = re.compile(
    r"Context:\s*(?P<context>.*?)"
    r"Sub-Goal:\s*(?P<sub_goal>.*?)"
    r"Tool Name:\s*(?P<tool>.*?)\s*(?:```)?\s*"
    r"(?=\n\n|\Z)",
    re.DOTALL,
)
_AFTER_LABEL = re.compile(r"Generated Command:.*?```python\n(?P<code>.*?)```", re.DOTALL | re.IGNORECASE)
_ANY_PYTHON = re.compile(r"```python\s*\n(?P<code>.*?)```", re.DOTALL | re.IGNORECASE)
_LEADING_FENCE = re.compile(r"^```python\s*")
_VERDICT_WORD = re.compile(r"conclusion\**:?\s*\**\s*(?P<word>\w+)", re.IGNORECASE | re.DOTALL)
_BLOCK = re.compile(r".*?execution\s*=\s*tool\.execute\([^\n]*\)\s*(?:\n|$)", re.DOTALL)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return None
    return value if isinstance(value, dict) else None


def _canonical(name: str) -> str:
    return "_".join(part.lower() for part in re.split(r"[ _]+", name))


def match_tool_name(name: str, tools: Sequence[str]) -> str:
    """The toolbox name ``name`` refers to, or AgentFlow's "no match" marker naming what was given."""
    wanted = _canonical(name)
    for tool in tools:
        if _canonical(tool) == wanted:
            return tool
    return f"No matched tool given: {name}"


def read_next_step(reply: Any, tools: Sequence[str]) -> tuple[str | None, str | None, str | None]:
    """``(context, sub_goal, tool_name)`` of a planner reply; ``(None, None, None)`` when unreadable."""
    if not isinstance(reply, str):
        return None, None, None
    obj = _json_object(reply)
    keys = ("justification", "context", "sub_goal", "tool_name")
    if obj is not None and all(isinstance(obj.get(k), str) for k in keys):
        return obj["context"].strip(), obj["sub_goal"].strip(), match_tool_name(obj["tool_name"].strip(), tools)
    blocks = list(_STEP_BLOCK.finditer(reply.replace("**", "")))
    if not blocks:
        return None, None, None
    last = blocks[-1]
    return last["context"].strip(), last["sub_goal"].strip(), match_tool_name(last["tool"], tools)


def read_command(reply: Any) -> str:
    """The tool command in an executor reply (``NO_COMMAND`` when there is none)."""
    if not isinstance(reply, str):
        return "Invalid response type."
    obj = _json_object(reply)
    if obj is not None and all(isinstance(obj.get(k), str) for k in ("analysis", "explanation", "command")):
        command = obj["command"].strip()
    else:
        labelled = _AFTER_LABEL.search(reply)
        if labelled:
            command = labelled["code"].strip()
        else:
            blocks = _ANY_PYTHON.findall(reply)
            command = max(blocks, key=lambda b: len(b.strip())).strip() if blocks else NO_COMMAND
    return _LEADING_FENCE.sub("", command).rstrip("`").strip()


def read_verdict(reply: Any) -> str:
    """``"STOP"`` or ``"CONTINUE"`` from a verifier reply."""
    if not isinstance(reply, str):
        return "CONTINUE"
    obj = _json_object(reply)
    if obj is not None and isinstance(obj.get("analysis"), str) and "stop_signal" in obj:
        signal = _as_bool(obj["stop_signal"])
        if signal is not None:
            return "STOP" if signal else "CONTINUE"
    words = [m["word"].upper() for m in _VERDICT_WORD.finditer(reply)]
    if words and words[-1] in ("STOP", "CONTINUE"):
        return words[-1]
    lowered = reply.lower()
    if "stop" in lowered:
        return "STOP"
    return "CONTINUE"


def _as_bool(value: Any) -> bool | None:
    """A JSON value read as a bool the way a pydantic ``bool`` field accepts it; None when it does not."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("1", "on", "t", "true", "y", "yes"):
            return True
        if text in ("0", "off", "f", "false", "n", "no"):
            return False
    return None


def split_blocks(command: str) -> list[str]:
    """The command's blocks, each ending with an ``execution = tool.execute(...)`` line."""
    return [b.strip() for b in _BLOCK.findall(command) if b.strip()]


class ToolCall:
    """One ``tool.execute(...)`` call with literal arguments, read without running any code."""

    def __init__(self, args: list[Any], kwargs: dict[str, Any]):
        self.args = args
        self.kwargs = kwargs


def parse_blocks(block: str) -> ToolCall:
    """The call in one block. Only literal assignments (``q = "..."``) and the call itself are allowed;
    anything else raises ``ValueError`` saying why (the offline executor never runs model-written code)."""
    try:
        tree = ast.parse(block)
    except SyntaxError as exc:
        raise ValueError(f"invalid syntax ({exc.msg}, line {exc.lineno})") from None
    names: dict[str, Any] = {}
    call: ToolCall | None = None

    def value(node: ast.expr) -> Any:
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"name {node.id!r} is not defined")
            return names[node.id]
        try:
            return ast.literal_eval(node)
        except ValueError:
            raise ValueError(f"only literal arguments can be run offline, not {ast.unparse(node)[:80]!r}") from None

    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            raise ValueError(f"unsupported statement {ast.unparse(stmt)[:80]!r}")
        target, rhs = stmt.targets[0].id, stmt.value
        if (
            isinstance(rhs, ast.Call)
            and isinstance(rhs.func, ast.Attribute)
            and rhs.func.attr == "execute"
            and isinstance(rhs.func.value, ast.Name)
            and rhs.func.value.id == "tool"
        ):
            if any(isinstance(a, ast.Starred) for a in rhs.args) or any(k.arg is None for k in rhs.keywords):
                raise ValueError("* and ** arguments are not supported")
            call = ToolCall([value(a) for a in rhs.args], {str(k.arg): value(k.value) for k in rhs.keywords})
            names[target] = None
        else:
            names[target] = value(rhs)
    if call is None:
        raise ValueError("the block has no tool.execute(...) call")
    return call
