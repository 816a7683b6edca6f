"""The planner action parser: AgentFlow's ``Field: value`` format or the same keys as JSON.

Tolerant of markdown emphasis, case, field order and surrounding prose; the last occurrence of a
field wins. It never raises: problems come back in ``ParsedAction.problems``.

Every scan is linear in the action's length: headers are found line by line with anchored,
backtracking-free matches (a keyword search picks the lines worth checking), and ``<answer>`` tags
and json fences are found with forward ``find`` loops that never rescan text. No pattern here is
applied where a failed match could retry over a long run of characters.
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
# field name, optional emphasis, a colon, optional emphasis, i.e. the language of
#   ^[ \t]*(?:[#>]+[ \t]*|[-*+][ \t]+|\d{1,3}[.)][ \t]*)?[*_`]{0,3}[ \t]*(NAME)[ \t]*[*_`]{0,3}[ \t]*:[ \t]*[*_`]{0,3}
# (case-insensitive). As one regex that backtracks quadratically over whitespace runs, so
# _match_header walks it piece by piece: each piece is an anchored, greedy match, which is exact
# here because the piece after it can never start with a character the greedy piece gave back.
_NAMES = (
    "justification",
    "reasoning",
    "rationale",
    "context",
    "sub[ _-]?goal",
    "selected[ _-]?tool",
    "tool[ _-]?name",
    "tool[ _-]?command",
    "tool",
    "command",
    "query",
    "final[ _-]?answer",
)
_NAME_RES = tuple(re.compile(name, re.IGNORECASE) for name in _NAMES)  # tried in this order
_NAME_ANY_RE = re.compile("|".join(_NAMES), re.IGNORECASE)  # picks the lines worth checking
_NAME_ANY_ASCII_RE = re.compile("|".join(_NAMES))  # the same on lower-cased ASCII text (faster)
_WS_RUN_RE = re.compile(r"[ \t]*")
_EMPHASIS_RE = re.compile(r"[*_`]{0,3}")
_EMPHASIS_WS_RE = re.compile(r"[*_`]{0,3}[ \t]*")
_MARKDOWN_RE = re.compile(r"[#>]+[ \t]*|[-*+][ \t]+|\d{1,3}[.)][ \t]*")
# a fenced value "```lang ... ```": the opening line of the fence
_FENCE_OPEN_RE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?")
# a json block "```json\n ... \n```" anywhere in the action: its opening line
_JSON_FENCE_OPEN_RE = re.compile(r"```(?:json)?[ \t]*\n", re.IGNORECASE)
_ANSWER_OPEN_RE = re.compile("<answer>", re.IGNORECASE)
_ANSWER_CLOSE_RE = re.compile("</answer>", re.IGNORECASE)
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


_MAX_KEY_CHARS = 64  # longer keys are looked up without the cache (no field name is that long)


@lru_cache(maxsize=4096)
def _cached_key_to_field(key: str) -> str | None:
    norm = "".join(ch for ch in key.lower() if ch.isalnum())
    return _KEY_TO_FIELD.get(norm)


def _key_to_field(key: str) -> str | None:
    if len(key) > _MAX_KEY_CHARS:  # keep huge keys out of the cache: it would hold them alive
        return _KEY_TO_FIELD.get("".join(ch for ch in key.lower() if ch.isalnum()))
    return _cached_key_to_field(key)


def _unfence(value: str) -> str | None:
    """The inside of a value that is one fenced block, ```` ```lang\n...\n``` ````; ``None`` if it is not.

    ``value`` is already stripped, so the closing fence is its last three characters.
    """
    if len(value) < 6 or not value.endswith("```"):
        return None
    opening = _FENCE_OPEN_RE.match(value)
    if opening is None:
        return None
    start, end = opening.end(), len(value) - 3
    if end - 1 >= start and value[end - 1] == "\n":
        end -= 1
    return value[start:end]


def _clean_value(value: str) -> str:
    value = value.strip()
    if "\n" not in value:  # emphasis left over from "**Tool Name:** **Calculator**"
        value = value.strip("*").strip()
    inside = _unfence(value)
    if inside is not None:
        value = inside
    elif value.startswith("`") and value.endswith("`") and "\n" not in value:
        value = value.strip("`")
    return value.strip()


def _apply(parsed: ParsedAction, name: str, value: Any) -> None:
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (ValueError, TypeError, RecursionError):
            parsed.problems.append(f"the value of {name!r} is nested too deeply to read")
            return
    text = _clean_value(text)
    if name == "final_answer":
        parsed.final_answer = text
    else:
        setattr(parsed, name, text)


def _json_fences(action: str) -> list[str]:
    """The insides of ```` ```json\n...\n``` ```` blocks, left to right, without overlaps."""
    blocks: list[str] = []
    pos = 0
    while True:
        start = action.find("```", pos)
        if start < 0:
            return blocks
        opening = _JSON_FENCE_OPEN_RE.match(action, start)
        if opening is None:
            pos = start + 1
            continue
        close = action.find("\n```", opening.end())
        if close < 0:  # no later block can close either
            return blocks
        blocks.append(action[opening.end() : close])
        pos = close + 4


def _parse_json(action: str) -> dict[str, Any] | None:
    candidates: list[str] = []
    stripped = action.strip()
    if stripped.startswith("{"):
        candidates.append(stripped)
    candidates.extend(_json_fences(action))
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


def _match_header(text: str, line_start: int) -> tuple[str | None, int] | None:
    """``(field, where its value starts)`` if the line at ``line_start`` opens with a field header."""
    lead = _WS_RUN_RE.match(text, line_start).end()  # type: ignore[union-attr]  # always matches
    markdown = _MARKDOWN_RE.match(text, lead)
    starts = (markdown.end(), lead) if markdown is not None else (lead,)
    for start in starts:
        name_start = _EMPHASIS_WS_RE.match(text, start).end()  # type: ignore[union-attr]
        for name_re in _NAME_RES:
            name = name_re.match(text, name_start)
            if name is None:
                continue
            pos = _WS_RUN_RE.match(text, name.end()).end()  # type: ignore[union-attr]
            pos = _EMPHASIS_RE.match(text, pos).end()  # type: ignore[union-attr]
            pos = _WS_RUN_RE.match(text, pos).end()  # type: ignore[union-attr]
            if pos < len(text) and text[pos] == ":":
                pos = _WS_RUN_RE.match(text, pos + 1).end()  # type: ignore[union-attr]
                pos = _EMPHASIS_RE.match(text, pos).end()  # type: ignore[union-attr]
                # None for a name matched only through a Unicode case fold ("ſub goal"): still a header
                return _key_to_field(name.group(0)), pos
    return None


def _headers(action: str) -> list[tuple[int, str | None, int]]:
    """``(line start, field, value start)`` of every header line, in order.

    Only lines holding a field name are checked, each once; finding their starts walks the text once.
    """
    if action.isascii():
        hits = _NAME_ANY_ASCII_RE.finditer(action.lower())
    else:
        hits = _NAME_ANY_RE.finditer(action)
    found: list[tuple[int, str | None, int]] = []
    line_start, checked, searched = 0, -1, 0
    for hit in hits:
        newline = action.rfind("\n", searched, hit.start())
        searched = hit.start()
        if newline >= 0:
            line_start = newline + 1
        if line_start == checked:
            continue
        checked = line_start
        header = _match_header(action, line_start)
        if header is not None:
            found.append((line_start, *header))
    return found


def _parse_text(action: str, parsed: ParsedAction) -> bool:
    headers = _headers(action)
    if not headers:
        return False
    for i, (_, name, value_start) in enumerate(headers):
        if name is None:
            continue
        end = headers[i + 1][0] if i + 1 < len(headers) else len(action)
        _apply(parsed, name, action[value_start:end])  # later occurrences overwrite earlier ones
    return True


def _last_answer_tag(action: str) -> str | None:
    """The inside of the last ``<answer>...</answer>`` (tags matched left to right, without overlaps)."""
    found: tuple[int, int] | None = None
    pos = 0
    while True:
        opening = _ANSWER_OPEN_RE.search(action, pos)
        if opening is None:
            break
        closing = _ANSWER_CLOSE_RE.search(action, opening.end())
        if closing is None:  # no later tag can close either
            break
        found = (opening.end(), closing.start())
        pos = closing.end()
    return None if found is None else action[found[0] : found[1]]


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
        tag = _last_answer_tag(action)
        if tag is not None:
            parsed.final_answer = tag.strip()
            parsed.format = parsed.format if parsed.format != "none" else "text"
    if parsed.format == "none":
        parsed.problems.append("no recognisable fields (expected 'Tool Name:' with 'Command:', or 'Final Answer:')")
    return parsed
