"""The planner action parser: AgentFlow's ``Field: value`` format or the same keys as JSON.

Tolerant of markdown emphasis, case, field order and surrounding prose; the last occurrence of a
field wins. It never raises: problems come back in ``ParsedAction.problems``.

Every scan is linear in the action's length: the header pattern never backtracks into a run of
characters (see ``_HEADER_RE``), and ``<answer>`` tags and json fences are found with forward
``find`` loops that never rescan text, where a lazy ``(.*?)`` pattern would rescan to the end of
the action from every unclosed opening.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, NamedTuple

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
# field name, optional emphasis, a colon, optional emphasis. Written plainly, as
#   ^[ \t]*(?:[#>]+[ \t]*|[-*+][ \t]+|\d{1,3}[.)][ \t]*)?[*_`]{0,3}[ \t]*(NAME)[ \t]*[*_`]{0,3}[ \t]*:[ \t]*[*_`]{0,3}
# a failed match gives back whitespace one character at a time to the next `[ \t]*`, which takes it
# again: quadratic in a long run of spaces. Here every run is atomic (taken greedily, never given
# back), which is exact because no piece can start with a character the piece before it could
# give back (names start with a letter; the colon and emphasis are not whitespace). A line start
# then costs its whitespace runs and a fixed number of alternatives, so a scan is linear.
_ATOMIC_IDS = itertools.count()


def _atomic(pattern: str) -> str:
    """``pattern``, matched greedily and never backtracked into (``(?>...)`` before Python 3.11)."""
    group = f"_a{next(_ATOMIC_IDS)}"
    return f"(?=(?P<{group}>{pattern}))(?P={group})"


def _ws() -> str:
    return _atomic(r"[ \t]*")


def _emphasis() -> str:
    return _atomic(r"[*_`]{0,3}")


_NAMES = (
    r"justification|reasoning|rationale|context|sub[ _-]?goal|selected[ _-]?tool|tool[ _-]?name"
    r"|tool[ _-]?command|tool|command|query|final[ _-]?answer"
)
_MARKDOWN = "(?:" + _atomic("[#>]+") + _ws() + "|[-*+]" + _atomic(r"[ \t]+") + r"|\d{1,3}[.)]" + _ws() + ")?"
_EMULATED_HEADER_PATTERN = (
    "^"
    + _ws()
    + _MARKDOWN
    + _emphasis()
    + _ws()
    + f"(?P<name>{_NAMES})"
    + _ws()
    + _emphasis()
    + _ws()
    + ":"
    + _ws()
    + _emphasis()
)
# Python 3.11+ has possessive quantifiers: the same pattern natively, about 2.5x faster
# (tests/env/turn/test_parser.py checks that both find the same headers)
_NATIVE_HEADER_PATTERN = (
    r"^[ \t]*+(?:[#>]++[ \t]*+|[-*+][ \t]++|\d{1,3}[.)][ \t]*+)?[*_`]{0,3}+[ \t]*+"
    f"(?P<name>{_NAMES})"
    r"[ \t]*+[*_`]{0,3}+[ \t]*+:[ \t]*+[*_`]{0,3}+"
)
_HEADER_PATTERN = _NATIVE_HEADER_PATTERN if sys.version_info >= (3, 11) else _EMULATED_HEADER_PATTERN
_HEADER_RE = re.compile(_HEADER_PATTERN, re.IGNORECASE | re.MULTILINE)
# a fenced value "```lang ... ```": the opening line of the fence
_FENCE_OPEN_RE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?")
# a json block "```json\n ... \n```" anywhere in the action: its opening line
_JSON_FENCE_OPEN_RE = re.compile(r"```(?:json)?[ \t]*\n", re.IGNORECASE)
_ANSWER_OPEN_RE = re.compile("<answer>", re.IGNORECASE)
_ANSWER_CLOSE_RE = re.compile("</answer>", re.IGNORECASE)
_MAX_JSON_CHARS = 200_000


@dataclass(slots=True)
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

    def as_parsed(self) -> ParsedAction:
        """Itself (:meth:`PlainToolAction.as_parsed` builds one)."""
        return self

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
    if not value or (value[0] not in "*`" and value[-1] not in "*`"):
        return value  # the common case: no emphasis or fence to take off
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


def _json_fences(action: str) -> list[tuple[int, int]]:
    """Where the insides of ```` ```json\n...\n``` ```` blocks are, left to right, without overlaps."""
    blocks: list[tuple[int, int]] = []
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
        blocks.append((opening.end(), close))
        pos = close + 4


def _parse_json(action: str, before: int | None = None) -> dict[str, Any] | None:
    """The JSON object the action is, or ``None``: the whole action, else a json block, else the span from the
    first "{" to the last "}". ``before``: only an object that starts before this position counts."""
    candidates: list[str] = []
    stripped = action.strip()
    if stripped.startswith("{") and len(stripped) <= _MAX_JSON_CHARS:
        candidates.append(stripped)
    # spans first: a candidate too long to read is never copied out of the action
    spans = _json_fences(action)
    first, last = action.find("{"), action.rfind("}")
    if 0 <= first < last:
        spans.append((first, last + 1))
    limit = len(action) if before is None else before
    candidates.extend(action[start:end] for start, end in spans if end - start <= _MAX_JSON_CHARS and start < limit)
    for text in candidates:
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and any(isinstance(k, str) and _key_to_field(k) for k in obj):
            return obj
    return None


# the header spellings planners write most, looked up before the general key normaliser
_COMMON_HEADERS = {
    spelling: _KEY_TO_FIELD["".join(ch for ch in spelling.lower() if ch.isalnum())]
    for spelling in ("Justification", "Context", "Sub-Goal", "Tool Name", "Command", "Final Answer", "Answer", "Tool")
}
_NAME_GROUP = _HEADER_RE.groupindex["name"]
# the fields whose header makes an action a tool call or an answer (a "Justification:" line alone does not)
_ACTION_FIELDS = frozenset({"tool_name", "command", "final_answer"})


def _final_answers_span(action: str) -> str | None:
    """With two or more ``Final Answer:`` headers that give a value, everything after the first of them to the end
    of the last one's value, the later headers included: what the JSON format hands the grammar for the same text
    (``{"final_answer": "35 .. Final Answer: 33"}``); ``None`` with fewer."""
    headers = [
        (m, _COMMON_HEADERS.get(m.group(_NAME_GROUP)) or _key_to_field(m.group(_NAME_GROUP)))
        for m in _HEADER_RE.finditer(action)
    ]
    finals = [i for i, (_m, name) in enumerate(headers) if name == "final_answer"]
    ends = [headers[i + 1][0].start() if i + 1 < len(headers) else len(action) for i in finals]
    given = [i for i, end in zip(finals, ends) if action[headers[i][0].end() : end].strip(" \t\n*_`")]
    if len(given) < 2:  # one answer (an empty header beside it gives none)
        return None
    end = headers[given[-1] + 1][0].start() if given[-1] + 1 < len(headers) else len(action)
    return _clean_value(action[headers[given[0]][0].end() : end])


def _first_action_header(action: str) -> int:
    """Where the first ``Tool Name:``/``Command:``/``Final Answer:`` header (any spelling) starts; the action's
    length when it has none."""
    for m in _HEADER_RE.finditer(action):
        key = m.group(_NAME_GROUP)
        if (_COMMON_HEADERS.get(key) or _key_to_field(key)) in _ACTION_FIELDS:
            return m.start()
    return len(action)


def _parse_text(action: str, parsed: ParsedAction) -> bool:
    # a field's value runs to the next header; the last occurrence of a field wins, so only that one is cleaned
    if _HEADER_RE.groups == 1:  # the native pattern: split gives [prefix, name, value, name, value, ...]
        parts = _HEADER_RE.split(action)
        if len(parts) == 1:
            return False
        values: dict[str | None, str] = {}
        for i in range(1, len(parts), 2):
            key = parts[i]
            # None for a name matched only through a Unicode case fold ("ſub goal"): still a header
            values[_COMMON_HEADERS.get(key) or _key_to_field(key)] = parts[i + 1]
        values.pop(None, None)
        for field_name, raw in values.items():
            setattr(parsed, str(field_name), _clean_value(raw))
        return True
    spans: dict[str | None, tuple[int, int]] = {}
    name: str | None = None
    start = -1
    for m in _HEADER_RE.finditer(action):
        if start >= 0:
            spans[name] = (start, m.start())
        key = m.group(_NAME_GROUP)
        # None for a name matched only through a Unicode case fold ("ſub goal"): still a header
        name = _COMMON_HEADERS.get(key) or _key_to_field(key)
        start = m.end()
    if start < 0:
        return False
    spans[name] = (start, len(action))
    spans.pop(None, None)
    for field_name, (begin, end) in spans.items():
        setattr(parsed, str(field_name), _clean_value(action[begin:end]))
    return True


def _last_answer_tag(action: str) -> str | None:
    """The inside of the last ``<answer>...</answer>`` (tags matched left to right, without overlaps)."""
    found: tuple[int, int] | None = None
    pos = 0
    if action.isascii():  # the common case: plain finds on the lower-cased text (same positions)
        low = action.lower()
        while (opening := low.find("<answer>", pos)) >= 0:
            closing = low.find("</answer>", opening + 8)
            if closing < 0:  # no later tag can close either
                break
            found, pos = (opening + 8, closing), closing + 9
    else:  # re's case folding also matches e.g. "\u017f" (long s) to "s", as before
        while (match := _ANSWER_OPEN_RE.search(action, pos)) is not None:
            close = _ANSWER_CLOSE_RE.search(action, match.end())
            if close is None:
                break
            found, pos = (match.end(), close.start()), close.end()
    return None if found is None else action[found[0] : found[1]]


# The fast path: the canonical action exactly as the prompt asks for it, every field on its own line, each
# value already clean (no surrounding whitespace, no emphasis or fence to take off, not empty). On such an
# action the tolerant parser below finds exactly these five headers (a header starts a line, and no value
# holds a newline) and ``_clean_value`` changes nothing, so one match gives the same fields. Anything else
# (another order or spelling, markdown, multi-line values, JSON, an ``<answer>`` tag, NUL) takes the
# tolerant path; tests/env/turn/test_parser.py pins the two paths' equality on a corpus of actions.
# a clean value: starts with neither whitespace nor emphasis (the header would take it), ends with neither
# whitespace nor emphasis (``_clean_value`` would take it off); the lookbehind checks the last character only
_VALUE = r"([^\s*_`][^\n]*)(?<![\s*`])"
_CANONICAL_RE = re.compile(
    rf"Justification: {_VALUE}\nContext: {_VALUE}\nSub-Goal: {_VALUE}\nTool Name: {_VALUE}\nCommand: {_VALUE}\n?"
)
_CANONICAL_FINAL_RE = re.compile(rf"Final Answer: {_VALUE}\n?")
# a canonical tool action with no "{", "<" or NUL anywhere (the labels hold none): one no JSON object, tool-call
# block or answer tag can claim and no NUL shortens, so it reads as its five fields (the env's fast reader)
_PLAIN_VALUE = r"([^\s*_`{<\x00][^\n{<\x00]*)(?<![\s*`])"
_CANONICAL_PLAIN_RE = re.compile(
    rf"Justification: {_PLAIN_VALUE}\nContext: {_PLAIN_VALUE}\nSub-Goal: {_PLAIN_VALUE}\n"
    rf"Tool Name: {_PLAIN_VALUE}\nCommand: {_PLAIN_VALUE}\n?"
)


class _PlainFields(NamedTuple):
    justification: str
    context: str
    sub_goal: str
    tool_name: str
    command: str


class PlainToolAction(_PlainFields):
    """The five fields of a ``_CANONICAL_PLAIN_RE`` action (the env's fast reader: ``match.groups()`` as they are),
    read like the :class:`ParsedAction` that ``parse_action`` gives it, for a tuple's cost instead of a dataclass's."""

    __slots__ = ()
    # a canonical tool action has no answer and no problem, in the text format
    final_answer: ClassVar[None] = None
    format: ClassVar[str] = "text"
    problems: ClassVar[tuple[str, ...]] = ()
    is_final: ClassVar[bool] = False

    def as_parsed(self) -> ParsedAction:
        """The :class:`ParsedAction` that ``parse_action`` gives the action."""
        return ParsedAction(self[0], self[1], self[2], self[3], self[4], None, "text", [])

    def to_dict(self) -> dict[str, Any]:
        """As :meth:`ParsedAction.to_dict` writes the action's parse."""
        return {
            "justification": self[0],
            "context": self[1],
            "sub_goal": self[2],
            "tool_name": self[3],
            "command": self[4],
            "final_answer": None,
            "format": "text",
            "problems": [],
        }


def _parse_canonical(action: str) -> ParsedAction | None:
    """The fields of a canonical action (see ``_CANONICAL_RE``), or ``None`` for the tolerant parser."""
    if "{" in action or "\x00" in action:
        return None  # a JSON object may win; NUL is dropped first
    match = _CANONICAL_RE.fullmatch(action)
    if match is not None:
        if "<" in action and _last_answer_tag(action) is not None:
            return None  # an <answer> tag in a tool action is a final answer
        justification, context, sub_goal, tool_name, command = match.groups()
        return ParsedAction(justification, context, sub_goal, tool_name, command, None, "text", [])
    match = _CANONICAL_FINAL_RE.fullmatch(action)
    if match is not None:
        return ParsedAction(final_answer=match.group(1), format="text")
    return None


def parse_action(action: Any, headers_first: bool = False) -> ParsedAction:
    """Parse one planner action; never raises. Non-strings are reported as a problem.

    ``headers_first``: a JSON object that starts after a ``Tool Name:``, ``Command:`` or ``Final Answer:`` header
    is part of that field's value (``Command: print({"answer": 42})`` is a command, ``Final Answer: {...}`` an
    answer that holds an object), and an action with two ``Final Answer:`` headers answers with everything after the
    first header, the later ones included, as the JSON format does (the grammar reads a later labelled answer,
    two labelled answers after it, or a revision), as the ``-v7`` ids read actions; ``False`` (ids up to ``-v6``): an
    object with a field key anywhere in the action is the action, and the last ``Final Answer:`` wins.
    """
    if type(action) is str and "{" not in action and "\x00" not in action:  # the fast path, _parse_canonical inlined
        match = _CANONICAL_RE.fullmatch(action)
        if match is not None:
            if "<" not in action or _last_answer_tag(action) is None:
                justification, context, sub_goal, tool_name, command = match.groups()
                return ParsedAction(justification, context, sub_goal, tool_name, command, None, "text", [])
        else:
            match = _CANONICAL_FINAL_RE.fullmatch(action)
            if match is not None:
                return ParsedAction(final_answer=match.group(1), format="text")
    return parse_tolerant(action, headers_first)


def parse_tolerant(action: Any, headers_first: bool = False) -> ParsedAction:
    """:func:`parse_action` without its fast path for canonical actions (every action goes through the full parser)."""
    parsed = ParsedAction()
    if not isinstance(action, str):
        parsed.problems.append(f"the action must be a string, got {type(action).__name__}")
        return parsed
    if "\x00" in action:
        action = action.replace("\x00", "")
    obj = None
    if "{" in action:
        obj = _parse_json(action, _first_action_header(action) if headers_first else None)
    if obj is not None:
        parsed.format = "json"
        for key, value in obj.items():
            name = _key_to_field(str(key))
            if name is not None and value is not None:
                _apply(parsed, name, value)
    elif _parse_text(action, parsed):
        parsed.format = "text"
        if headers_first and parsed.final_answer is not None:  # every answer the action gives, not the last alone
            parsed.final_answer = _final_answers_span(action) or parsed.final_answer
    if parsed.final_answer is None and "<" in action:
        tag = _last_answer_tag(action)
        if tag is not None:
            parsed.final_answer = tag.strip()
            parsed.format = parsed.format if parsed.format != "none" else "text"
    if parsed.format == "none":
        parsed.problems.append("no recognisable fields (expected 'Tool Name:' with 'Command:', or 'Final Answer:')")
    return parsed
