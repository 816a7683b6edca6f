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
2. **A retraction must be asserted.** A marker in a sentence that is conditional or unsure ("if that's wrong,
   44", "I might be wrong; 44 is possible") retracts nothing: "33. If that's wrong, 44." stays a hedge in both
   orders. A marker that follows the value it rejects ("33. 44 is incorrect.") leaves nothing after it to commit
   to, and the answer is read as before.
3. **Struck and replaced values in markup**: a ``diff`` block's removed lines are withdrawn and its added lines are
   the text; ``<s>44</s>`` followed by more text is a struck value (grammar 7 read ``<s>``/``</s>`` as template
   tokens, which they are only around the whole reply); a JSON object with a revision key (``revised_answer``,
   ``corrected_answer``, ``final_answer``, ..) beside a plain ``answer`` reads the revision.

The mirror image of every class reads the other value, so a retraction pays for the value it commits to, in one
order only: it is a reading of what the answer says, not a way to name two values and be paid for either. Every
step is a bounded number of linear passes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from agentflow_env.scoring import grammar5, grammar6, grammar7
from agentflow_env.scoring.extract import normalize_text
from agentflow_env.scoring.grammar import Reading, _candidates, _of_kind

__all__ = ["drop_decoys", "only_value", "presentation", "read_answer", "retraction", "rival_line", "value_token"]

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
_MARKER = re.compile(
    rf"(?i)(?P<wrong>{_WRONG_EN}|{_WRONG_OTHER})|(?P<no>{_BARE_NO})|(?P<replace>{_REPLACE})|(?P<soft>{_SOFT})"
)
# "unless I miscounted", "if that's wrong": a revision cue under a condition keeps both values
_CONDITIONAL_REVISION = re.compile(
    rf"(?i)\b(?:if|unless|in\s+case)\b[^.!?\n]{{0,40}}?(?:{_WRONG_EN}|\bmis\w+|\bwrong\b|\bmistaken\b)"
)
# a CJK character beside a value: a space between them, so the value is a token of its own ("是508" -> "是 508")
_CJK = r"[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]"
_CJK_EDGE = re.compile(rf"(?<={_CJK})(?=[0-9A-Za-z\\$-])|(?<=[0-9A-Za-z}}$.])(?={_CJK})")
# the copula and particles around a value in Chinese, Japanese and Korean ("是 no", "D です", "33 입니다")
_CJK_LEAD = re.compile(r"^(?:是|为|為|は|은|는|が|:)\s*")
_CJK_TAIL = re.compile(r"\s*(?:です|でした|だ|である|입니다|이다|이에요|예요|요|。|．)+$")
# a sentence that is conditional or unsure retracts nothing ("if that's wrong, 44")
_CONDITIONAL = re.compile(
    r"(?i)\b(?:if|unless|in\s+case|otherwise|might|may|could|would|possibly|perhaps|maybe|wenn|falls|si|если)\b"
    r"|如果|要是|もし|만약|혹시"
)
_SENTENCE_START = re.compile(r"(?s).*(?:[.!?。！？]\s|\n)")
# what a committed value may not carry after it: a second rejection, a rival or a distractor
_REJECTS_AGAIN = re.compile(
    rf"(?i){_WRONG_EN}|{_WRONG_OTHER}|\bnot\b|\bdistractor\b|\btrap\b|\bconfus\w*"
    r"|\b(?:so|as)\s+(?:is|was|were|are)\b|\btoo\b|\balso\b|\beither\b|\bneither\b|\bnor\b"
)
_DENIED_TOO = re.compile(
    rf"(?i)(?:{_WRONG_EN}|{_WRONG_OTHER})[^.!?\n]{{0,40}}?\b(?:(?:and\s+)?so\s+(?:is|was|are|were)|as\s+(?:is|was)|nor)\s+\S"
)
_TEXT_COMMIT = re.compile(
    r"(?i)^[\s,:;.!)\]—–-]*(?:so\s+)?(?:(?:it's|it’s|it\s+is|the\s+(?:correct\s+|right\s+)?answer\s+is|that\s+would\s+be"
    r"|make\s+that|is|should\s+(?:read|be))\s+)?(?P<value>[^\n.!?;]{1,80}?)[.!]?\s*$"
)


def denies_all(text: str, kind: str) -> str | None:
    """Why ``text`` commits to nothing when, after a marker that a value is wrong, another is rejected alongside it
    ("580 is wrong, and so is 508"), else ``None``."""
    match = _DENIED_TOO.search(text)
    if match is None or kind == "text":
        return None
    values = {c for c in _candidates(text) if _of_kind(c, kind)}
    return "it says each value it names is wrong: it commits to none" if len(values) > 1 else None


def retraction(text: str, kind: str) -> str | None:
    """What the answer commits to after its last retraction marker (see the module doc, steps 1 and 2), or ``None``
    when the text has no marker, the marker is conditional, or what follows it is not one committed value."""
    if len(text) > 20_000:
        return None
    if re.search(_CJK, text):
        text = _CJK_EDGE.sub(" ", text)
    markers = [m for m in _MARKER.finditer(text) if m.group("no") is None or text[m.end() :].strip(" \t\n.!。")]
    if not markers:
        return None
    last = markers[-1]
    head = text[: last.start()]
    start = _SENTENCE_START.match(head)
    if _CONDITIONAL.search(head[start.end() if start else 0 :] + last.group(0)):
        return None
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
_DECOY_PAREN = re.compile(r"\(([^()\n]{0,120})\)")
_CLAUSES = re.compile(r"(?<=[.!?])[ \t]+|[ \t]+[—–][ \t]+|\n+")


def drop_decoys(text: str, kind: str) -> str:
    """``text`` without the parentheticals, sentences and dash clauses that name a value only as a decoy, when
    another part of it still names a value (a clause that is the whole answer stays, and is read as before)."""
    if _DECOY.search(text) is None:
        return text
    text = _DECOY_PAREN.sub(lambda m: "" if _DECOY.search(m.group(1)) else m.group(0), text)
    clauses = [c for c in _CLAUSES.split(text) if c.strip()]
    kept = [c for c in clauses if not _DECOY.search(c)]
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
    """``line`` (a labelled line with links) dropped when, its links and entry numbers taken out, it names no
    value of the answer's type; kept as it is otherwise ("See also: 580 (oeis.org)" names 580)."""
    rest = _ENTRY_NUMBER.sub(" ", _LINK.sub(" ", line.split(":", 1)[-1].split("：", 1)[-1]))
    return line if any(_of_kind(c, kind) for c in _candidates(rest)) and kind != "text" else ""


def presentation(text: str, golds: list[str], kind: str, question: str = "") -> tuple[str, str | None]:
    """Step 3, an arrow after an answer label ("Final result → 33") as a colon, "X or Y" in Chinese, Japanese
    and Korean, then grammar 7's presentation."""
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
    return grammar7.presentation(text, golds, kind, question)


def drop_drafts(text: str, kind: str) -> tuple[str, str | None, bool]:
    """Grammar 7's revisions; where they leave a hedge or more than one value of the type, the last retraction."""
    denied = denies_all(text, kind)
    if denied is not None:
        return text, denied, False
    read, hedge, revised = grammar7.drop_drafts(text, kind)
    if revised and _CONDITIONAL_REVISION.search(text) and len({c for c in _candidates(text) if _of_kind(c, kind)}) > 1:
        return text, "its revision is conditional: it commits to none of its values", False
    spaced = _CJK_EDGE.sub(" ", read) if re.search(_CJK, read) else read
    if hedge is None and kind != "text" and len({c for c in _candidates(spaced) if _of_kind(c, kind)}) <= 1:
        return read, hedge, revised
    if hedge is None and kind == "text" and revised:
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


def read_answer(prediction: object, golds: Iterable[object] = (), kind: str = "text", question: str = "") -> Reading:
    """The final answer ``prediction`` read by grammar 8: grammar 7's reader with this module's presentation and
    revision steps."""
    text = normalize_text(prediction)
    if len(text) <= 20_000:
        text = _STRUCK_S.sub("", text)  # before grammar 7 reads "<s>"/"</s>" as template tokens
    return grammar7.read_answer(text, golds, kind, question, present=presentation, drafts=drop_drafts)
