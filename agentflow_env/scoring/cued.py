"""A long pattern behind a short cue: the pattern runs only where its cue occurs.

Some of the grammars' patterns try an open-ended value at every position of the text ("35, corrected to 33" starts
with the value, so the engine attempts each token), which costs tenths of a millisecond per answer. Each such
pattern has words it cannot match without ("corrected", "scratch", "("): :class:`Cued` searches for those first
and answers as the pattern would, without running it, where none occurs. The cue must be a necessary condition of
the pattern (every match of the pattern holds a match of the cue); the tests check that on the pattern's own cases
and on random text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

__all__ = ["Cued"]


class Cued:
    """``pattern``'s ``search``, ``finditer`` and ``sub``, run only where ``cue`` finds something."""

    __slots__ = ("cue", "pattern")

    def __init__(self, pattern: re.Pattern[str], cue: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.cue = cue

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.pattern.search(text, pos) if self.cue.search(text, pos) else None

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.pattern.finditer(text) if self.cue.search(text) else iter(())

    def sub(self, repl: str | Callable[[re.Match[str]], str], text: str) -> str:
        return self.pattern.sub(repl, text) if self.cue.search(text) else text
