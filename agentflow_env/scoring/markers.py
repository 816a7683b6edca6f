"""Text, numbers and alternative markers shared by the span reader and the single-commitment rule.

:mod:`agentflow_env.scoring.extract` (where the answer span is) and :mod:`agentflow_env.scoring.commitment`
(whether the span commits to one candidate) both need the same three things, so they live here and both
modules import them (neither imports the other's internals: no import circle):

- :func:`normalize_text`: Unicode digits and full-width forms as ASCII, no invisible format characters;
- numbers: :func:`number_value` (one number token, fractions and ``\\frac`` included) and :func:`value_of`
  (an arithmetic expression or one number);
- alternative markers: :func:`alternative_marker` (``or``, ``either``, ``±``, ranges, comparisons,
  disjunctions, look-alike letters read as Latin), with the gold masked first (:func:`mask_gold`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

from agentflow_env.scoring.arith import ArithmeticError_, evaluate

__all__ = ["GOLD_MARK", "alternative_marker", "gold_pattern", "mask_gold", "normalize_text", "number_value", "value_of"]

GOLD_MARK = "\x00"  # placeholder for a masked gold span (stripped from inputs first)
_GOLD = GOLD_MARK


# ------------------------------------------------------------------ characters
def _char_map() -> dict[int, str]:
    table: dict[int, str] = {}
    for code in range(0x80, 0x10000):
        ch = chr(code)
        if unicodedata.category(ch) == "Nd":
            table[code] = str(unicodedata.decimal(ch))
    for code in range(0xFF01, 0xFF5F):  # full-width ASCII
        table[code] = chr(code - 0xFEE0)
    table.update({0x2212: "-", 0x3000: " ", 0x00A0: " ", 0x3001: ",", 0xFF0C: ",", 0xFF1B: ";"})
    return table


_CHARS = _char_map()


def normalize_text(text: object) -> str:
    """Unicode digits and full-width forms as ASCII, no invisible format characters, no NUL."""
    text = "" if text is None else str(text)
    if text.isascii():  # the map's keys and every format character are outside ASCII
        return text.replace(_GOLD, " ")
    text = text.translate(_CHARS).replace(_GOLD, " ")
    hidden = {ch for ch in set(text) if unicodedata.category(ch) == "Cf"}
    return "".join(ch for ch in text if ch not in hidden) if hidden else text


# look-alike letters (Cyrillic, Greek) read as Latin when looking for alternative markers ("оr")
_CONFUSABLES = str.maketrans(
    {
        "о": "o",
        "О": "O",
        "р": "p",
        "Р": "P",
        "а": "a",
        "е": "e",
        "Е": "E",
        "с": "c",
        "С": "C",
        "х": "x",
        "у": "y",
        "і": "i",
        "ѕ": "s",
        "ο": "o",
        "Ο": "O",
        "ν": "v",
        "κ": "k",
        "ԁ": "d",
        "һ": "h",
        "ӏ": "l",
        "ք": "p",
        "ɑ": "a",
        "ᴏ": "o",
        "ʀ": "r",
        "г": "r",
    }
)


# ------------------------------------------------------------------ numbers
_NUM_TOKEN = re.compile(
    r"\\d?frac\{\s*(-?\d+(?:\.\d+)?)\s*\}\{\s*(-?\d+(?:\.\d+)?)\s*\}"
    r"|(?<![\d.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?"
    r"|(?<![\d])-?\.\d+"
)
_BARE_NUMBER = re.compile(
    r"[$€£]?\s*(?:\\d?frac\{-?\d+(?:\.\d+)?\}\{-?\d+(?:\.\d+)?\}"
    r"|-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+(?:\.\d+)?)?|-?\.\d+)(?:st|nd|rd|th|%|\\%)?"
)


def number_value(token: str) -> Fraction | None:
    """The value of one number token (``1,000``, ``-2.5``, ``7/3``, ``\\frac{7}{3}``, ``20th``, ``17%``)."""
    m = _NUM_TOKEN.search(token)
    if m is None:
        return None
    try:
        if m.group(1) is not None:
            return Fraction(m.group(1)) / Fraction(m.group(2))
        return Fraction(m.group(0).replace(",", "").replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        return None


_EDGE_PUNCT = ".,;:!?\"'`*$"


def value_of(text: str) -> Fraction | None:
    """The value of an arithmetic expression or one number, or ``None``."""
    return _value_of(text)


def _value_of(text: str) -> Fraction | None:
    try:
        return evaluate(text.strip().strip(_EDGE_PUNCT))
    except (ArithmeticError_, ValueError, ZeroDivisionError, TypeError):
        return number_value(text) if _BARE_NUMBER.fullmatch(text.strip().strip(_EDGE_PUNCT)) else None


# ------------------------------------------------------------------ alternative markers
@lru_cache(maxsize=1024)
def gold_pattern(gold: str) -> re.Pattern[str] | None:
    gold = gold.strip().rstrip(".").strip()
    if not gold:
        return None
    body = r"\s*".join(re.escape(tok) for tok in gold.split())
    left = r"(?<![\w.])" if gold[0].isalnum() else ""
    right = r"(?![\w]|[.,]\d)" if gold[-1].isalnum() else ""
    return re.compile(left + body + right, re.IGNORECASE)


def mask_gold(text: str, golds: Sequence[str]) -> str:
    for gold in sorted(golds, key=len, reverse=True):
        pattern = gold_pattern(gold)
        if pattern is not None:
            text = pattern.sub(f" {_GOLD} ", text)
    return text


_N = r"(?<![\d.])-?\d+(?:\.\d+)?"  # starts where a number starts: linear time on long digit runs
_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("or", r"\bor\b"),
        ("either", r"\beither\b"),
        ("nor", r"\bnor\b"),
        ("versus", r"\bvs\b\.?|\bversus\b"),
        ("alternatively", r"\balternative(?:ly)?\b|\botherwise\b"),
        ("plus-minus", r"±|∓|\\pm\b|\\mp\b|\+\s*/\s*-|-\s*/\s*\+|\+\s*-(?=\s*\d)|\bplus\s+minus\b"),
        ("range", rf"{_N}\s*(?:[–—~]|\.\.\.?|…)\s*{_N}|{_N}\s*(?:to|through|thru|until|till)\s+{_N}"),
        (
            "comparison",
            r"<=|>=|(?<![-=<>])[<>](?![-=<>])|[≤≥≠≲≳≪≫]|\\(?:le|ge|leq|geq|lt|gt|neq|ne|leqslant|geqslant)\b",
        ),
        ("comparison", r"\b(?:at\s+(?:least|most)|(?:less|more|greater|fewer)\s+than|up\s+to|no\s+more)\b"),
        (
            "disjunction",
            r"∨|\\lor(?![A-Za-z])|\\vee(?![A-Za-z])|\\cup(?![A-Za-z])|∪|\|\||‖|\\\||\\Vert\b|\\parallel\b|⋁",
        ),
        (
            "alternatives",
            r"(?<=[\w}.)\]])\s*\|\s*(?=[-\w\\{(\[$])|\bou\b|\boder\b|\bo\b(?=\s*[-\d\\$])|\bodér\b|\bili\b|\bили\b|\bאו\b|\boppure\b|\bof\b(?=\s*[-\d\\$])",
        ),
    )
)


_BETWEEN = re.compile(r"\bbetween\b", re.IGNORECASE)
_AND = re.compile(r"\band\b", re.IGNORECASE)


def _between_and(text: str) -> bool:
    """ "between .. and" on one line (one scan per line, not one per "between")."""
    for line in text.splitlines():
        m = _BETWEEN.search(line)
        if m and _AND.search(line, m.end()):
            return True
    return False


def alternative_marker(text: str, golds: Sequence[str] = ()) -> str | None:
    """The first alternative marker (``or``, ``±``, a range, a comparison, ...) in ``text`` that no gold
    contains, or ``None``."""
    masked = mask_gold(normalize_text(text), golds).translate(_CONFUSABLES)
    gold_texts = [normalize_text(g).translate(_CONFUSABLES) for g in golds]
    for name, pattern in _MARKERS:
        if pattern.search(masked) and not any(pattern.search(g) for g in gold_texts):
            return name
    if _between_and(masked) and not any(_between_and(g) for g in gold_texts):
        return "between"
    return None
