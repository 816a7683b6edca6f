"""A long pattern behind a short cue: the pattern runs only where its cue occurs.

Some of the grammars' patterns try an open-ended value at every position of the text ("35, corrected to 33" starts
with the value, so the engine attempts each token), or try a hundred case-insensitive words at every position (the
retraction markers), which costs tenths of a millisecond per answer. Each such pattern has words it cannot match
without ("corrected", "scratch", "("): :class:`Cued` searches for those first and answers as the pattern would,
without running it, where none occurs. The cue must be a necessary condition of the pattern (every match of the
pattern holds a match of the cue); the tests check that on the pattern's own cases and on random text.

A cue may be written in lower case and without ``(?i)`` (``lowered=True``): it then runs on :func:`lowered` text,
where every branch can start with a literal letter, so the engine skips ahead to the letters that can start one
instead of trying each branch at each position.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

__all__ = ["Cued", "lowered"]

# The characters a case-insensitive pattern matches to an ASCII letter whose ``str.lower()`` is not that letter:
# dotted and dotless I ("İ".lower() is two characters), the long s and the Kelvin sign
_AS_PATTERNS_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def lowered(text: str) -> str:
    """``text`` in lower case as a case-insensitive pattern reads it, one character for each of ``text``'s (so a
    position in one is the same position in the other)."""
    if not text.isascii() and any(ch in text for ch in "\u0130\u0131\u017f\u212a"):
        text = text.translate(_AS_PATTERNS_FOLD)
    return text.lower()


class Cued:
    """``pattern``'s ``search``, ``finditer``, ``sub`` and ``split``, run only where ``cue`` finds something (in the
    :func:`lowered` text when ``lowered``)."""

    __slots__ = ("cue", "lowered", "pattern")

    def __init__(self, pattern: re.Pattern[str], cue: re.Pattern[str], *, lowered: bool = False) -> None:
        if lowered and cue.flags & re.IGNORECASE:
            raise ValueError("a lowered cue is written in lower case, without (?i)")
        self.pattern = pattern
        self.cue = cue
        self.lowered = lowered

    def cued(self, text: str, pos: int = 0) -> bool:
        """Whether the cue occurs in ``text`` (from ``pos``): where it does not, the pattern cannot match."""
        return self.cue.search(lowered(text) if self.lowered else text, pos) is not None

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.pattern.search(text, pos) if self.cued(text, pos) else None

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.pattern.finditer(text) if self.cued(text) else iter(())

    def sub(self, repl: str | Callable[[re.Match[str]], str], text: str) -> str:
        return self.pattern.sub(repl, text) if self.cued(text) else text

    def split(self, text: str) -> list[str]:
        return self.pattern.split(text) if self.cued(text) else [text]
