"""Words and tokens of an answer around a position, read in time linear in the answer.

The answer grammar's rival step (:func:`agentflow_env.scoring.grammar.rival_clause`) asks, at every clause, which
tokens the answer named before it, and at every rival cue, which words stand next to the cue. Read from the whole
prefix each time, an answer of many clauses or many cues took time quadratic in its length. Here the tokens come
from one index of the answer (:class:`TokensBefore`) and a cue's neighbours from a window that grows only as far as
the neighbouring word (:func:`word_before`, :func:`word_after`); each gives exactly what reading the whole prefix or
suffix gives (``tests/env/scoring/test_fast_paths.py`` compares them).
"""

from __future__ import annotations

import bisect
import re

__all__ = ["TOKEN_EDGES", "WORD", "TokensBefore", "capital", "token", "tokens", "word_after", "word_before"]

TOKEN_EDGES = ".,;:!?\"'“”‘’()[]{}*_`$"  # taken off a whitespace-separated token's ends
WORD = re.compile(r"[\w']+")
_RAW_TOKEN = re.compile(r"\S+")  # what str.split() splits out (both read whitespace as str.isspace does)
# Σ is the one letter whose lower case depends on its neighbours (final sigma): a window holding one is read whole
_SIGMA = "\u03a3"


def capital(token: str) -> bool:
    """Whether ``token`` is one ASCII capital letter (an option)."""
    return len(token) == 1 and "A" <= token <= "Z"


def token(raw: str) -> str | None:
    """A whitespace-separated piece of text as a token: its edges taken off, lower case unless it is an option
    letter; ``None`` when nothing is left."""
    stripped = raw.strip(TOKEN_EDGES)
    if not stripped:
        return None
    return stripped if capital(stripped) else stripped.lower()


def tokens(text: str) -> set[str]:
    """Every token of ``text`` (:func:`token`)."""
    out = set()
    for raw in text.split():
        stripped = raw.strip(TOKEN_EDGES)
        if stripped:
            out.add(stripped if capital(stripped) else stripped.lower())
    return out


class TokensBefore:
    """Which tokens a text names before a position, from one pass over the text: ``named_before(t, i)`` is
    ``t in tokens(text[:i])``, without reading ``text[:i]`` again for every ``i``."""

    def __init__(self, text: str):
        self.text = text
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.first_end: dict[str, int] = {}  # a token -> where the first raw token that gives it ends
        for m in _RAW_TOKEN.finditer(text):
            self.starts.append(m.start())
            self.ends.append(m.end())
            found = token(m.group(0))
            if found is not None:
                self.first_end.setdefault(found, m.end())

    def named_before(self, wanted: str, position: int) -> bool:
        end = self.first_end.get(wanted)
        if end is not None and end <= position:
            return True
        i = bisect.bisect_right(self.starts, position - 1) - 1  # the raw token that ``position`` may cut
        if i < 0 or self.ends[i] <= position:
            return False
        return token(self.text[self.starts[i] : position]) == wanted


def word_before(text: str, end: int) -> list[str]:
    """``WORD.findall(text[:end].lower())[-1:]``: the last word before ``end``, read from a window that grows back
    only as far as that word."""
    size = 64
    while True:
        start = max(0, end - size)
        window = text[start:end]
        if _SIGMA in window:
            return WORD.findall(text[:end].lower())[-1:]
        words = list(WORD.finditer(window.lower()))
        last = words[-1] if words else None
        if start == 0 or (last is not None and last.start() > 0):  # a whole word: a non-word character before it
            return [last.group(0)] if last is not None else []
        size *= 2


def word_after(text: str, start: int) -> list[str]:
    """``WORD.findall(text[start:].lower())[:1]``: the first word from ``start``, read from a window that grows only
    as far as that word."""
    size = 64
    while True:
        end = min(len(text), start + size)
        window = text[start:end]
        if _SIGMA in window:
            return WORD.findall(text[start:].lower())[:1]
        lowered = window.lower()
        first = WORD.search(lowered)
        if end == len(text) or (first is not None and first.end() < len(lowered)):  # a non-word character after it
            return [first.group(0)] if first is not None else []
        size *= 2
