"""Answer grammar 9 (the ``-v9`` ids): grammar 8 (:mod:`agentflow_env.scoring.grammar8`) after one more step, which
takes out of the answer every value the answer itself says is not its answer.

An eighth answer set, written outside the project by someone who never read the scorers, was run blind through
grammar 8: 9.6% of its correct answers scored 0. Two thirds of those were corrections that say which value they
drop without a word grammar 8 reads as a retraction: "Korrektur: nicht 35, sondern 33.", "No es 35, sino 33.",
"35ではなく、33です。", "Revised: 33 (was 35).", "Answer changed: 35 → 33", "Scratch 35. 33.", "Draft answer: No ..
Final answer: Yes", "Eliminated: 8 / Remaining: 7". The rest were wrappers: ReAct's ``Finish[33]``, a role header
("assistant"), a lone numbered item, "Ja." / "Oui." / "是的。", dates in another language, "1.535.270".

Grammar 9 reads a value the answer marks as dropped by the **mark**, not by a phrase list of whole answers
(:func:`drop_marked`). A mark is one of:

1. **Negation in a contrast**, in nine languages: "not Y but X", "X, not Y", "nicht Y, sondern X", "no es Y, sino
   X", "X, e não Y", "X, non Y", "ce n'est pas Y, c'est X", "не Y, а X", "不是Y，而是X", "YではなくX". "Not only Y but
   also X", "if not Y", "不是Y就是X" (either-or) and "не то Y, не то X" are not marks: they keep both values.
2. **Withdrawal**: "scratch / ignore / retract Y", "Y (retracted)", "changed from Y to X", "Y → X" after "changed",
   "revised" or "corrected", "Y → revised to X", "(was Y)", "(previously Y)", "(I mistakenly wrote Y)", "I considered
   Y but ruled it out", and a draft the answer reports as past ("Earlier I wrote Y.", "I initially said Y;", "My
   first answer was Y, but", "Mi primera respuesta fue Y, pero").
3. **A draft label before a final one**: "First pass: Y. Second pass: X.", "Draft answer: Y .. Final answer: X";
   a draft label drops its value only when a final label follows it.
4. **Elimination**: a line labelled "Eliminated:", "Ruled out:", "Rejected:" names no answer.

A mark counts only when it is asserted: an answer that doubts ("maybe", "I think", a question after the mark), or
makes the mark conditional, someone else's or quoted (grammar 8's rules), keeps every value it names; one that marks
a value and doubts it is a hedge in both orders (:func:`doubted_mark`). The mirror image of every mark reads the
other value. After the marked values are gone, the text is read by grammar 8 (the ``-v8`` ids keep their digests).

Three more hedges: an answer that names two values and says it has not chosen ("I can't determine which", "Options I
couldn't eliminate: ..", "are tied"; :func:`undecided`); a revision of a value the answer gave, under doubt, a
condition or someone else's word in the marker's own clause ("12. Revised answer: 21, per some.";
:func:`attributed_revision`); and a short number that opens the answer ("12. ..") is its first value, not a list
item, unless an item numbered after it follows (grammar 8's readings disagreed on it, so such hedges were paid in
both orders).

Presentation it adds (:func:`wrappers`, :func:`localize`, :func:`restated`): ReAct's ``Action: Finish[X]``, a lone
``Thought:`` line above the answer, a chat role header on its own line, a lone numbered item ("1. X"), a generic
section heading ("## Summary") above labelled lines, sign-offs ("Feel free to ask .."), "yes" and "no" in eight more
languages when the gold is yes or no, dates written in German, French, Spanish, Portuguese, Italian, Chinese or
Japanese, digit groups separated by dots ("1.535.270", two groups at least), a surname-first name ("Madison, James")
when it is the gold's name reordered, and a number answer that restates the question and ends on "is V": the
question's own numbers are not rivals.

Every step is a bounded number of linear passes over an answer of at most 20,000 characters.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from agentflow_env.scoring import grammar8
from agentflow_env.scoring.cued import Cued
from agentflow_env.scoring.extract import normalize_text
from agentflow_env.scoring.grammar import Reading, _candidates, _of_kind
from agentflow_env.scoring.typed import fold

__all__ = [
    "attributed_revision",
    "doubted_mark",
    "drop_marked",
    "localize",
    "read_answer",
    "restated",
    "undecided",
    "wrappers",
]

_LIMIT = 20_000

# ------------------------------------------------------------------ 1. negation in a contrast
# the negated value: a short span without clause punctuation
_NEG = r"(?P<neg>(?:\d[.,]\d|,\s\d{4}\b|[^,;.!?:\n，。、；]){1,60}?)"
# "not only", "not just", "nicht nur", "no solo", "pas seulement": both values stay
_NOT_ONLY = (
    r"(?!\s*(?:only|just|merely|necessarily|sure|certain|exactly|nur|bloß|solo|sólo|solamente|só|apenas|seulement"
    r"|uniquement|soltanto|только|то)\b)"
)
# a contrast that opens with the negated value; the kept value follows the joiner
_NOT_AFTER = r"(?<![\w'’])(?<!\bif\s)(?<!\bor\s)(?<!\bwhether\s)"
_LEAD_CONTRASTS = tuple(
    re.compile(f"(?i){_NOT_AFTER}{pattern}")
    for pattern in (
        rf"(?:it'?s\s+|it’s\s+|it\s+is\s+|the\s+answer\s+is\s+|answer\s+is\s+)?not{_NOT_ONLY}\s+{_NEG}\s*,?\s+but\s+"
        r"(?:rather\s+|instead\s+)?(?:it'?s\s+|it\s+is\s+)?",
        rf"(?:es\s+|ist\s+)?nicht{_NOT_ONLY}\s+{_NEG}\s*,?\s+sondern\s+",
        rf"no\s+(?:es|son|era|fue){_NOT_ONLY}\s+{_NEG}\s*,\s*(?:sino\s+(?:que\s+)?|es\s+|son\s+)",
        rf"não\s+(?:é|são|era|foi){_NOT_ONLY}\s+{_NEG}\s*,\s*(?:mas\s+(?:sim\s+)?|é\s+|são\s+)",
        rf"non\s+(?:è|sono|era){_NOT_ONLY}\s+{_NEG}\s*,\s*(?:ma\s+|è\s+|sono\s+)",
        rf"(?:ce\s+)?n['’]est\s+pas{_NOT_ONLY}\s+{_NEG}\s*,\s*(?:mais\s+|c['’]est\s+)",
        rf"не{_NOT_ONLY}\s+{_NEG}\s*,\s*а\s+",
    )
) + (
    re.compile(r"(?<!就)不是\s*(?P<neg>[^，,。、；\n就]{1,40}?)\s*[，,]?\s*而是\s*"),
    re.compile(r"(?:(?<=[。．.!！?？:：,、\n])|^)\s*(?P<neg>[^，,。、；\n]{1,40}?)\s*ではなく(?:て)?\s*[、,，]?\s*"),
)
# a contrast that names the kept value first and negates the other after it
_TAIL_CONTRASTS = tuple(
    re.compile(rf"(?i)\s*[,，、]\s*{pattern}(?=\s*(?:[.!?。！？)\n]|$))")
    for pattern in (
        rf"(?:and\s+|but\s+)?not{_NOT_ONLY}\s+{_NEG}",
        rf"(?:und\s+)?nicht{_NOT_ONLY}\s+{_NEG}",
        rf"y\s+no{_NOT_ONLY}\s+{_NEG}",
        rf"(?:e\s+)?não{_NOT_ONLY}\s+{_NEG}",
        rf"(?:e\s+)?non{_NOT_ONLY}\s+{_NEG}",
        rf"(?:et\s+)?pas{_NOT_ONLY}\s+{_NEG}",
        rf"(?:а\s+)?не{_NOT_ONLY}\s+{_NEG}",
        r"(?:而)?不是\s*(?P<neg>[^，,。、；\n]{1,40}?)",
    )
)
# "33, no 35" in Spanish: not where "no" is itself an answer (a yes-or-no question)
_TAIL_NO = re.compile(
    rf"(?i)\s*[,，、]\s*no{_NOT_ONLY}\s+(?!\()(?P<neg>(?:\d[.,]\d|[^,;.!?:\n，。、；]){{1,60}}?)(?=\s*(?:[.!?。！？)\n]|$))"
)
# a negation any contrast needs
_NEGATION = re.compile(r"(?i)\b(?:not|nicht|no|não|non|pas|не)\b|不是|ではなく")
# either-or and doubt: no mark counts ("不是35就是33", "не то 35, не то 33")
_EITHER = re.compile(
    r"(?i)不是[^，,。\n]{0,40}就是|не\s+то\b|\beither\b|\bentweder\b|\bo\s+bien\b|\bou\s+bien\b|\bsoit\b"
)
_EITHER = Cued(_EITHER, re.compile(r"不是|не\s+то|either|entweder|o\s+bien|ou\s+bien|soit"), lowered=True)

# ------------------------------------------------------------------ 2. withdrawal
_VALUE = r"(?:[-+]?\d[\d.,/]*\d|[^\s,;.!?:()\[\]]+)(?:\s+[A-Z][^\s,;.!?:()\[\]]*){0,3}"
_WITHDRAWN = re.compile(
    r"(?i)"
    # "Scratch 35.", "ignore 35;", "retract 35": the verb and the value it withdraws
    rf"\b(?:scratch|strike|cross\s+out|retract|withdraw|disregard)\s+(?:the\s+)?(?:\$)?(?P<w1>{_VALUE})(?:\$)?\s*[.;,!—–]"
    # "(was 35)", "(previously 35)", "(not 35)", "(I mistakenly wrote 35 above)"
    r"|\(\s*(?:was|previously|formerly|originally|initially|earlier|before|not|old|orig\.?)\b[:\s][^()\n]{1,60}\)"
    r"|\([^()\n]{0,30}\b(?:mistakenly|by\s+mistake|accidentally|erroneously|wrongly|in\s+error)\b[^()\n]{0,50}\)"
    # "Earlier I wrote 35.", "I initially said 35;", "My first answer was 35,": a draft the answer reports as past
    r"|\b(?:(?:earlier|before|previously|initially|originally|at\s+first)\b[,\s]*I\s+(?:wrote|said|answered|gave|typed|put|had"
    r"|thought|guessed|got|picked|chose)"
    r"|I\s+(?:first|initially|originally|earlier|previously)\s+(?:wrote|said|answered|gave|typed|put|had|thought|guessed|got"
    r"|picked|chose)"
    r"|my\s+(?:first|initial|earlier|previous|original)\s+(?:answer|guess|attempt|response|reply|result)\s+(?:was|is"
    r"|had\s+been)"
    r"|mi\s+primera\s+respuesta\s+(?:fue|era)|meine\s+erste\s+antwort\s+war|ma\s+première\s+réponse\s+(?:était|a\s+été)"
    r"|a\s+minha\s+primeira\s+resposta\s+(?:foi|era)|la\s+mia\s+prima\s+risposta\s+(?:era|è\s+stata))\s+"
    # the draft: up to the end of its sentence or clause (an expression, a title or a date with a comma)
    r"[^\n]{1,100}?(?=\s*(?:[.;!—–](?:\s|$)|,\s*(?:but|pero|aber|mais|mas|ma|however|though)\b|$))"
    # "35, corrected to 33": the value before the revision
    rf"|(?:\$)?{_VALUE}(?:\$)?\s*(?:,|;|—|–)?\s*\(?\s*(?:now\s+|later\s+)?(?:revised|corrected|changed|updated"
    r"|amended)\s+to\b"
    # "I had 35, but ..", "I first wrote 35, but": the draft before the "but" that withdraws it
    r"|\bI\s+(?:had|wrote|said|put|gave|answered|typed|first\s+(?:had|wrote|said|put|gave|answered|thought))\s+"
    rf"(?:\$)?{_VALUE}(?:\$)?\s*,?(?=\s+but\b)"
)
# the words a withdrawal cannot be written without: the pattern runs only where one occurs
_WITHDRAWN = Cued(
    _WITHDRAWN,
    re.compile(
        r"(?i)scratch|strike|cross\s+out|retract|withdraw|disregard|\(|revised|corrected|changed|updated|amended"
        r"|\bI\s|\b(?:my|mi|meine|ma|minha|mia)\s"
    ),
)
# "Ignore the above; corrected: ..": what follows the last such marker is the answer
_IGNORE_ABOVE = re.compile(
    r"(?i)(?:\b(?:ignore|disregard|forget|scratch)\s+(?:the\s+|my\s+|all\s+(?:of\s+)?the\s+)?"
    r"(?:above|previous|earlier|prior|preceding|that|this)\b(?:\s+(?:answer|one|response|output|draft|text))?"
    # "Hmm, no wait.", "Wait, no.", "Actually, no.": the draft before is dropped
    r"|(?:\bhmm+,?\s*)?\bno,?\s+wait\b|\bwait,?\s+no\b|\bactually,?\s+no\b|\bno,?\s+actually\b)"
    r"[\s;:,.!—–-]*(?:(?:corrected|revised|updated|instead|the\s+answer\s+is)\s*[:：]?\s*)?"
)
# "Edit: changed from 35 to 33 after checking": the change record's line says the answer is its target
_CHANGE_FROM = re.compile(
    r"(?im)^[^\n]*?\b(?:changed|revised|corrected|updated|amended|switched)\s+(?:it\s+|my\s+answer\s+|the\s+answer\s+)?"
    r"from\s+(?P<old>[^\n]{1,60}?)\s+to\s+(?P<new>[^\n]{1,80}?)"
    r"(?=\s+(?:after|because|since|based|following|once|when|as|per)\b|[.;!]?[ \t]*$|[.;!]\s)[^\n]*"
)
# "Final answer: (1+1)×(8+1) → revised to (1+1+1)×8": what the arrow leaves is withdrawn
_ARROW_REVISED_TO = re.compile(
    r"(?im)(?P<head>^|[:：][ \t]*)(?P<old>[^\n→]{1,100}?)[ \t]*(?:→|->|=>|⇒)[ \t]*\(?(?:now[ \t]+|later[ \t]+)?"
    r"(?:revised|corrected|changed|updated|amended)[ \t]+to[ \t]+"
)
# "Answer changed: 35 → 33", "Revised: 35 -> 33": a change record's target
_CHANGE_ARROW = re.compile(
    r"(?im)^(?P<label>[^\n]{0,40}?\b(?:changed|revised|corrected|updated|amended|edit(?:ed)?|correction)\b[^\n:]{0,20}[:：]?)"
    r"[ \t]*(?P<old>[^\n→]{1,60}?)[ \t]*(?:→|->|=>|⇒)[ \t]*(?P<new>[^\n]{1,80})$"
)
# a sentence that names a value and withdraws it ("Previous answer (No) retracted.", "I briefly considered No, but
# ruled it out.")
_WITHDRAWS = re.compile(
    r"(?i)\b(?:retracted|withdrawn|superseded|scratched|struck\s+out|crossed\s+out|discarded|rejected|dismissed"
    r"|rul(?:e|ed|ing)\s+(?:it|that|this|them)\s+out|(?:was|is)\s+(?:my\s+)?(?:wrong|mistaken)\s+(?:first\s+)?guess"
    # a value dismissed as about something else ("35, but that refers to something else")
    r"|refers?\s+to\s+(?:something|a\s+different|another)|unrelated|irrelevant|not\s+relevant"
    r"|(?:is|was)\s+(?:a\s+)?different\s+(?:thing|quantity|number|value|entity|person|event|question))\b"
)
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|\n+|\s+\((?=[^()]*\)\s*[.!]?\s*$)")

# ------------------------------------------------------------------ 3. draft labels before a final one
_DRAFT_LABEL = re.compile(
    r"(?im)^[ \t>*_#-]*(?:\d+[.)][ \t]*)?(?:first\s+(?:pass|attempt|try|guess|draft|answer|estimate)"
    r"|initial\s+(?:answer|guess|attempt|estimate)"
    r"|draft(?:\s+answer)?|preliminary\s+answer|previous\s+answer|earlier\s+answer|old\s+answer|original\s+answer"
    r"|tentative\s+answer|hypothesis)[ \t*_]*(?:\([^()\n]{0,30}\))?[ \t*_]*[:：][^\n]*?(?=(?:[.!][ \t]+|\n|$))"
)
_FINAL_LABEL = re.compile(
    r"(?i)\b(?:final(?:\s+answer)?|second\s+pass|second\s+attempt|revised(?:\s+answer)?|corrected(?:\s+answer)?"
    r"|updated(?:\s+answer)?|going\s+with|settled\s+on|answer)\b[^\n:]{0,30}[:：]|\bgoing\s+with\b|\bsettl(?:e|ed|ing)\s+on\b"
)
# ------------------------------------------------------------------ 4. elimination
_ELIMINATED_LINE = re.compile(
    r"(?im)^[ \t>*_-]*(?:eliminated|ruled\s+out|rejected|excluded|discarded|dismissed|crossed\s+out)"
    r"[ \t*_]*[:：][^\n]*(?:\n|$)"
)


def _doubts(text: str) -> bool:
    """Doubt, a condition or someone else's word anywhere in the answer, or a question after its last mark: no mark
    counts (grammar 8's rules: a question about the draft before the mark is how a correction starts)."""
    return (
        grammar8.doubtful(text)
        or grammar8._ATTRIBUTION.search(text) is not None
        or re.search(r"(?i)\b(?:if|unless|otherwise|whether)\b", text) is not None
        or _EITHER.search(text) is not None
        or _asks_after_marks(text)
    )


def _asks_after_marks(text: str) -> bool:
    """A question mark after the start of the answer's last mark (anywhere, when it has none)."""
    if "?" not in text:
        return False
    starts = [m.start() for p in _MARKS for m in p.finditer(text)] if _HINT.search(text) else []
    return "?" in text[max(starts, default=0) :]


_CJK_RUN = re.compile(rf"\s*({grammar8._CJK}+)\s*")


def _spaced(text: str) -> str:
    """``text`` with a space around each run of CJK characters, so a value beside one is a token of its own."""
    return _CJK_RUN.sub(r" \1 ", text) if re.search(grammar8._CJK, text) else text


@functools.lru_cache(maxsize=256)
def _values(text: str, kind: str) -> frozenset[str]:
    """The values of the answer's kind ``text`` names (with "yes" and "no", which are common words elsewhere)."""
    spaced = _spaced(text)
    values = {c for c in _candidates(spaced) if _of_kind(c, kind)}
    if kind == "text":
        values.update(w.lower() for w in re.findall(r"(?i)\b(?:yes|no)\b", spaced))
    return frozenset(values)


def _names_value(span: str, kind: str) -> bool:
    return bool(_values(span, kind))


def drop_marked(text: str, kind: str, grammar: int = 9) -> str:
    """``text`` without the values it marks as not its answer (the module doc's four marks), when at least one value
    of the answer's kind remains; ``text`` unchanged when the answer doubts or makes a mark conditional. From
    ``grammar`` 12 a minus sign left at the start keeps its number ("Not -40 but -41." answers -41)."""
    if len(text) > _LIMIT or _HINT.search(text) is None or _doubts(text) or _quoted_mark(text):
        return text
    if len(_values(text, kind)) < 2:
        return text
    out = _strike(text, kind)
    if out != text:  # the gaps the dropped values left: no space before punctuation, no clause left empty
        out = re.sub(r"[ \t]+([.,;:!?])", r"\1", out)
        out = re.sub(r"[,;:]+(?=[.!?])", "", out)
        out = re.sub(r"^(?:[\s.,;:!?—–]|-(?![\d.]))+" if grammar >= 12 else r"^[\s.,;:!?—–-]+", "", out)
    left = _values(out, kind)
    if out == text or not left or not out.strip():
        return text
    if kind != "text" and len(left) == 1:
        return f"Answer: {_only_token(out, kind)}"  # one value of the kind is left: the answer
    out = _drop_postamble(_drop_preambles(_ANSWER_FRAME.sub("the answer is ", out)))  # the frame in English
    if re.search(grammar8._CJK, out):  # "James Madisonです。": the value a token of its own, the copula off
        out = grammar8._CJK_TAIL.sub("", grammar8._CJK_EDGE.sub(" ", out).rstrip(" .。"))
    return out


def _strike(out: str, kind: str) -> str:
    """Every marked value taken out of ``out`` (each pass only where its cue is there)."""
    ignore = list(_IGNORE_ABOVE.finditer(out))
    if ignore and _names_value(out[ignore[-1].end() :], kind) and _names_value(out[: ignore[-1].start()], kind):
        out = out[ignore[-1].end() :]
    labelled = ":" in out or "：" in out
    if labelled:
        out = _ELIMINATED_LINE.sub(
            lambda m: "" if _names_value(m.group(0).split(":", 1)[-1], kind) else m.group(0), out
        )
    if "from" in out:
        out = _CHANGE_FROM.sub(lambda m: f"Answer: {m.group('new')}", out)
    if any(arrow in out for arrow in ("→", "->", "=>", "⇒")):
        out = _ARROW_REVISED_TO.sub(lambda m: m.group("head"), out)
        out = _CHANGE_ARROW.sub(lambda m: f"Answer: {m.group('new')}", out)
    out = _WITHDRAWN.sub(lambda m: " " if _names_value(m.group(0), kind) else m.group(0), out)
    if _NEGATION.search(out):
        for pattern in _LEAD_CONTRASTS:
            out = pattern.sub(_lead, out)
        for pattern in _TAIL_CONTRASTS:
            out = pattern.sub(_tail, out)
        if re.search(r"(?i)\b(?:yes|s[ií])\b", out) is None:
            out = _TAIL_NO.sub(_tail, out)
    if labelled:
        out = _drop_drafts(out, kind)
    return _drop_withdrawing_clauses(out, kind)


def _only_token(text: str, kind: str) -> str:
    """The one token of ``text`` that holds a value of ``kind``, as it is written (its edges taken off)."""
    for raw in _spaced(text).split():
        token = grammar8.value_token(raw.strip("$"))
        if token and _of_kind(token, kind) and _candidates(token):
            return token
    return text


_PREAMBLE = re.compile(r"[^.!?:;\n。！？：—–]*(?:[.!?:;\n。！？：]|\s[—–]\s)\s*")


def _drop_postamble(text: str) -> str:
    """A last clause left with nothing but a correction marker or a dangling word ("Marie Curie. Oops, <the draft
    withdrawn>", "Sorry, <..>"), once the value it withdrew is gone."""
    dangling = text.rstrip()[-1:] in (",", ":", ";", "—", "–")  # its object was the withdrawn value ("Sorry, ")
    body = text.rstrip(" \t\n,;:.!—–-")
    cut = max(body.rfind(c) for c in ".!?\n。！？") + 1
    clause = body[cut:]
    if not clause.strip() or cut == 0 or not (dangling or _withdrawing_marker(clause)):
        return text
    rest = _APOLOGY.sub(" ", grammar8._MARKER.sub(" ", clause))
    if re.search(r"\d", rest) or len(rest.split()) > 3:
        return text
    return body[:cut]


def _drop_preambles(text: str) -> str:
    """Leading clauses that only say a correction follows ("Oops — typo above.", "Korrektur:"), once the value
    they withdrew is gone."""
    while True:
        match = _PREAMBLE.match(text)
        if match is None or match.end() >= len(text.rstrip()):
            return text
        clause = match.group(0)
        if re.fullmatch(r"[^\d\n:：]{1,40}[:：]\s*", clause) and len(clause.split()) <= 4:
            return f"Answer: {text[match.end() :]}"  # "Revised: X", "Remaining and confirmed: X": a label
        rest = _APOLOGY.sub(" ", grammar8._MARKER.sub(" ", clause))
        if not _withdrawing_marker(clause) or re.search(r"\d", rest) or len(rest.split()) > 3:
            return text
        text = text[match.end() :]


_APOLOGY = re.compile(r"(?i)\b(?:sorry|apologies|pardon|whoops|my\s+bad)\b")


def _withdrawing_marker(clause: str) -> bool:
    """A grammar 8 marker that a value was wrong ("oops", "that was an error", "Korrektur", "no,") or an apology; a
    replacement marker ("the correct answer is") introduces the answer and is never dropped."""
    return _APOLOGY.search(clause) is not None or any(
        m.group("wrong") or m.group("no") for m in grammar8._MARKER.finditer(clause)
    )


def _lead(match: re.Match[str]) -> str:
    return " " if _negated_span(match) else match.group(0)


def _tail(match: re.Match[str]) -> str:
    return "" if _negated_span(match) else match.group(0)


def _negated_span(match: re.Match[str]) -> bool:
    neg = match.group("neg")
    return bool(neg.strip()) and len(neg.split()) <= 8


def _drop_drafts(text: str, kind: str) -> str:
    """Draft-labelled values ("First pass: 35.", "Draft answer: No") dropped when a final label follows them."""
    drafts = list(_DRAFT_LABEL.finditer(text))
    if not drafts:
        return text
    last = drafts[-1]
    if _FINAL_LABEL.search(text, last.end()) is None or not _names_value(text[last.end() :], kind):
        return text
    finals = list(_FINAL_LABEL.finditer(text, last.end()))
    final = finals[-1]
    value = re.match(r"[ \t*_]*([^\n]*?)[ \t*_]*(?:[.!][ \t]*)?(?:\n|$)", text[final.end() :])
    if value is not None and _names_value(value.group(1), kind):
        return f"Answer: {value.group(1).strip()}"
    for m in reversed(drafts):
        text = text[: m.start()] + text[m.end() :]
    return text


def _drop_withdrawing_clauses(text: str, kind: str) -> str:
    """Clauses that name a value and withdraw it ("Previous answer (No) retracted.", "I briefly considered No, but
    ruled it out."), when another clause names a value."""
    if _WITHDRAWS.search(text) is None:
        return text
    pieces = [p for p in _CLAUSE.split(text) if p and p.strip()]
    kept = [p for p in pieces if not (_WITHDRAWS.search(p) and _names_value(_WITHDRAWS.sub(" ", p), kind))]
    if kept and len(kept) < len(pieces) and any(_names_value(p, kind) for p in kept):
        return " ".join(p.strip() for p in kept)
    return text


# ------------------------------------------------------------------ presentation
_FINISH = re.compile(
    r"(?is)^\s*(?:thought\s*:[^\n]*\n\s*)?(?:action\s*:\s*)?finish\s*\[(?P<value>[^\[\]\n]{1,500})\]\s*$"
)
_THOUGHT_LINE = re.compile(r"(?i)^\s*thought\s*:[^\n]*\n+(?=\s*\S)")
_ROLE_HEADER = re.compile(r"(?i)^\s*(?:assistant|model|ai|bot|answer|response|output)\s*:?\s*\n\s*\n(?=\s*\S)")
_NUMBERED_ONE = re.compile(r"^\s*1[.)]\s+(?P<value>[^\n]{1,300})\s*$")
_GENERIC_HEADING = re.compile(
    r"(?im)^[ \t]*#{1,6}[ \t]*(?:summary|overview|conclusion|findings|result\s+summary|verification|tl;?dr)"
    r"[ \t]*:?[ \t]*\n"
)
_SIGN_OFF = re.compile(
    r"(?i)(?<=[.!])\s+(?:feel\s+free\s+to\s+(?:ask|reach\s+out|let\s+me\s+know)|let\s+me\s+know\s+if|don'?t\s+hesitate\s+to"
    r"|hope\s+(?:this|that|it)\s+helps|happy\s+to\s+help|if\s+you\s+(?:have|need|want|'d\s+like|would\s+like)\s+(?:any\s+)?"
    r"(?:more|further|other|additional)?\s*(?:details|questions|help|information|clarification))[^\n]*$"
)


_LEADING_NUMBER = re.compile(r"^\s*(?P<n>\d{1,2})\.[ \t]+(?=\S)")


def _leading_number(text: str) -> str:
    """A short number that opens the answer ("12. The correct answer is 21.") is its first value, not a list item,
    unless an item numbered after it follows ("2. .."): written "12 . ..", it is read as a longer number is (grammar 8's
    readings disagreed on it, and a hedge that opened with it was paid in both orders)."""
    match = _LEADING_NUMBER.match(text)
    if match is None or match.group("n") == "1":
        return text
    if re.search(rf"(?m)^\s*{int(match.group('n')) + 1}[.)]\s", text):
        return text
    return f"{match.group('n')} . {text[match.end() :]}"


def wrappers(text: str, kind: str | None = None) -> str:
    """ReAct's ``Finish[X]``, a ``Thought:`` line above the answer, a role header, a lone numbered item, a generic
    section heading and a sign-off taken off. With a number or option ``kind`` (grammar 12), a lone item's "1." is a
    list number only when the item names a value of that kind ("1. I verified this." answers 1)."""
    match = _FINISH.match(text) if "[" in text else None
    if match is not None:
        return f"Final Answer: {match.group('value').strip()}"
    if "\n" in text:
        text = _THOUGHT_LINE.sub("", text, count=1)
        text = _ROLE_HEADER.sub("", text, count=1)
    match = _NUMBERED_ONE.match(text)
    if match is not None and kind in ("number", "option"):
        match = match if any(_of_kind(c, kind) for c in _candidates(match.group("value"))) else None
    if match is not None:
        text = match.group("value")
    else:
        text = _leading_number(text)
    if "#" in text:
        text = _GENERIC_HEADING.sub("", text)
    lower = text[-400:].lower()
    if any(cue in lower for cue in ("feel free", "let me know", "hesitate", "hope ", "happy to help", "if you")):
        text = _SIGN_OFF.sub("", text)
    return text


# ------------------------------------------------------------------ localized values
_YES = re.compile(r"(?i)^\s*(?:ja|jawohl|oui|s[ií]|sim|да|是的?|对|對|はい|네|예)\s*[.!。！]?\s*$")
_NO = re.compile(r"(?i)^\s*(?:nein|non|não|нет|不是?|否|不对|いいえ|아니(?:요|오))\s*[.!。！]?\s*$")
_MONTHS = {
    "January": "januar janvier enero janeiro gennaio январ",
    "February": "februar février fevrier febrero fevereiro febbraio феврал",
    "March": "märz maerz mars marzo março мартa марта март",
    "April": "april avril abril aprile апрел",
    "May": "mai mayo maio maggio мая май",
    "June": "juni juin junio junho giugno июн",
    "July": "juli juillet julio julho luglio июл",
    "August": "august août aout agosto август",
    "September": "september septembre septiembre setiembre setembro settembre сентябр",
    "October": "oktober octobre octubre outubro ottobre октябр",
    "November": "november novembre noviembre novembro ноябр",
    "December": "dezember décembre decembre diciembre dezembro dicembre декабр",
}
_MONTH_OF = {word: english for english, words in _MONTHS.items() for word in words.split()}
_FOREIGN_DATE = re.compile(
    r"(?i)\b(?P<day>\d{1,2})(?:\.|er|º|°)?\s+(?:de\s+)?(?P<month>[^\W\d_]{3,12})\.?\s+(?:de\s+|del\s+|года?\s+)?(?P<year>\d{3,4})\b"
)
_CJK_DATE = re.compile(r"(?P<year>\d{3,4})\s*年\s*(?P<month>\d{1,2})\s*月\s*(?P<day>\d{1,2})\s*日")
_ENGLISH_MONTHS = list(_MONTHS)
_DOT_GROUPS = re.compile(r"(?<![\d.,])\d{1,3}(?:\.\d{3}){2,}(?![\d.,]*\d)")


def _month(word: str) -> str | None:
    word = word.lower()
    if word in _MONTH_OF:
        return _MONTH_OF[word]
    for stem, english in _MONTH_OF.items():
        if len(stem) >= 5 and word.startswith(stem):  # Russian cases: "июня", "сентября"
            return english
    return None


def _foreign_date(match: re.Match[str]) -> str:
    month = _month(match.group("month"))
    if month is None:
        return match.group(0)
    return f"{int(match.group('day'))} {month} {match.group('year')}"


def _cjk_date(match: re.Match[str]) -> str:
    month = int(match.group("month"))
    if not 1 <= month <= 12:
        return match.group(0)
    return f" {int(match.group('day'))} {_ENGLISH_MONTHS[month - 1]} {match.group('year')} "


_ANSWER_FRAME = re.compile(
    r"(?i)\b(?:a\s+resposta\s+(?:certa\s+|correta\s+)?é|la\s+risposta\s+(?:corretta\s+|giusta\s+)?è"
    r"|la\s+respuesta\s+(?:correcta\s+)?es|la\s+(?:bonne\s+)?réponse\s+est|die\s+(?:richtige\s+)?antwort\s+(?:ist|lautet)"
    r"|(?:правильный\s+)?ответ\s*(?:—|-|:)?)\s+"
)


def localize(text: str, golds: list[str], *, comma_golds_as_names: bool = True) -> str:
    """Yes and no in eight more languages (when a gold is yes or no), dates in seven more languages, digit groups
    separated by dots, and a surname-first name that is a gold's name reordered, written as grammar 8 reads them.

    With ``comma_golds_as_names`` (grammars 9 to 11) a gold that holds a comma counts as a name too, so a two-item
    list gold written in the other order ("Germany, Oranienburg" for "Oranienburg, Germany") was read as the gold;
    grammar 12 reorders names only (a gold without a comma)."""
    if any(g.strip().lower() in ("yes", "no") for g in golds):
        if _YES.match(text):
            return "Yes"
        if _NO.match(text):
            return "No"
    if "年" in text:
        text = _CJK_DATE.sub(_cjk_date, text)
    text = _FOREIGN_DATE.sub(_foreign_date, text)
    if "." in text:
        text = _DOT_GROUPS.sub(lambda m: m.group(0).replace(".", ""), text)
    if "," in text:
        text = _surname_first(text, golds, comma_golds_as_names)
    return text


_NAME = r"(?:[^\W\d_]\.|[^\W\d_][\w'’-]*)"
_SURNAME_FIRST = re.compile(rf"\b(?P<last>[^\W\d_][\w'’-]*),\s+(?P<first>{_NAME}(?:\s+{_NAME}){{0,2}})")


def _surname_first(text: str, golds: list[str], comma_golds_as_names: bool = True) -> str:
    names = {
        " ".join(fold(g).split()) for g in golds if 2 <= len(g.split()) <= 4 and (comma_golds_as_names or "," not in g)
    }
    if not names:
        return text

    def swap(match: re.Match[str]) -> str:
        reordered = f"{match.group('first')} {match.group('last')}"
        return reordered if " ".join(fold(reordered).split()) in names else match.group(0)

    return _SURNAME_FIRST.sub(swap, text)


# the answer says it has not chosen ("I can't determine which", "Options I couldn't eliminate: ..", "A and C are tied")
_UNDECIDED = re.compile(
    r"(?i)\b(?:can(?:no|')?t|could(?:n't|\s+not)|unable\s+to)\s+(?:\w+\s+)?(?:(?:determine|decide|choose|tell|pick|distinguish)"
    r"(?:\s+\w+){0,2}?\s+(?:which|between|among)|eliminate|narrow\s+(?:it|this|them)\s+down)\b|\bare\s+(?:tied|equally\s+(?:likely|plausible|supported))\b|\bevidence\s+is\s+(?:split|mixed)\b"
    r"|\bmore\s+information\s+(?:would\s+be|is)\s+needed\b|\btoo\s+close\s+to\s+call\b|\bunclear\b"
    r"|\bsupports?\s+both\b|\bboth\s+(?:fit|work|apply|are\s+(?:possible|plausible|supported|consistent|defensible))\b"
)


def undecided(text: str, kind: str) -> str | None:
    """Why an answer that names two values or more and says it has not chosen between them commits to none."""
    if _UNDECIDED.search(text) is None or len(_values(text, kind)) < 2:
        return None
    return "it says it has not chosen between the values it names"


# a word or sign at least one mark needs: an answer without any is read by grammar 8 at once
_HINT = re.compile(
    r"(?i)\b(?:not|nicht|no|não|non|pas|не|scratch|strike|cross(?:ed)?|retract(?:ed)?|withdraw(?:n)?|disregard|ignore"
    r"|forget|changed|revised|corrected|updated|amended|edit(?:ed)?|correction|switched|mistakenly|mistake|accidentally"
    r"|erroneously|wrongly|error|I|wait|actually|first|second|initial|draft|preliminary|previous|earlier|old|original"
    r"|tentative|hypothesis|eliminated|ruled?|ruling|rejected|excluded|discarded|dismissed|superseded|scratched|struck"
    r"|guess|refers?|unrelated|irrelevant|relevant|different|was|previously|formerly|originally|initially|before"
    r"|primera|erste|première|primeira|prima)\b"
    r"|不是|ではなく|→|->|=>|⇒|\("
)
_MARKS = (
    *_LEAD_CONTRASTS,
    *_TAIL_CONTRASTS,
    _WITHDRAWN,
    _CHANGE_FROM,
    _CHANGE_ARROW,
    _ARROW_REVISED_TO,
    _IGNORE_ABOVE,
    _DRAFT_LABEL,
    _ELIMINATED_LINE,
    _WITHDRAWS,
)


def _marks(text: str) -> bool:
    """Whether ``text`` holds any of the four marks (whether or not it is asserted)."""
    return _HINT.search(text) is not None and any(p.search(text) for p in _MARKS)


def _quoted_mark(text: str) -> bool:
    """A mark inside a quotation or code ("580. \"scratch that, 508.\""): shown, not made; the text keeps its values."""
    if not any(q in text for q in '"“`'):
        return False
    quoted = [m.span() for m in grammar8._QUOTED.finditer(text)]
    return any(a <= m.start() < b for p in _MARKS for m in p.finditer(text) for a, b in quoted)


def doubted_mark(text: str, kind: str) -> str | None:
    """Why an answer that marks one of two values as dropped and doubts it ("Not 580 but 508, I think.", "It's 508, not
    580? Hard to say.") commits to neither (grammar 8 reads a doubted revision so)."""
    if _HINT.search(text) is None:
        return None
    doubt = grammar8.doubtful(text) or _asks_after_marks(text)
    if not doubt or _EITHER.search(text) or len(_values(text, kind)) < 2 or not _marks(text):
        return None
    return "it marks a value as dropped and doubts it: it commits to neither"


def attributed_revision(text: str, kind: str) -> str | None:
    """Why an answer that revises a value it gave (grammar 8's markers, a value before the last one and after it) under
    doubt, a condition or someone else's word ("12. Revised answer: 21, per some.") commits to neither. Grammar 8
    read no retraction there, and left both values to the readings after it, which took a short number at the start
    for a list item ("12.") and paid either value."""
    if len(text) > _LIMIT:
        return None
    if not (grammar8._ATTRIBUTION.search(text) or grammar8._CONDITIONAL.search(text) or grammar8.doubtful(text)):
        return None  # nothing doubts, conditions or attributes anything
    quoted = [m.span() for m in grammar8._QUOTED.finditer(text)] if any(q in text for q in '"“`') else []
    markers = [m for m in grammar8._MARKER.finditer(text) if not any(a <= m.start() < b for a, b in quoted)]
    if not markers:
        return None
    last = markers[-1]
    # the marker's own clause and the first words after it: "Although some sources say 44, the correct answer is 33"
    # attributes the rival, not the revision
    start = max(text.rfind(c, 0, last.start()) for c in ".!?;,\n") + 1
    scope = text[start : last.end()] + " ".join(grammar8._FIRST_SENTENCE.match(text, last.end()).group(0).split()[:4])
    told = grammar8.doubtful(text) or grammar8._ATTRIBUTION.search(scope) or grammar8._CONDITIONAL.search(scope)
    if not told or not _values(text[: markers[0].start()], kind) or not _values(text[last.end() :], kind):
        return None
    if len(_values(text, kind)) < 2:
        return None
    return "its revision is doubted, conditional or someone else's: it commits to neither value"


def read_answer(
    prediction: object,
    golds: Iterable[object] = (),
    kind: str = "text",
    question: str = "",
    *,
    grammar: int = 9,
) -> Reading:
    """The final answer ``prediction`` read by grammar 9: the wrappers and localized values written as grammar 8
    reads them, the values the answer marks as not its answer taken out, then grammar 8's reader (``grammar``: the
    grammar reading, 9 or later; grammar 12 reorders only the names of golds without a comma, :func:`localize`)."""
    text = normalize_text(prediction)
    if len(text) <= _LIMIT:
        reason = undecided(text, kind) or doubted_mark(text, kind) or attributed_revision(text, kind)
        if reason is not None:
            return Reading(text, reason)
        gold_texts = [str(g) for g in golds]
        text = localize(wrappers(text, kind if grammar >= 12 else None), gold_texts, comma_golds_as_names=grammar < 12)
        text = drop_marked(text, kind, grammar)
        text = restated(text, kind, question)
    return grammar8.read_answer(text, golds, kind, question, grammar=grammar)


_IS_VALUE = re.compile(
    r"(?is)\b(?:is|are|was|equals|comes\s+to|gives|=)\s+(?:\*\*|\$)?(?P<value>[^\s*$]{1,80}?)(?:\*\*|\$)?[.!]?\s*$"
)


def restated(text: str, kind: str, question: str) -> str:
    """A number or option answer that restates the question and ends on "is V" ("The remainder when the product is
    divided by 1000 is 321."): ``Answer: V`` when V is the only value it names that the question does not."""
    if kind == "text" or not question or len(text) > 2000 or _doubts(text):
        return text
    match = _IS_VALUE.search(text)
    if match is None:
        return text
    value = grammar8.value_token(match.group("value"))
    asked = _values(question, kind)
    named = _values(text, kind) - asked
    if not value or not _of_kind(value, kind) or named != set(_candidates(value)):
        return text
    return f"Answer: {value}"
