"""Multiple-choice scoring (GPQA, MedQA): find the chosen option letter in free text and compare it.

Accepts ``B``, ``(B)``, ``Answer: B``, ``B. 0.7``, ``**B**``, ``\\boxed{B}`` and the option's own text.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from agentflow_env.scoring.qa import normalize_answer, unwrap_answer
from agentflow_env.types import Task

__all__ = ["ChoiceScorer", "extract_choice", "option_letters", "render_options"]


def option_letters(n: int) -> str:
    return string.ascii_uppercase[:n]


def render_options(options: Sequence[str]) -> str:
    """``A. text`` lines, one per option."""
    return "\n".join(f"{letter}. {text}" for letter, text in zip(option_letters(len(options)), options))


_EMPHASIS = re.compile(r"[*_`]+")
# "answer is (B)", "Answer: B", "correct option - B", "choice B"
_ANCHORED = re.compile(
    r"(?i:answer|option|choice)\s*(?i:is|would\s+be|:|-|=)?\s*(?i:option|choice|letter)?\s*[:\-]?\s*"
    r"[\(\[]?([A-Z])[\)\]]?(?![A-Za-z0-9])"
)
# the whole answer is a letter: "B", "(B)", "B.", "[B]"
_ONLY = re.compile(r"[\(\[]?([A-Za-z])[\)\]]?[.:)]?")
# leading letter followed by the option text: "B. 0.7", "(B) 0.7", "B) 0.7", "B: 0.7"
_LEADING = re.compile(r"[\(\[]?([A-Z])(?:[\)\]][.:]?|[.:)])\s+\S")


def extract_choice(prediction: str, options: Sequence[str]) -> str | None:
    """The letter the prediction picks among ``options`` (texts without letters), or ``None``.

    Order of evidence: the whole answer is a letter; a leading ``B.``-style letter; an explicit
    ``answer is B``; the text of exactly one option.
    """
    letters = option_letters(len(options))
    raw = unwrap_answer(prediction)
    text = _EMPHASIS.sub("", raw).strip()
    if not text:
        return None
    m = _ONLY.fullmatch(text)
    if m and m.group(1).upper() in letters:
        return m.group(1).upper()
    m = _LEADING.match(text)
    if m and m.group(1) in letters:
        return m.group(1)
    anchored = [g.upper() for g in _ANCHORED.findall(text) if g.upper() in letters]
    if anchored:
        return anchored[-1]
    return _match_option_text(raw, options) or _match_option_text(text, options)


def _squeeze(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


def _match_option_text(text: str, options: Sequence[str]) -> str | None:
    # verbatim first: normalisation drops signs and symbols that tell some options apart (-12 vs 12)
    verbatim = [i for i, o in enumerate(options) if _squeeze(o) == _squeeze(text)]
    if len(verbatim) == 1:
        return option_letters(len(options))[verbatim[0]]
    pred = normalize_answer(text)
    if not pred:
        return None
    normed = [normalize_answer(o) for o in options]
    exact = [i for i, o in enumerate(normed) if o and o == pred]
    if len(exact) == 1:
        return option_letters(len(options))[exact[0]]
    # the prediction quotes exactly one option (longest wins when one option contains another)
    inside = [i for i, o in enumerate(normed) if o and f" {o} " in f" {pred} "]
    inside = [i for i in inside if not any(i != j and normed[i] in normed[j] for j in inside)]
    if len(inside) == 1:
        return option_letters(len(options))[inside[0]]
    return None


class ChoiceScorer:
    """1.0 when the extracted letter equals ``task.answer`` (a letter); options come from
    ``task.metadata['options']`` (texts, in the order shown to the planner)."""

    def __call__(self, prediction: str, task: Task) -> float:
        options = list(task.metadata.get("options") or [])
        if not options:
            raise KeyError(f"task {task.id} has no metadata['options'] for multiple-choice scoring")
        letter = extract_choice(prediction, options)
        return 1.0 if letter is not None and letter == str(task.answer).strip().upper() else 0.0

    def __repr__(self) -> str:
        return "ChoiceScorer()"
