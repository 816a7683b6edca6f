"""Hermes/Qwen tool calls in text: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks.

The one reader of that format, below both of its users: the OpenAI server's wire format
(:mod:`agentflow_env.engines.openai_wire`, a reply's blocks sent back as ``tool_calls``) and the env's tool-call
actions (:mod:`agentflow_env.turn.tool_calls`). Linear in the text's length (``find`` loops, one ``json.loads``
per block).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CLOSE_TAG", "MAX_JSON_CHARS", "OPEN_TAG", "hermes_tool_calls"]

MAX_JSON_CHARS = 200_000  # a tool call's arguments longer than this are not read (the action limit caps it too)
OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"


def hermes_tool_calls(text: str) -> tuple[list[tuple[Any, Any]], str, list[str]]:
    """``<tool_call>{"name", "arguments"}</tool_call>`` blocks in ``text``: ``(calls, the text outside them,
    problems)``. An unclosed last block runs to the end (a reply cut at the closing tag)."""
    calls: list[tuple[Any, Any]] = []
    problems: list[str] = []
    outside: list[str] = []
    pos = 0
    while (start := text.find(OPEN_TAG, pos)) >= 0:
        outside.append(text[pos:start])
        body_start = start + len(OPEN_TAG)
        end = text.find(CLOSE_TAG, body_start)
        body = text[body_start : len(text) if end < 0 else end]
        pos = len(text) if end < 0 else end + len(CLOSE_TAG)
        obj: Any = None
        if len(body) <= MAX_JSON_CHARS:
            try:
                obj = json.loads(body)
            except (ValueError, RecursionError):
                obj = None
        if not isinstance(obj, dict) or not obj.get("name"):
            problems.append('a <tool_call> block is not JSON {"name": ..., "arguments": {...}}')
            continue
        calls.append((obj.get("name"), obj.get("arguments", obj.get("parameters"))))
    outside.append(text[pos:])
    return calls, "".join(outside).strip(), problems
