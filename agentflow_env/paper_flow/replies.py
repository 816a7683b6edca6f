"""Reading the modules' replies the way AgentFlow's code reads them (same outcomes, this project's code).

- planner: the last ``Context: … Sub-Goal: … Tool Name: …`` block (``**`` removed), or a JSON object with
  ``justification``/``context``/``sub_goal``/``tool_name``; the tool name is matched to the toolbox
  ignoring case and treating runs of spaces/underscores alike;
- executor: a JSON ``command``, else the code after ``Generated Command:``, else the longest python block;
- verifier: a JSON ``stop_signal``, else the last ``Conclusion: WORD``; with no STOP/CONTINUE there, any
  "stop" in the reply means STOP, else any "continue" means CONTINUE, else CONTINUE (``reading="as_coded"``;
  ``reading="hardened"`` reads the last line only: :func:`read_verdict_hardened`);
- commands: split into blocks, each ending in an ``execution = tool.execute(...)`` line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "NO_COMMAND",
    "match_tool_name",
    "read_command",
    "read_next_step",
    "read_verdict",
    "read_verdict_hardened",
    "split_blocks",
]

NO_COMMAND = "No command found."

# AgentFlow reads replies with these patterns (DOTALL; the executor's and verifier's ignore case):
#   planner   Context:\s*(.*?)Sub-Goal:\s*(.*?)Tool Name:\s*(.*?)\s*(?:```)?\s*(?=\n\n|\Z)   (the last match)
#   executor  Generated Command:.*?```python\n(.*?)```                                     (the first match)
#             else ```python\s*\n(.*?)```                      (every match; ignoring case; the longest code)
#   verifier  conclusion\**:?\s*\**\s*(\w+)                                                (the last match)
#   commands  .*?execution\s*=\s*tool\.execute\([^\n]*\)\s*(?:\n|$)                        (every match)
# Run as regexes they backtrack: adjacent \s* runs give a long whitespace run back one character at
# a time, and a lazy .*? that cannot complete rescans the rest of the text from every start, so a
# 20,000-character reply took seconds to minutes (a python fence then 100,000 characters of " \n":
# 30 s). The readers below find the same matches with forward scans (str.find, and single-quantifier
# regexes that never backtrack), each character read a bounded number of times: linear in the
# reply's length. tests/hostile/test_paper_mode_fuzz.py checks them against the patterns above.
_WS_RUN = re.compile(r"\s*")  # \s is str.isspace(), the set str.strip() removes
_STARS = re.compile(r"\**")
_WORD = re.compile(r"\w+")
# whitespace to the end, or whitespace up to its first blank line; each piece excludes what can follow
# it, so a failed attempt gives the run back once, not once per split (linear), and only the
# newlines, not every character, are group iterations
_BLANK_OR_END = r"(?:\s*\Z|[^\S\n]*(?:\n[^\S\n]+)*\n\n)"
_TOOL_END = re.compile(r"(?<!\s)(?=\s)" + _BLANK_OR_END + r"|```(?=" + _BLANK_OR_END + ")")
_LABEL = re.compile("Generated Command:", re.IGNORECASE)
_PYTHON_FENCE = re.compile("```python\n", re.IGNORECASE)
_PYTHON_OPEN = re.compile("```python", re.IGNORECASE)
_CONCLUSION = re.compile("conclusion", re.IGNORECASE)
_LEADING_FENCE = re.compile(r"^```python\s*")


def _run_end(run: re.Pattern[str], text: str, start: int) -> int:
    """The end of the run of ``run`` (a single starred class) at ``start``; ``start`` when there is none."""
    found = run.match(text, start)
    return found.end() if found else start


def _ws_end(text: str, start: int) -> int:
    """The end of the whitespace run at ``start`` (``start`` itself when there is none)."""
    return _run_end(_WS_RUN, text, start)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, TypeError, RecursionError):  # RecursionError: deeply nested JSON
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
    last = _last_step_block(reply.replace("**", ""))
    if last is None:
        return None, None, None
    context, sub_goal, tool = last
    return context.strip(), sub_goal.strip(), match_tool_name(tool, tools)


def _last_step_block(text: str) -> tuple[str, str, str] | None:
    r"""The three groups (unstripped) of the planner pattern's last match.

    A match starts at a ``Context:``; its lazy groups end at the first ``Sub-Goal:`` and then the first
    ``Tool Name:`` after it. The tool's group always completes (``\Z`` at worst), so a ``Context:``
    with no ``Sub-Goal:``/``Tool Name:`` after it means no match there or anywhere later.
    """
    found: tuple[int, int, int, int, int, int] | None = None
    pos = 0
    while True:
        context = text.find("Context:", pos)
        if context < 0:
            break
        sub_goal = text.find("Sub-Goal:", context + 8)
        if sub_goal < 0:
            break
        tool = text.find("Tool Name:", sub_goal + 9)
        if tool < 0:
            break
        tool_start = _ws_end(text, tool + 10)
        tool_end, pos = _tool_end(text, tool_start)
        found = (_ws_end(text, context + 8), sub_goal, _ws_end(text, sub_goal + 9), tool, tool_start, tool_end)
    if found is None:
        return None
    a, b, c, d, e, f = found
    return text[a:b], text[c:d], text[e:f]


def _tool_end(text: str, start: int) -> tuple[int, int]:
    r"""(end of the tool group, end of the match) for the group starting at ``start``: the first place
    where ``\s*(?:```)?\s*(?=\n\n|\Z)`` matches. That is the start of a whitespace run holding a blank
    line or reaching the end, or a fence followed by such whitespace (then the whitespace before the
    fence too), or the end of the text; ``_TOOL_END`` finds the first of them in one linear search."""
    n = len(text)
    found = _TOOL_END.search(text, start)
    if found is None:
        return n, n
    at = found.start()
    if text[at] == "`":  # a fence: the whitespace just before it is part of the tail
        at = start + len(text[start:at].rstrip())
    end = _tail_end(text, at, _ws_end(text, at))
    return at, n if end is None else end  # never None: _TOOL_END found a place where the tail matches


def _tail_end(text: str, at: int, run_end: int) -> int | None:
    r"""Where ``\s*(?:```)?\s*(?=\n\n|\Z)`` matching at ``at`` (whitespace up to ``run_end``) ends, in
    the regex's own order (the longest whitespace and the fence first), or None when it does not match."""
    n = len(text)
    if text.startswith("```", run_end):
        after = _ws_end(text, run_end + 3)
        if after == n:
            return n
        blank = text.rfind("\n\n", run_end + 3, after)
        if blank >= 0:
            return blank
    if run_end == n:
        return n
    blank = text.rfind("\n\n", at, run_end)
    return blank if blank >= 0 else None


def read_command(reply: Any) -> str:
    """The tool command in an executor reply (``NO_COMMAND`` when there is none)."""
    if not isinstance(reply, str):
        return "Invalid response type."
    obj = _json_object(reply)
    if obj is not None and all(isinstance(obj.get(k), str) for k in ("analysis", "explanation", "command")):
        command = obj["command"].strip()
    else:
        labelled = _labelled_code(reply)
        if labelled is not None:
            command = labelled.strip()
        else:
            blocks = _python_blocks(reply)
            command = max(blocks, key=lambda b: len(b.strip())).strip() if blocks else NO_COMMAND
    return _LEADING_FENCE.sub("", command).rstrip("`").strip()


def _labelled_code(reply: str) -> str | None:
    """The code of the executor pattern's first match: after the first label, the first python fence,
    up to the first ``` after it. With no label, fence or closing there, none comes later either (a
    later python fence would itself close the block)."""
    label = _LABEL.search(reply)
    if label is None:
        return None
    fence = _PYTHON_FENCE.search(reply, label.end())
    if fence is None:
        return None
    close = reply.find("```", fence.end())
    return reply[fence.end() : close] if close >= 0 else None


def _python_blocks(reply: str) -> list[str]:
    r"""The code of every match of ``(?i)```python\s*\n(.*?)```````: after a fence's whitespace has given
    back everything past its last newline, up to the next ```. A fence with no newline in its whitespace
    does not match; an unclosed block ends the search (a later fence would have closed it)."""
    blocks: list[str] = []
    pos = 0
    while True:
        fence = _PYTHON_OPEN.search(reply, pos)
        if fence is None:
            return blocks
        newline = reply.rfind("\n", fence.end(), _ws_end(reply, fence.end()))
        if newline < 0:
            pos = fence.start() + 1
            continue
        close = reply.find("```", newline + 1)
        if close < 0:
            return blocks
        blocks.append(reply[newline + 1 : close])
        pos = close + 3


def read_verdict_hardened(reply: Any) -> str:
    """``reading="hardened"``: a JSON reply's ``stop_signal`` as AgentFlow reads it, else the reply's last line
    only (``Conclusion: STOP``, see :func:`agentflow_env.turn.llm_modes.parse_verdict`). A "stop" anywhere else (in
    quoted tool output, in the reasoning) is no verdict, and no verdict means CONTINUE."""
    from agentflow_env.turn.llm_modes import parse_verdict

    if not isinstance(reply, str):
        return "CONTINUE"
    obj = _json_object(reply)
    if obj is not None and isinstance(obj.get("analysis"), str) and "stop_signal" in obj:
        signal = _as_bool(obj["stop_signal"])
        return "STOP" if signal else "CONTINUE"
    return parse_verdict(reply)[0]


def read_verdict(reply: Any) -> str:
    """``"STOP"`` or ``"CONTINUE"`` from a verifier reply, as AgentFlow's code reads it (``reading="as_coded"``):
    note that a "stop" anywhere in the reply, even quoted from a tool's output, is read as STOP."""
    if not isinstance(reply, str):
        return "CONTINUE"
    obj = _json_object(reply)
    if obj is not None and isinstance(obj.get("analysis"), str) and "stop_signal" in obj:
        signal = _as_bool(obj["stop_signal"])
        if signal is not None:
            return "STOP" if signal else "CONTINUE"
    word = _last_verdict_word(reply)
    if word is not None and word.upper() in ("STOP", "CONTINUE"):
        return word.upper()
    lowered = reply.lower()
    if "stop" in lowered:
        return "STOP"
    return "CONTINUE"


def _last_verdict_word(reply: str) -> str | None:
    r"""The word of the verifier pattern's last match. Stars, colon, whitespace and word characters are
    disjoint classes, so after ``conclusion`` the pattern reads deterministically: stars, an optional
    colon, whitespace, stars, whitespace, then a word (or no match at this ``conclusion``)."""
    word = None
    pos = 0
    while True:
        found = _CONCLUSION.search(reply, pos)
        if found is None:
            return word
        at = _run_end(_STARS, reply, found.end())
        if reply.startswith(":", at):
            at += 1
        at = _ws_end(reply, at)
        at = _run_end(_STARS, reply, at)
        read = _WORD.match(reply, _ws_end(reply, at))
        if read is None:
            pos = found.start() + 1
        else:
            word, pos = read.group(), read.end()


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
    blocks = (command[start:end].strip() for start, end in _block_spans(command))
    return [block for block in blocks if block]


def _block_spans(text: str) -> list[tuple[int, int]]:
    r"""Spans of the commands pattern's matches. Each runs from the previous one's end to the end of the
    first call line ``execution = tool.execute(...)`` after it: ``[^\n]*\)\s*(?:\n|$)`` needs the
    call's ``)`` to be the last non-whitespace character of its line, and the match ends after the last
    newline of the whitespace that follows (at the end of the text when that whitespace reaches it).
    The last non-whitespace character is found once per line, however many calls the line holds."""
    spans: list[tuple[int, int]] = []
    n = len(text)
    block_start = search = 0
    line_end = -1  # the line of the last call read: where it ends, and its last non-whitespace
    line_last = -1
    while True:
        name = text.find("execution", search)
        if name < 0:
            return spans
        search = name + 1
        at = _ws_end(text, name + 9)
        if not text.startswith("=", at):
            continue
        at = _ws_end(text, at + 1)
        if not text.startswith("tool.execute(", at):
            continue
        args = at + 13
        if args > line_end:  # a new line
            line_end = text.find("\n", args)
            if line_end < 0:
                line_end = n
            kept = len(text[args:line_end].rstrip())
            line_last = args + kept - 1 if kept else -1
        if line_last < args or text[line_last] != ")":
            continue
        after = _ws_end(text, line_last + 1)
        end = n if after == n else text.rfind("\n", line_last + 1, after) + 1
        spans.append((block_start, end))
        block_start = search = end
