"""Answer grammar 6 (the ``-v6`` ids): the steps grammar 6 adds to grammar 5 (:mod:`agentflow_env.scoring.grammar5`).

Grammar 5 read revisions, frames and renderings. Grammar 6 closes the classes that a validation set written
outside the project found in it, each by what an answer commits to (docs/rewards.md, "Grammar 6"):

1. **More presentation** (:func:`presentation`): pictographs (emoji) are decoration; an arrow that opens a
   line is a label; a horizontal rule is a separator; an XML element named like an answer key
   (``<final_answer>``) is an ``<answer>`` tag; a reference entry (a line that opens with a citation mark:
   ``[1] Wikipedia``, ``¹ Verified ..``) and the mark it explains are a citation; code followed by its output
   ("Output: 33") is working, its output the answer; a bullet before a label ("- **Answer**: ..") is a label
   line; an answer label and "or" in another language ("Die Antwort lautet ..", "Ответ:", "A o B", "A 或 B")
   are the label and "or"; a list literal (``['no', 'yes']``) is its items.
2. **A JSON object commits to all it states** (:func:`json_rival`): a key other than the answer key that names
   another answer (``"alternative": "23"``, ``"backup"``, ``"candidates"``) keeps a second candidate alive.
3. **Rejections** (:func:`reject`): a candidate named only to be rejected is not a candidate: "33 (rather
   than 23)", "33, not 23", "instead of 23", a clause that names a value and rules it out or calls it a mistake
   ("I can rule out 23.", "A common mistake is to answer 23, but that is incorrect."). A clause that names no
   value ("I made an error above") rejects nothing: it is a correction cue (step 4). A clause that carries a
   rival cue is never a rejection ("23 can't be ruled out" keeps 23 alive).
4. **A revision commits at its first commitment, however far after the cue** (:func:`drop_drafts`): "23..
   wait, no. Let me recheck that. <working>. So the answer is actually 33." reads 33.
5. **More ways to keep two candidates** (:data:`CUES`, :func:`distribution`, :func:`offered_both`): "can't be
   ruled out", "leaning towards", "torn between"; probabilities given to two candidates ("A: 60%, D: 40%");
   an answer that names both alternatives the question offers ("Which came first, X or Y?" answered "X or
   Y", "X and Y") commits to neither (grammar 4 read the question's words as no candidates, so such an answer
   read as the gold whichever order it took).

Every step is a bounded number of linear passes.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from collections.abc import Callable, Iterable
from functools import lru_cache

from agentflow_env.scoring import grammar5
from agentflow_env.scoring.cued import Cued
from agentflow_env.scoring.extract import normalize_text
from agentflow_env.scoring.grammar import (
    _ANSWER_MARK,
    _COMMON,
    _CUES,
    _REVISION,
    _WEAK_CUES,
    LaterSteps,
    Reading,
    _candidates,
    _of_kind,
)
from agentflow_env.scoring.grammar import read_answer as _read
from agentflow_env.scoring.words import tokens

__all__ = ["CUES", "distribution", "drop_drafts", "json_rival", "offered_both", "presentation", "read_answer", "reject"]

# ------------------------------------------------------------------ 1. presentation
_PICTOGRAPH = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d]")
_ARROW_LEAD = re.compile(r"(?m)^([ \t>*_]*)(?:→|⇒|⟹|➜|➡|=>|->)[ \t]*")
_RULE_LINE = re.compile(
    r"(?m)^[ \t]*(?:-[ \t]*){3,}$|^[ \t]*(?:\*[ \t]*){3,}$|^[ \t]*(?:_[ \t]*){3,}$|^[ \t]*={3,}[ \t]*$"
)
_XML_ANSWER = re.compile(
    r"(?is)<(final[_ -]?answer|answer|result|solution|response|output)>(.*?)</\1>",
)
_MARKS = "¹²³⁴⁵⁶⁷⁸⁹⁰"
_REFERENCE_ENTRY = re.compile(rf"(?m)^[ \t]*(\[\^?\d{{1,3}}\]:?|[{_MARKS}]+|\^\d{{1,2}})[ \t]+\S[^\n]*$")
_CODE_OUTPUT = re.compile(
    r"(?i)```[ \t]*\n\s*(?:\*\*|__)?(?:output|result|prints?|returns?)(?:\*\*|__)?[ \t]*[:：][ \t]*"
)
_LANGUAGE_LINE = re.compile(r"\A[ \t]*[A-Za-z0-9_+.-]{1,20}[ \t]*\n")
_PRINT = re.compile(
    r"(?s)\A\s*(?:python|py)?\s*print\s*\(\s*('[^'\n]{0,400}'|\"[^\"\n]{0,400}\"|-?[\d.]{1,40})\s*\)\s*\Z"
)
_ALT_HEADER = re.compile(
    r"(?im)^[ \t]*(?:#{1,6}[ \t]*|\*\*|__)(?:alternatives?|alternatively"
    r"|other\s+(?:possibilit(?:y|ies)|candidates?|options?|answers?)"
    r"|back-?up|fall-?back|second\s+(?:choice|option|answer|candidate|guess)|runner[- ]up)[ \t*_:]*\n\s*"
)
_LABELLED_BULLETS = re.compile(
    r"(?im)^([ \t*_]*(?:final\s+)?answers?[ \t*_]*[:：][ \t*_]*)\n((?:[ \t]*[-*•·][ \t]+[^\n]+(?:\n|$)){2,})"
)
_TOGETHER = re.compile(r"(?i)\b(?:putting|taking|combining|bringing)\s+(?:[\w-]+\s+){1,3}together\b[ \t]*,?")
_POSTSCRIPT = re.compile(r"(?m)^([ \t*_]*)P\.[ \t]?S\.?[ \t]*[:,-]?[ \t]*")
_BULLET_LABEL = re.compile(r"(?m)^[ \t]*[-*•·][ \t]+(?=(?:\*\*|__)?[A-Za-z][A-Za-z ]{0,30}(?:\*\*|__)?[ \t]*[:：])")
_FOREIGN_LABEL = re.compile(
    r"(?im)(?:^|(?<=[.!?]\s))[ \t*_]*(?:"
    r"la\s+respuesta\s+(?:correcta\s+|final\s+)?es|(?:la\s+)?respuesta(?:\s+final|\s+correcta)?\s*[:：]"
    r"|la\s+r[ée]ponse\s+(?:correcte\s+|finale\s+)?est|(?:la\s+)?r[ée]ponse(?:\s+finale|\s+correcte)?\s*[:：]"
    r"|die\s+(?:richtige\s+|endgültige\s+)?antwort\s+(?:ist|lautet)|(?:die\s+)?(?:richtige\s+|endgültige\s+)?antwort\s*[:：]"
    r"|la\s+risposta\s+(?:corretta\s+|finale\s+)?(?:è|e)|(?:la\s+)?risposta(?:\s+finale|\s+corretta)?\s*[:：]"
    r"|a\s+resposta\s+(?:correta\s+|final\s+)?(?:é|e)|(?:a\s+)?resposta(?:\s+final|\s+correta)?\s*[:：]"
    r"|(?:правильный\s+|окончательный\s+)?ответ\s*(?:[:：]|—|–|-|это)"
    r"|(?:最终|正确)?答案\s*(?:是|为|[:：])|答え\s*(?:は|[:：])|(?:최종\s*)?(?:정답|답)\s*(?:은|는)?\s*[:：]"
    r")[ \t*_]*"
)
_FOREIGN_OR = re.compile(r"(?<=\S)[ \t]+(?:o|ou|oder|oppure|или|o\s+bien|ou\s+bien)[ \t]+(?=\S)")
_CJK_OR = re.compile(r"[ \t]*(?:或者|或是|或|还是|または|또는)[ \t]*")
_ALT_KEY = re.compile(
    r"(?i)alt|other|second|backup|fall-?back|runner|candidate|possib|secondary|also|plan[_ ]?b"
    r"|(?:answer|option|choice)[_ ]?[2-9b]"
)


def _list_literal(text: str) -> str | None:
    """The items of a list literal (``['no', 'yes']``, ``["A", "B"]``), joined as a list, or ``None``."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")) or len(stripped) > grammar5.MAX_JSON_CHARS:
        return None
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, (str, int, float)) for v in value):
        return None
    return ", ".join(str(v) for v in value)


def json_rival(text: str) -> str | None:
    """Why a JSON object names a second answer besides its answer key (a key of alternativeness, such as
    ``alternative``, ``backup``, ``candidates``, whose value differs from the answer), or ``None``."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")) or len(stripped) > grammar5.MAX_JSON_CHARS:
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    answers = {
        re.sub(r"\s+", "", str(v)).lower()
        for k, v in data.items()
        if grammar5._ANSWER_KEY.match(str(k).strip()) and isinstance(v, (str, int, float))
    }
    if not answers:
        return None
    for key, value in data.items():
        if grammar5._ANSWER_KEY.match(str(key).strip()) or not _ALT_KEY.search(str(key)):
            continue
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip():
                if re.sub(r"\s+", "", str(v)).lower() not in answers:
                    return f"a JSON object names another answer under {str(key)[:30]!r}"
    return None


def _references(text: str) -> str:
    """``text`` without reference entries after the answer and the citation marks they explain."""
    entries = [m for m in _REFERENCE_ENTRY.finditer(text) if text[: m.start()].strip()]
    if not entries:
        return text
    marks = set()
    for m in reversed(entries):
        line = m.group(0)
        if grammar5.remark_cue(line):
            continue  # "[1] Some sources say 34" names a rival: it stays
        marks.add(m.group(1).rstrip(":").strip("[]^"))
        text = text[: m.start()] + text[m.end() :]
    for mark in marks:
        if mark and mark[0] in _MARKS:
            text = re.sub(rf"(?<=\S){re.escape(mark)}(?![{_MARKS}])", "", text)
    return text.strip()


def _code_output(text: str) -> str:
    """Code followed by its output ("```python\nprint(33)\n```\nOutput: 33") as ``Answer: 33``: the code is
    working. The opening fence may have been read as the action's (only the language line is left)."""
    m = _CODE_OUTPUT.search(text)
    if m is None:
        return text
    opening = text.rfind("```", 0, m.start())
    if opening < 0:
        if _LANGUAGE_LINE.match(text) is None:
            return text
        opening = 0
    return text[:opening] + "Answer: " + text[m.end() :]


def presentation(text: str, golds: list[str], kind: str, question: str = "") -> tuple[str, str | None]:
    """``text`` with grammar 6's presentation read (step 1 of the module doc), then grammar 5's."""
    text = _PICTOGRAPH.sub("", text)
    text = _ARROW_LEAD.sub(r"\1", text)
    text = _RULE_LINE.sub("", text)
    text = _code_output(text)
    printed = _PRINT.match(text)
    if printed is not None:
        text = printed.group(1).strip("'\"")
    text = _ALT_HEADER.sub("Alternatively: ", text)
    labelled = _LABELLED_BULLETS.search(text)
    if labelled is not None:
        from agentflow_env.scoring.typed import _items

        bullets = [b.group(1).strip() for b in re.finditer(r"(?m)^[ \t]*[-*•·][ \t]+([^\n]+)", labelled.group(2))]
        need = max((len(_items(g)) for g in golds), default=1)
        if all(len(_items(b)) >= need for b in bullets):
            return text, "several bulleted answers under one label"  # each bullet is a whole answer
        text = text[: labelled.start()] + labelled.group(1) + " " + ", ".join(bullets) + "\n" + text[labelled.end() :]
    text = _TOGETHER.sub("So", text)
    text = _POSTSCRIPT.sub(r"\1", text)
    text = _references(text)
    text = _BULLET_LABEL.sub("", text)
    text = text.replace("。", ". ").replace("：", ": ").strip()
    text = _FOREIGN_LABEL.sub("Answer: ", text)
    folded_golds = " ".join(g.lower() for g in golds)
    if not re.search(r"(?<!\S)(?:o|ou|oder|oppure|или)(?!\S)", folded_golds):
        text = _FOREIGN_OR.sub(" or ", text)
    if not re.search(r"或|还是|または|또는", folded_golds):
        text = _CJK_OR.sub(" or ", text)
    hedge = json_rival(text)
    if hedge is not None:
        return text, hedge
    items = _list_literal(text)
    if items is not None:
        text = items
    return grammar5.presentation(text, golds, kind, question)


# ------------------------------------------------------------------ 3. rejections
_CONTRAST_PAREN = re.compile(
    r"(?i)\s*\(\s*(?:rather\s+than|not|instead\s+of|as\s+opposed\s+to)\s+(?:[^()\n]|\([^()\n]{0,60}\)){1,160}\)"
)
_CONTRAST_TAIL = re.compile(
    r"(?i)(?<=\S)[ \t]*(?:,|;|[ \t][—–-])[ \t]*(?:and[ \t]+|but[ \t]+)?"
    r"(?:rather\s+than|not|instead\s+of|as\s+opposed\s+to)[ \t]+"
    r"(?!(?:sure|certain|confident|only|just|100|entirely|completely|quite|necessarily|exactly)\b)"
    r"(?:[^.;!?()\n]|\([^()\n]{0,60}\)){1,160}?(?=[ \t]*(?:[.;!?\n)]|$)|,?[ \t]+(?:but|though|although|however|yet)\b)"
)
_REJECTS = re.compile(
    r"(?i)\b(?:rule[sd]?\s+out|ruling\s+out|eliminat(?:e|es|ed|ing)|exclud(?:e|es|ed|ing)|discard(?:s|ed)?"
    r"|(?:is|was|are|were|'s)\s+(?:incorrect|wrong|a\s+(?:common\s+)?mistake|an\s+error|not\s+(?:correct|right))"
    r"|(?:common\s+|earlier\s+|initial\s+|previous\s+)?(?:mistake|error)s?"
    r"|does(?:\s+not|n't)\s+(?:fit|work|match|hold|satisfy)|do(?:\s+not|n't)\s+(?:fit|work|match|hold))\b"
)
_REJECTS = Cued(
    _REJECTS,
    re.compile(
        r"rule|ruling|eliminat|exclud|discard|incorrect|wrong|mistake|error|not\s+correct|not\s+right|does|do\s+not"
        r"|don't"
    ),
    lowered=True,
)
_NOT_REJECTED = re.compile(
    r"(?i)\b(?:can(?:not|'t|\s+not)|could(?:n't|\s+not)|won't|shouldn't|not|never|hard\s+to)\s+(?:be\s+|yet\s+|fully\s+)?"
    r"(?:rule[sd]?|ruled|exclude[sd]?|eliminate[sd]?|discard(?:ed)?)\b"
)
_CLAUSE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


def _cue_free(clause: str) -> bool:
    return not (
        _CUES.search(clause) or _WEAK_CUES.search(clause) or grammar5.CUES.search(clause) or CUES.search(clause)
    )


_VALUE_TOKEN = re.compile(r"\d|^(?:yes|no)$", re.IGNORECASE)


def _names_a_value(clause: str) -> bool:
    """Whether a rejecting clause names the value it rejects: a token with a digit, an option letter, "yes" or
    "no", a capitalised word after the clause's first, or a bracketed or quoted text. "I made an error above"
    names none: it is a correction cue (step 4), not a rejection, and nothing is dropped."""
    if re.search(r"\([^()\n]{1,80}\)|[\"“][^\"“”\n]{1,80}[\"”]", clause):
        return True
    words = [w.strip(_EDGE) for w in clause.split()]
    for i, word in enumerate(words):
        if not word or word == "I":
            continue
        if len(word) > 1 and _VALUE_TOKEN.search(word):
            return True
        if i > 0 and re.fullmatch(r"[A-J]", word):  # "A common mistake ..": the article is no option
            return True
        if i > 0 and word[:1].isupper() and word.lower() not in _COMMON:
            return True
    return False


def reject(text: str) -> str:
    """``text`` without the candidates it names only to reject them (step 3 of the module doc)."""
    text = _CONTRAST_PAREN.sub("", text)
    text = _CONTRAST_TAIL.sub("", text)
    if not _REJECTS.search(text):
        return text
    pieces, pos = [], 0
    for m in _CLAUSE_END.finditer(text):
        pieces.append(text[pos : m.end()])
        pos = m.end()
    pieces.append(text[pos:])
    keep = [True] * len(pieces)
    for i, piece in enumerate(pieces):
        if (
            _REJECTS.search(piece)
            and _names_a_value(piece)
            and not _NOT_REJECTED.search(piece)
            and not _ANSWER_MARK.search(piece)
            and not grammar5._COMMIT5.search(piece)
            and _cue_free(piece)
        ):
            keep[i] = False
    kept = "".join(p for p, k in zip(pieces, keep) if k).strip()
    return kept or text


# ------------------------------------------------------------------ 4. revisions
_REVISION6 = re.compile(
    r"(?i)\bwait\b[,.!:…]*|\b(?:i|we)\s+(?:had\s+|have\s+|'d\s+|'ve\s+)?(?:made|make)\s+(?:an?\s+)?(?:\w+\s+)?"
    r"(?:error|mistake|slip|typo)\b|\blet\s+me\s+(?:re-?compute|re-?calculate|redo|re-?do|re-?check|reconsider|"
    r"try\s+again|re-?count|re-?evaluate|double-check|check\s+again)\b|\bon\s+(?:second|further)\s+thought\b"
    r"|\bon\s+reflection\b|\bcorrecting\s+(?:it|this|that)\b|\bscratch\s+that\b"
)
_COMMIT_ANY = re.compile(
    r"(?i)\b(?:the|my)\s+(?:\w+\s+){0,2}(?:answer|value|result|option|choice|number)\s+(?:is|should\s+be|would\s+be|must\s+be)\b"
    r"|(?:^|(?<=[\s*_]))(?:final\s+|correct\s+)?answer\s*[:：]"
)


def drop_drafts(text: str, kind: str) -> tuple[str, str | None, bool]:
    """Grammar 5's revisions after the rejections are dropped (step 3), then step 4: after a correction cue
    whose commitment grammar 5 did not find, the first commitment phrase that follows, however far."""
    text = reject(text)
    read, hedge, revised = grammar5.drop_drafts(text, kind)
    if hedge is None and revised and _CUES6.search(read):
        return text, None, False  # "leaning towards no, but yes can't be ruled out": no revision, both are read
    if hedge is not None:
        return read, hedge, revised
    if revised:  # grammar 5's revision may end on another cue ("No... wait, no. <working>. So the answer is ..")
        later = _later_commitment(read, kind)
        return later if later[2] else (read, None, True)
    return _later_commitment(text, kind)


def _later_commitment(text: str, kind: str) -> tuple[str, str | None, bool]:
    """Step 4 on ``text``: after the last correction cue with a commitment phrase somewhere after it, the first
    such phrase; ``(text, None, False)`` when there is none."""
    commits = [m.start() for m in _COMMIT_ANY.finditer(text)]
    cut = None
    for cue in (_REVISION, _REVISION6):
        for m in cue.finditer(text):
            at = bisect.bisect_left(commits, m.end())
            if at < len(commits) and (cut is None or commits[at] > cut):
                cut = commits[at]
    if cut is None:
        return text, None, False
    after, draft = text[cut:].strip(), text[:cut]
    if grammar5.UNCERTAIN.search(after):
        earlier = {c for c in _candidates(draft) if _of_kind(c, kind)}
        if earlier - tokens(after):
            return text, "a revision that is itself uncertain keeps the draft alive", True
    return after, None, True


# ------------------------------------------------------------------ 5. rival cues and two candidates
CUES = re.compile(
    r"(?i)\b(?:can(?:not|'t|\s+not)|could(?:n't|\s+not)|won't|shouldn't)\s+(?:yet\s+|fully\s+)?(?:be\s+)?"
    r"(?:ruled\s+out|excluded|dismissed|discounted|eliminated)\b|\bnot\s+(?:be\s+)?(?:ruled\s+out|excluded)\b"
    r"|\bleaning\b|\btorn\s+between\b|\bnarrowed\b|\bshort-?list\b|\b(?:best|first)\s+guess\b"
)
_CUES6 = re.compile(f"(?:{grammar5.CUES.pattern[4:]})|(?:{CUES.pattern[4:]})", re.IGNORECASE)
_PERCENT = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d+)?\s*%|\b(?:chance|probability|likelihood|odds)\b", re.IGNORECASE)
_SEGMENT = re.compile(r"[,;\n]|\band\b|\bvs\.?(?!\w)|/")


def distribution(text: str, kind: str) -> str | None:
    """Why ``text`` gives probabilities to several candidates ("A: 60%, D: 40%", "a 55% chance it's A and a
    45% chance it's C"), or ``None``."""
    if len(re.findall(r"\d\s*%", text)) < 2:
        return None
    named = []
    for segment in _SEGMENT.split(text):
        if not _PERCENT.search(segment):
            continue
        rest = re.sub(r"(?<![\w.])\d{1,3}(?:\.\d+)?\s*%", " ", segment)
        found = [c for c in _candidates(rest) if _of_kind(c, kind) and c not in _COMMON]
        if found:
            named.append(found[-1])
    return "it gives probabilities to several candidates" if len(set(named)) > 1 else None


_OFFERED = re.compile(r"(?:^|[,:;]\s*|\b(?:between|either)\s+)([^,:;?]{1,80}?)\s*,?\s+or\s+([^,;?]{1,80}?)\s*\?\s*$")


def _fold(text: str) -> str:
    from agentflow_env.scoring.typed import fold

    return " ".join(re.findall(r"\w+", fold(text)))


@lru_cache(maxsize=64)
def _offered(question: str) -> tuple[str, str] | None:
    """The two alternatives ``question`` offers ("Which came first, X or Y?"), folded, or ``None``."""
    m = _OFFERED.search(question.strip())
    if m is None:
        return None
    first, second = (_fold(a) for a in m.groups())
    return None if not first or not second or first == second else (first, second)


def offered_both(text: str, question: str) -> str | None:
    """Why ``text`` names both alternatives the question offers ("Which came first, X or Y?") without
    rejecting either (rejections were dropped before), or ``None``. The question's own "X or Y" restated
    ("Released earlier, X or Y, was Y") is the question, not two candidates: what the rest of the answer names
    decides; an answer that is only the question's "X or Y" (with words of doubt around it) commits to neither.
    "Between X and Y, .." restates the question's framing too."""
    if not question:
        return None
    alternatives = _offered(question)
    if alternatives is None:
        return None
    body = _fold(re.sub(r"(?i)\bbetween\b[^,.;\n]{1,200}?\band\b[^,.;\n]{1,200}?(?=,|$)", " ", text))
    phrase = f"{alternatives[0]} or {alternatives[1]}"
    restated = re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", body) is not None
    rest = re.sub(rf"(?<!\w){re.escape(phrase)}(?!\w)", " ", body) if restated else body
    found = [re.search(rf"(?<!\w){re.escape(a)}(?!\w)", rest) for a in alternatives]
    if all(found):
        first, second = sorted((f for f in found if f is not None), key=lambda f: f.start())
        if _COMPARES.search(rest[first.end() : second.start()]):
            return None  # "X was established before Y": a comparison that commits to X
        return "it names both alternatives the question offers"
    if restated and not any(found):
        q = set(_fold(question).split())
        words = [
            w for w in rest.split() if w not in q and w not in _COMMON and w not in _FRAME_WORDS6 and w not in _DOUBT
        ]
        if not words:
            return "it only restates the alternatives the question offers"
    return None


_DOUBT = frozenset(
    """unclear whether determine decide tell sure unsure know say torn between either neither could might
    can't cannot cant dont isnt its whats im ive id s t d ll""".split()
)
_COMPARES = re.compile(
    r"\b(?:before|after|than|earlier|later|older|younger|preceded|predates|followed|ahead|prior|first|second)\b"
)


_JOIN = r"[ \t]*(?:,|;|/|&|\band\b|\bor\b|\bvs\.?|\bversus\b)[ \t]*"
_VALUE_NEXT = re.compile(
    rf"^[.!?]?{_JOIN}(?:\*\*|__)?(\\[dt]?frac\{{[^{{}}]{{1,20}}\}}\{{[^{{}}]{{1,20}}\}}|[^\s,;/&()*_]+)"
)
_VALUE_BEFORE = re.compile(
    rf"(\\[dt]?frac\{{[^{{}}]{{1,20}}\}}\{{[^{{}}]{{1,20}}\}}|[^\s,;/&()*_:]+)(?:\*\*|__)?{_JOIN}$"
)
# where the text before a value ends in a join (its last line's end), a value may be joined before it: the pattern
# above tries every position, so it runs only there
_JOIN_ENDS = re.compile(r"(?:,|;|/|&|and|or|vs\.?|versus)[ \t]*\Z")


def joined_rival(text: str, golds: list[str], question: str = "") -> str | None:
    """Why ``text`` writes the gold joined to another value of its shape by a list separator or "or" ("X,
    Y", "X and Y", "X (..) / Y", "\\frac{9}{4}; \\frac{7}{4}"), when the gold is one value: two candidates
    side by side, or ``None``. The other value has the gold's shape: a token with a digit or a LaTeX fraction
    for a number or an expression, a word that is not a common word for a word gold, a capitalised word for a
    capitalised gold; words of the question are not values (it offers them)."""
    from agentflow_env.scoring.typed import _items

    q = {w.lower() for w in re.findall(r"\w+", question)}
    plain = re.sub(r"\s*\([^()\n]{0,40}\)", "", text)  # "(strict reading)": a gloss on the value
    for gold in golds:
        g = gold.strip().rstrip(".")
        if not g or len(_items(g)) > 1 or g.lower() in ("yes", "no"):
            continue
        for n, m in enumerate(re.finditer(rf"(?i)(?<![\w\\]){re.escape(g)}(?![\w}}])", plain)):
            if n >= 20:
                break
            before = plain[max(0, m.start() - 60) : m.start()]
            joined = _JOIN_ENDS.search(before[:-1] if before.endswith("\n") else before) is not None
            for other in (
                _VALUE_NEXT.match(plain[m.end() : m.end() + 60]),
                _VALUE_BEFORE.search(before) if joined else None,
            ):
                if other is None:
                    continue
                word = other.group(1).strip(_EDGE)
                if not word or word.lower() == g.lower() or word.lower() in q:
                    continue
                if (re.search(r"\d", g) or "\\" in g) and not re.search(r"(?<![\\A-Za-z])[A-Za-z]{3,}", g):
                    shaped = bool(re.search(r"\d", word))
                elif g[:1].isupper():
                    shaped = word[:1].isupper() and word.lower() not in _COMMON
                else:
                    shaped = word.isalpha() and word.islower() and word not in _COMMON and word not in _FRAME_WORDS6
                if shaped:
                    return f"it writes the answer beside another value ({word[:30]!r})"
    return None


_EDGE = ".,;:!?\"'“”‘’()[]*_`$"
_FRAME_WORDS6 = grammar5._FRAME_VOCABULARY | frozenset(
    """because since although though while whereas unless until which who whom whose where when why how that
    since per via namely including especially""".split()
)


# ------------------------------------------------------------------ the reader
def _both(text: str, golds: list[str]) -> str | None:
    return "it answers both yes and no" if grammar5.both_polarities(text, golds) else None


def _clean(prediction: object) -> str:
    text = normalize_text(prediction)
    if len(text) > 20_000:
        return text
    return _XML_ANSWER.sub(lambda m: "<answer>" + m.group(2) + "</answer>", text)


def read_answer(
    prediction: object,
    golds: Iterable[object] = (),
    kind: str = "text",
    question: str = "",
    present: Callable[[str, list[str], str, str], tuple[str, str | None]] = presentation,
    drafts: Callable[[str, str], tuple[str, str | None, bool]] | None = None,
    cues: re.Pattern[str] | None = None,
    grammar: int = 6,
) -> Reading:
    """The final answer ``prediction`` read by grammar 6: grammar 5's reader with this module's steps (see the
    module doc), then :func:`distribution`, :func:`offered_both` and grammar 5's
    :func:`~agentflow_env.scoring.grammar5.negated_only`. ``present``, ``drafts`` and ``cues``: the presentation
    step, the revision step and the strong rival cues (grammar 7 passes its own, built on this module's);
    ``grammar``: the grammar reading (a later one passes its number down; the rival step reads it, 12 on)."""
    steps = LaterSteps(presentation=present, drop_drafts=drafts or drop_drafts, both=_both, cues=cues or _CUES6)
    gold_list = [str(g) for g in golds if g is not None and str(g).strip()]
    reading = _read(_clean(prediction), gold_list, kind, grammar, question, steps)
    if reading.hedge is not None:
        return reading
    why = (
        distribution(reading.text, kind)
        or offered_both(reading.text, question)
        or (joined_rival(reading.text, gold_list, question) if kind != "option" else None)
    )
    if why is None and grammar5.negated_only(reading.text, gold_list):
        why = "it only denies a value: it commits to none"
    return reading if why is None else Reading(reading.text, why, reading.revised)
