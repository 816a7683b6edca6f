"""Scorers by answer-grammar version: the ``-v3`` env ids read answers with grammar 3, older ids with grammar 2.

Grammar 2 is the span reader every scorer already applies (:mod:`agentflow_env.scoring.extract` and the
single-commitment rule); its verdicts are what ``-v2`` results were measured with, so they stay as they are.
Grammar 3 (:mod:`agentflow_env.scoring.grammar`) reads the final answer first, then hands what it read to
the same scorer:

- an answer whose remark names a rival scores 0 without reaching the scorer;
- otherwise the scorer scores the read text (presentation stripped, drafts dropped);
- for short-answer golds (not options, not Game of 24), a committed span that the scorer's metric did not
  match is compared by the gold's type (:mod:`agentflow_env.scoring.typed`: dates, names, lists, numbers
  with units), and only when the span reader finds no hedge in it.

The LLM judge is wrapped the same way, so it is asked about the same text and never about a hedge.
"""

from __future__ import annotations

import re
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.scoring.base import Scorer
from agentflow_env.scoring.choice import letter_names_another_option
from agentflow_env.scoring.grammar import read_answer, remark_cue
from agentflow_env.scoring.grammar5 import read_answer as read_answer5
from agentflow_env.scoring.grammar6 import read_answer as read_answer6
from agentflow_env.scoring.grammar7 import only_value
from agentflow_env.scoring.grammar7 import read_answer as read_answer7
from agentflow_env.scoring.grammar8 import only_value as only_value8
from agentflow_env.scoring.grammar8 import read_answer as read_answer8
from agentflow_env.scoring.grammar9 import read_answer as read_answer9
from agentflow_env.scoring.grammar10 import read_answer as read_answer10
from agentflow_env.scoring.grammar11 import read_answer as read_answer11
from agentflow_env.scoring.grammar12 import read_answer as read_answer12
from agentflow_env.types import Task

__all__ = ["DEFAULT_GRAMMAR", "GRAMMARS", "GrammarScorer", "grammar_version", "unwrap_scorer", "with_grammar"]

GRAMMARS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
# make_env without an id's version; the -v3 .. -v12 ids pass grammar=3 .. grammar=12 (grammar 7 and later also change
# how the env reads an action: benchmarks.specs.make_env's headers_first)
DEFAULT_GRAMMAR = 2


def grammar_version(value: Any) -> int:
    """``value`` as a grammar version, or a :class:`~agentflow_env.error.ConfigError`."""
    try:
        version = int(value)
    except (TypeError, ValueError):
        version = -1
    if version not in GRAMMARS or isinstance(value, bool):
        raise ConfigError(f"grammar={value!r}; choose one of {', '.join(map(str, GRAMMARS))}")
    return version


_JOINER = r"\s*(?:[,;/|‖]|\\lor|\bor\b|\band\b)\s*"


def _joined_to_a_formula(text: str, value: str, golds: list[str]) -> bool:
    """Grammar 8: a formula gold's value read out of an answer that joins something else to it ("(¬A → B) ↔ (A ∨
    ¬B), egalitarian", "X; Y", "X \\lor Y"): two candidates, whatever the other one's shape."""
    from agentflow_env.scoring.typed import formula_symbols

    if not any(len(formula_symbols(g)) >= 2 for g in golds):
        return False
    escaped = re.escape(value)
    return re.search(rf"{escaped}{_JOINER}\S|\S{_JOINER}{escaped}", text) is not None


def _golds(task: Task) -> list[str]:
    answer = task.answer
    if answer is None:
        return []
    if isinstance(answer, (list, tuple, set)):
        return [str(a) for a in answer if a is not None and str(a).strip()]
    return [str(answer)] if str(answer).strip() else []


def _answer_kind(task: Task) -> str:
    """Which candidates a remark can name: option letters, numbers (and expressions), or any text."""
    meta = task.metadata or {}
    if meta.get("options"):
        return "option"
    if meta.get("numbers") is not None:
        return "number"
    golds = _golds(task)
    if golds and all(re.fullmatch(r"[-+]?[\d.,/]+|[-+]?\\frac\{\d+\}\{\d+\}", g.strip()) for g in golds):
        return "number"
    return "text"


_MATH_GOLD = re.compile(
    r"[-+]?(?:[\d.,/+*^_(){}\[\] -]|\\(?:sqrt|d?t?frac|pi|cdot|times|infty|circ|left|right)(?![A-Za-z]))+"
)


def _value_kind(task: Task) -> str:
    """Grammar 8's kind for the one-value reading: a gold written as a LaTeX expression with a digit
    (``2\\sqrt{2}``, ``\\frac{\\pi}{3}``) is read as a number, as a plain number or fraction is."""
    kind = _answer_kind(task)
    golds = _golds(task)
    if kind == "text" and golds and all(re.search(r"\d", g) and _MATH_GOLD.fullmatch(g.strip()) for g in golds):
        return "number"
    return kind


def _typed_kind(task: Task) -> bool:
    """Short-answer tasks (not multiple choice, not Game of 24) get the comparison by type."""
    meta = task.metadata or {}
    return not meta.get("options") and meta.get("numbers") is None


class GrammarScorer:
    """``inner`` read through answer grammar ``grammar`` (3 or 4; see the module doc). Attributes not set
    here (``kind``, counters, ``describe``) are the inner scorer's."""

    grammar = 3  # the class default: scorers pickled before grammar 4 existed read with grammar 3
    inner: Scorer

    def __init__(self, inner: Scorer, grammar: int = 3):
        if isinstance(inner, GrammarScorer):
            inner = inner.inner
        self.inner = inner
        if grammar != 3:
            self.grammar = grammar
        from agentflow_env.scoring.qa import QAScorer

        if isinstance(inner, QAScorer):  # the paper's QA golds hold dates; other families' never do
            from agentflow_env.scoring.typed import require_dates

            require_dates()

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # unpickling: not set yet
            raise AttributeError(name)
        return getattr(self.inner, name)

    def read(self, prediction: str, task: Task) -> tuple[str, str | None]:
        """``(text, hedge)``: what the scorer reads, and why the answer hedges (``None``: it does not)."""
        question = task.question if self.grammar >= 4 else ""
        if self.grammar >= 12:
            reading = read_answer12(prediction, _golds(task), _answer_kind(task), question)
        elif self.grammar >= 11:
            reading = read_answer11(prediction, _golds(task), _answer_kind(task), question)
        elif self.grammar >= 10:
            reading = read_answer10(prediction, _golds(task), _answer_kind(task), question)
        elif self.grammar >= 9:
            reading = read_answer9(prediction, _golds(task), _answer_kind(task), question)
        elif self.grammar >= 8:
            reading = read_answer8(prediction, _golds(task), _answer_kind(task), question)
        elif self.grammar >= 7:
            reading = read_answer7(prediction, _golds(task), _answer_kind(task), question)
        elif self.grammar >= 6:
            reading = read_answer6(prediction, _golds(task), _answer_kind(task), question)
        elif self.grammar >= 5:
            reading = read_answer5(prediction, _golds(task), _answer_kind(task), question)
        else:
            reading = read_answer(prediction, _golds(task), _answer_kind(task), self.grammar, question)
        numbers = (task.metadata or {}).get("numbers")
        if (
            reading.hedge is None
            and numbers is not None
            and several_solutions(
                _sentence_breaks(reading.text) if self.grammar >= 5 else reading.text, numbers, self.grammar >= 10
            )
        ):
            return reading.text, "it writes more than one expression over the given numbers"
        if reading.hedge is None and self.grammar >= 4 and getattr(self.inner, "kind", None) == "judge":
            return _judged_sentence(reading.text, task)
        return reading.text, reading.hedge

    def __call__(self, prediction: str, task: Task) -> float:
        options = (task.metadata or {}).get("options")
        if self.grammar >= 8 and options and letter_names_another_option(str(prediction)[:5000], list(options)):
            return 0.0  # "C. <option A's text>", read before the grammar rewrites the option's LaTeX
        text, hedge = self.read(str(prediction), task)
        if hedge is not None:
            return 0.0
        score = float(self.inner(text, task))
        if score >= 1.0 or getattr(self.inner, "kind", None) == "judge":
            return score
        if not _typed_kind(task):
            if self.grammar >= 4:
                value = _option_or_expression(text, task)
                if value is not None and float(self.inner(value, task)) >= 1.0:
                    return 1.0
            if self.grammar >= 5:
                value = _one_expression(text, task) or _one_option(text, task)
                if value is not None and float(self.inner(value, task)) >= 1.0:
                    return 1.0
            return score
        golds = _golds(task)
        return 1.0 if golds and self._typed_match(text, task, golds) else score

    def _typed_match(self, text: str, task: Task, golds: list[str]) -> bool:
        """Whether a short answer's read text commits to the gold by its type: the committed span, then grammar 4's
        sentence value, grammar 5's frame values and grammar 7's one value, each by the scorer or by type."""
        from agentflow_env.scoring.commitment import read_commitment
        from agentflow_env.scoring.typed import typed_equal

        symbols = self.grammar >= 8  # grammar 8 compares a formula gold by its symbols too
        committed = read_commitment(text, golds, task.question)
        if committed.hedge is None and typed_equal(committed.text, golds, symbols=symbols):
            return True
        if self.grammar >= 4:
            value = _sentence_value(text, task, self.grammar)
            if value is not None and symbols and _joined_to_a_formula(text, value, golds):
                value = None
            if value is not None and (
                float(self.inner(value, task)) >= 1.0 or typed_equal(value, golds, symbols=symbols)
            ):
                return True
        if self.grammar >= 5:
            for value in _frame_values(text, task, committed.text if committed.hedge is None else None):
                if float(self.inner(value, task)) >= 1.0 or typed_equal(value, golds, version=5, symbols=symbols):
                    return True
        if self.grammar >= 7:
            value = only_value8(text, _value_kind(task)) if self.grammar >= 8 else only_value(text, _answer_kind(task))
            if value is not None and (
                float(self.inner(value, task)) >= 1.0 or typed_equal(value, golds, version=5, symbols=symbols)
            ):
                return True
        return False

    def score_batch(self, predictions: list[str], tasks: list[Task]) -> list[float]:
        """Many answers at once: a judge gets one batched call on the read texts (hedges score 0 without
        reaching it); any other scorer scores each answer as :meth:`__call__` does."""
        batch = getattr(self.inner, "score_batch", None)
        if getattr(self.inner, "kind", None) != "judge" or not callable(batch):
            return [self(str(p), t) for p, t in zip(predictions, tasks)]
        reads = [self.read(str(p), t) for p, t in zip(predictions, tasks)]
        todo = [i for i, (_text, hedge) in enumerate(reads) if hedge is None]
        out = [0.0] * len(predictions)
        for i, score in zip(todo, batch([reads[i][0] for i in todo], [tasks[i] for i in todo])):
            out[i] = float(score)
        return out

    def __repr__(self) -> str:  # stored results record it: no memory addresses
        inner = self.inner
        shown = repr(inner) if type(inner).__repr__ is not object.__repr__ else type(inner).__name__
        return f"GrammarScorer({shown})" if self.grammar == 3 else f"GrammarScorer({shown}, grammar={self.grammar})"


def _sentence_value(text: str, task: Task, version: int = 4) -> str | None:
    """Grammar 4: the one value of the gold's type that the answer span states, when the span is a sentence
    (:mod:`agentflow_env.scoring.sentence`); ``None`` when it states none, several, or the span hedges."""
    from agentflow_env.scoring.sentence import sentence_value

    golds = _golds(task)
    sentence, hedge = _answer_sentence(text, golds)
    if hedge is not None or not sentence.strip() or remark_cue(sentence, task.question):
        return None  # a sentence with a rival cue ("though", "also") is read by the span reader only
    reading = sentence_value(sentence, golds, task.question, version)
    return reading.value if reading.hedge is None else None


def _frame_values(text: str, task: Task, committed: str | None) -> list[str]:
    """Grammar 5: what else the answer may be read as, each compared by the scorer and by type: the committed
    span with number words as digits (for a number gold), and the one value of the gold's type in a short
    answer of common words around it ("Happy to help! 33", "Simplifying, we get 33."), read as one sentence
    (:func:`~agentflow_env.scoring.sentence.sentence_value` and
    :func:`~agentflow_env.scoring.sentence.frame_value`: two candidates of the type are no reading). The frame
    is one line with one answer span (no second box, tag or answer marker): lines and boxes stay separate."""
    from agentflow_env.scoring.grammar5 import common_frame, number_words
    from agentflow_env.scoring.sentence import _FRAME_NEGATION, frame_value, gold_type, sentence_value

    golds = _golds(task)
    number = gold_type(golds) == "number"
    out = []
    if committed:
        out.append(number_words(committed) if number else committed)
    frame = text.strip()
    if number:
        frame = number_words(frame)
    if len(frame) > 400 or "\n" in frame or remark_cue(frame, task.question) or _several_spans(frame):
        return [v for v in dict.fromkeys(out) if v.strip()]
    if not _FRAME_NEGATION.search(frame) and common_frame(frame, task.question, golds):
        # "Happy to help! Certainly not 1879.": no reading; "33, james madison": a word that may be a candidate
        for reading in (sentence_value(frame, golds, task.question, 5), frame_value(frame, golds, task.question)):
            if reading.hedge is None and reading.value is not None:
                out.append(reading.value)
    polarity = _POLARITY.match(frame)  # "No, the Louvre is in France ..": a reason after the answer
    if polarity is not None and any(g.strip().lower() in ("yes", "no") for g in golds):
        from agentflow_env.scoring.sentence import _FRAME_START5

        reason = frame[polarity.end() :].split()  # a clause that opens with a function word ("the", "both", "it")
        if len(reason) >= 3 and reason[0].lower().strip("\"'“(") in _FRAME_START5:  # not "yes, Let's Make Money"
            out.append(polarity.group(1))
    return [v for v in dict.fromkeys(out) if v.strip()]


def _option_or_expression(text: str, task: Task) -> str | None:
    """Grammar 4 for multiple choice and Game of 24: the one option letter (or option text) the answer's
    sentence names, or the one expression over the given numbers it writes; ``None`` for none or several."""
    from agentflow_env.scoring.sentence import option_value

    meta = task.metadata or {}
    sentence, hedge = _answer_sentence(text, _golds(task) if not meta.get("options") else [])
    if hedge is not None:
        return None
    if meta.get("options"):
        from agentflow_env.scoring.choice import read_choice

        if read_choice(text, list(meta["options"]))[1] is not None:
            return None  # the choice reader found a hedge: no sentence reading overrides it
        return option_value(sentence, list(meta["options"])).value
    expressions = {re.sub(r"\s+", "", e) for e in _expressions(sentence, meta.get("numbers") or ())}
    return expressions.pop() if len(expressions) == 1 else None


def _several_spans(text: str) -> bool:
    """Whether a one-line answer writes several answer spans (boxes, ``<answer>`` tags or answer markers):
    each is an answer of its own, never one frame."""
    from agentflow_env.scoring.extract import _ANSWER_TAG, _boxes
    from agentflow_env.scoring.grammar import _ANSWER_MARK

    return len(_boxes(text)) > 1 or len(_ANSWER_TAG.findall(text)) > 1 or len(_ANSWER_MARK.findall(text)) > 1


_POLARITY = re.compile(r"(?i)^\W*(yes|no)\b\s*[,.;:!—–-]")


def _one_option(text: str, task: Task) -> str | None:
    """Grammar 5 for multiple choice: the one option (letter or text) named in a one-line answer of words
    around it ("Happy to help! D"); ``None`` for none, several, a negation, a cue, or a span hedge."""
    from agentflow_env.scoring.sentence import _FRAME_NEGATION, option_value

    options = (task.metadata or {}).get("options")
    frame = text.strip()
    if not options or "\n" in frame or len(frame) > 400 or _FRAME_NEGATION.search(frame):
        return None
    from agentflow_env.scoring.grammar5 import common_frame

    if not common_frame(frame, task.question, [str(o) for o in options]):
        return None
    if remark_cue(frame, task.question) or len(set(re.findall(r"(?<![A-Za-z])[A-J](?![A-Za-z])", frame))) > 1:
        return None  # "[D, C]", "C/D": every capital letter standing alone counts, whatever is around it
    from agentflow_env.scoring.choice import read_choice

    hedge = read_choice(frame, list(options))[1]
    if hedge is not None and not hedge.startswith("another line or sentence"):
        return None  # "A (0.7)" names option A and another option's text: the choice reader's hedge stands
    return option_value(frame, list(options)).value


def _one_expression(text: str, task: Task) -> str | None:
    """Grammar 5 for Game of 24: the one expression over the given numbers that the whole answer writes, in
    a frame of words or after working whose steps use only some of the numbers ("Happy to help! (8-2)*4",
    "10 / 2 = 5 .. Expression: .."); ``None`` for none, several, or a negation anywhere ("not (8-2)*4")."""
    from agentflow_env.scoring.sentence import _FRAME_NEGATION

    numbers = (task.metadata or {}).get("numbers")
    if numbers is None or len(text) > 2_000 or _FRAME_NEGATION.search(text) or remark_cue(text, task.question):
        return None
    expressions = {re.sub(r"[\s()]+", "", e): e for e in _expressions(_sentence_breaks(text), numbers)}
    return next(iter(expressions.values())) if len(expressions) == 1 else None


def _sentence_breaks(text: str) -> str:
    """``text`` with a full stop that ends a sentence as a line break: "E1. E2 is also possible." writes two
    expressions, not one with a "." in it (grammar 5)."""
    return re.sub(r"(?<=[\d)])\.(?=\s|$)", "\n", text)


def _answer_sentence(text: str, golds: list[str]) -> tuple[str, str | None]:
    """The whole sentence the answer span is in (the span and the explanation the span reader cut off its
    end: "x = 540 is the largest real part of .. where |z| = 4"), and why the text *after* it names a rival
    (the sentence itself is read by :func:`~agentflow_env.scoring.sentence.sentence_value`)."""
    from agentflow_env.scoring.extract import extract_answer

    span = extract_answer(text, golds)
    if not span.explanation or span.hedge is None:
        return span.text + span.explanation, span.hedge
    explanation = span.explanation.strip()
    if explanation not in text:
        return span.text + span.explanation, span.hedge
    rest = extract_answer(text.replace(explanation, "", 1), golds)
    return span.text + span.explanation, rest.hedge


def _judged_sentence(text: str, task: Task) -> tuple[str, str | None]:
    """What the judge reads under grammar 4: the read text, unless its answer span is a sentence naming
    two candidates of the gold's type (a hedge, scored 0 without a call)."""
    from agentflow_env.scoring.sentence import sentence_value

    golds = _golds(task)
    if not golds or (task.metadata or {}).get("options") or (task.metadata or {}).get("numbers") is not None:
        return text, None
    sentence, _hedge = _answer_sentence(text, golds)
    return text, sentence_value(sentence, golds, task.question).hedge


_EXPRESSION = re.compile(r"[\d(][\d \t()+\-*/×÷·x.]*[\d)]")


def several_solutions(text: str, numbers: Any, by_brackets: bool = False) -> bool:
    """Whether ``text`` writes two different expressions that each use exactly the given ``numbers`` (two
    candidate Game-of-24 solutions; ``expr = 24`` and ``expr = 26 - 2 = 24`` write one). Before grammar 10 the
    brackets were set aside altogether, so ``1+(10-5)*4`` and ``(1+10-5)*4`` were one expression (the line that
    reached 24 was paid); ``by_brackets`` (grammar 10) sets aside only a bracket without its partner."""
    if by_brackets:
        return len({_paired(e) for e in _expressions(text, numbers)}) > 1
    # brackets aside: a stray one cut off by the match is no second expression
    return len({re.sub(r"[()]", "", e) for e in _expressions(text, numbers)}) > 1


def _paired(expression: str) -> str:
    """``expression`` without the brackets that have no partner in it."""
    unmatched, stack = set(), []
    for i, ch in enumerate(expression):
        if ch == "(":
            stack.append(i)
        elif ch == ")":
            if stack:
                stack.pop()
            else:
                unmatched.add(i)
    unmatched.update(stack)
    return "".join(ch for i, ch in enumerate(expression) if i not in unmatched)


def _expressions(text: str, numbers: Any) -> list[str]:
    """The expressions in ``text`` that use exactly the given ``numbers`` (operators as ASCII)."""
    from collections import Counter
    from fractions import Fraction

    try:
        want = Counter(Fraction(str(n)) for n in numbers)
    except (ValueError, TypeError, ZeroDivisionError):
        return []
    out = []
    for m in _EXPRESSION.finditer(text):
        expr = re.sub(r"\s+", "", m.group(0)).replace("×", "*").replace("·", "*").replace("÷", "/").replace("x", "*")
        leaves = Counter(Fraction(n) for n in re.findall(r"\d+(?:\.\d+)?", expr))
        if leaves == want and re.search(r"[-+*/]", expr):
            out.append(expr)
    return out


def with_grammar(scorer: Scorer, grammar: int) -> Scorer:
    """``scorer`` as answer grammar ``grammar`` reads (2: unchanged). A scorer whose ``reads_raw_answer``
    is true (AgentFlow's own judge, which must see what AgentFlow's judge sees) is left as it is."""
    if grammar_version(grammar) < 3 or getattr(scorer, "reads_raw_answer", False):
        return scorer
    return GrammarScorer(scorer, grammar)


def unwrap_scorer(scorer: Any) -> Any:
    """The scorer under any grammar wrapper (for code that asks which kind of scorer an env has)."""
    while isinstance(scorer, GrammarScorer):
        scorer = scorer.inner
    return scorer
