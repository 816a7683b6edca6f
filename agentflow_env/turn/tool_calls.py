"""Native tool calling: the env's tools as OpenAI function schemas, and tool-call actions read back.

A planner that calls tools the OpenAI way sends, instead of the ``Tool Name:/Command:`` text:

- an OpenAI assistant message, as a dict or its JSON:
  ``{"role": "assistant", "content": ..., "tool_calls": [{"id": ..., "type": "function",
  "function": {"name": "Calculator_Tool", "arguments": "{\\"command\\": \\"6*7\\"}"}}]}``;
- Hermes/Qwen blocks in the text:
  ``<tool_call>{"name": "Calculator_Tool", "arguments": {"command": "6*7"}}</tool_call>``;
- a final answer: a ``final_answer`` call (``{"answer": ...}``), or plain content without tool calls (an
  assistant message, or text in an episode that already called tools the Hermes way).

:func:`read_tool_action` turns such an action into the same :class:`~agentflow_env.turn.parsing.ParsedAction` the
text format gives, so the env runs, remembers, budgets and scores it exactly as the text. One tool runs per
turn, as in the text format: further calls in the same message are answered "not run".

Every reader here is linear in the action's length (``find`` loops, one ``json.loads`` per block).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentflow_env.engines.hermes import MAX_JSON_CHARS as _MAX_JSON_CHARS
from agentflow_env.engines.hermes import OPEN_TAG as _OPEN
from agentflow_env.engines.hermes import hermes_tool_calls
from agentflow_env.tools.base import Tool, normalize_tool_name
from agentflow_env.turn.parsing import ParsedAction, parse_action

__all__ = [
    "FINAL_ANSWER",
    "SYSTEM_PROMPT",
    "ToolCallAction",
    "final_answer_schema",
    "function_name",
    "hermes_tool_calls",
    "read_tool_action",
    "schemas_from_cards",
    "tool_schema",
    "tool_schemas",
]

FINAL_ANSWER = "final_answer"

SYSTEM_PROMPT = (
    "You answer questions step by step with tools. Each turn, call exactly one tool; its result comes back "
    "as the tool message. When you know the answer, call final_answer with the answer only (or reply with the "
    "answer only, without a tool call)."
)


def function_name(name: str) -> str:
    """``name`` as an OpenAI function name (letters, digits, ``_`` and ``-``, at most 64 characters)."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name.strip())[:64]
    return cleaned or "tool"


def final_answer_schema() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": FINAL_ANSWER,
            "description": "Give the final answer and end the episode. Call it once you know the answer.",
            "parameters": {
                "type": "object",
                "properties": {"answer": {"type": "string", "description": "the answer only, no explanation"}},
                "required": ["answer"],
                "additionalProperties": False,
            },
        },
    }


def _describe(description: str, input_spec: str, examples: Sequence[str]) -> str:
    text = description.strip()
    if examples:
        text += f" Example command: {examples[0]}"
    return text


def _schema(name: str, description: str, input_spec: str, examples: Sequence[str], direct: bool) -> dict[str, Any]:
    if direct:
        props = {"command": {"type": "string", "description": f"the exact tool input: {input_spec.strip()}"}}
        required = ["command"]
    else:  # the LLM executor writes the command from the sub-goal
        props = {"sub_goal": {"type": "string", "description": "what this call should achieve, precisely"}}
        required = ["sub_goal"]
    props["context"] = {"type": "string", "description": "facts from earlier results the tool needs (optional)"}
    return {
        "type": "function",
        "function": {
            "name": function_name(name),
            "description": _describe(description, input_spec, examples),
            "parameters": {"type": "object", "properties": props, "required": required, "additionalProperties": False},
        },
    }


def tool_schema(tool: Tool, direct: bool = True) -> dict[str, Any]:
    """One tool's OpenAI function schema, from its card (or its own JSON Schema ``parameters``, e.g. MCP tools)."""
    params = getattr(tool, "parameters", None)
    if isinstance(params, dict):
        return {
            "type": "function",
            "function": {
                "name": function_name(tool.name),
                "description": tool.description.strip(),
                "parameters": params,
            },
        }
    return _schema(tool.name, tool.description, tool.input_spec, list(tool.examples), direct)


def tool_schemas(tools: Sequence[Tool], direct: bool = True) -> list[dict[str, Any]]:
    """The schemas of ``tools`` followed by ``final_answer``: what to send as ``tools=``."""
    return [*(tool_schema(t, direct) for t in tools), final_answer_schema()]


_CARD_RE = re.compile(r"^- (?P<name>[^:\n]+): (?P<desc>.*)$")


def schemas_from_cards(text: str, direct: bool = True) -> list[dict[str, Any]]:
    """The schemas of the tool cards in an observation's ``tools`` text (as :func:`tool_schemas` makes them
    from the tools themselves, for tools without their own ``parameters``)."""
    cards: list[dict[str, Any]] = []
    for line in text.splitlines():
        m = _CARD_RE.match(line)
        if m:
            cards.append({"name": m["name"].strip(), "desc": [m["desc"]], "input": "", "examples": []})
        elif cards and line.startswith("  Input: "):
            cards[-1]["input"] = line[len("  Input: ") :]
        elif cards and line.startswith("  Example command: "):
            cards[-1]["examples"].append(line[len("  Example command: ") :])
        elif cards and not cards[-1]["input"]:
            cards[-1]["desc"].append(line)
    out = [_schema(c["name"], "\n".join(c["desc"]), c["input"], c["examples"], direct) for c in cards]
    return [*out, final_answer_schema()]


@dataclass
class ToolCallAction:
    """A tool-call action, normalised: OpenAI-shaped calls (ids, string arguments) and the text content."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    content: str | None = None
    format: str = "openai"  # "openai" or "hermes"
    problems: list[str] = field(default_factory=list)

    def message(self) -> dict[str, Any]:
        """The assistant message as an OpenAI chat records it."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.calls:
            out["tool_calls"] = self.calls
        return out


def _arguments_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value if value is not None else {}, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return "{}"


def _call(name: Any, arguments: Any, call_id: Any, index: int, turn: int) -> dict[str, Any]:
    return {
        "id": str(call_id) if call_id else f"call_{turn}_{index}",
        "type": "function",
        "function": {"name": str(name or ""), "arguments": _arguments_text(arguments)},
    }


def _from_message(msg: dict[str, Any], turn: int) -> ToolCallAction:
    out = ToolCallAction(format="openai")
    content = msg.get("content")
    if isinstance(content, list):  # [{"type": "text", "text": ...}]; parts of other types are skipped
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type", "text") == "text"]
        if not all(isinstance(p, dict) for p in content) or not all(isinstance(t, str) for t in texts):
            out.problems.append("the message content must be a string or a list of {type: text, text: '...'} parts")
            return out
        content = "".join(str(t) for t in texts)
    out.content = None if content is None else str(content)
    raw = msg.get("tool_calls")
    if raw is None and isinstance(msg.get("function_call"), dict):  # the legacy single call
        raw = [{"type": "function", "function": msg["function_call"]}]
    if raw is not None and not isinstance(raw, list):
        out.problems.append("'tool_calls' must be a list of {type: function, function: {name, arguments}}")
        return out
    for i, item in enumerate(raw or []):
        fn = item.get("function") if isinstance(item, dict) else None
        if not isinstance(fn, dict) or not fn.get("name"):
            out.problems.append(f"tool call {i} has no function name")
            continue
        out.calls.append(_call(fn.get("name"), fn.get("arguments"), item.get("id"), i, turn))
    return out


def _from_hermes(text: str, turn: int) -> ToolCallAction:
    calls, content, problems = hermes_tool_calls(text)
    out = ToolCallAction(format="hermes", content=content or None, problems=problems)
    out.calls = [_call(name, args, None, i, turn) for i, (name, args) in enumerate(calls)]
    return out


def _as_message(action: Any) -> dict[str, Any] | None:
    """``action`` as an assistant message dict when it is one (a dict, or a JSON object string with
    ``tool_calls`` or ``role``); ``None`` for everything else (the text formats)."""
    if isinstance(action, dict):
        return action
    if not isinstance(action, str):
        return None
    stripped = action.strip()
    if not stripped.startswith("{") or len(stripped) > _MAX_JSON_CHARS:
        return None
    if '"tool_calls"' not in stripped and '"role"' not in stripped and '"function_call"' not in stripped:
        return None
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, dict) and ("tool_calls" in obj or "function_call" in obj or obj.get("role") == "assistant"):
        return obj
    return None


def read_tool_action(
    action: Any,
    turn: int,
    tool_mode: bool,
    tool_lookup: Callable[[str], Tool | None],
    headers_first: bool = False,
) -> tuple[ToolCallAction, ParsedAction] | None:
    """A tool-call action read as ``(the call, the ParsedAction the env runs)``; ``None`` when ``action`` is
    in the text format (``parse_action`` reads it then).

    ``tool_mode``: the episode already called tools, so plain text without fields is the final answer.
    ``tool_lookup``: the env's tool for a name (tools with their own JSON Schema get the arguments as JSON).
    ``headers_first``: how a message's plain content is read (see :func:`parse_action`).
    """
    msg = _as_message(action)
    if msg is not None:
        call = _from_message(msg, turn)
    elif isinstance(action, str) and _OPEN in action:
        call = _from_hermes(action, turn)
    elif tool_mode and isinstance(action, str):
        call = ToolCallAction(format="hermes", content=action.strip() or None)
    else:
        return None
    return call, _parsed(call, tool_lookup, headers_first)


def _parsed(call: ToolCallAction, tool_lookup: Callable[[str], Tool | None], headers_first: bool) -> ParsedAction:
    parsed = ParsedAction(format=f"tool_call:{call.format}", problems=list(call.problems))
    content = call.content or ""
    if not call.calls:
        if parsed.problems:
            return parsed
        # plain content: the text format's fields when it has them, else the whole content is the answer
        inner = parse_action(content, headers_first) if content.strip() else ParsedAction()
        if inner.format != "none" and (inner.is_final or inner.tool_name):
            inner.format = f"tool_call:{call.format}+{inner.format}"
            return inner
        if content.strip():
            parsed.final_answer = content.strip()
        else:
            parsed.problems.append("the message has neither tool calls nor content")
        return parsed
    parsed.problems.clear()  # a readable call wins over a malformed sibling block (reported in the trace)
    first = call.calls[0]["function"]
    name, raw = first["name"], first["arguments"]
    args: Any = None
    if len(raw) <= _MAX_JSON_CHARS:
        try:
            args = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            args = None
    if not isinstance(args, dict):
        parsed.problems.append(f"the arguments of the call to {name[:80]!r} are not a JSON object")
        return parsed
    parsed.justification = content
    if normalize_tool_name(name) == normalize_tool_name(FINAL_ANSWER):
        answer = args.get("answer")
        if answer is None and len(args) == 1:
            answer = next(iter(args.values()))
        parsed.final_answer = "" if answer is None else (answer if isinstance(answer, str) else json.dumps(answer))
        if not parsed.final_answer.strip():
            parsed.problems.append("final_answer was called without an 'answer'")
        return parsed
    parsed.tool_name = name
    tool = tool_lookup(name) if len(name) <= 200 else None
    if tool is not None and isinstance(getattr(tool, "parameters", None), dict):
        parsed.command = json.dumps(args, ensure_ascii=False)  # the tool reads its own JSON arguments
    else:
        command = args.get("command", "")
        parsed.command = command if isinstance(command, str) else json.dumps(command, ensure_ascii=False)
    for key in ("sub_goal", "context"):
        value = args.get(key)
        if isinstance(value, str):
            setattr(parsed, key, value)
    return parsed
