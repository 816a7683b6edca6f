"""Answer grammar 5 (the ``-v5`` ids): the steps grammar 5 adds to :mod:`agentflow_env.scoring.grammar`.

Grammar 4 read answers inside sentences. Grammar 5 closes four more classes, each by a rule about the
*shape* of an answer, never by a phrase (docs/rewards.md, "Grammar 5"):

1. **More presentation** (:func:`presentation`): a code fence is its contents; a JSON object with one
   answer-like key (``answer``, ``final_answer``, ``result``, ...) is that key's value, and one with two
   answer keys that differ is a hedge; display math (``$$..$$``, ``\\[..\\]`` over lines) is its contents; a
   Markdown table with an answer column is the one value in that column; struck-out text (``~~..~~``) is
   retracted, never read; superscript citation marks, "(Source: ..)" remarks and a trailing "Sources:" list
   are citations; a section under an explanation header after the answer is working; a bulleted or
   numbered list is a list; a mixed number ("2 2/7") is one fraction; ``√``, ``pi`` and ``\\div`` are LaTeX's
   ``\\sqrt``, ``\\pi`` and ``/``; a gloss that restates the value it follows ("2,785,692 (about 2.8
   million)", "528845/66 ≈ 8012.8030", "330 metres (1,083 ft)") is dropped, and only then: a gloss that
   rounds to anything else stays a second value.
2. **Revisions** (:func:`drop_drafts`): a revision is a later value after a correction cue: grammar 3's cues,
   a negation ("No.", "Not 34 — it's 33"), a stated error ("I made an error", "that's wrong"), a redo ("let
   me recompute"). The commitment after the cue may come a few sentences later. When what follows the cue
   is itself uncertain ("maybe", "possibly", "?", "not sure", "hard to say") and the draft named another
   candidate, the answer keeps two candidates alive: a hedge.
3. **More rival cues** (:data:`CUES`, :func:`both_polarities`): a second value under any cue of
   alternativeness ("would also be acceptable", "vs", "less likely", "more probable than", "not certain")
   is a rival, and an answer to a yes/no question that writes both "yes" and "no" as answers commits to
   neither.
4. **Number words** (:func:`number_words`): "twenty-five", "Three" read as numbers for a number gold.

Every step is a bounded number of linear passes (hostile inputs stay linear: fences and math delimiters are
paired by ``str.find``, not by backtracking).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable
from fractions import Fraction

from agentflow_env.scoring.cued import Cued
from agentflow_env.scoring.grammar import (
    _ANSWER_WORDS,
    _COMMIT,
    _COMMON,
    LaterSteps,
    Reading,
    _candidates,
    _commits,
    _drop_drafts,
    _of_kind,
    remark_cue,
)
from agentflow_env.scoring.grammar import read_answer as _read
from agentflow_env.scoring.words import tokens

__all__ = ["CUES", "both_polarities", "drop_drafts", "number_words", "presentation", "read_answer"]

MAX_JSON_CHARS = 5_000

# ------------------------------------------------------------------ 1. presentation
_ANSWER_KEY = re.compile(
    r"(?i)^(?:final[_ ]?)?(?:answer|result|value|output|solution|response|prediction|choice|option|conclusion)s?$"
)


def _pairs(text: str, opener: str, closer: str, inner) -> str:
    """``text`` with every ``opener .. closer`` pair replaced by ``inner(contents)``; one left-to-right pass."""
    out, pos = [], 0
    while True:
        a = text.find(opener, pos)
        if a < 0:
            break
        b = text.find(closer, a + len(opener))
        if b < 0:
            break
        out.append(text[pos:a])
        out.append(inner(text[a + len(opener) : b]))
        pos = b + len(closer)
    out.append(text[pos:])
    return "".join(out)


_FENCE_TAGS = frozenset("text txt plaintext json markdown md latex tex python py yaml answer output".split())


def _fence(body: str) -> str:
    first, _, rest = body.partition("\n")
    if rest and re.fullmatch(r"[A-Za-z0-9_+.-]{0,20}\s*", first):
        body = rest  # the fence's language tag
    return "\n" + body.strip("\n") + "\n"


def _json_value(value: object) -> str | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in value):
        return ", ".join(str(v) for v in value)
    return None


_ONE_KEY = re.compile(r'^\{\s*"([^"\\]{1,40})"\s*:\s*"((?:[^"\\]|\\.){0,2000})"\s*\}$', re.DOTALL)


def _json_answer(text: str) -> tuple[str, str | None] | None:
    """A JSON object's answer: ``(value, None)``, ``(text, hedge)`` for two answer keys that differ, or
    ``None`` when ``text`` is no JSON object with an answer."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")) or len(stripped) > MAX_JSON_CHARS:
        return None
    m = _ONE_KEY.match(stripped)  # '{"answer": "\frac{9}{4}"}': LaTeX backslashes are not JSON escapes
    if m is not None:
        key, raw = m.groups()
        value = re.sub(r"\\([\\\"/])", r"\1", raw)
        return value, None  # one key: its value is the one value the object states
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(data, dict) or not data:
        return None
    keys = [k for k in data if _ANSWER_KEY.match(str(k).strip())]
    if not keys and len(data) == 1:
        keys = list(data)
    values = [_json_value(data[k]) for k in keys]
    if not keys or any(v is None for v in values):
        return None
    distinct = {re.sub(r"\s+", "", str(v)).lower() for v in values}
    if len(distinct) > 1:
        return text, "a JSON object with two answer keys that differ"
    return str(values[0]), None


_TABLE_ROW = re.compile(r"^\s*\|(.*)\|\s*$")


def _table(text: str) -> tuple[str, str | None]:
    """A Markdown table with an answer column as ``Answer: value`` (its one value; two differing values in
    the column are a hedge)."""
    lines = text.split("\n")
    rows = [i for i, ln in enumerate(lines) if _TABLE_ROW.match(ln)]
    if len(rows) < 3 or rows != list(range(rows[0], rows[0] + len(rows))):
        return text, None
    matches = [_TABLE_ROW.match(lines[i]) for i in rows]
    cells = [[c.strip().strip("*_ ") for c in m.group(1).split("|")] for m in matches if m is not None]
    header, body = cells[0], [r for r in cells[1:] if not all(re.fullmatch(r":?-{2,}:?", c) for c in r if c)]
    column = [j for j, c in enumerate(header) if _ANSWER_WORDS.fullmatch(c)]
    if len(column) != 1 or not body:
        return text, None
    values = {r[column[0]] for r in body if column[0] < len(r) and r[column[0]]}
    if len(values) != 1:
        return text, ("a table names several answers" if len(values) > 1 else None)
    kept = lines[: rows[0]] + [f"Answer: {values.pop()}"] + lines[rows[-1] + 1 :]
    return "\n".join(kept), None


_SUPERSCRIPT_MARK = re.compile(
    r"(?<=[^\W\d_]{3})[¹²³⁴⁵⁶⁷⁸⁹⁰]+(?=[\s.,;:!?)]|$)|(?<=[^\W\d_])[¹⁴⁵⁶⁷⁸⁹⁰]+(?=[\s.,;:!?)]|$)"
)
_SUPERSCRIPT_MARK = Cued(_SUPERSCRIPT_MARK, re.compile("[¹²³⁴⁵⁶⁷⁸⁹⁰]"))
_SOURCE_REMARK = re.compile(
    r"(?i)\s*[(\[]\s*(?:(?:sources?|references?|refs?|citations?)\s*:|(?:via|per|cf\.|see|from)\s)\s*([^()\[\]\n]{1,80})[)\]]"
)
_WEEKDAY = re.compile(
    r"(?i)\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\s*,?\s+(?=(?:\d{1,2}(?:st|nd|rd|th)?\s+)?[A-Za-z]{3,9}\.?\s+\d)"
)
_SOURCES_HEADER = re.compile(
    r"(?im)^[ \t>*_#-]*(?:sources?|references?|citations?|bibliography|further\s+reading)[ \t*_]*:?[ \t*_]*(?=\S|$)"
)
_EXPLANATION_HEADER = re.compile(
    r"(?im)^[ \t]*(?:#{1,6}[ \t]*|\*\*|__)?(?:explanation|reasoning|rationale|justification|derivation|working|"
    r"steps|details|how\s+i\s+got\s+(?:it|this)|why)[ \t*_]*:?[ \t*_]*$"
)
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d{1,2}[.)])\s+(\S.*?)\s*$")


def _sources(text: str, kind: str) -> str:
    """``text`` without citation remarks and a trailing sources list (neither names an answer)."""
    text = _SUPERSCRIPT_MARK.sub("", text)
    text = _WEEKDAY.sub("", text)  # "Sunday, June 18, 1815": the weekday is how the date is written

    def remark(m: re.Match[str]) -> str:
        inner = m.group(1)
        return m.group(0) if remark_cue(inner) or (kind != "text" and re.search(r"\d", inner)) else ""

    text = _SOURCE_REMARK.sub(remark, text)
    header = None
    for m in _SOURCES_HEADER.finditer(text):
        if text[: m.start()].strip():
            header = m
            break
    if header is not None:
        tail = text[header.start() :]
        bare_value = re.compile(r"(?m)^[\s*•·-]*(?:[\d.,/]+|[A-J])[\s.)]*$")
        if not remark_cue(tail) and not (kind != "text" and bare_value.search(tail[header.end() - header.start() :])):
            text = text[: header.start()].rstrip()
    return text


def _explanation(text: str) -> str:
    """``text`` without a section under an explanation header that comes after an answer and names no
    rival cue (the section is working, as working before a marked answer is)."""
    m = _EXPLANATION_HEADER.search(text)
    if m is None or not text[: m.start()].strip() or remark_cue(text[m.end() :]):
        return text
    return text[: m.start()].rstrip()


def _bullets(text: str, golds: list[str]) -> str:
    """A text that is only a bulleted or numbered list, as the list it writes (``a, b, c``) when a gold is a
    list; one bullet is its item."""
    from agentflow_env.scoring.typed import _items

    lines = [ln for ln in text.split("\n") if ln.strip()]
    found = [_BULLET.match(ln) for ln in lines]
    items = [m for m in found if m is not None]
    if not lines or len(items) != len(lines):
        return text
    numbers = [re.match(r"\s*(\d+)", ln) for ln in lines]
    if any(numbers) and [int(n.group(1)) if n else 0 for n in numbers] != list(range(1, len(lines) + 1)):
        return text  # "34. 36 would .." is a value and a sentence, not a list; a numbered list counts 1, 2, ..
    if len(items) == 1:
        return items[0].group(1) if not numbers[0] else text
    if any(len(_items(g)) > 1 for g in golds):
        return ", ".join(m.group(1).rstrip(".,;") for m in items)
    return text


_MIXED = re.compile(r"(?<![\d./,])(\d{1,6})\s+(\d{1,6})\s*/\s*(\d{1,6})(?![\d/])")
_SQRT = re.compile(r"√\s*(\d+(?:\.\d+)?|\{[^{}]{1,40}\}|\([^()]{1,40}\)|[A-Za-z])")
_FRACTION = re.compile(r"(-\s*)?\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}")
_PI = re.compile(r"(?<![A-Za-z\\])(?:pi|π)(?![A-Za-z])")


def _mixed(m: re.Match[str]) -> str:
    whole, num, den = (int(g) for g in m.groups())
    if den == 0 or num >= den:
        return m.group(0)
    return f"{whole * den + num}/{den}"


def _latex_words(text: str, golds: list[str]) -> str:
    text = re.sub(r"\\div(?![A-Za-z])", "/", text)
    text = _SQRT.sub(lambda m: "\\sqrt{" + m.group(1).strip("{}()") + "}", text)
    if any("\\pi" in g for g in golds):
        text = _PI.sub(r"\\pi", text)
    if any(re.search(r"\d\s*/\s*\d|\\frac", g) for g in golds):
        text = _MIXED.sub(_mixed, text)
    if any(re.fullmatch(r"\s*-?\d+\s*/\s*\d+\s*", g) for g in golds):  # the gold's own notation: a/b
        text = _FRACTION.sub(lambda m: f"{m.group(1) or ''}{m.group(2)}/{m.group(3)}", text)
    return text


# glosses: "(about 2.8 million)", "≈ 8012.8030", "(1,083 ft)", "\approx 12.566"
_GLOSS = re.compile(
    r"(?i)\s*(?:\(\s*(?:(?:about|approx(?:imately|\.)?|roughly|around|circa|ca\.|~|≈|i\.e\.,?|=)\s*)?"
    r"(?P<p>[^()\n]{1,40}?)\s*\)|(?:≈|~|\\approx)\s*(?P<b>[^\s()=≈~]{1,30}(?:\s+[A-Za-z]{1,12})?))\s*(?=[.]?\s*$|[.]?\n)"
)
_GLOSS = Cued(_GLOSS, re.compile(r"[(≈~]|\\approx"))  # a gloss is in brackets or after an approximation
_SCALE = {"thousand": 1000, "million": 10**6, "billion": 10**9, "trillion": 10**12, "k": 1000, "m": 10**6, "bn": 10**9}
_LENGTH: dict[str, int | Fraction] = {
    "m": 1,
    "metre": 1,
    "meter": 1,
    "km": 1000,
    "kilometre": 1000,
    "kilometer": 1000,
    "cm": Fraction(1, 100),
    "centimetre": Fraction(1, 100),
    "centimeter": Fraction(1, 100),
    "mm": Fraction(1, 1000),
    "millimetre": Fraction(1, 1000),
    "millimeter": Fraction(1, 1000),
    "ft": Fraction(3048, 10000),
    "foot": Fraction(3048, 10000),
    "feet": Fraction(3048, 10000),
    "in": Fraction(254, 10000),
    "inch": Fraction(254, 10000),
    "inches": Fraction(254, 10000),
    "yd": Fraction(9144, 10000),
    "yard": Fraction(9144, 10000),
    "mi": Fraction(1609344, 1000),
    "mile": Fraction(1609344, 1000),
}
_MASS: dict[str, int | Fraction] = {
    "kg": 1,
    "kilogram": 1,
    "g": Fraction(1, 1000),
    "gram": Fraction(1, 1000),
    "mg": Fraction(1, 10**6),
    "t": 1000,
    "tonne": 1000,
    "lb": Fraction(45359237, 10**8),
    "lbs": Fraction(45359237, 10**8),
    "pound": Fraction(45359237, 10**8),
    "oz": Fraction(45359237, 16 * 10**8),
    "ounce": Fraction(45359237, 16 * 10**8),
}


def _unit_key(unit: str) -> str:
    unit = unit.strip().strip(".").lower()
    for suffix in ("es", "s"):
        if len(unit) > 3 and unit.endswith(suffix) and unit[: -len(suffix)] in _LENGTH | _MASS:
            return unit[: -len(suffix)]
    return unit


def _quantity(text: str) -> tuple[Fraction | float, str | None, Fraction | float] | None:
    """``(value, dimension or None, rounding step)`` of a number with an optional scale word or unit (the
    value in the dimension's base unit, the step half the last digit shown, in that unit; exact fractions), or
    of a simple expression (a fraction, ``\\frac``, ``\\pi``, ``\\sqrt``: a float, step 0)."""
    text = text.strip().rstrip(".")
    m = re.fullmatch(r"(-?\d{1,3}(?:,\d{3})+|-?\d+)(?:\.(\d+))?\s*([A-Za-z]{1,12}\.?)?", text)
    if m is None:
        return _expression_value(text)
    value = Fraction(m.group(1).replace(",", "") + ("." + m.group(2) if m.group(2) else ""))
    step = Fraction(1, 2 * 10 ** len(m.group(2) or ""))
    word = (m.group(3) or "").lower().rstrip(".")
    if not word:
        return value, None, step
    if word in _SCALE:
        return value * _SCALE[word], None, step * _SCALE[word]
    key = _unit_key(word)
    for name, table in (("length", _LENGTH), ("mass", _MASS)):
        if key in table:
            factor = Fraction(table[key])
            return value * factor, name, step * factor
    return None


def _expression_value(text: str) -> tuple[float, None, float] | None:
    """The value of a short expression of numbers, ``+ - * /``, ``\\frac``, ``\\sqrt`` and ``\\pi`` (an
    :mod:`ast` walk: nothing else is evaluated), or ``None``."""
    expr = text.replace(" ", "")
    expr = re.sub(r"\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}", r"((\1)/(\2))", expr)
    expr = re.sub(r"\\sqrt\{([^{}]+)\}", r"sqrt(\1)", expr)
    expr = expr.replace("\\pi", "pi").replace("\\cdot", "*").replace("\\times", "*")
    expr = re.sub(r"(?<=[\d)])(?=[a-z(])", "*", expr)
    if len(expr) > 60 or not re.search(r"\d", expr):
        return None
    try:
        value = _evaluate(ast.parse(expr, mode="eval").body)
    except (SyntaxError, ZeroDivisionError, ValueError, OverflowError):
        return None
    return None if value is None else (value, None, 0.0)


def _evaluate(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Name) and node.id == "pi":
        return math.pi
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _evaluate(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "sqrt"
        and len(node.args) == 1
    ):
        inner = _evaluate(node.args[0])
        return None if inner is None or inner < 0 else math.sqrt(inner)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        a, b = _evaluate(node.left), _evaluate(node.right)
        if a is None or b is None:
            return None
        ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
        return ops[type(node.op)] if type(node.op) in ops else a / b
    return None


def _restates(main: str, gloss: str) -> bool:
    """Whether ``gloss`` rounds to the value of ``main`` (in the same dimension): exactly, within half the last
    digit the gloss shows, when both are numbers; within a float's error when one is irrational (``4\\pi``)."""
    a, b = _quantity(main), _quantity(gloss)
    if a is None or b is None or a[1] != b[1]:
        return False
    if isinstance(a[0], Fraction) and isinstance(b[0], Fraction) and isinstance(b[2], Fraction):
        return abs(a[0] - b[0]) <= b[2]
    return abs(float(a[0]) - float(b[0])) <= float(b[2]) + 1e-12 * abs(float(a[0]))


def _glosses(text: str) -> str:
    """``text`` without a gloss that restates the value right before it (see the module doc)."""

    def drop(m: re.Match[str]) -> str:
        before = text[: m.start()].replace("**", "")
        if re.search(r"[-+*/×÷^=(]\s*$", before):
            return m.group(0)  # "5 * (9 - 3 - 1)": an operand, not a gloss
        head = re.split(r"(?:^|\n|[:：]\s|\bis\s)", before)[-1].strip().strip("$`")
        head = re.sub(r"\\text\{([^{}]*)\}", r"\1", head)
        gloss = (m.group("p") or m.group("b") or "").strip().strip("$")
        return "" if head and _restates(head, gloss) else m.group(0)

    return _GLOSS.sub(drop, text)


_QUOTED = Cued(re.compile(r"[\"“]([^\"“”\n]{20,600})[\"”]"), re.compile(r"[\"“]"))


def _quoted_question(text: str, question: str) -> str:
    """A quoted span that is the question restated ("To answer "...": 699") as ``the question``."""
    if not question:
        return text
    from agentflow_env.scoring.typed import fold

    q = set(fold(question).split())

    def sub(m: re.Match[str]) -> str:
        words = fold(m.group(1)).split()
        if len(words) < 8 or re.match(r"\s*\(?[A-J][.):]\s", m.group(1)):
            return m.group(0)  # a short quote, or an option quoted with its letter, is an answer, not the question
        return "the question" if sum(w in q for w in words) >= 0.9 * len(words) else m.group(0)

    return _QUOTED.sub(sub, text)


def presentation(text: str, golds: list[str], kind: str, question: str = "") -> tuple[str, str | None]:
    """``text`` with grammar 5's presentation read (step 1 of the module doc), and why it hedges."""
    if "```" in text:
        text = _pairs(text, "```", "```", _fence).strip()
        if text.count("```") == 1 and text.rstrip().endswith("```"):  # the opening fence was read as the action's
            first, _, rest = text.rstrip()[:-3].partition("\n")
            text = (rest if rest.strip() and first.strip().lower() in _FENCE_TAGS else first + "\n" + rest).strip()
    text = text.replace("`", "") if text.count("`") == 2 and text.strip().startswith("`") else text
    found = _json_answer(text)
    if found is not None:
        if found[1] is not None:
            return found
        text = found[0]
    if "$$" in text:
        text = _pairs(text, "$$", "$$", lambda body: " " + body.strip() + " ").strip()
    if "\\[" in text:
        text = _pairs(text, "\\[", "\\]", lambda body: " " + body.strip() + " ").strip()
    if "~~" in text:
        text = _pairs(text, "~~", "~~", lambda body: "").strip()
    if "|" in text:
        text, hedge = _table(text)
        if hedge is not None:
            return text, hedge
    text = _sources(text, kind)
    text = _explanation(text)
    text = _bullets(text, golds)
    text = _latex_words(text, golds)
    text = _glosses(text)
    text = _quoted_question(text, question)
    return text, None


# ------------------------------------------------------------------ 2. revisions
_REVISION5 = re.compile(
    r"(?i)(?:(?<=[\w?!.)\]*])[ \t]*[.!?…]*[ \t]*\b(?:no|nope|nah)\b(?:[ \t]*[,.!…]+|(?=[ \t]+wait\b))"
    r"|\b(?:i|we)\s+(?:made|make)\s+(?:an?\s+)?(?:\w+\s+)?(?:error|mistake|slip|typo)\b[^.!?\n]{0,40}[.!?]?"
    r"|(?<!\bif\s)(?<!\bcase\s)\b(?:that|this)(?:'s|\s+is|\s+was)\s+(?:wrong|incorrect|not\s+right|a\s+mistake|an\s+error)\b[.!,]?"
    r"|\blet\s+me\s+(?:re-?compute|re-?calculate|redo|re-?do|re-?check|reconsider|try\s+again|re-?count|re-?evaluate)"
    r"\b[^.!?\n]{0,40}?(?:\.{2,}|…|[.!?])?"
    r"|\boops\b[,.!]?|\b(?:sorry|apologies)\b[,.!]?|\bcorrect(?:ed|ion)\b(?=\s*(?:answer|value|result)?\s*[:：])"
    r")"
)
_NOT_LEAD = re.compile(r"(?i)(?:^|(?<=[.!?\n]))[ \t]*not\s+(?!only\b|just\b|sure\b)")
_NOT_SEPARATOR = re.compile(r"\s*(?:[—–;,]|\s-\s|[.!](?=\s))\s*")
_COMMIT5 = re.compile(
    r"(?i)^\s*(?:(?:the\s+)?(?:correct(?:ed)?|right|actual|real|final|true)\s+(?:answer|value|result|option|choice|number)"
    r"\s*(?:is\b|[:：])|(?:it|that|this)\s+(?:comes\s+(?:out\s+)?to|gives|equals)\b)"
)
UNCERTAIN = re.compile(
    r"(?i)\b(?:maybe|possibly|perhaps|might|could\s+(?:also\s+)?be|not\s+(?:sure|certain|100\s*%|confident)|unsure|"
    r"uncertain|hard\s+to\s+(?:say|tell)|can'?t\s+(?:say|tell|be\s+sure)|cannot\s+(?:say|tell|be\s+sure)|"
    r"don'?t\s+know|no\s+idea|i\s+guess|probably|likely)\b|\?"
)


def _commits5(after: str) -> int | None:
    """Where, in the text after a revision cue, the revision commits to a value: the start of the first of
    its first three sentences that commits (grammar 3's rule or "Correct answer: .."), or ``None``."""
    pos = 0
    for _ in range(3):
        rest = after[pos:]
        if not rest.strip():
            return None
        lead = len(rest) - len(rest.lstrip(" \t\n,:;—–.…"))
        if _commits(rest) or _COMMIT5.match(rest[lead:]):
            return pos
        m = re.search(r"(?:[.!?…]+|\n)\s+", rest)
        if m is None:
            return None
        pos += m.end()
    return None


def drop_drafts(text: str, kind: str) -> tuple[str, str | None, bool]:
    """What the last revision commits to (step 2 of the module doc): ``(text, hedge, revised)``."""
    read, revised = _drop_drafts(text)
    cut = len(text) - len(read) if revised and text.endswith(read) else None
    for m in _REVISION5.finditer(text):
        at = _commits5(text[m.end() :])
        if at is not None and (cut is None or m.end() + at > cut):
            cut = m.end() + at
    for m in _NOT_LEAD.finditer(text):  # "Not 34 — it's 33": the first separator followed by a commitment phrase
        for sep in _NOT_SEPARATOR.finditer(text, m.end(), min(len(text), m.end() + 120)):
            if _COMMIT.match(text[sep.end() :]) or _COMMIT5.match(text[sep.end() :]):
                cut = max(cut or 0, sep.end())
                break
    if cut is None:
        return text, None, False
    after = re.sub(r"^[\s,:;—–.…]+|^-+\s+", "", text[cut:]).strip()
    draft = text[:cut]
    if after and UNCERTAIN.search(after):
        earlier = {c for c in _candidates(draft) if _of_kind(c, kind)}
        if earlier - tokens(after):
            return text, "a revision that is itself uncertain keeps the draft alive", True
    return (after, None, True) if after else (text, None, False)


# ------------------------------------------------------------------ 3. rival cues
CUES = re.compile(
    r"(?i)\b(?:would|could|might|may|can|should|will)\s+(?:also\s+)?be\s+(?:also\s+|equally\s+)?"
    r"(?:acceptable|valid|correct|right|fine|ok(?:ay)?|possible|plausible|reasonable|defensible|true)\b"
    r"|\balso\s+(?:be\s+)?(?:acceptable|valid|correct|right|fine|possible|plausible|true|works?|fits?)\b"
    r"|\bvs\.?(?!\w)|\bversus\b|\b(?:less|more|most|least|equally)\s+(?:likely|probable|plausible)\b"
    r"|\b(?:un)?likely\b|\bprobabl[ey]\b|\bnot\s+(?:certain|sure|100\s*%|confident)\b|\bboth\b[^.;\n]{0,60}\b(?:fit|work|apply|match)"
    r"|\bif\s+(?:that'?s|this\s+is|it'?s)\s+(?:wrong|not\s+right|incorrect)\b|\btry\b"
)
_YES = re.compile(r"(?i)(?<![\w'])yes(?![\w'])")
_NO = re.compile(
    r"(?i)(?<![\w'])no(?![\w'])(?!\s+(?:one|longer|more|other|doubt|need|problem|evidence|record|such|less|matter)\b)"
)


def both_polarities(text: str, golds: list[str]) -> bool:
    """Whether an answer to a yes/no question writes both "yes" and "no" as answers (neither is negated
    away: "yes, not no" still names both)."""
    if not any(g.strip().lower().rstrip(".") in ("yes", "no") for g in golds):
        return False
    return bool(_YES.search(text)) and bool(_NO.search(text))


# ------------------------------------------------------------------ frames of common words
_FRAME_VOCABULARY = frozenset(
    """happy glad help helping sure certainly course great good okay ok hi hello here there above below
    information info given based data details context provided shown stated listed facts research looked
    looking up find found finding get gets got getting obtain obtained simplifying simplify simplified
    solving solve solved computing compute computed calculating calculate calculated evaluating evaluate
    working worked out gives give yields yield comes come equals equal final answer result value total
    therefore thus hence so then now which means that is are was were be the a an of to in on at by for with
    as it its this these those we i you our my your me us and from after before all everything
    question asked asks asking request requested above-mentioned following steps step approach reasoning""".split()
)


_MONTH_WORDS = frozenset(
    """january february march april may june july august september october november december jan feb mar apr jun
    jul aug sep sept oct nov dec""".split()
)


def common_frame(text: str, question: str, golds: list[str]) -> bool:
    """Whether every word of ``text`` outside its values is a common word (grammar 3's and 4's frame words and
    :data:`_FRAME_VOCABULARY`), a word of the question or of a gold: only then is ``text`` a frame around
    its value. A word that is none of these ("james madison") may be a candidate of its own."""
    from agentflow_env.scoring.extract import UNITS
    from agentflow_env.scoring.sentence import _FRAME_START5, _FRAME_WORDS
    from agentflow_env.scoring.typed import fold

    known = set(fold(question).split()) | {w for g in golds for w in fold(g).split()} | {u.lower() for u in UNITS}
    known |= _MONTH_WORDS | set(_UNITS_WORDS) | set(_TENS_WORDS) | set(_SCALE_WORDS)
    for word in re.findall(r"[^\W\d_]+(?:['’-][^\W\d_]+)*", text):
        w = fold(word)
        if (
            len(w) > 1
            and w not in known
            and not {w, w.replace("'", "")} & (_COMMON | _FRAME_WORDS | _FRAME_START5 | _FRAME_VOCABULARY)
        ):
            return False
    return True


# ------------------------------------------------------------------ 4. number words
_UNITS_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split()
    )
}
_TENS_WORDS = {w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_SCALE_WORDS = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_NUMBER_WORD = "|".join([*_UNITS_WORDS, *_TENS_WORDS, *_SCALE_WORDS])
_NUMBER_RUN = re.compile(rf"(?i)(?<![\w-])(?:{_NUMBER_WORD})(?:(?:[\s-]+|\s+and\s+)(?:{_NUMBER_WORD}))*(?![\w-])")


def _words_value(run: str) -> int | None:
    total = current = 0
    seen = False
    for word in re.split(r"[\s-]+", run.lower()):
        if word == "and":
            continue
        if word in _UNITS_WORDS:
            current += _UNITS_WORDS[word]
        elif word in _TENS_WORDS:
            current += _TENS_WORDS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word in _SCALE_WORDS:
            total += max(current, 1) * _SCALE_WORDS[word]
            current = 0
        else:
            return None
        seen = True
    return total + current if seen else None


def number_words(text: str) -> str:
    """``text`` with runs of English number words written as digits ("twenty-five" -> "25"); a lone "one"
    inside a longer text stays a word ("the one with ..")."""
    stripped = text.strip()

    def sub(m: re.Match[str]) -> str:
        if m.group(0).lower() in ("one", "zero") and stripped.lower().rstrip(".!") != m.group(0).lower():
            return m.group(0)
        value = _words_value(m.group(0))
        return m.group(0) if value is None else str(value)

    return _NUMBER_RUN.sub(sub, text)


# ------------------------------------------------------------------ the reader
def _both(text: str, golds: list[str]) -> str | None:
    return "it answers both yes and no" if both_polarities(text, golds) else None


# an answer that only negates: "It is not 33.", "Not C.", "It can't be Paris.", "I don't think it's 33.", "33? No."
_NEGATION_LEAD = re.compile(
    r"(?i)^(?:(?:so|thus|hence|therefore|well|hmm|honestly|clearly)\b[\s,]*)?(?:"
    r"(?:it|this|that|the\s+(?:\w+\s+){0,3}(?:answer|result|value|option|choice|number|date|name|one))"
    r"(?:['’]s|\s+(?:is|was|would\s+be|will\s+be|should\s+be|must\s+be|can\s+be|could\s+be))\s+not"
    r"|(?:it|this|that|the\s+answer)\s+(?:is|was|ca|could|wo|should|must|does|did)n['’]t(?:\s+be)?"
    r"|(?:it|this|that|the\s+answer)\s+(?:cannot|can\s+not)(?:\s+be)?"
    r"|i\s+(?:don['’]t|do\s+not)\s+(?:think|believe)(?:\s+(?:that\s+)?(?:it['’]s|it\s+is|the\s+answer\s+is))?"
    r"|i\s+doubt(?:\s+(?:that\s+)?(?:it['’]s|it\s+is|the\s+answer\s+is))?"
    r"|(?:(?:definitely|certainly|surely|clearly|probably|absolutely)\s+)?not)\b"
)
_NEGATION_TAIL = re.compile(
    r"(?i)\b(?:that|only|just|merely|but|rather|instead|unless|until|because|more|less|exactly|un\w+)\b|[,;—–\n]|\s-\s"
)
_QUESTIONED_THEN_NO = re.compile(r"(?i)^[^?\n]{1,120}\?\s*(?:no|nope)\s*[.!]*\s*$")
_NEGATIVE_GOLD = re.compile(r"(?i)\b(?:not|no|never|none|nothing)\b|n['’]t\b")


def negated_only(text: str, golds: list[str]) -> bool:
    """Whether the answer only denies a value ("It is not 33.", "Not C.", "33? No."): one clause that opens
    with a negation and commits to nothing else. Such an answer names no value as its answer, so it is no
    reading, whatever it denies (an answer that denies a value and states another, "It's 33, not 34",
    "Not 34 — it's 33", is read as before). Golds that are themselves negative ("not guilty") or a yes/no
    answer ("It is not." answers "no") are left to the other rules."""
    stripped = text.strip()
    if not stripped or any(_NEGATIVE_GOLD.search(g) or g.strip().lower().rstrip(".") == "yes" for g in golds):
        return False
    if _QUESTIONED_THEN_NO.match(stripped):
        return True
    lead = _NEGATION_LEAD.match(stripped)
    if lead is None:
        return False
    rest = stripped[lead.end() :].rstrip(" .!")
    return bool(rest) and len(rest.split()) <= 8 and _NEGATION_TAIL.search(rest) is None


def read_answer(prediction: object, golds: Iterable[object] = (), kind: str = "text", question: str = "") -> Reading:
    """The final answer ``prediction`` read by grammar 5: grammar 4's reader
    (:func:`agentflow_env.scoring.grammar.read_answer`) with this module's steps (see the module doc), then
    :func:`negated_only`."""
    steps = LaterSteps(presentation=presentation, drop_drafts=drop_drafts, both=_both, cues=CUES)
    reading = _read(prediction, golds, kind, 5, question, steps)
    gold_list = [str(g) for g in golds if g is not None and str(g).strip()]
    if reading.hedge is None and negated_only(reading.text, gold_list):
        return Reading(reading.text, "it only denies a value: it commits to none", reading.revised)
    return reading
