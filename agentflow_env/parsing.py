"""The planner action parser: AgentFlow's ``Field: value`` format or the same keys as JSON.

Tolerant of markdown emphasis, case, field order and surrounding prose; the last occurrence of a
field wins. It never raises: problems come back in ``ParsedAction.problems``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = ["FIELDS", "ParsedAction", "parse_action"]

# canonical field -> spellings (compared after lower-casing and dropping spaces, _ and -)
FIELDS: dict[str, tuple[str, ...]] = {
    "justification": ("justification", "reasoning", "rationale"),
    "context": ("context",),
    "sub_goal": ("subgoal",),
    "tool_name": ("toolname", "tool", "selectedtool"),
    "command": ("command", "toolcommand", "code", "query", "input"),
    "final_answer": ("finalanswer", "answer"),
}
_KEY_TO_FIELD = {spelling: name for name, spellings in FIELDS.items() for spelling in spellings}

# A header at the start of a line: optional markdown (#, >, -, *, 1.), optional emphasis, the
# field name, optional emphasis, a colon, optional emphasis. The ASCII-only name classes keep
# this linear on any input.
_HEADER_RE = re.compile(
    r"^[ \t]*(?:[#>]+[ \t]*|[-*+][ \t]+|\d{1,3}[.)][ \t]*)?[*_`]{0,3}[ \t]*"
    r"(justification|reasoning|rationale|context|sub[ _-]?goal|selected[ _-]?tool|tool[ _-]?name"
    r"|tool[ _-]?command|tool|command|query|final[ _-]?answer)"
    r"[ \t]*[*_`]{0,3}[ \t]*:[ \t]*[*_`]{0,3}",
    re.IGNORECASE | re.MULTILINE,
)
_FENCE_RE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)\n?```[ \t]*$", re.DOTALL)
_JSON_FENCE_RE = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n```", re.DOTALL | re.IGNORECASE)
_ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_MAX_JSON_CHARS = 200_000


@dataclass
class ParsedAction:
    """The fields found in one planner action, plus what was wrong with it."""

    justification: str = ""
    context: str = ""
    sub_goal: str = ""
    tool_name: str = ""
    command: str = ""
    final_answer: str | None = None
    format: str = "none"  # "text", "json" or "none"
    problems: list[str] = field(default_factory=list)

    @property
    def is_final(self) -> bool:
        return self.final_answer is not None and self.final_answer.strip() != ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "justification": self.justification,
            "context": self.context,
            "sub_goal": self.sub_goal,
            "tool_name": self.tool_name,
            "command": self.command,
            "final_answer": self.final_answer,
            "format": self.format,
            "problems": list(self.problems),
        }


@lru_cache(maxsize=4096)
def _key_to_field(key: str) -> str | None:
    norm = "".join(ch for ch in key.lower() if ch.isalnum())
    return _KEY_TO_FIELD.get(norm)


def _clean_value(value: str) -> str:
    value = value.strip()
    if "\n" not in value:  # emphasis left over from "**Tool Name:** **Calculator**"
        value = value.strip("*").strip()
    m = _FENCE_RE.match(value)
    if m:
        value = m.group(1)
    elif value.startswith("`") and value.endswith("`") and "\n" not in value:
        value = value.strip("`")
    return value.strip()


def _apply(parsed: ParsedAction, name: str, value: Any) -> None:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = _clean_value(text)
    if name == "final_answer":
        parsed.final_answer = text
    else:
        setattr(parsed, name, text)


def _parse_json(action: str) -> dict[str, Any] | None:
    candidates: list[str] = []
    stripped = action.strip()
    if stripped.startswith("{"):
        candidates.append(stripped)
    candidates.extend(m.group(1) for m in _JSON_FENCE_RE.finditer(action))
    first, last = action.find("{"), action.rfind("}")
    if 0 <= first < last:
        candidates.append(action[first : last + 1])
    for text in candidates:
        if len(text) > _MAX_JSON_CHARS:
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and any(isinstance(k, str) and _key_to_field(k) for k in obj):
            return obj
    return None


def _parse_text(action: str, parsed: ParsedAction) -> bool:
    matches = list(_HEADER_RE.finditer(action))
    if not matches:
        return False
    for i, m in enumerate(matches):
        name = _key_to_field(m.group(1))
        if name is None:  # pragma: no cover - the regex only matches known spellings
            continue
        end = matches[i + 1].start() if i + 1 < len(matches) else len(action)
        _apply(parsed, name, action[m.end() : end])  # later occurrences overwrite earlier ones
    return True


def parse_action(action: Any) -> ParsedAction:
    """Parse one planner action; never raises. Non-strings are reported as a problem."""
    parsed = ParsedAction()
    if not isinstance(action, str):
        parsed.problems.append(f"the action must be a string, got {type(action).__name__}")
        return parsed
    if "\x00" in action:
        action = action.replace("\x00", "")
    obj = _parse_json(action) if "{" in action else None
    if obj is not None:
        parsed.format = "json"
        for key, value in obj.items():
            name = _key_to_field(str(key))
            if name is not None and value is not None:
                _apply(parsed, name, value)
    elif _parse_text(action, parsed):
        parsed.format = "text"
    if parsed.final_answer is None:
        tags = _ANSWER_TAG_RE.findall(action)
        if tags:
            parsed.final_answer = tags[-1].strip()
            parsed.format = parsed.format if parsed.format != "none" else "text"
    if parsed.format == "none":
        parsed.problems.append("no recognisable fields (expected 'Tool Name:' with 'Command:', or 'Final Answer:')")
    return parsed
