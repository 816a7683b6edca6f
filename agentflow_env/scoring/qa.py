"""Short-answer QA scoring: HotpotQA's answer normalisation, exact match, token F1, and GAIA's quasi-exact match.

Gold answers may be one string or a list of aliases; the score is the best over the aliases. Before any
metric, :class:`QAScorer` applies the single-commitment rule (:mod:`agentflow_env.scoring.commitment`): an
answer that names more than one candidate scores 0 under every metric.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.scoring.commitment import FILLER_WORDS, Commitment, read_commitment
from agentflow_env.scoring.extract import number_with_unit, same_unit
from agentflow_env.types import Task

__all__ = [
    "QAScorer",
    "cover_match",
    "exact_match",
    "gaia_match",
    "gold_aliases",
    "normalize_answer",
    "token_f1",
    "unwrap_answer",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.DOTALL | re.IGNORECASE)
_FINAL_PREFIX = re.compile(r"^\s*[*_]*\s*(?:final\s+answer|answer)\s*[*_]*\s*[:：]\s*[*_]*\s*", re.IGNORECASE)


def unwrap_answer(text: Any) -> str:
    """The answer inside the usual wrappers: ``<answer>..</answer>``, ``\\boxed{..}``, ``Final Answer:``."""
    text = "" if text is None else str(text)
    tags = _ANSWER_TAG.findall(text)
    if tags:
        text = tags[-1]
    boxed = _last_boxed(text)
    if boxed is not None:
        text = boxed
    text = _FINAL_PREFIX.sub("", text.strip())
    return text.strip()


def _last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}``, with nested braces balanced."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def normalize_answer(text: str) -> str:
    """HotpotQA's normalisation: lower-case, drop punctuation, drop articles a/an/the, collapse spaces."""
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def gold_aliases(answer: Any) -> list[str]:
    """A gold answer as a list of alias strings (a string, a number, or a list of either)."""
    if answer is None:
        return []
    if isinstance(answer, (list, tuple, set)):
        return [str(a) for a in answer if a is not None and str(a).strip()]
    return [str(answer)] if str(answer).strip() else []


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """HotpotQA's token F1; yes/no/noanswer must match exactly (partial credit would be meaningless)."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    special = ("yes", "no", "noanswer")
    if (pred in special or ref in special) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def cover_match(prediction: str, gold: str) -> float:
    """1 when the normalised gold appears as a whole-word span of the normalised prediction and every other
    word is a filler ("it was James Madison, I think"): naming other words beside the gold is not covered."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if not ref or f" {ref} " not in f" {pred} ":
        return 0.0
    rest = f" {pred} ".replace(f" {ref} ", " ", 1).split()
    return float(all(word in FILLER_WORDS for word in rest))


# ---------------------------------------------------------------- GAIA's quasi-exact match
_NUM_STRIP = str.maketrans("", "", "$% ")
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def _as_number(text: str) -> float | None:
    """A number with ``$``, ``%``, spaces and thousands commas ignored (``1, 2`` is not ``12``)."""
    try:
        return float(_THOUSANDS_COMMA.sub("", text.strip()).translate(_NUM_STRIP))
    except ValueError:
        return None


_NUMBER_RE = re.compile(r"\$?\s*-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\s*%?|\$?\s*-?\.\d+\s*%?")


def _gold_number(text: str) -> float | None:
    """A gold answer that is one number (``1,000`` with thousands commas counts; ``3, 4`` is a list)."""
    try:
        return float(text)
    except ValueError:
        pass
    return _as_number(text) if _NUMBER_RE.fullmatch(text.strip()) else None


def _gaia_text(text: str) -> str:
    return "".join(ch for ch in text.lower() if not ch.isspace() and ch not in _PUNCT)


def _split_list(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"[,;]", text)]


def gaia_match(prediction: str, gold: str) -> float:
    """GAIA's rule: numbers compare as numbers (ignoring ``$ % ,``), comma/semicolon lists element by
    element, anything else as lower-case text without spaces and punctuation."""
    prediction, gold = str(prediction).strip(), str(gold).strip()
    gold_number = _gold_number(gold)
    if gold_number is not None:
        value = _as_number(prediction)
        return float(value is not None and abs(value - gold_number) < 1e-9)
    if re.search(r"[,;]", gold):
        golds, preds = _split_list(gold), _split_list(prediction)
        if len(golds) != len(preds):
            return 0.0
        for g, p in zip(golds, preds):
            g_num = _as_number(g)
            if g_num is not None:
                p_num = _as_number(p)
                if p_num is None or abs(p_num - g_num) > 1e-9:
                    return 0.0
            elif _gaia_text(g) != _gaia_text(p):
                return 0.0
        return 1.0
    return float(_gaia_text(prediction) == _gaia_text(gold))


_METRICS = {"em": exact_match, "f1": token_f1, "cover": cover_match, "gaia": gaia_match}


def same_number(prediction: str, gold: str) -> bool:
    """Both are one number (units, thousands separators, scientific notation aside) with equal values and
    compatible units (``22 cm^2`` = ``22``; ``5 km`` != ``5 miles``)."""
    g = number_with_unit(gold)
    if g is None:
        return False
    p = number_with_unit(prediction)
    return p is not None and p[0] == g[0] and same_unit(p[1], g[1])


def best_over(prediction: str, golds: Iterable[str], metric: str = "em") -> float:
    fn = _METRICS[metric]
    golds = list(golds)
    if any(same_number(prediction, g) for g in golds):
        return 1.0
    return max((fn(prediction, g) for g in golds), default=0.0)


def _compared_text(committed: Commitment, golds: Sequence[str]) -> str:
    """The committed text, or its last ``=`` side (``x = 204``) when every gold is one number."""
    if golds and all(number_with_unit(g.strip()) is not None for g in golds):
        return committed.value
    return committed.text


class QAScorer:
    """Scorer for short answers: ``metric`` is ``em`` (default), ``f1``, ``cover`` or ``gaia``.

    The prediction is unwrapped first (``<answer>`` tags, ``\\boxed{}``, a ``Final Answer:`` prefix), and
    scores 0 under every metric when it commits to more than one candidate (see
    :mod:`agentflow_env.scoring.commitment`).
    """

    def __init__(self, metric: str = "em"):
        if metric not in _METRICS:
            raise ConfigError(f"metric={metric!r}; choose one of {', '.join(_METRICS)}")
        self.metric = metric

    def __call__(self, prediction: str, task: Task) -> float:
        golds = gold_aliases(task.answer)
        committed = read_commitment(prediction, golds, task.question)
        if committed.hedge is not None:
            return 0.0
        return best_over(_compared_text(committed, golds), golds, self.metric)

    def details(self, prediction: str, task: Task) -> dict[str, float]:
        """Every metric at once (for evaluation tables)."""
        golds = gold_aliases(task.answer)
        committed = read_commitment(prediction, golds, task.question)
        if committed.hedge is not None:
            return dict.fromkeys(_METRICS, 0.0)
        pred = _compared_text(committed, golds)
        return {name: best_over(pred, golds, name) for name in _METRICS}

    def __repr__(self) -> str:
        return f"QAScorer(metric={self.metric!r})"
