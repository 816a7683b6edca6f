"""Multiple-choice scoring (GPQA, MedQA): find the one option an answer commits to, and compare its letter.

How an answer is read (:func:`extract_choice`), in order of evidence:

1. Several ``<answer>`` blocks or ``\\boxed{}`` answers that differ pick nothing (the single-commitment rule of
   :mod:`agentflow_env.scoring.commitment`).
2. The whole answer is one letter: ``B``, ``(B)``, ``B.``, ``**B**``, ``\\boxed{B}``; a lower-case ``b``
   reads as B too, except when some option's text is itself a bare letter (GPQA's "a".."d" options, which
   shuffling puts under other labels): then a lower-case letter is that option's *text* and an upper-case
   letter the *label*.
3. The whole answer is one option's text: case-sensitive first (two GPQA options differ only by ``L`` vs
   ``l``), then case-insensitive and then normalised, each only when exactly one option matches.
4. Letter mentions anywhere: ``answer is (C)``, ``Answer: C``, ``C is correct``, ``I'd choose (C)``,
   ``(C)``, a leading ``C. text``, and letters joined by ``or``/``and``/``,``/``/``. One distinct letter
   is the answer; two or more pick nothing ("A or B", "A, B, C, D", every option on its own line).
   Before them, a leading letter followed by an option's exact text (``B. 0.7``, ``B (0.7)``) reads
   as that letter when the text is its own option's, and as nothing when it is another option's.
5. The answer quotes exactly one option's text ("... at greatest risk of colorectal cancer"); quoting
   several picks nothing. In steps 4 and 5 an alternative marker outside the chosen option's own text
   (``or``, ``either``, ``vs``, ...; see :func:`~agentflow_env.scoring.commitment.alternative_marker`)
   picks nothing too.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from agentflow_env.scoring.commitment import FILLER_WORDS, alternative_marker
from agentflow_env.scoring.extract import AnswerSpan, extract_answer
from agentflow_env.scoring.qa import normalize_answer
from agentflow_env.types import Task

__all__ = [
    "ChoiceScorer",
    "choice_span",
    "extract_choice",
    "letter_names_another_option",
    "option_letters",
    "read_choice",
    "render_options",
]


def option_letters(n: int) -> str:
    return string.ascii_uppercase[:n]


def render_options(options: Sequence[str]) -> str:
    """``A. text`` lines, one per option."""
    return "\n".join(f"{letter}. {text}" for letter, text in zip(option_letters(len(options)), options))


_EMPHASIS = re.compile(r"[*_`]+")
# the whole answer is a letter: "B", "(B)", "B.", "[B]"
_ONLY = re.compile(r"[\(\[]?([A-Za-z])[\)\]]?[.:)]?")
_L = r"[\(\[]?([A-Z])[\)\]]?(?![A-Za-z0-9'])"
_MENTIONS = (
    # "answer is (B)", "Answer: B", "correct option - B", "choice B", "the answer would be option B"
    re.compile(
        r"(?i:answer|option|choice|letter)\s*(?i:is|would\s+be|should\s+be|:|-|=)?\s*(?i:option|choice|letter)?"
        rf"\s*[:\-]?\s*{_L}"
    ),
    # "C is correct", "(C) is the right answer", "C seems best"
    re.compile(
        rf"(?<![A-Za-z]){_L}\s+(?i:is|seems|looks|appears|would\s+be)\s+(?i:the\s+)?"
        r"(?i:correct|right|best|answer|true|most)"
    ),
    # "I'd choose (C)", "pick C", "going with C"
    re.compile(rf"(?i:choose|chose|pick|picked|select|selected|go\s+with|going\s+with|opt\s+for)\s+{_L}"),
    # "(C)", "[C]" anywhere
    re.compile(r"[\(\[]([A-Z])[\)\]]"),
    # a leading letter on any line: "C. text", "C) text", "C: text"
    re.compile(r"(?m)^\s*[\(\[]?([A-Z])(?:[\)\]][.:]?|[.:)])(?=\s|$)"),
)
# letters joined as alternatives: "A or B", "B/C", "A, B", "A and D", "A & C"
_LETTER_LIST = re.compile(r"(?<![A-Za-z'])([A-Z])(?=\s*(?:,|/|&|\bor\b|\band\b)\s*[\(\[]?([A-Z])(?![A-Za-z']))")
_LEAD = re.compile(r"\s*[\(\[]?([A-Z])(?:[\)\]]|[.:)\-–—]|\s)\s*[\(\[]?(.+?)[\)\]]?\s*", re.S)
_LETTER_TOKEN = re.compile(r"(?<![A-Za-z'])[\(\[]?([A-Z])[\)\]]?(?![A-Za-z'])")


def _bare_label_texts(options: Sequence[str], letters: str) -> bool:
    return any(len(o.strip()) == 1 and o.strip().upper() in letters for o in options)


def _squeeze(text: str) -> str:
    return " ".join(text.split()).rstrip(".").strip()


def _unique(indices: list[int]) -> int | None:
    return indices[0] if len(set(indices)) == 1 else None


def _whole_option(text: str, options: Sequence[str]) -> int | None:
    """The one option whose text the whole answer is: case-sensitive, then case-insensitive, then normalised."""
    answer = _squeeze(text)
    if not answer:
        return None
    keys = [lambda t: _squeeze(t), lambda t: _squeeze(t).lower()]
    if not any(len(o.strip()) == 1 for o in options):  # normalising drops "a": "C, A" would read "c"
        keys.append(normalize_answer)
    for key in keys:
        want = key(answer)
        if not want:
            continue
        hits = [i for i, o in enumerate(options) if key(o) == want]
        if hits:
            return _unique(hits)
    return None


def _letters_only(text: str) -> bool:
    rest = _LETTER_TOKEN.sub(" ", text)
    if re.search(r"[^\w\s.,;:/&()\[\]'!?-]|\d", rest):
        return False
    words = re.findall(r"[A-Za-z']+", rest.lower())
    return all(w in FILLER_WORDS or w in ("or", "and", "option", "options", "choice", "letter") for w in words)


def _mentioned_letters(text: str, letters: str) -> set[str]:
    found: set[str] = set()
    for pattern in _MENTIONS:
        found.update(m.group(1) for m in pattern.finditer(text))
    for m in _LETTER_LIST.finditer(text):
        found.update((m.group(1), m.group(2)))
    if _letters_only(text):
        found.update(m.group(1) for m in _LETTER_TOKEN.finditer(text))
    return {x for x in found if x in letters}


def _quoted_option(text: str, options: Sequence[str]) -> int | None:
    """The one option whose text the answer quotes (the longest when one option contains another)."""
    pred = normalize_answer(text)
    if not pred:
        return None
    normed = [normalize_answer(o) for o in options]
    inside = [i for i, o in enumerate(normed) if o and f" {o} " in f" {pred} "]
    inside = [i for i in inside if not any(i != j and normed[i] in normed[j] for j in inside)]
    return inside[0] if len(inside) == 1 else None


def choice_span(prediction: str, options: Sequence[str]) -> AnswerSpan:
    """The answer span of a multiple-choice answer (:func:`~agentflow_env.scoring.extract.extract_answer`):
    option texts are kept whole, and a later line or sentence that is itself an option (its letter, its
    text, or ``B. text``) is a rival answer."""
    letters = option_letters(len(options))
    texts = {_squeeze(o).lower(): letters[i] for i, o in enumerate(options) if len(_squeeze(o)) > 1}

    def named(text: str) -> str | None:
        text = _EMPHASIS.sub("", text).strip()
        if _ONLY.fullmatch(text) and text.strip("()[].:").upper() in letters:
            return text.strip("()[].:").upper()
        if re.match(r"\s*[\(\[]?[A-Z](?:[\)\]][.:]?|[.:)])(?:\s|$)", text) and text.lstrip("([")[0] in letters:
            return text.lstrip("([")[0]
        return texts.get(_squeeze(text).lower())

    def is_candidate(piece: str, span: str) -> bool:
        option = named(piece)
        return option is not None and option != named(span)

    return extract_answer(
        prediction,
        (),
        is_candidate,
        generic_rivals=False,
        normalize=False,
        protect=[o for o in options if len(o.strip()) > 3],
    )


def extract_choice(prediction: str, options: Sequence[str]) -> str | None:
    """The letter the prediction commits to among ``options`` (texts without letters), or ``None``
    (nothing, or more than one option; see the module doc)."""
    return read_choice(prediction, options)[0]


def _letter_and_text(prediction: str, options: Sequence[str], letters: str) -> tuple[str | None, str | None] | None:
    """The whole answer is a letter and a whole option text (over several lines, too): that letter when the
    text is its own option's, a hedge when it is another's; ``None`` when the answer is not of that form."""
    for whole in (" ".join(str(prediction).split()), " ".join(_EMPHASIS.sub("", str(prediction)).split())):
        lead = _LEAD.fullmatch(whole) if len(whole) < 5000 else None
        if lead and lead.group(1) in letters:
            said = _whole_option(whole[lead.start(2) :], options)
            if said is not None:
                if letters[said] == lead.group(1):
                    return lead.group(1), None
                return None, "its letter names one option and its text another"
    return None


def letter_names_another_option(prediction: str, options: Sequence[str]) -> str | None:
    """Why an answer that is a letter and the whole text of another option hedges, read on the answer as written
    (grammar 8 asks before the answer grammar rewrites its LaTeX: ``\\left(`` made ``(`` no longer matched the
    option's text), else ``None``."""
    labelled = _letter_and_text(prediction, options, option_letters(len(options)))
    return labelled[1] if labelled is not None else None


def read_choice(prediction: str, options: Sequence[str]) -> tuple[str | None, str | None]:
    """``(letter, hedge)``: the letter the prediction commits to (or ``None``), and why it commits to more
    than one option (``None`` when it does not)."""
    letters = option_letters(len(options))
    labelled = _letter_and_text(prediction, options, letters)
    if labelled is not None:
        return labelled
    span = choice_span(prediction, options)
    if span.hedge is not None:
        return None, span.hedge
    raw = span.text.strip()
    text = _EMPHASIS.sub("", raw).strip()
    if not text:
        return None, None
    m = _ONLY.fullmatch(text)
    if m and m.group(1).upper() in letters:
        letter = m.group(1)
        if letter.isupper() or not _bare_label_texts(options, letters):
            return letter.upper(), None
        same = [i for i, o in enumerate(options) if o.strip() == letter]
        return (letters[same[0]], None) if len(same) == 1 else (None, None)
    whole = _whole_option(raw, options)
    if whole is None and text != raw:
        whole = _whole_option(text, options)
    if whole is not None:
        return letters[whole], None
    lead = _LEAD.fullmatch(text)
    if lead and lead.group(1) in letters:  # "B. 0.7", "B (0.7)": the letter and its option's text
        said = _whole_option(lead.group(2), options)
        if said is None:  # an option text that itself ends in a bracket: "C. f\\left(x\\right)"
            said = _whole_option(text[lead.start(2) :], options)
        if said is not None:
            if letters[said] == lead.group(1):
                return lead.group(1), None
            return None, "its letter names one option and its text another"
    return _by_mention(text, raw, options, letters)


def _by_mention(text: str, raw: str, options: Sequence[str], letters: str) -> tuple[str | None, str | None]:
    """Steps 4 and 5 of the module doc: letters mentioned anywhere in the span, else one quoted option."""
    mentioned = _mentioned_letters(text, letters)
    if _bare_label_texts(options, letters):  # lower-case letters name option texts here
        named = {m.group(1) for m in re.finditer(r"(?<![A-Za-z'])[\(\[]?([a-z])[\)\]]?(?![A-Za-z'])", text)}
        mentioned |= {letters[i] for i, o in enumerate(options) if o.strip() in named}
    if len(mentioned) > 1:
        return None, "it names several options"
    if len(mentioned) == 1:
        letter = mentioned.pop()
        marker = alternative_marker(text, [options[letters.index(letter)]])
        if marker is not None:
            return None, f"it offers alternatives ({marker})"
        return letter, None
    quoted = _quoted_option(raw, options)
    if quoted is None:
        return None, None
    marker = alternative_marker(text, [options[quoted]])
    if marker is not None:
        return None, f"it offers alternatives ({marker})"
    return letters[quoted], None


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
