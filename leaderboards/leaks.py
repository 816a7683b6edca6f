"""The leak meter of search benchmarks: per episode, whether a retrieved passage holds the gold answer and whether
a search query copies the question; per run, the rates of both.

A high "gold retrieved" rate with a low score says the reader fails; a high "query copies question" rate says
the planner pastes the question instead of searching for what it needs (and, on corpora built from the
benchmarks, can find the answer by string match). Neither changes a score: they sit beside it on the board.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["COPY_THRESHOLD", "episode_leaks", "leak_rates", "normalize"]

#: a query copies the question when it holds at least this share of the question's words (4 words or more)
COPY_THRESHOLD = 0.8
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans(dict.fromkeys(string.punctuation, " "))
_SEARCH_TOOL = re.compile(r"search|wikipedia|retriev", re.IGNORECASE)


def normalize(text: Any) -> str:
    """Lowercase, punctuation and articles dropped, spaces folded (SQuAD's answer normalisation)."""
    return " ".join(_ARTICLES.sub(" ", str(text).lower().translate(_PUNCT)).split())


def _golds(gold: Any) -> list[str]:
    items = gold if isinstance(gold, (list, tuple)) else [gold]
    return [g for g in (normalize(x) for x in items if x is not None) if g]


def _searches(memory_steps: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for step in memory_steps or []:
        tool = str(step.get("tool") or step.get("tool_name") or "")
        if _SEARCH_TOOL.search(tool):
            out.append((str(step.get("command") or ""), str(step.get("result") or "")))
    return out


def copies_question(query: str, question: str) -> bool:
    """Whether ``query`` holds at least :data:`COPY_THRESHOLD` of the (4+) words of ``question``."""
    q_words = normalize(question).split()
    if len(q_words) < 4:
        return normalize(question) in normalize(query)
    have = set(normalize(query).split())
    return sum(w in have for w in q_words) / len(q_words) >= COPY_THRESHOLD


def episode_leaks(question: Any, gold: Any, memory_steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{"searches", "gold_retrieved", "query_copies_question"}`` of one episode (from its memory steps)."""
    searches = _searches(memory_steps)
    golds = _golds(gold)
    found = False
    for _, result in searches:
        text = f" {normalize(result)} "
        if any(f" {g} " in text for g in golds):
            found = True
            break
    copied = bool(question) and any(copies_question(query, str(question)) for query, _ in searches)
    return {"searches": len(searches), "gold_retrieved": found, "query_copies_question": copied}


def leak_rates(outcomes: Iterable[Any]) -> dict[str, Any] | None:
    """The share of search episodes whose passages held the gold, and whose queries copied the question."""
    leaks = [getattr(o, "leak", None) if not isinstance(o, dict) else o.get("leak") for o in outcomes]
    leaks = [x for x in leaks if isinstance(x, dict)]
    if not leaks:
        return None
    n = len(leaks)
    return {
        "episodes": n,
        "gold_retrieved": sum(bool(x.get("gold_retrieved")) for x in leaks) / n,
        "query_copies_question": sum(bool(x.get("query_copies_question")) for x in leaks) / n,
    }
