"""A Gymnasium ``Text`` space that accepts any Unicode text (the default charset is alphanumeric)."""

from __future__ import annotations

import copy
from typing import Any

from gymnasium import spaces

# What ``sample()`` draws from: printable ASCII plus a few characters the envs really produce.
_SAMPLE_CHARSET = "".join(chr(c) for c in range(32, 127)) + "\n\t×÷−π≈…é中"

MAX_TEXT = 1_000_000


class UnicodeText(spaces.Text):
    """Any ``str`` up to ``max_length`` characters is a member; samples are short and printable."""

    def __init__(
        self, max_length: int = MAX_TEXT, *, min_length: int = 0, seed: Any = None, sample_max_length: int = 256
    ):
        super().__init__(max_length=max_length, min_length=min_length, charset=_SAMPLE_CHARSET, seed=seed)
        self.sample_max_length = min(sample_max_length, max_length)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        length = int(self.np_random.integers(self.min_length, self.sample_max_length + 1))
        chars = self.np_random.choice(len(self.character_list), size=length)
        return "".join(self.character_list[i] for i in chars)

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, UnicodeText) and (self.min_length, self.max_length) == (
            other.min_length,
            other.max_length,
        )

    __hash__ = None  # type: ignore[assignment]


def observation_space() -> spaces.Dict:
    return spaces.Dict({key: text_space() for key in ("question", "memory", "tools", "prompt")})


_PROTOTYPE: UnicodeText | None = None


def text_space() -> UnicodeText:
    """A new unseeded ``UnicodeText()``: a copy of one made once, its own generator unmade (``Text`` builds its
    charset tables in ``__init__``, a tenth of a millisecond each, five per env built)."""
    global _PROTOTYPE
    if _PROTOTYPE is None:
        _PROTOTYPE = UnicodeText()
    space = copy.copy(_PROTOTYPE)
    space._np_random = None  # type: ignore[assignment]  # as Space.__init__ leaves it unseeded: made on first use
    return space
