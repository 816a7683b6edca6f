"""The BM25 tokenizer: lowercase words, stopwords dropped, plural endings folded."""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "tokenize"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Common English function words: they match nearly every passage and only add noise to BM25.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
    off on once only or other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves""".split()
)


def _light_stem(word: str) -> str:
    """Fold the commonest English plural endings so ``cities``/``city`` and ``boxes``/``box`` match."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


class _Tokenizer:
    """Lowercase words (letters and digits), stopwords dropped, plurals folded; memoised per word."""

    def __init__(self, stopwords: bool = True, stem: bool = True, cache_size: int = 2_000_000):
        self.stopwords = stopwords
        self.stem = stem
        self.cache_size = cache_size
        self._cache: dict[str, str | None] = {}

    def _norm(self, word: str) -> str | None:
        if self.stopwords and word in STOPWORDS:
            return None
        return _light_stem(word) if self.stem else word

    def __call__(self, text: str) -> list[str]:
        cache = self._cache
        out = []
        for word in _WORD.findall(text.lower()):
            tok = cache.get(word, "")
            if tok == "":
                tok = self._norm(word)
                if len(cache) < self.cache_size:  # bound the memo on huge corpora
                    cache[word] = tok
            if tok is not None:
                out.append(tok)
        return out


_DEFAULT_TOKENIZER = _Tokenizer()


def tokenize(text: str, *, stopwords: bool = True, stem: bool = True) -> list[str]:
    """The tokens BM25 indexes: lowercase words, stopwords dropped, plural endings folded."""
    if stopwords and stem:
        return _DEFAULT_TOKENIZER(text)
    return _Tokenizer(stopwords, stem)(text)
