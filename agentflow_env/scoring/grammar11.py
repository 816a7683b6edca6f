"""Answer grammar 11 (the ``-v11`` ids): grammar 10 (:mod:`agentflow_env.scoring.grammar10`) after a first step that
writes more shapes of a committed answer the way grammar 10 reads them, and one more hedge.

An eleventh answer set, written outside the project by someone who never read the scorers, was run blind through
grammar 10: 5.6% of its correct answers scored 0. Five shapes, each a class of answers rather than one phrase, were
two thirds of them, and each was scored 0 in every one of its cases:

1. **An agent's JSON action**: LangChain's ``{"action": "Final Answer", "action_input": "33"}``, bare, fenced, or in
   what the text format leaves of a fence. The input of a final-answer action is the answer, read as ``Final Answer:
   33`` (:func:`json_action`); another action, or an input that is not one string or number, is left alone.
2. **A revision after an arrow**: "Answer: 35 → revised: 33" (``->``, ``=>``, ``⇒``; revised, corrected, updated,
   amended, fixed, final, new) is a revision label, written as "Revised answer: 33" (:func:`arrow_revision`).
3. **A draft reported in another language**: "Zuerst dachte ich an 35, aber …", "J'ai d'abord pensé à 35,
   mais …", "Primero pensé en 35, pero …", "Inizialmente pensavo 35, ma …", "Primeiro pensei em 35, mas …",
   "Сначала я думал, что 35, но …", "我一开始以为是35，但…", "最初は35だと思いましたが、…": written as grammar 9's
   English report, "I initially thought 35, but …" (:func:`foreign_drafts`), so its rules decide; the answer frame
   after it ("lautet die Antwort 33", "la réponse est 33") as "the answer is 33" (:func:`answer_frames`), and yes or
   no in those frames as "yes" or "no" (:func:`yes_no_sentence`).
4. **A rival named as a distractor**: "The answer is 33; 35 is a distractor" (a decoy, a red herring, a trap) is a
   rejection, written "; not 35" (or "35 is wrong") (:func:`distractor`).
5. **A tentative draft before a revision**: "That would suggest 35. … the earlier step was wrong, and the correct
   result is 33." Grammar 8 counts a condition anywhere before a revision as the revision's own, so the draft's
   "would" made the answer commit to neither value: a sentence that only reports what a step "would suggest" (give,
   mean, imply, indicate, yield, point to), with a revision cue after it, is written as reported ("That suggested
   35.", :func:`tentative_draft`); a condition in the revision's own sentence still counts. Where the working ends
   in an explicit commitment (an answer label line; for a number, option or expression also ".. so the answer is
   X"), after a revision, a failed check or a contrast, the answer is read from that commitment's sentence on
   (:func:`last_commitment`): what follows it, a rival remark included, still counts.

Smaller classes of the same set: AutoGen's ``TERMINATE`` after the answer, smolagents' "Out - Final answer: X", a
label with a dash or an arrow for its colon (:func:`labels`); a verdict table before an answer label
(:func:`table_then_label`); "Per the search results, X" as a source, "My own estimate was X, but" as a draft
(:func:`sources_and_estimates`). One hedge, found by the project's own styles: a number or date beside any word as
list items ("04/15/18, egalitarian", :func:`number_beside_a_word`).

The swapped answers (the rival committed last) read the rival, as before. Every step is a bounded number of linear
passes over an answer of at most 20,000 characters; the answer is then read by grammar 10 (the ``-v10`` ids keep
their digests).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from agentflow_env.scoring import grammar8, grammar10
from agentflow_env.scoring.cued import Cued
from agentflow_env.scoring.extract import normalize_text
from agentflow_env.scoring.grammar import Reading

__all__ = [
    "answer_frames",
    "arrow_revision",
    "distractor",
    "foreign_drafts",
    "json_action",
    "labels",
    "last_commitment",
    "number_beside_a_word",
    "read_answer",
    "sources_and_estimates",
    "table_then_label",
    "tentative_draft",
    "yes_no_sentence",
]

_LIMIT = 20_000

# ------------------------------------------------------------------ 1. an agent's JSON action
_FENCED_OBJECT = re.compile(r"(?s)```[ \t]*(?:json|JSON)?[ \t]*\n?[ \t]*(\{.{0,4000}?\})[ \t]*\n?[ \t]*```")
_FENCE_DEBRIS = re.compile(r"(?i)\s*(?:```)?\s*(?:json)?\s*(?:```)?\s*")
_FINAL_ACTION = re.compile(r"(?i)^\s*final[\s_-]*answer\s*$")


def _action_input(blob: str) -> str | None:
    """The input of a final-answer action written as a JSON object, or ``None``."""
    try:
        action = json.loads(blob)
    except (ValueError, RecursionError):
        return None
    if not isinstance(action, dict) or len(action) > 4:
        return None
    keys = {str(k).lower(): v for k, v in action.items()}
    name, value = keys.get("action"), keys.get("action_input")
    if not isinstance(name, str) or not _FINAL_ACTION.match(name):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    value = str(value).strip()
    return value or None


def json_action(text: str) -> str:
    """A final-answer JSON action (``{"action": "Final Answer", "action_input": ..}``), fenced or the whole answer,
    written as ``Final Answer: ..``."""
    if "action_input" not in text:
        return text
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end and _FENCE_DEBRIS.fullmatch(text[:start]) and _FENCE_DEBRIS.fullmatch(text[end + 1 :]):
        # the whole answer is the object, in a fence or in what is left of one ("json\n{..}\n```")
        value = _action_input(text[start : end + 1])
        return text if value is None else f"Final Answer: {value}"
    out, pos = [], 0
    for m in _FENCED_OBJECT.finditer(text):
        value = _action_input(m.group(1))
        if value is not None:
            out.append(text[pos : m.start()] + f"Final Answer: {value}")
            pos = m.end()
    return "".join(out) + text[pos:] if out else text


# ------------------------------------------------------------------ 2. a revision after an arrow
_ARROW_REVISION = Cued(
    re.compile(
        r"(?i)[ \t]*(?:→|->|=>|⇒|⟹|➜|➡)[ \t]*(?:\*\*|__)?[ \t]*(?:revised|corrected|updated|amended|fixed|final|new)"
        r"(?:[ \t]+(?:answer|value|result))?(?:\*\*|__)?[ \t]*[:：][ \t]*"
    ),
    re.compile(r"→|->|=>|⇒|⟹|➜|➡"),
)


def arrow_revision(text: str) -> str:
    """ "35 → revised: 33" written as "35. Revised answer: 33"."""
    return _ARROW_REVISION.sub(". Revised answer: ", text)


# ------------------------------------------------------------------ 3. a draft reported in another language
# the lead-in of a draft, up to its value (what would be "I initially thought" in English)
_FOREIGN_DRAFT = re.compile(
    r"(?im)(?:^|(?<=[.!?]\s)|(?<=[.!?]\s\s))[ \t*_]*(?:"
    # German
    r"(?:zuerst|anfangs|ursprünglich|zunächst|erst)\s+dachte\s+ich(?:,?\s+es\s+(?:sei|wäre|ist)|\s+an)?"
    r"|ich\s+dachte\s+(?:zuerst|anfangs|ursprünglich|zunächst)(?:,?\s+es\s+(?:sei|wäre|ist)|\s+an)?"
    # French
    r"|j['’]ai\s+d['’]abord\s+(?:pensé|cru)(?:\s+que\s+c['’](?:était|est)|\s+à|\s+que)?"
    r"|(?:au\s+début|au\s+départ|initialement|d['’]abord),?\s+(?:je\s+pensais|j['’]ai\s+(?:pensé|cru))"
    r"(?:\s+que\s+c['’](?:était|est)|\s+à|\s+que)?"
    # Spanish
    r"|(?:primero|al\s+principio|inicialmente|en\s+un\s+principio),?\s+(?:pensé|creí)(?:\s+que\s+era|\s+en|\s+que)?"
    # Italian
    r"|(?:inizialmente|all['’]inizio|in\s+un\s+primo\s+momento|prima),?\s+(?:pensavo|ho\s+pensato|credevo)"
    r"(?:\s+che\s+fosse|\s+a|\s+che)?"
    # Portuguese
    r"|(?:primeiro|inicialmente|no\s+início|a\s+princípio),?\s+(?:pensei|achei)(?:\s+que\s+era|\s+em|\s+que)?"
    # Russian
    r"|сначала\s+я\s+(?:думал|подумал|решил)а?(?:,?\s+что(?:\s+это)?)?"
    r")\s+(?=\S)"
)
_FOREIGN_DRAFT = Cued(
    _FOREIGN_DRAFT,
    re.compile(r"dachte|pensé|cru|pensais|creí|pensavo|ho\s+pensato|credevo|pensei|achei|думал|подумал|решил"),
    lowered=True,
)
# ... in Chinese and Japanese, where the value sits inside the lead-in
_CJK_DRAFT = re.compile(
    r"(?:我)?(?:一开始|起初|最初|开始时|刚开始|一開始|起初)(?:我)?(?:以为|認為|认为|以為)(?:是)?\s*(?P<zh>[^，,。；;\n]{1,40}?)\s*[，,]\s*(?:但是?|不过|可是)"
    r"|最初は\s*(?P<ja>[^、。\n]{1,40}?)\s*(?:だ|です)?と思いました(?:が|けど)[、,]?"
)
# "but" in those languages, right after the draft's value
_FOREIGN_BUT = re.compile(r"(?i)(?P<value>(?:[^\n.!?;]|\.(?=\d)){1,100}?),\s*(?:aber|mais|pero|ma|mas|но)\s+")


def foreign_drafts(text: str) -> str:
    """A draft reported in German, French, Spanish, Italian, Portuguese, Russian, Chinese or Japanese written as
    grammar 9's English report: "I initially thought 35, but ..."."""
    if re.search(r"[一-龥ぁ-ゖ]", text):
        text = _CJK_DRAFT.sub(lambda m: f"I initially thought {m.group('zh') or m.group('ja')}, but ", text)
    if not _FOREIGN_DRAFT.search(text):
        return text
    out, pos = [], 0
    for m in _FOREIGN_DRAFT.pattern.finditer(text):
        if m.start() < pos:
            continue
        but = _FOREIGN_BUT.match(text, m.end())
        if but is None:
            continue
        out.append(text[pos : m.start()] + m.group(0)[: len(m.group(0)) - len(m.group(0).lstrip(" \t*_"))])
        out.append(f"I initially thought {but.group('value')}, but ")
        pos = but.end()
    return "".join(out) + text[pos:] if out else text


# ------------------------------------------------------------------ 4. a rival named as a distractor
_DISTRACTOR = Cued(
    re.compile(
        r"(?i)\b(is|was|are|were|'s|’s)\s+(?:(?:just|only|merely|simply|clearly|likely|probably|a\s+classic)\s+)?"
        r"(?:(?:a|an|the)\s+)?(?:common\s+|classic\s+|tempting\s+|deliberate\s+|plausible(?:-looking)?\s+)?"
        r"(?:distractors?|decoys?|red\s+herrings?|traps?)\b"
    ),
    re.compile(r"distractor|decoy|red\s+herring|trap"),
    lowered=True,
)


# ... with the value it names as the subject of its own clause: "; not 35" (grammar 6 drops a rejected value only where
# it is a token of two characters or more, or a capitalised word after the clause's first)
_NAMED_DISTRACTOR = re.compile(
    r"(?i)(?P<sep>[.;,:])[ \t]*(?!(?:the|a|an|this|that|it|which|one|both|either)\b)"
    r"(?P<value>[^\s.;,:!?()\n][^.;,:!?()\n]{0,79}?)[ \t]+(?:is|was|'s|’s)[ \t]+"
    r"(?:(?:just|only|merely|simply|clearly|likely|probably)[ \t]+)?(?:(?:a|an|the)[ \t]+)?"
    r"(?:common[ \t]+|classic[ \t]+|tempting[ \t]+|deliberate[ \t]+)?(?:distractor|decoy|red[ \t]+herring|trap)\b"
    r"[^.;!?\n]*"
)


def distractor(text: str) -> str:
    """ "35 is a distractor" (a decoy, a red herring, a trap) after the answer's clause written as "; not 35", and
    elsewhere as "35 is wrong"."""
    if not _DISTRACTOR.cued(text):
        return text

    def named(m: re.Match[str]) -> str:
        if text.count("(", 0, m.start()) > text.count(")", 0, m.start()):
            return m.group(0)  # a note in brackets ("(Watch out: 35 is a distractor.)") rejects by itself
        return (", not " if m.group("sep") == "," else "; not ") + m.group("value")

    text = _NAMED_DISTRACTOR.sub(named, text)
    return _DISTRACTOR.sub(lambda m: f"{m.group(1)} wrong", text)


# ------------------------------------------------------------------ 5. a tentative draft before a revision
_TENTATIVE = Cued(
    re.compile(
        r"(?im)(?:^|(?<=[.!?]\s)|(?<=[.!?]\s\s))(?P<lead>[ \t*_]*(?:that|this|which|it|so\s+that|this\s+step"
        r"|this\s+result"
        r"|the\s+(?:calculation|computation|formula|result|first\s+pass|estimate))\s+)(?:would|might|could|should)"
        r"\s+(?P<verb>suggest|give|mean|imply|indicate|yield|point\s+to|lead\s+to|make\s+it)\b"
    ),
    re.compile(r"would|might|could|should"),
    lowered=True,
)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")
_PAST = {"suggest": "suggested", "give": "gave", "mean": "meant", "imply": "implied", "indicate": "indicated"}
_PAST |= {"yield": "yielded", "point to": "pointed to", "lead to": "led to", "make it": "made it"}


def tentative_draft(text: str) -> str:
    """A draft sentence that reports what a step "would suggest", before a later retraction marker, written as
    reported ("That suggested 35.")."""
    if not _TENTATIVE.cued(text):
        return text
    # per cue pattern, the start of a cue found at or after the last position asked about (-1: not asked yet, -2: none
    # there, so none after it); drafts come in order, so each pattern is searched about once per cue it holds
    found = {grammar8._MARKER: -1, grammar8._REVISION_CUE: -1}

    def revised_after(pos: int) -> bool:
        for pattern, start in found.items():
            if start >= pos:
                return True
            if start != -2:
                cue = pattern.search(text, pos)
                found[pattern] = cue.start() if cue is not None else -2
                if cue is not None:
                    return True
        return False

    def reported(m: re.Match[str]) -> str:
        sentence_end = _SENTENCE_END.search(text, m.end())
        if not revised_after(sentence_end.end() if sentence_end else len(text)):
            return m.group(0)
        verb = " ".join(m.group("verb").lower().split())
        return m.group("lead") + _PAST[verb]

    return _TENTATIVE.sub(reported, text)


# ------------------------------------------------------------------ 6. an agent's or a summary's label
# AutoGen's end token after the answer ("The answer is X. TERMINATE")
_END_TOKEN = re.compile(r"[ \t]*\n?[ \t]*\bTERMINATE\b[ \t]*[.!]?\s*\Z")
# smolagents' printed output ("Out - Final answer: X")
_OUT_PREFIX = re.compile(r"(?im)^([ \t]*)Out[ \t]*-[ \t]*(?=final[ \t]+answer\b)")
# an answer label with a dash or an arrow in place of its colon ("Final answer — X", "Key finding → X")
_DASH_LABEL = re.compile(
    r"(?im)^([ \t*_#]*)(?:final[ \t]+answer|answer|key[ \t]+finding|bottom[ \t]+line|conclusion|verdict)(?:\*\*|__)?"
    r"[ \t]*(?:—|–|--|-|→|->|=>|⇒)[ \t]+(?=\S)"
)


def labels(text: str) -> str:
    """AutoGen's ``TERMINATE`` after the answer dropped; smolagents' "Out - Final answer: X" and a label with a dash
    or an arrow ("Final answer — X", "Key finding → X") written as "Answer: X"."""
    if "TERMINATE" in text:
        text = _END_TOKEN.sub("", text)
    if "Out" in text:
        text = _OUT_PREFIX.sub(r"\1", text)
    return _DASH_LABEL.sub(r"\1Answer: ", text)


# ------------------------------------------------------------------ 7. a table of candidates, then the answer label
_TABLE_ROW = re.compile(r"(?m)^[ \t]*\|[^\n]*\|[ \t]*$")
_LABEL_LINE = re.compile(r"(?im)^[ \t>*_#]*(?:\*\*|__)?(?:final[ \t]+)?answer(?:\*\*|__)?[ \t]*[:：][^\n]*\S")


def table_then_label(text: str) -> str:
    """A markdown table (a verdict per candidate) followed by an answer label line: the table is the working, the
    label the answer (grammar 7 reads this too, but later steps had joined the table's lines into one by then)."""
    if "|" not in text:
        return text
    rows = list(_TABLE_ROW.finditer(text))
    if not rows or _LABEL_LINE.search(text, rows[-1].end()) is None:
        return text
    return text[: rows[0].start()] + text[rows[-1].end() :]


# ------------------------------------------------------------------ 8. yes or no in another language, in a sentence
_YES_NO_SENTENCE = re.compile(
    r"(?i)(?:\bthe\s+(?:correct\s+|right\s+|final\s+)?answer\s+is|\ba\s+resposta\s+(?:certa\s+|correta\s+|final\s+)?é"
    r"|\bla\s+risposta\s+(?:corretta\s+|giusta\s+|finale\s+)?è|\bla\s+respuesta\s+(?:correcta\s+|final\s+)?es"
    r"|\bla\s+(?:bonne\s+)?réponse\s+(?:finale\s+)?est|\bdie\s+(?:richtige\s+)?antwort\s+(?:ist|lautet)"
    r"|\blautet\s+die\s+(?:richtige\s+)?antwort|(?:правильный\s+)?ответ\s*(?:—|-|:)?|答案是|答えは)\s*[:：]?\s*"
    r"(?:(?P<yes>ja|jawohl|oui|s[ií]|sim|да|是|はい)|(?P<no>nein|non|não|нет|否|いいえ))"
    r"(?=\s*(?:です|だ)?\s*[.!。！]?\s*(?:\n|$))"
)


def yes_no_sentence(text: str, golds: list[str]) -> str:
    """Yes or no in eight other languages after an answer frame ("… lautet die Antwort Ja.", "la réponse est oui")
    written as "the answer is yes" (when a gold is yes or no; grammar 9 read the bare word and grammar 10 a label)."""
    if not any(g.strip().lower() in ("yes", "no") for g in golds):
        return text
    return _YES_NO_SENTENCE.sub(lambda m: "the answer is " + ("yes" if m.group("yes") else "no"), text)


# ------------------------------------------------------------------ 9. answer frames in other languages
_FOREIGN_FRAME = Cued(
    re.compile(
        r"(?i)(?:\blautet\s+die\s+(?:richtige\s+)?antwort\b|\bdie\s+(?:richtige\s+)?antwort\s+(?:ist|lautet)\b"
        r"|\bla\s+(?:bonne\s+)?réponse\s+(?:finale\s+)?est\b|\bla\s+respuesta\s+(?:correcta\s+|final\s+)?es\b"
        r"|\bla\s+risposta\s+(?:corretta\s+|giusta\s+|finale\s+)?è|\ba\s+resposta\s+(?:certa\s+|correta\s+|final\s+)?é"
        r"|(?<!\w)(?:правильный\s+)?ответ\s*(?:—|-|:)?(?=\s)|答案是|答えは"
        r")(?:[ \t]*[:：])?[ \t]*",
    ),
    re.compile(r"antwort|réponse|respuesta|risposta|resposta|ответ|答案是|答えは"),
    lowered=True,
)


def answer_frames(text: str) -> str:
    """ "lautet die Antwort X", "la réponse est X", "la respuesta es X", "la risposta è X", "a resposta é X", "ответ
    X", "答案是X", "答えはX" written as "the answer is X" (grammar 9 read these only as labels)."""
    if not _FOREIGN_FRAME.cued(text):
        return text

    def english(m: re.Match[str]) -> str:
        return m.group(0) if not text[: m.start()].strip(" \t\n*_#>") else "the answer is "

    return _FOREIGN_FRAME.pattern.sub(english, text)


# ------------------------------------------------------------------ 10. a source named with "per", an own estimate
_PER_SOURCE = re.compile(r"(?im)(?:^|(?<=[.!?]\s))([ \t*_]*)per[ \t]+(the|my|our|these|those|its)[ \t]+")
_OWN_DRAFT = re.compile(
    r"(?i)\b(?:my|our)\s+own\s+(?:estimate|guess|calculation|computation|answer|reading|count|result)\s+(?:was|gave)\b"
)


def sources_and_estimates(text: str) -> str:
    """ "Per the search results, it's X" written as "According to the search results, it's X" (a source the answer
    cites, not someone else's rival claim); "My own estimate was X, but .." as grammar 9's "My first answer was X"."""
    if "er" in text:
        text = _PER_SOURCE.sub(lambda m: f"{m.group(1)}According to {m.group(2)} ", text)
    if "own" in text:
        text = _OWN_DRAFT.sub("my first answer was", text)
    return text


# ------------------------------------------------------------------ 11. the last commitment after the working
# an explicit commitment: an answer label opening a line, or "the (final|correct) answer is"
_COMMITMENT = re.compile(
    r"(?im)^[ \t>*_#-]*(?:\*\*|__)?(?:my\s+|the\s+)?(?:final\s+|correct\s+)?answer(?:\*\*|__)?[ \t]*[:：]"
    r"|\bthe\s+(?:final\s+|correct\s+|right\s+)?answer\s+is\b"
)
# what marks the text before it as working: a revision or rejection, a failed check, a contrast
_WORKING = re.compile(
    r"(?i)[✗❌✘✖]|\b(?:failed|fails|rejected|ruled\s+out|confuse[sd]?|mistaken\s+for|but|however|instead)\b"
)
_CONDITION_BEFORE = re.compile(r"(?i)\b(?:if|unless|whether|suppose|supposing|assuming|when)\b[^.!?\n]*\Z")
_SENTENCE_START = re.compile(r"(?s).*(?:[.!?](?:\s)|\n)")
_CLAUSE_BEFORE = re.compile(r"(?i)[,;]\s*(?:but|so|and\s+so|thus|hence|therefore|however)\s*,?\s*(?=[^,;]*\Z)")


def last_commitment(text: str, kind: str = "text") -> str:
    """The answer from the sentence (or line) of its last explicit commitment on ("Answer: X", ".. so the answer is
    X."), where the text before it is working: it revises, rejects, fails a check or contrasts ("Candidate: Y —
    failed ✗ .. Answer: X", "People often confuse this with Y, but the answer is X"). Everything after the
    commitment stays, so a remark naming a rival after it still counts; a commitment under a condition ("if the
    answer is X") is no commitment."""
    commitments = list(_COMMITMENT.finditer(text))
    last = commitments[-1] if commitments else None
    if last is None or last.start() == 0:
        return text
    if kind == "text" and not last.group(0).rstrip().endswith((":", "：")):
        return text  # a text answer's "the answer is X" in a sentence: grammar 10 reads the sentence whole
    head = _SENTENCE_START.match(text, 0, last.start())
    start = head.end() if head is not None else 0
    clause = _CLAUSE_BEFORE.search(text, start, last.start())
    if clause is not None:  # ".. confuse this with Y, but the answer is X": the clause after the conjunction
        start = clause.end()
    before = text[:start]
    if not before.strip() or _CONDITION_BEFORE.search(text, start, last.start()) is not None:
        return text
    if (
        _WORKING.search(before) is None
        and grammar8._MARKER.search(before) is None
        and grammar8._REVISION_CUE.search(before) is None
    ):
        return text
    return text[start:].strip()


# ------------------------------------------------------------------ the hedge: a number or date beside any word
_NUMBER_ITEM = re.compile(r"[-+−]?\$?\d[\d,./:-]*%?")
_WORD_ITEM = re.compile(r"[^\W\d_][\w'’.-]*(?:\s+[^\W\d_][\w'’.-]*){0,2}")
# words beside a number that qualify it rather than rival it ("12, inclusive", "33, approximately"), and a chat
# role's header above it ("assistant\n\n33": grammar 9 takes role headers out later)
_QUALIFIER = re.compile(
    r"(?i)[\w'’.-]*ly|inclusive|exclusive|total|overall|each|approx\.?|ca\.?|circa|exact|rounded|est\.?|estimated"
    r"|assistant|user|system|model|human|bot|ai|agent|tool|observation|thought|action|response|output"
    r"|units?|points?|people|items?|days?|years?|times?|ways?|cm|mm|km|kg|g|m|s|h|min|ml|l"
)


def number_beside_a_word(text: str, kind: str) -> str | None:
    """Grammar 10's hedge of a number beside a capitalised word as list items, for a number written with slashes,
    colons or dashes too ("04/15/18, egalitarian") and a word in lower case ("33; egalitarian"): the word is another
    answer, not a candidate of the number's type, and the answer commits to neither. A word that qualifies the
    number ("12, inclusive"), a unit, a label or a common word is no rival."""
    if kind != "number" or len(text) > 200:
        return None
    plain = re.sub(r"\\boxed\{([^{}]*)\}", r" \1 ;", text).replace("**", "").replace("$", " ")
    plain = re.sub(r"(?m)^[ \t]*[-*•][ \t]+", "", plain).strip(" \t\n.;")
    items = [i.strip(" \t.") for i in grammar10._ITEM_BREAK.split(plain) if i and i.strip(" \t.")]
    if not 2 <= len(items) <= 6:
        return None
    numbers = [i for i in items if _NUMBER_ITEM.fullmatch(i)]
    words = [
        i
        for i in items
        if _WORD_ITEM.fullmatch(i)
        and not grammar10._NOT_A_RIVAL.fullmatch(i)
        and not grammar10._common(i)
        and not _QUALIFIER.fullmatch(i)
    ]
    if len(numbers) == 1 and words and len(numbers) + len(words) == len(items):
        return "it lists its number beside another answer, a word: it commits to neither"
    return None


def read_answer(
    prediction: object,
    golds: Iterable[object] = (),
    kind: str = "text",
    question: str = "",
    *,
    grammar: int = 11,
) -> Reading:
    """The final answer ``prediction`` read by grammar 11: the module doc's five shapes written as grammar 10 reads
    them, then grammar 10's reader (``grammar``: the grammar reading, grammar 12 reads through this one)."""
    text = normalize_text(prediction)
    if len(text) <= _LIMIT:
        text = json_action(text)
        text = arrow_revision(text)
        text = foreign_drafts(text)
        text = distractor(text)
        text = tentative_draft(text)
        text = labels(table_then_label(text))
        text = yes_no_sentence(text, [str(g) for g in golds])
        text = answer_frames(sources_and_estimates(text))
        text = last_commitment(text, kind)
        reason = number_beside_a_word(text, kind)
        if reason is not None:
            return Reading(text, reason)
    return grammar10.read_answer(text, golds, kind, question, grammar=grammar)
