"""Answer grammar 8 (the ``-v8`` ids): grammar 7 (:mod:`agentflow_env.scoring.grammar7`) with retractions read by
their structure instead of by a list of phrasings.

A seventh answer set, written outside the project by someone who never read the scorers, was run blind through
grammar 7: 10.9% of its correct answers scored 0, and half of those were self-corrections ("Zuerst dachte ich 44,
aber das ist falsch. Richtig ist 33.", "44 — no, 33.", "My mistake — 44 was wrong. It's 33.", a ``diff`` block,
``{"answer": "44", "revised_answer": "33"}``), while 7.5% of their mirror images (the same words with the two values
swapped) were paid. Grammar 7 knew revisions as phrases ("I misread", "me equivoqué"); a phrasing it had not seen
left two values, which it read as the first or as none. Grammar 8 reads a retraction as a structure:

1. **A retraction marks what came before it as withdrawn** (:func:`retraction`). A marker is a word or phrase that
   says a value already given is wrong ("that's wrong", "X was incorrect", "my mistake", "I misread", "scratch
   that", "no,", "oops", "typo", "correction"), or that introduces its replacement ("should read", "I meant",
   "the correct answer is", "it's actually", "Revised answer:"), in English and in eight more languages (German,
   French, Spanish, Portuguese, Italian, Russian, Chinese, Japanese, Korean). After the **last** marker, when what
   follows states exactly one value of the answer's type (a number or an option; a text answer: one short
   sentence after a marker that says a value was wrong), with no rival cue, no doubt ("maybe", "?"), and no
   second rejection, that value is the answer: everything before the marker is a draft.
2. **A retraction must be asserted, by the answer itself** (:func:`unsure_revision`, :func:`quoted_revision`,
   :func:`drop_drafts`). An answer that revises and doubts ("Toss-up", "Vielleicht", "I think", a question after
   the last marker), or whose revision is conditional ("33. If that's wrong, 44."), someone else's or conceded
   ("some sources say", "per a reviewer", "though"; checked up to the first words after the marker), quoted or in
   code, or offered as an alternative ("44 (or, my mistake: 33)"), keeps both values: a hedge in both orders,
   grammar 7's own revisions included. "The correct answer is" replaces a value only after a marker withdrew it.
   A marker that follows the value it rejects ("33. 44 is incorrect."), or one followed by a note about the
   draft ("33. Oops, I first typed 44."), leaves the answer as it was read before; "44 is wrong, and so is 33"
   denies both (:func:`denies_all`).
3. **Struck and replaced values in markup**: a ``diff`` block's removed lines are withdrawn and its added lines are
   the text; ``<s>44</s>`` followed by more text is a struck value (grammar 7 read ``<s>``/``</s>`` as template
   tokens, which they are only around the whole reply); a JSON object with a revision key (``revised_answer``,
   ``corrected_answer``, ``final_answer``, ..) beside a plain ``answer`` reads the revision. A replacement that
   asks ("<s>44</s> 33?") replaces nothing.
4. **One value beside a debris line** (:func:`only_value`, :func:`rival_line`, :func:`value_token`): a debris line
   before a number answer's one value, or a sign-off, heading, list item or ``\\end{..}`` after it, leaves the
   value read; LaTeX values keep their braces.
5. **Decoys and footers** (:func:`drop_decoys`): a clause that names a value only as a decoy, and says nothing for
   it, is dropped; a footer line of links alone is presentation. "X or Y" in Chinese, Japanese and Korean is a
   hedge.

The mirror image of every class reads the other value, so a retraction pays for the value it commits to, in one
order only: it is a reading of what the answer says, not a way to name two values and be paid for either. Every
step is a bounded number of linear passes.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable

from agentflow_env.scoring import grammar5, grammar6, grammar7
from agentflow_env.scoring.cued import Cued
from agentflow_env.scoring.extract import normalize_text
from agentflow_env.scoring.grammar import Reading, _candidates, _of_kind

__all__ = [
    "doubtful",
    "drop_decoys",
    "only_value",
    "presentation",
    "quoted_revision",
    "read_answer",
    "retraction",
    "rival_line",
    "unsure_revision",
    "value_token",
]

# ------------------------------------------------------------------ 1. retraction markers
# A value given before it is wrong (the commitment follows the marker).
_WRONG_EN = (
    r"(?:that|this|it|which)(?:'s|’s|\s+is|\s+was)\s+(?:wrong|incorrect|not\s+(?:right|correct)|a\s+(?:mistake|typo|slip)|an\s+error)"
    r"|\b(?:is|was|were|are)\s+(?:wrong|incorrect|a\s+(?:mistake|typo|slip)|an\s+error|not\s+(?:right|correct))"
    r"|\b(?:a\s+slip|slip-up|blunder|an\s+oversight)\b"
    r"|\bI\s+(?:was|am|'m|’m)\s+(?:wrong|mistaken)|\bmy\s+(?:mistake|bad|error)"
    r"|\bI\s+(?:made|make)\s+(?:a|an)\s+(?:mistake|error|typo)"
    r"|\bI\s+(?:misread|miscalculated|miscounted|misremembered|mixed\s+up|messed\s+up|got\s+(?:it|that)\s+wrong)"
    r"|\b(?:scratch|strike)\s+that|\b(?:ignore|disregard)\s+(?:that|this|the\s+above|my\s+(?:previous|earlier|last|first))"
    r"|\boops\b|\btypo\b|\bcorrection\b"
)
# a bare "no" ("44 — no, 33"), in the nine languages: a marker only where more than punctuation follows it
_BARE_NO = (
    r"\bnope\b|\bno\s*(?:[,.;:!—–]|-\s)|\bwait,?\s+no\b|\bnein\s*[,.;:!—–]|\bnon\s*[,.;:!—–]|\bnão\s*[,.;:!—–]"
    r"|\bнет\s*[,.;:!—–]|いや、|아니(?:요|오)?[,.]"
)
_WRONG_OTHER = (
    r"\bfalsch\b|\bFehler\b|\bstimmt\s+nicht\b|\bnicht\s+richtig\b|\bKorrektur\b|\bich\s+habe\s+mich\s+(?:geirrt|vertan)"
    r"|\bTippfehler\b"
    r"|\bfau(?:x|sse)\b|\berreur\b|\berroné\w*|\bje\s+me\s+suis\s+tromp\w+|\bpas\s+(?:juste|correct|bon)\b"
    r"|\bme\s+equivoqu\w+|\bequivocad\w+|\bincorrect[oa]\b|\berróne\w+|\bcorrecci[oó]n\b"
    r"|\berrad[oa]\b|\berrei\b|\bme\s+engane\w*|\bincorret[oa]\b|\bcorreção\b"
    r"|\bsbagliat\w+|\bsbagliavo\b|\berrat[oa]\b|\bcorrezione\b"
    r"|неправильн\w*|неверн\w*|\bошиб\w+|исправлени\w*|поправка"
    r"|错了|是错的|错误|不对|不正确|更正|纠正"
    r"|間違|誤り|違いま|訂正"
    r"|틀렸|틀린|잘못|정정"
)
# The replacement follows at once ("should read 33", "the correct answer is 33", "Revised answer: 33").
_REPLACE = (
    r"\bshould\s+(?:read|be|have\s+been)\b|\bI\s+meant\b|\bmake\s+that\b"
    r"|\bthe\s+(?:correct|right|real|actual|true)\s+(?:answer|value|result|figure|number|option|choice|one)\s+is\b"
    r"|\b(?:revised|corrected|updated|amended)\s+(?:final\s+)?(?:answer|value|result)\s*[:：]"
    r"|\brichtig\s+ist\b|\bdie\s+richtige\s+Antwort\s+ist\b|\bla\s+bonne\s+réponse\s+est\b"
    r"|\bla\s+respuesta\s+correcta\s+es\b|\ba\s+resposta\s+correta\s+é\b|\bla\s+risposta\s+(?:corretta|giusta)\s+è\b"
    r"|правильный\s+ответ|正确答案|应该是|正解は|正しくは|정답은"
)
# ... or a softer word that the value said before was not so ("it's actually 33"): numbers and options only
_SOFT = (
    r"\b(?:it's|it’s|it\s+is|is|was)\s+actually\b|\bactually,|\beigentlich\b|\btatsächlich\b|\ben\s+(?:fait|réalité)\b"
    r"|\ben\s+realidad\b|\bna\s+verdade\b|\bin\s+realtà\b|на\s+самом\s+деле|其实|实际上|実は|사실은"
)
# replacement markers that withdraw the value before them by themselves
_SELF_REPLACE = re.compile(r"(?i)should|I\s+meant|make\s+that|revised|corrected|updated|amended")
_MARKER = re.compile(
    rf"(?i)(?P<wrong>{_WRONG_EN}|{_WRONG_OTHER})|(?P<no>{_BARE_NO})|(?P<replace>{_REPLACE})|(?P<soft>{_SOFT})"
)
# a word of each of the markers above, in lower case: most answers hold none, and then the hundred-odd markers are
# not tried at every position
_MARKER = Cued(
    _MARKER,
    re.compile(
        r"wrong|incorrect|not\s+right|not\s+correct|mistake|typo|slip|error|blunder|oversight|my\s+bad|misread"
        r"|miscalculated|miscounted|misremembered|mixed\s+up|messed\s+up|scratch\s+that|strike\s+that|ignore\s"
        r"|disregard\s|oops|correction"
        r"|nope|no\s*[,.;:!—–]|no\s*-\s|wait,?\s+no|nein\s*[,.;:!—–]|non\s*[,.;:!—–]|não\s*[,.;:!—–]|нет\s*[,.;:!—–]"
        r"|いや、|아니"
        r"|falsch|fehler|stimmt\s+nicht|nicht\s+richtig|korrektur|ich\s+habe\s+mich|faux|fausse|erreur|erron"
        r"|je\s+me\s+suis\s+tromp|pas\s+juste|pas\s+correct|pas\s+bon|me\s+equivoqu|equivocad|errón|correcci"
        r"|errad|errei|me\s+engane|incorret|correção|sbagliat|sbagliavo|errat|correzione"
        r"|неправильн|неверн|ошиб|исправлени|поправка|错了|是错的|错误|不对|不正确|更正|纠正|間違|誤り|違いま|訂正"
        r"|틀렸|틀린|잘못|정정"
        r"|should\s+read|should\s+be|should\s+have\s+been|i\s+meant|make\s+that"
        r"|correct\s+(?:answer|value|result|figure|number|option|choice|one)\s+is"
        r"|right\s+(?:answer|value|result|figure|number|option|choice|one)\s+is"
        r"|real\s+(?:answer|value|result|figure|number|option|choice|one)\s+is"
        r"|actual\s+(?:answer|value|result|figure|number|option|choice|one)\s+is"
        r"|true\s+(?:answer|value|result|figure|number|option|choice|one)\s+is"
        r"|revised\s|corrected\s|updated\s|amended\s"
        r"|richtig|la\s+bonne|respuesta\s+correcta|resposta\s+correta|risposta\s+corretta|risposta\s+giusta"
        r"|правильный|正确答案|应该是|正解は|正しくは|정답은"
        r"|actually|eigentlich|tatsächlich|en\s+fait|en\s+réalité|en\s+realidad|na\s+verdade|in\s+realtà"
        r"|на\s+самом\s+деле|其实|实际上|実は|사실은"
    ),
    lowered=True,
)
# "unless I miscounted", "if that's wrong": a revision cue under a condition keeps both values
_CONDITIONAL_REVISION = re.compile(
    rf"(?i)\b(?:if|unless|in\s+case)\b[^.!?\n]{{0,40}}?(?:{_WRONG_EN}|\bmis\w+|\bwrong\b|\bmistaken\b)"
)
# a revision offered as an alternative ("580 (or, my mistake: 508)")
_OR_BEFORE_MARKER = re.compile(rf"(?i)\bor\b[\s,(]*(?:{_WRONG_EN}|{_WRONG_OTHER}|{_REPLACE})")
# a CJK character beside a value: a space between them, so the value is a token of its own ("是508" -> "是 508")
_CJK = r"[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]"
_CJK_EDGE = re.compile(rf"(?<={_CJK})(?=[0-9A-Za-z\\$-])|(?<=[0-9A-Za-z}}$.])(?={_CJK})")
# the copula and particles around a value in Chinese, Japanese and Korean ("是 no", "D です", "33 입니다")
_CJK_LEAD = re.compile(r"^(?:是|为|為|は|은|는|が|:)\s*")
_CJK_TAIL = re.compile(r"\s*(?:です|でした|だ|である|입니다|이다|이에요|예요|요|。|．)+$")
# a sentence that is conditional or unsure retracts nothing ("if that's wrong, 44")
_CONDITIONAL = re.compile(
    r"(?i)\b(?:if|unless|in\s+case|otherwise|might|could|would|possibly|perhaps|maybe|wenn|falls|si|если)\b"
    r"|(?-i:\bmay\b)|如果|要是|もし|만약|혹시"  # "may" in lower case: "May" is also a month
)
# doubt anywhere in an answer that revises: it commits to neither value ("Revised answer: 508. Toss-up.",
# "580. Nein, 508. Vielleicht.")
_DOUBT = re.compile(
    r"(?i)\b(?:plausible|toss-?up|unclear|can'?t\s+decide|undecided|unsure|low\s+confidence|confidence\s*[:：]\s*(?:low|medium)"
    r"|hard\s+to\s+say|I\s+think|I\s+believe"
    r"|vielleicht|peut-être|possiblement|quizás?|tal\s+vez|talvez|forse|возможно|может\s+быть)\b"
    r"|也许|可能|或许|かもしれ|たぶん|多分|일지도|아마|어쩌면"
)
# grammar 5's words of doubt, without its question mark: a question about the draft before a retraction ("34? No,
# wait. Actually 33.") is how a correction starts; a question after the last marker still blocks it
_UNSURE = re.compile(grammar5.UNCERTAIN.pattern.removesuffix(r"|\?"))
# the words of doubt above, in lower case and without their word edges: most answers hold none
_DOUBT = Cued(
    _DOUBT,
    re.compile(
        r"plausible|toss|unclear|decide|unsure|confidence|hard\s+to\s+say|i\s+think|i\s+believe|vielleicht"
        r"|peut-être|possiblement|quiz|tal\s+vez|talvez|forse|возможно|может\s+быть"
        r"|也许|可能|或许|かもしれ|たぶん|多分|일지도|아마|어쩌면"
    ),
    lowered=True,
)
_UNSURE = Cued(
    _UNSURE,
    re.compile(
        r"maybe|possibly|perhaps|might|could|not\s+sure|not\s+certain|not\s+100|not\s+confident|unsure|uncertain"
        r"|hard\s+to|can't|cant|cannot|don't|dont|no\s+idea|i\s+guess|probably|likely"
    ),
    lowered=True,
)


@functools.lru_cache(maxsize=256)
def doubtful(text: str) -> bool:
    """Whether ``text`` holds a word of doubt (``_DOUBT``, or grammar 5's without its question mark). Several readings
    ask this of the same answer, so the verdict is kept for the last few texts."""
    return _DOUBT.search(text) is not None or _UNSURE.search(text) is not None


# ... and a revision told as someone else's, or conceded, is not the answer's own ("Some sources say it's actually
# 508", "580 (though I meant 508")
_ATTRIBUTION = re.compile(
    r"(?i)\b(?:per\s+(?:some|a|an|the|one|my|our|their)|some\s+(?:sources|say|argue|claim)|others?\s+(?:say|argue|claim)"
    r"|according\s+to|assuming"
    r"|though|although|albeit)\b"
)
_ATTRIBUTION = Cued(_ATTRIBUTION, re.compile(r"per\s|some\s|other|according|assuming|though|albeit"), lowered=True)
_SENTENCE_START = re.compile(r"(?s).*(?:[.!?。！？]\s|\n)")
# a marker inside a quotation or code is quoted, not said ("580. \"Revised answer: 508.\"")
_QUOTED = re.compile(r'(?s:```.*?(?:```|$))|"[^"\n]*"|“[^”\n]*”|`[^`\n]+`')
# what a committed value may not carry after it: a second rejection, a rival or a distractor
_REJECTS_AGAIN = re.compile(
    rf"(?i){_WRONG_EN}|{_WRONG_OTHER}|\bnot\b|\bdistractor\b|\btrap\b|\bconfus\w*"
    r"|\b(?:so|as)\s+(?:is|was|were|are)\b|\btoo\b|\balso\b|\beither\b|\bneither\b|\bnor\b"
    # ... or a pointer back at the draft it withdraws ("Correction of an earlier draft that said 580")
    r"|\b(?:earlier|initially|originally|first|before|previous(?:ly)?|draft|version|edition|stray|above|ignore|said|wrote"
    r"|written|typed|put|entered|gave|step|fixed)\b"
)
_DENIED_TOO = re.compile(
    rf"(?i)(?:{_WRONG_EN}|{_WRONG_OTHER})[^.!?\n]{{0,40}}?\b(?:(?:and\s+)?so\s+(?:is|was|are|were)|as\s+(?:is|was)|nor)\s+\S"
)
_DENIED_TOO = Cued(_DENIED_TOO, re.compile(r"(?i)\b(?:so\s+(?:is|was|are|were)|as\s+(?:is|was)|nor)\s+\S"))
_TEXT_COMMIT = re.compile(
    r"(?i)^[\s,:;.!)\]—–-]*(?:so\s+)?(?:(?:it's|it’s|it\s+is|the\s+(?:correct\s+|right\s+)?answer\s+is|that\s+would\s+be"
    r"|make\s+that|is|should\s+(?:read|be))\s+)?(?P<value>[^\n.!?;]{1,80}?)[.!]?\s*$"
)


def denies_all(text: str, kind: str) -> str | None:
    """Why ``text`` commits to nothing when, after a marker that a value is wrong, another is rejected alongside it
    ("580 is wrong, and so is 508"), else ``None``."""
    if kind == "text" or _DENIED_TOO.search(text) is None:
        return None
    values = {c for c in _candidates(text) if _of_kind(c, kind)}
    return "it says each value it names is wrong: it commits to none" if len(values) > 1 else None


_FIRST_SENTENCE = re.compile(r"[^.!?。！？\n]*")
# a revision cue of grammar 7's or grammar 8's (where grammar 7 revised, the scope of its condition ends after it)
_REVISION_CUE = re.compile(rf"(?i){_WRONG_EN}|{_WRONG_OTHER}|{_BARE_NO}|{_REPLACE}|{_SOFT}|\bactually\b|\bwait\b")


def _told_otherwise(text: str, end: int) -> bool:
    """Whether the text up to ``end`` (a revision marker's end) and the first words of the sentence after it hold a
    condition, an attribution or a concession ("580. The correct answer is 508, per some."); what comes later is
    the answer's content ("(D) Although the scientist detected the two genes ..." is an option's text)."""
    scope = text[:end] + " ".join(_FIRST_SENTENCE.match(text, end).group(0).split()[:4])  # its first four words
    return _ATTRIBUTION.search(scope) is not None or _CONDITIONAL.search(scope) is not None


def unsure_revision(text: str, kind: str) -> str | None:
    """Why ``text`` commits to nothing when it names two values or more, revises and doubts ("12. I meant 21. Hard
    to say.", "580. Revised answer: 508. Toss-up."), else ``None``."""
    doubts = doubtful(text)
    if not doubts and "?" not in text:
        return None
    markers = list(_MARKER.finditer(text))
    asks_after = bool(markers) and "?" in text[markers[-1].end() :]
    if not (doubts or asks_after) or not markers:
        return None
    spaced = _CJK_EDGE.sub(" ", text) if re.search(_CJK, text) else text
    values = {c for c in _candidates(spaced) if _of_kind(c, kind)}
    return "it revises a value and doubts the revision: it commits to neither" if len(values) > 1 else None


def retraction(text: str, kind: str) -> str | None:
    """What the answer commits to after its last retraction marker (see the module doc, steps 1 and 2), or ``None``
    when the text has no marker, the marker is conditional, or what follows it is not one committed value."""
    if len(text) > 20_000:
        return None
    if re.search(_CJK, text):
        text = _CJK_EDGE.sub(" ", text)
    if doubtful(text):
        return None  # a revision among doubts commits to neither value
    quoted = [m.span() for m in _QUOTED.finditer(text)] if any(q in text for q in '"“`') else []
    yes_no = re.search(r"(?i)\byes\b", text) is not None  # "no" is then a value, not a marker
    markers = [
        m
        for m in _MARKER.finditer(text)
        if (m.group("no") is None or (not yes_no and text[m.end() :].strip(" \t\n.!。")))
        and not any(a <= m.start() < b for a, b in quoted)
    ]
    if not markers:
        return None
    if markers[-1].group("replace") is not None and not _SELF_REPLACE.match(markers[-1].group(0)):
        # "the correct answer is" / "la bonne réponse est" replaces only what a marker before it withdrew
        # ("Under reading 2, the correct answer is yes" is a second reading, not a retraction)
        if not any(m.group("wrong") is not None or m.group("no") is not None for m in markers[:-1]):
            return None
    last = markers[-1]
    if _told_otherwise(text, last.end()):
        return None  # conditional, attributed or conceded: not the answer's own retraction
    head = text[: last.start()]
    if re.search(r"(?i)\bor[\s,]*$", head):
        return None  # "580 (or, correction: 508)": offered as an alternative
    after = text[last.end() :].strip()
    after = _CJK_TAIL.sub("", _CJK_LEAD.sub("", after))
    if grammar5.UNCERTAIN.search(after) or not grammar6._cue_free(after) or _REJECTS_AGAIN.search(after):
        return None
    before = {c for c in _candidates(head) if _of_kind(c, kind)}
    if kind == "text":
        if last.group("soft") is not None:
            return None
        after = re.sub(r"(?i)^(?:the\s+)?answer\s*[:：]\s*", "", after.lstrip(" \t\n,:;.!)]—–-"))
        match = _TEXT_COMMIT.match(after)
        if match is None or len(match.group("value").split()) > 8 or not before:
            return None
        return match.group("value").strip()
    values = {c for c in _candidates(after) if _of_kind(c, kind)}
    if len(values) != 1 or not before:
        return None
    return after.lstrip(" \t\n,:;!—–").rstrip(" \t\n,:;.!—–") or None  # (a sign or a decimal point stays)


# ------------------------------------------------------------------ 3. struck and replaced values in markup
_DIFF_FENCE = re.compile(r"(?s)```diff[ \t]*\n(?P<body>.*?)```")
_STRUCK_S = re.compile(r"<s>[^<>\n]{1,60}</s>(?=[ \t]*\S)")
_REVISION_KEY = re.compile(r"(?i)^(?:revised|corrected|updated|final|amended|new)[_ ]?(?:answer|value|result)$")


def _diff(match: re.Match[str]) -> str:
    return _diff_lines(match.group("body"))


def _bare_diff(text: str) -> str:
    """A text that is only a diff's lines (its fence taken off by the action reader: an optional ``diff`` line, then
    removed and added lines, one of each at least) read as :func:`_diff` reads a fenced one; ``text`` otherwise."""
    lines = [line for line in text.strip().strip("`").split("\n") if line.strip()]
    if lines and lines[0].strip().lower() == "diff":
        lines = lines[1:]
    body = [line for line in lines if not line.startswith(("---", "+++", "@@"))]
    if (
        not body
        or not all(line.startswith(("-", "+")) for line in body)
        or not any(line.startswith("-") for line in body)
        or not any(line.startswith("+") for line in body)
    ):
        return text
    return _diff_lines("\n".join(lines))


def _diff_lines(body: str) -> str:
    if body.rstrip().rstrip("`").rstrip().endswith("?"):
        return body  # "-580 / +508?": an added line that asks replaces nothing
    kept = []
    for line in body.split("\n"):
        if line.startswith(("---", "+++", "@@")) or line.startswith("-"):
            continue
        kept.append(line[1:].strip() if line.startswith("+") else line.strip())
    return "\n".join(line for line in kept if line)


def _json_with_revision(text: str) -> str:
    """``{"answer": "44", "revised_answer": "33"}``: the revision key's value (one revision key beside ``answer``)."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")) or len(stripped) > 2000:
        return text
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        return text
    if not isinstance(obj, dict) or "answer" not in {str(k).lower() for k in obj}:
        return text
    revised = [v for k, v in obj.items() if _REVISION_KEY.match(str(k))]
    if len(revised) == 1 and isinstance(revised[0], (str, int, float)) and not isinstance(revised[0], bool):
        return f"Answer: {revised[0]}"
    return text


_ARROW_LABEL = re.compile(r"(?i)\b(?:final\s+)?(?:answer|result|output)\s*(?:→|⇒|=>|->)\s*")
# "X or Y" in Chinese, Japanese and Korean ("123か120のどちらかです", "33或者44", "33 또는 44")
_CJK_OR = re.compile(
    r"どちらか|いずれか|或者|或是|还是|還是|之一|또는|혹은|아니면|중\s*하나|(?<=[\d}A-Z])\s*か\s*(?=[\d\\A-Z-])"
)


# a value named as a decoy ("often confused with No", "a common mix-up is 44", "B is a distractor")
_DECOY = re.compile(
    r"(?i)\b(?:(?:often|commonly|sometimes|frequently)\s+)?(?:confused\s+with|mistaken\s+for|mix-?ups?|mixed\s+up\s+with"
    r"|distractors?|decoys?|red\s+herrings?|misconceptions?|common\s+(?:error|mistake|trap|pitfall|wrong\s+answer))\b"
)
_DECOY = Cued(
    _DECOY,
    re.compile(r"confused|mistaken|mix|distractor|decoy|red\s+herring|misconception|common\s"),
    lowered=True,
)
_DECOY_PAREN = re.compile(r"\(([^()\n]{0,120})\)")
_CLAUSES = re.compile(r"(?<=[.!?])[ \t]+|[ \t]+[—–][ \t]+|\n+")


_IN_FAVOUR = re.compile(r"(?i)\b(?:right|correct|fits?|valid|possible|true|works?|acceptable)\b")


def _only_a_decoy(clause: str) -> bool:
    """A clause that names a decoy and says nothing in its favour ("which might be correct", "also fits")."""
    return (
        _DECOY.search(clause) is not None
        and _IN_FAVOUR.search(clause) is None
        and _DOUBT.search(clause) is None
        and grammar5.UNCERTAIN.search(clause) is None
        and grammar6._cue_free(clause)
    )


def drop_decoys(text: str, kind: str) -> str:
    """``text`` without the parentheticals, sentences and dash clauses that name a value only as a decoy, when
    another part of it still names a value (a clause that is the whole answer stays, and is read as before)."""
    if _DECOY.search(text) is None:
        return text
    text = _DECOY_PAREN.sub(lambda m: "" if _only_a_decoy(m.group(1)) else m.group(0), text)
    clauses = [c for c in _CLAUSES.split(text) if c.strip()]
    kept = [c for c in clauses if not _only_a_decoy(c)]
    if kept and len(kept) < len(clauses) and any(re.search(r"\w", c) for c in kept):
        return " ".join(c.strip() for c in kept)
    return text


# a footer of links after the answer ("Learn more: 1. wikipedia.org 2. britannica.com", "Sources: [1] https://..")
_LINK_LINE = re.compile(
    r"(?im)^[ \t>*_]*(?:learn\s+more|read\s+more|see\s+also|sources?|references?|citations?|links?)[ \t*_]*[:：]"
    r"(?=[^\n]*(?:https?://|\b[\w-]+\.(?:org|com|net|edu|gov|io|wiki|int)\b))[^\n]*$"
)


_LINK = re.compile(r"https?://\S+|\b[\w.-]+\.(?:org|com|net|edu|gov|io|wiki|int)\b(?:/\S*)?")
_ENTRY_NUMBER = re.compile(r"\[\d{1,2}\]|(?<!\S)\d{1,2}[.)](?=\s|$)")


def _link_footer(line: str, kind: str) -> str:
    """``line`` (a labelled line with links) dropped when it holds nothing but its label, its links and entry
    numbers that count from 1 ("Learn more: 1. wikipedia.org 2. britannica.com"); kept as it is otherwise ("See
    also: 580 (oeis.org)", "Links: https://.. (alternative)")."""
    rest = _LINK.sub(" ", re.split(r"[:：]", line, maxsplit=1)[-1])
    numbers = [int(re.sub(r"\D", "", m.group(0))) for m in _ENTRY_NUMBER.finditer(rest)]
    if numbers != list(range(1, len(numbers) + 1)):
        return line
    rest = _ENTRY_NUMBER.sub(" ", rest)
    return "" if re.fullmatch(r"[\s()\[\],;.·|•*_-]*", rest) else line


def presentation(
    text: str, golds: list[str], kind: str, question: str = "", *, grammar: int = 8
) -> tuple[str, str | None]:
    """Step 3, an arrow after an answer label ("Final result → 33") as a colon, "X or Y" in Chinese, Japanese
    and Korean, then grammar 7's presentation (``grammar``: the grammar reading)."""
    if kind != "text" and _CJK_OR.search(text):
        spaced = _CJK_EDGE.sub(" ", text)
        if len({c for c in _candidates(spaced) if _of_kind(c, kind)}) > 1:
            return text, "it names two values joined by 'or'"
    text = drop_decoys(text, kind)
    if "." in text and ":" in text:
        text = _LINK_LINE.sub(lambda m: _link_footer(m.group(0), kind), text)
    if "→" in text or "=>" in text or "->" in text or "⇒" in text:
        text = _ARROW_LABEL.sub("Answer: ", text)
    if "```diff" in text:
        text = _DIFF_FENCE.sub(_diff, text)
    elif "+" in text and "-" in text:
        text = _bare_diff(text)
    if "{" in text:
        text = _json_with_revision(text)
    return grammar7.presentation(text, golds, kind, question, grammar=grammar)


def drop_drafts(text: str, kind: str) -> tuple[str, str | None, bool]:
    """Grammar 7's revisions; where they leave a hedge, more than one value of the type, or a marker in what they
    read ("wait. That was a slip — 508."), the last retraction."""
    denied = denies_all(text, kind) or unsure_revision(text, kind)
    if denied is not None:
        return text, denied, False
    read, hedge, revised = grammar7.drop_drafts(text, kind)
    if (
        revised
        and (
            _CONDITIONAL_REVISION.search(text)
            or _told_otherwise(text, max((m.end() for m in _REVISION_CUE.finditer(text)), default=0))
            or _OR_BEFORE_MARKER.search(text)
        )
        and len({c for c in _candidates(text) if _of_kind(c, kind)}) > 1
    ):
        return text, "its revision is conditional or not its own: it commits to none of its values", False
    spaced = _CJK_EDGE.sub(" ", read) if re.search(_CJK, read) else read
    settled = _MARKER.search(read) is None  # grammar 7's reading holds no marker of its own any more
    if settled and hedge is None and kind != "text" and len({c for c in _candidates(spaced) if _of_kind(c, kind)}) <= 1:
        return read, hedge, revised
    if settled and hedge is None and kind == "text" and revised:
        return read, hedge, revised
    committed = retraction(text, kind)
    if committed is None:
        return read, hedge, revised
    return committed, None, True


# ------------------------------------------------------------------ 4. one value beside a debris line
_NOT_A_RIVAL_LINE = re.compile(r"^[ \t]*(?:[—–~>$#\[(]|-[ \t]|\\(?:begin|end)\{|.*[:：][ \t]*$)")


def rival_line(lines: list[str]) -> bool:
    """Whether a line may be a rival of another type beside a number answer's one value (``only_value``): the first
    line after the value's, when it is short (four words or fewer), holds no digit, and is neither a sign-off
    ("— Assistant"), a quote or shell line ("> Finished chain.", "$ python solve.py"), a bracketed line, a list
    item, a LaTeX environment's ``\\end{..}`` nor a heading ("Evidence:"). Grammar 7 took any short line, before
    the value too, so a debris line above a bare value ("[result]") left no reading."""
    seen_value = False
    for line in lines:
        if not line.strip():
            continue
        if re.search(r"\d", line):
            seen_value = True
            continue
        if seen_value:
            return len(line.split()) <= 4 and _NOT_A_RIVAL_LINE.match(line) is None
    return False


def value_token(raw: str) -> str:
    """The value a token holds: punctuation and quotes taken off both ends, and a bracket only where it has no
    partner inside the token (grammar 7 took every bracket off, so ``-\\frac{1}{2}`` lost its closing brace)."""
    token = raw.strip(".,;:!?\"'“”‘’*_`")
    for opening, closing in ("()", "[]", "{}"):
        while token.endswith(closing) and token.count(closing) > token.count(opening):
            token = token[:-1]
        while token.startswith(opening) and token.count(opening) > token.count(closing):
            token = token[1:]
    return token.strip(".,;:!?\"'“”‘’*_`")


def only_value(text: str, kind: str) -> str | None:
    """Grammar 7's :func:`~agentflow_env.scoring.grammar7.only_value` with :func:`rival_line` and
    :func:`value_token`."""
    return grammar7.only_value(text, kind, rival_line, value_token)


def read_answer(
    prediction: object,
    golds: Iterable[object] = (),
    kind: str = "text",
    question: str = "",
    *,
    grammar: int = 8,
) -> Reading:
    """The final answer ``prediction`` read by grammar 8: grammar 7's reader with this module's presentation and
    revision steps (``grammar``: the grammar reading, 8 or later)."""
    text = normalize_text(prediction)
    if len(text) <= 20_000:
        struck = _STRUCK_S.sub("", text)  # before grammar 7 reads "<s>"/"</s>" as template tokens
        if struck != text and not struck.rstrip().endswith("?"):  # "<s>580</s> 508?" replaces nothing
            text = struck
        quoted = quoted_revision(text, kind)  # before the presentation takes the quotation marks off
        if quoted is not None:
            return Reading(text, quoted)
    return grammar7.read_answer(text, golds, kind, question, present=presentation, drafts=drop_drafts, grammar=grammar)


def quoted_revision(text: str, kind: str) -> str | None:
    """Why an answer that names two values or more and quotes a revision marker (``580. "Revised answer: 508."``, a
    marker in code) commits to neither, else ``None``: a quoted revision is shown, not made."""
    if not any(q in text for q in '"“`'):
        return None
    quoted = [m.span() for m in _QUOTED.finditer(text)]
    if not any(any(a <= m.start() < b for a, b in quoted) for m in _MARKER.finditer(text)):
        return None
    spaced = _CJK_EDGE.sub(" ", text) if re.search(_CJK, text) else text
    values = {c for c in _candidates(spaced) if _of_kind(c, kind)}
    return "it quotes a revision: it commits to neither value" if len(values) > 1 else None
