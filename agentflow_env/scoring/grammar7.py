"""Answer grammar 7 (the ``-v7`` ids): the steps grammar 7 adds to grammar 6 (:mod:`agentflow_env.scoring.grammar6`).

Grammar 6 closed the classes a validation set found in grammar 5. A fourth answer set, written outside the project
by someone who never read the scorers, was run blind through grammar 6 and the ``-v7`` action reading (7.99% of its
correct answers scored 0); its failures were then read, and grammar 7 closes their classes, each by what the answer
commits to (docs/rewards.md, "Grammar 7"). The fourth set is a validation set from here on; a fifth, written
blind, is the check.

1. **Chat-template debris is not the answer** (:func:`presentation`): end-of-turn tokens (``<|im_end|>``,
   ``<|eot_id|>``, ``</s>``, ``[/INST]``, ``<end_of_turn>``), and inline HTML formatting (``<b>``, ``<strong>``,
   ``<em>``, ``<code>``, ``<span ..>``; never ``<sup>``/``<sub>``, which change a value).
2. **Labels in more layouts**: a line that ends in a colon and names the answer ("Okay, here's the answer:")
   labels the line after it; a bullet that is only an answer label ("- **Result**") labels the bullet under it;
   a table row whose first cell is an answer label (``| **Answer** | 33 |``) is that label; Japanese and Korean
   answer frames ("答えはXです", "정답은 X입니다") are the label around X.
3. **Remarks that trail the answer are not the answer** (:func:`trailing_remarks`): after the first sentence or
   line that states a value, the sentences and lines at the end that are remarks are dropped. A remark is prose
   (five words or more, a third of them common words) that names no candidate of the answer's type, holds no
   gold written in lower case, carries no answer label, commitment, conclusion ("So", "Hence"), revision or
   rejection, and either has no rival cue or speaks to the reader: offers ("Let me know if you'd like .."), notes
   ("Note: please verify .. if this is important"), a numbered explanation. A leaked next turn ("User: thanks!")
   is cut when it names no candidate. A remark that names a candidate, or carries a cue and does not speak to the
   reader, stays and is read as before.
4. **More rejections and repeats**: "Not X — Y" commits to Y; "the most likely diagnosis is B" commits to B; a
   parenthetical that calls an earlier value a mistake ("(I previously wrote 35 by mistake)") names it only to
   reject it; "Y rather than X" / "Y instead of X" without a comma reject X as with one; a concession that a value
   is often cited, before "the correct answer is Y", rejects it; "B, C, D can be ruled out" rules them out; a
   sentence or line repeated word for word is one statement; a line that quotes the question ("You asked: ..",
   "Question: ..") is the question, not the answer.
5. **More hedges**: two or more candidates each asked as a question ("33? 35?") commit to none; "soit X, soit Y"
   is "either X or Y"; number words glossed by other digits ("Three hundred twelve (321)") give two values.

6. **The fifth set's classes** (a second round, read from a fifth set's failures after it was run blind):
   reasoning blocks in other spellings (``◁think▷``, ``[scratchpad]``); role markers between template tokens;
   lines of agent and UI debris ("TERMINATE", "Thought for 12 seconds", Command R's document lists and
   ``<co: 0>`` tags, ``[!NOTE]`` callouts, ``<details>``); a lone closing ``</answer>``; ``==highlight==``; a
   candidate marked ❌ is rejected, ✅ is a mark; "if I'm reading it correctly" is a confidence remark; a Python
   call or dict that carries the answer (``final_answer('33')``, ``Result(answer='33', alternative='35')``) is the
   JSON object of its arguments; "Correction — Answer: 33" is a correction; "Final result:", "Output:",
   "TL;DR:", "Bottom line:" and answer labels in more languages are labels; "Most likely X" commits to X; after
   a revision cue ("I misread ..", "Redoing that step ..", "I need to correct myself"), the first sentence that
   states one value of the type and does not negate it commits (numbers and options); a number answer that states
   one value, never negated or bounded ("at least 33"), commits to it (:func:`only_value`); "can't exclude",
   "plausible" are rival cues, and a list of candidates with no pick is a hedge.

7. **The sixth set's classes** (a third round, read from a sixth set's failures after it was run blind): JSON
   revision keys (``{"initial_answer": .., "revised_answer": ..}``), revision cues in other languages ("nein,
   Korrektur:", "不对，应该是", "Нет, поправка:", "me equivoqué", "en fait", "いや、違います"), "No, that's not
   right", "My mistake — it's Y" (text answers too), "I said X earlier, but the correct answer is Y", a retracted
   line, struck-out values (``<del>``, U+0336), a value followed by ❌, "(and not X)", "although some sources
   list X, the correct answer is Y", openers ("Sure!", "Assistant:", "You're looking for"), sign-offs ("Best,
   Assistant"), "END" lines, "if I'm not mistaken", a table before an answer label is working, "can't reconcile"
   is a rival cue; and :func:`only_value` reads no value beside a short bare line ("138,535 / Prussian").

Every step is a bounded number of linear passes.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Callable, Iterable

from agentflow_env.scoring import grammar5, grammar6
from agentflow_env.scoring.cued import Cued
from agentflow_env.scoring.extract import normalize_text
from agentflow_env.scoring.grammar import _ANSWER_MARK, _COMMON, _REVISION, Reading, _candidates, _of_kind

__all__ = ["presentation", "read_answer", "trailing_remarks"]

# ------------------------------------------------------------------ 1. chat-template debris
_TEMPLATE_TOKEN = re.compile(
    r"<\|[A-Za-z0-9_.:-]{1,40}\|>"
    r"|</?s>|\[/?INST\]|<(?:eos|bos|pad|unk|end_of_turn|start_of_turn|/start_of_turn)>(?:[ \t]*(?:model|user)\b)?"
)
_HTML_FORMAT = re.compile(
    r"(?i)</?(?:b|strong|i|em|u|mark|code|span|p|div|font|small|big|tt|kbd|var|ins)(?:\s[^<>\n]{0,200})?\s*/?>|<br\s*/?>"
)

# ------------------------------------------------------------------ 2. labels in more layouts
_ANSWER_WORD = (
    r"(?:final\s+answer|answer|result|solution|conclusion|verdict|bottom\s+line|in\s+short|tl;?dr|short\s+answer)"
)
_COLON_LABEL_LINE = re.compile(
    rf"(?im)^[ \t>*_#]*[^\n:]{{0,60}}\b(?:{_ANSWER_WORD}|what\s+i\s+found|what\s+i\s+got)\b[^\n:]{{0,20}}"
    r"[ \t*_]*:[ \t*_]*\n"
    r"(?:[ \t]*\n)*(?=[ \t]*\S)"
)
_COLON_LABEL_LINE = Cued(_COLON_LABEL_LINE, re.compile(r":[ \t*_]*\n"))  # a label line ends in a colon
_BULLET_LABEL_BLOCK = re.compile(
    rf"(?im)^[ \t]*[-*•·+][ \t]+(?:\*\*|__)?[ \t]*{_ANSWER_WORD}[ \t]*(?:\*\*|__)?[ \t]*\n[ \t]+[-*•·+][ \t]+"
)
_TABLE_ROW = re.compile(r"(?m)^[ \t]*\|(.*)\|[ \t]*$")
_ANSWER_CELL = re.compile(rf"(?i)^[ \t*_]*{_ANSWER_WORD}[ \t*_:]*$")
_CJK_FRAME = re.compile(
    r"(?m)^[ \t]*(?:(?:最終的な)?(?:答え|正解|解答|回答)(?:は|：|:)|(?:최종\s*)?(?:정답|답|답변)(?:은|는|:|：))[ \t]*"
    r"(?P<value>[^\n]+?)[ \t]*(?:です|である|だ|입니다|이다|예요|이에요|에요)?[ \t]*[。.!]?[ \t]*$"
)

# ------------------------------------------------------------------ 4. rejections and repeats
_NOT_FIRST = re.compile(
    r"(?im)^([ \t*_]*)not[ \t]+(?P<rejected>[^\n—–;:,.!?]{1,80}?)[ \t]*(?:[—–;:]|[ \t]-)[ \t]*(?P<kept>[^\n]+)$"
)
# grammar 12: a hyphen before a digit is a minus sign, not a dash ("Not 40 but -41." keeps its sign)
_NOT_FIRST12 = re.compile(
    r"(?im)^([ \t*_]*)not[ \t]+(?P<rejected>[^\n—–;:,.!?]{1,80}?)[ \t]*(?:[—–;:]|[ \t]-(?![\d.]))[ \t]*"
    r"(?P<kept>[^\n]+)$"
)
_MISTAKE_PAREN = re.compile(
    r"(?i)[ \t]{0,3}\((?=[^()\n]{0,160}\b(?:previously|earlier|before|initially|originally|at\s+first|first)\b)"
    r"(?=[^()\n]{0,160}\b(?:mistake|mistakenly|error|erroneously|wrong|wrongly|typo|incorrect(?:ly)?)\b)[^()\n]{1,160}\)"
)
_MISTAKE_PAREN = Cued(_MISTAKE_PAREN, re.compile(r"\("))
_BARE_CONTRAST = re.compile(r"(?i)(?<=[^\s,;—–-])[ \t]+(?=(?:rather\s+than|instead\s+of|as\s+opposed\s+to)[ \t])")
_OFTEN_CITED = re.compile(
    r"(?i)\b(?:although|though|even\s+though|while|whereas)[ \t]+[^\n,.;]{1,80}?[ \t]+"
    r"(?:is|are|was|were|gets|get)[ \t]+(?:often|commonly|sometimes|frequently|widely|usually)?[ \t]*"
    r"(?:cited|given|said|reported|believed|thought|comes\s+up|come\s+up|appears|shows\s+up|mentioned|"
    r"claimed|quoted|assumed|mentioned|suggested|guessed|listed)[^\n,.;]{0,40},[ \t]*"
    r"(?=the[ \t]+(?:correct|right|actual|true|real|accurate)[ \t]+answer[ \t]+is\b)"
)
_OFTEN_CITED = Cued(_OFTEN_CITED, re.compile(r"though|while|whereas"), lowered=True)
_AS_THE_ANSWER = re.compile(
    r"(?i)\b(?:giving|give|submitting|submit|going\s+with|go\s+with|settling\s+on|settle\s+on|offering|offer)[ \t]+"
    r"(?P<value>[^\n.;!?]{1,80}?)[ \t]+as[ \t]+(?:the|my|our)[ \t]+(?:final[ \t]+)?answer\b"
)
_INTERJECTION = re.compile(r"(?i)\b(so|and)[ \t]+(?:yeah|yep|yup|well|okay|ok|alright|hmm+|um+|uh+)[ \t]*,[ \t]*")
_MOST_LIKELY = re.compile(
    r"(?i)\bthe[ \t]+most[ \t]+likely[ \t]+"
    r"(answer|option|choice|diagnosis|cause|explanation|mechanism|finding)[ \t]+is\b"
)
_FENCED_OUTPUT = re.compile(
    r"(?i)\b(output|result|prints?|returns?)([ \t]*[:：])[ \t]*\n```[A-Za-z]*[ \t]*\n([^`]{0,400}?)(?:\n```|$)"
)
_FENCED_OUTPUT = Cued(_FENCED_OUTPUT, re.compile("```"))
_CODE_THEN_OUTPUT = re.compile(
    r"(?is)\A\s*(?:```[a-z]*[ \t]*\n)?(?:[^\n]*\bprint\s*\([^\n]*\n)+\s*(?:```[ \t]*\n)?\s*"
    r"(?:output|result|prints?)[ \t]*[:：][ \t]*(?P<value>[^\n]{1,200}?)\s*\Z"
)
_CAN_BE_RULED_OUT = re.compile(
    r"(?i)\b(?:can|could|may)[ \t]+(?:all[ \t]+|both[ \t]+|safely[ \t]+|easily[ \t]+|immediately[ \t]+)?be[ \t]+"
    r"(ruled[ \t]+out|eliminated|excluded|discarded|dismissed)\b"
)
# a number then another in brackets right after it ("312 (321)"), once number words are written as digits
_WORDS_AND_DIGITS = re.compile(r"(?<![\d.])\d[\d,.]*[ \t]*\([ \t]*\d[\d,.]*[ \t]*\)")
# ------------------------------------------------------------------ round 2: the fifth set's classes
# reasoning blocks in other spellings, read as <think> blocks (before grammar 3 drops them)
_OTHER_THINK = (
    ("◁think▷", "◁/think▷"),
    ("[scratchpad]", "[/scratchpad]"),
    ("<scratchpad>", "</scratchpad>"),
    ("<reasoning>", "</reasoning>"),
    ("<thinking>", "</thinking>"),
)
# a role marker between chat-template tokens: the assistant's own is debris, a user's starts a leaked turn
_ROLE_TOKEN = re.compile(
    r"<\|(?:im_start|start_of_role|start_header_id)\|>[ \t]*(?P<role>assistant|user|system)[ \t]*"
    r"(?:<\|(?:end_of_role|end_header_id)\|>)?[ \t]*\n?"
)
_DEBRIS_LINE = re.compile(
    r"(?im)^[ \t]*(?:TERMINATE|\[DONE\]|END|EOF|DONE|<\|?endoftext\|?>"
    r"|thought\s+for\s+(?:\d+|a\s+few|a\s+couple(?:\s+of)?|several)\s*(?:s|sec|secs|seconds|m|min|minutes)\.?"
    r"|(?:relevant|cited)\s+documents?\s*:[ \t\d,]*|>?[ \t]*\[!(?:note|tip|important|warning|caution)\])[ \t]*$\n?"
)
_GROUNDING_TAG = re.compile(r"</?co:\s*[\d,\s]*>")
_LONE_CLOSE = re.compile(r"(?i)</(?:final_?answer|answer|result)>")
_DETAILS = re.compile(r"(?is)</?details>|<summary>\s*([^<\n]{1,40}?)\s*</summary>")
_HIGHLIGHT = re.compile(r"(?<![=\w])==(?=\S)([^=\n]{1,200}?)(?<=\S)==(?![=\w])")
_MARKED_LINE = re.compile(r"(?m)^[ \t>*_-]*(?:❌|✗|✘|✖|⛔|🚫)[^\n]*\n?")
_CHECK_MARK = re.compile(r"(?m)^([ \t>*_-]*)(?:✅|✓|✔|☑)\ufe0f?[ \t]*")
_CHECK_MARK = Cued(_CHECK_MARK, re.compile("[✅✓✔☑]"))
_MORE_LABELS = re.compile(
    r"(?im)(?:^|(?<=[.!]\s))[ \t*_]*(?:final\s+)?(?:result|output|deliverable|bottom\s+line|tl;?\s?dr|verdict"
    r"|key\s+takeaway|in\s+short|grounded\s+answer|final)[ \t*_]*[:：][ \t*_]*"
)
_CORRECTION_LABEL = re.compile(
    r"(?im)(^|(?<=[.!]\s))[ \t*_]*(?:correction|corrected|update|edit|revision|erratum|amendment)[ \t*_]*[—–:-]+[ \t]*"
)
_REVISION7 = re.compile(
    r"(?i)\b(?:i|we)\s+(?:had\s+|have\s+)?(?:misread|misremembered|miscounted|mistyped|misapplied|miscalculated|mixed\s+up)\b"
    r"|\bredo(?:ing)?\s+(?:that|this|the|my)\s+(?:step|calculation|computation|count|check|sum|search|lookup)\b"
    r"|\b(?:i\s+need\s+to|let\s+me)\s+correct\s+(?:myself|that|this)\b|\bcorrecting\s+myself\b"
    r"|\bcorrection\s*:|\bno,?\s+that(?:'s|\s+is|\s+was)\s+(?:not\s+right|wrong|incorrect)\b"
    r"|\bthat(?:'s|\s+is|\s+was)\s+not\s+right\b|\bi\s+misspoke\b|\bmy\s+(?:mistake|bad)\b"
)
_RECALL = re.compile(
    r"(?i),?[ \t]{0,3}\bif\s+(?:i'm|i\s+am|i've|i\s+have)\s+"
    r"(?:reading|understanding|interpreting|remembering|recalling)\b[^.,;\n]{0,40}?\b(?:correctly|right)\b"
    r"|,?[ \t]{0,3}\bif\s+i\s+(?:recall|remember)\s+(?:correctly|right)\b"
    r"|,?[ \t]{0,3}\bif\s+memory\s+serves(?:\s+me)?\b"
    r"|,?[ \t]{0,3}\b(?:if|unless)\s+i(?:'m|\s+am)\s+(?:not\s+)?mistaken\b"
)
_RECALL = Cued(_RECALL, re.compile(r"if\s|unless\s"), lowered=True)  # each remark starts "if" or "unless"
_NOT_DOT = re.compile(
    r"(?im)^([ \t*_]*)not[ \t]+(?P<rejected>[^\n.!?;:—–]{1,60}?)[.!][ \t]+(?P<kept>[^\n.!?]{1,60}[.!]?)[ \t]*$"
)
_ACTIVE_EXCLUDE = re.compile(
    r"(?i)\b(?:can(?:not|'t|\s+not)|could(?:n't|\s+not)|won't)\s+(?:fully\s+|quite\s+|yet\s+)?"
    r"(?:rule\s+out|exclude|eliminate|dismiss|discount)\b"
)
# answer labels in more languages (grammar 6 reads Spanish, French, German, Italian, Portuguese and Russian ones)
_FOREIGN_LABEL7 = re.compile(
    r"(?im)(?:^|(?<=[.!?]\s))[ \t*_]*(?:"
    r"het\s+antwoord\s+is|antwoord\s*:|svaret\s+(?:är|er)|svar\s*:|vastaus\s+on|vastaus\s*:"
    r"|odpowied[źz]\s+(?:to|brzmi)|odpowied[źz]\s*:|odpov[ěe]ď\s+je|odpov[ěe]ď\s*:|odpove[ďd]\s+je|odpove[ďd]\s*:"
    r"|r[ăa]spunsul\s+(?:este|e)|r[ăa]spuns\s*:|a\s+v[áa]lasz(?:\s+pedig)?\s*:?|v[áa]lasz\s*:"
    r"|(?:cevap|yan[ıi]t)\s*:|jawa(?:b|ban|pan)nya\s+(?:adalah|ialah)|jawa(?:b|ban|pan)?\s*:|ang\s+sagot\s+ay"
    r"|c[âa]u\s+tr[ảa]\s+l[ờo]i\s+l[àa]|[đd][áa]p\s+[áa]n\s+l[àa]|[đd][áa]p\s+[áa]n\s*:|tr[ảa]\s+l[ờo]i\s*:"
    r"|jibu\s+ni|jibu\s*:|η\s+απάντηση\s+είναι|απάντηση\s*:|відповідь\s*(?::|—|-|є)|отговорът\s+е|отговор\s*:"
    r"|उत्तर\s*(?::|है)|الإجابة\s+هي|(?:الإجابة|الجواب)\s*:|התשובה\s+היא|תשובה\s*:|(?:پاسخ|جواب)\s*:|คำตอบคือ"
    r")[ \t*_]*"
)
_MOST_LIKELY_LEAD = re.compile(r"(?im)^[ \t*_]*(?:most\s+likely|probably|likely)[ \t]*[,:—–-]?[ \t]+(?=\S)")
# revision cues in other languages, read as "Correction:"
_FOREIGN_REVISION = re.compile(
    r"(?i)[…\.。,，;!]{0,3}[ \t]{0,3}(?:いや[、,]?\s*(?:違います|ちがう|違う)[。.]?"
    r"|不对[，,。]?\s*(?:应该是|應該是)?|不對[，,。]?\s*(?:應該是)?"
    r"|нет,?\s*поправка\s*:|нет,?\s*исправляю\s*:?|nein,?\s*korrektur\s*:|nein,?\s*eigentlich"
    r"|perd[óo]n,?\s*me\s+equivoqu[ée]\s*:?\s*(?:es)?|no,?\s*en\s+realidad(?:\s+es)?|non,?\s*en\s+fait,?\s*(?:c'est)?"
    r"|no,?\s*in\s+realt[àa](?:\s+[èe])?|n[ãa]o,?\s*na\s+verdade(?:\s+[ée])?)[ \t]*"
)
_FOREIGN_REVISION = Cued(
    _FOREIGN_REVISION,
    re.compile(
        r"いや|不对|不對|нет|nein|perd|no,?\s*en\s+realidad|no,?\s*in\s+realt|non,?\s*en\s+fait"
        r"|não,?\s*na\s+verdade|nao,?\s*na\s+verdade"
    ),
    lowered=True,
)
# bounded runs: an unbounded \S* before a mark would rescan a long token from every start (quadratic)
_STRUCK = re.compile(r"(?is)<(del|strike|s)>[^<]{0,200}</\1>|\S{0,60}\u0336\S{0,60}")
_STRUCK = Cued(_STRUCK, re.compile("(?i)<(?:del|strike|s)>|\u0336"))
_CROSSED_VALUE = Cued(re.compile(r"(\S{1,60})[ \t]*(?:❌|✗|✘|✖)\ufe0f?"), re.compile("[❌✗✘✖]"))
_AND_NOT_PAREN = re.compile(r"(?i)\(\s*(?:and|but)\s+not\s+")
_MID_ANSWER = re.compile(r"(?i)(?<=[.!?])[ \t]+(?=(?:\*\*|__)?(?:final\s+)?answer(?:\*\*|__)?\s*[:：])")
_SIGN_OFF = re.compile(
    r"(?is)\n[ \t]*(?:best(?:\s+regards)?|cheers|regards|kind\s+regards|sincerely|thanks|thank\s+you)[ \t]*[,.!]?[ \t]*"
    r"(?:\n[ \t]*[—–-]?[ \t]*[\w .'-]{1,30})?[ \t]*\Z"
)
_REVISION_KEYS = re.compile(r"(?i)^(?:revised|corrected|updated|final|amended|new)[_ ]?(?:answer|value|result)?$")
_DRAFT_KEYS = re.compile(
    r"(?i)^(?:initial|original|first|previous|old|draft|earlier|prior)[_ ]?(?:answer|value|result|guess)?$"
)
_OPENER = re.compile(
    r"(?i)\A[ \t*_]*(?:(?:assistant|ai|bot)[ \t]*:|sure|okay|ok|alright|of\s+course|certainly|absolutely"
    r"|great\s+question|good\s+question|happy\s+to\s+help|glad\s+to\s+help|no\s+problem|you'?re\s+looking\s+for"
    r"|what\s+you'?re\s+looking\s+for\s+is"
    r"|simply\s+put|put\s+simply|in\s+a\s+word|the\s+short\s+answer\s+is)[ \t]*[!.,:—–-]*[ \t]+(?=\S)"
)
_SAID_EARLIER = re.compile(
    r"(?i)\bI\s+(?:said|wrote|gave|answered|stated|put)\s+[^\n,.;]{1,60}?\s+(?:earlier|before|previously|at\s+first|initially)"
    r"\s*,?\s*but\s+"
)
_RETRACTED_LINE = re.compile(r"(?im)^(?P<line>[^\n]*\b(?:retracted|withdrawn|withdraw)\b[^\n]*)\n(?=[ \t]*\S)")
_SOME_SOURCES = re.compile(
    r"(?i)\b(?:although|though|while|whereas)\s+(?:some|many|several|other|a\s+few)\s+[\w-]+\s+"
    r"(?:list|lists|say|says|give|gives|cite|cites|report|reports|claim|claims|state|states|suggest|suggests|mention|mentions)"
    r"\s+[^\n,.;]{1,80},\s*(?=the\s+(?:correct|right|actual|true|real|accurate)\s+answer\s+is\b)"
)
_TEXT_REVISED = re.compile(
    r"(?i)\A[\s—–:,.!-]*(?:it'?s|it\s+is|it\s+was|rather,?|instead,?|the\s+(?:correct\s+|right\s+)?answer\s+is)\s+(?=\S)"
)
_CUES7 = re.compile(
    f"(?:{grammar6._CUES6.pattern})|(?:{_ACTIVE_EXCLUDE.pattern[4:]})|\\b(?:plausible|viable|equally\\s+(?:likely|valid))\\b"
    "|\\bcan(?:not|'t|\\s+not)\\s+reconcile\\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^\n.!?]*(?:[.!?]+|(?=\n)|$)")
_ECHO = re.compile(
    r"(?im)^[ \t>*_]*(?:you\s+asked|your\s+question|the\s+question|question|q)[ \t*_]*[:：](?P<quoted>[^\n]*)\n?"
)

# ------------------------------------------------------------------ 3. remarks that name no candidate
_ROLE = re.compile(r"(?i)^[ \t>*_]*(?:user|human|assistant|ai|system|bot)[ \t*_]*[:：]")
_LIST_MARK = re.compile(r"^[ \t>]*(?:\d{1,2}[.)]|[-*•·+]|step[ \t]+\d{1,2}[ \t]*[:.)])[ \t]+", re.IGNORECASE)
# words that open courtesy lines and notes (not candidates however they are capitalised)
_COURTESY = frozenset(
    "note notes nb edit update disclaimer caveat tip thanks thank welcome glad happy hope sure please feel let okay ok "
    "sources source reference references explanation reasoning summary steps step user human assistant verification "
    "verified checked cross-checked double-check assumption assumptions caveat caveats primary".split()
)
_TURN = re.compile(r"(?im)^[ \t>*_]*(?:user|human|<\|im_start\|>[ \t]*user)[ \t*_]*[:：\n]")
_ROLE_ANYWHERE = re.compile(r"(?im)^[ \t>*_]*(?:user|human|assistant|ai|system|bot)[ \t*_]*[:：]")
# sentence ends, never after an option letter ("A. Compressive tumor .." is one piece)
_SPLIT = re.compile(r"(?<=[.!?])(?<![\s(*_][A-Z]\.)(?<!^[A-Z]\.)[ \t]+(?=\S)|\n+", re.MULTILINE)


_DIGIT = re.compile(r"\d")
_CONTRACTION = re.compile(r"(?:'|’)(?:s|re|ll|ve|m|d|t)$")


def _word(token: str) -> str:
    word = token.strip(".,;:!?\"'“”‘’()[]{}*_`$").lower()
    return _CONTRACTION.sub("", word)


def _names_candidate(piece: str, kind: str) -> bool:
    """Whether a sentence or line names a candidate of the answer's type: a token with a digit (list markers and
    "Step 2" aside), an option letter for options, a capitalised word that is not a common or courtesy word."""
    body = _LIST_MARK.sub("", _ROLE.sub("", piece))
    for raw in body.split():
        word = _word(raw)
        if not word:
            continue
        if _DIGIT.search(raw):
            return True
        token = raw.strip(".,;:!?\"'“”‘’()[]{}*_`$")
        if kind == "option":
            if re.fullmatch(r"[A-Z]", token) and token not in ("I", "A"):
                return True
            article = re.match(
                r"A[ \t]+(?!(?:is|was|also|and|or|could|might|may|would|seems|appears|fits)\b)[a-z]",
                body[body.find(raw) :],
            )
            if token == "A" and not article:
                return True
            continue
        if kind == "text" and token[:1].isupper() and word not in _COMMON and word not in _COURTESY:
            return True
    return False


def _cue_free(piece: str) -> bool:
    return grammar6._cue_free(piece) and not _REVISION.search(piece) and not grammar6._REJECTS.search(piece)


_TO_READER = re.compile(r"(?i)\b(?:you|your|you're|you'd|please)\b")


_CONCLUSION = re.compile(
    r"(?i)^[ \t>*_#-]*(?:so|hence|thus|therefore|consequently|overall|finally|ultimately"
    r"|in\s+(?:short|sum|summary|conclusion))\b"
)


def _remark(piece: str, kind: str, golds: list[str]) -> bool:
    """Whether a sentence or line after the answer is a remark to drop: prose (five words or more, at least a third
    of them common words: a value, a name or a list of them is never prose), naming no candidate of the
    answer's type (for numbers, number words count), with no answer label or commitment, no revision or rejection,
    and either no rival cue or words to the reader ("Let me know if you'd like ..", "please verify .. if ..")."""
    body = _LIST_MARK.sub("", piece).strip()
    words = [w for w in (_word(raw) for raw in body.split()) if w]
    if len(words) < 5 or 3 * sum(w in _COMMON or w in _COURTESY for w in words) < len(words):
        return False
    if _names_candidate(piece, kind) or (kind == "number" and grammar5.number_words(piece) != piece):
        return False
    if _ANSWER_MARK.search(piece) or grammar5._COMMIT5.search(body) or grammar6._COMMIT_ANY.search(piece):
        return False
    if _CONCLUSION.match(body) or (kind == "text" and _holds_gold(piece, golds)):
        return False
    if _REVISION.search(piece) or grammar6._REJECTS.search(piece) or _REVISION7.search(piece):
        return False
    # a rival cue needs a rival: for numbers none is named (checked above); for options and text it may be a word
    return kind == "number" or grammar6._cue_free(piece) or bool(_TO_READER.search(piece))


_HEADING = re.compile(r"^[ \t>#*_-]*[A-Za-z][A-Za-z '’-]{0,40}[ \t*_]*[:：][ \t*_]*$")


def _heading(piece: str, kind: str) -> bool:
    """A heading line over remarks ("**Key details:**", "Why:"): a short label, no candidate, no answer label."""
    return bool(_HEADING.match(piece)) and not _ANSWER_MARK.search(piece) and not _names_candidate(piece, kind)


def _holds_gold(piece: str, golds: list[str]) -> bool:
    """Whether a gold is written in the piece (case and spacing aside): a lower-case answer in prose is no remark."""
    folded = " " + " ".join(re.sub(r"[^\w\s]", " ", piece.lower()).split()) + " "
    return any(g and f" {g} " in folded for g in (" ".join(re.sub(r"[^\w\s]", " ", x.lower()).split()) for x in golds))


def _leaked_turn(text: str, kind: str) -> str:
    """``text`` up to a leaked next turn ("User: thanks!" after the answer), when the turn names no candidate: for
    text answers any word that is not a common or courtesy word is one, as under a strong rival cue."""
    m = _TURN.search(text)
    if m is None or not text[: m.start()].strip():
        return text
    tail = _ROLE_ANYWHERE.sub(" ", text[m.start() :])
    if kind == "text":
        named = [c for c in _candidates(tail) if _word(c) not in _COURTESY and _word(c) not in _COMMON]
    else:
        named = [c for c in _candidates(tail) if _of_kind(c, kind)]
    return text if named else text[: m.start()].rstrip()


def trailing_remarks(text: str, kind: str, golds: Iterable[str] = ()) -> str:
    """``text`` without the remarks that trail it (step 3 of the module doc): the sentences and lines after the
    last one that is not a remark, when a sentence before them states a value; ``text`` itself otherwise."""
    if len(text) > 4000:
        return text
    pieces = [(m.start(), m.end()) for m in re.finditer(r"[^\n]+", text)]
    spans: list[tuple[int, int]] = []
    for start, end in pieces:  # sentences within lines (a list marker's "1." is no sentence end)
        line = text[start:end]
        offset = 0
        mark = _LIST_MARK.match(line)
        if mark is not None:
            offset = mark.end()
        cut = start
        for m in _SPLIT.finditer(line, offset):
            spans.append((cut, start + m.start()))
            cut = start + m.end()
        spans.append((cut, end))
    first = next((i for i, (a, b) in enumerate(spans) if _names_candidate(text[a:b], kind)), None)
    if first is None:
        return text
    gold_list = list(golds)
    last = first  # the last piece that is not a remark: only the remarks after it trail the answer
    for i in range(first + 1, len(spans)):
        a, b = spans[i]
        piece = text[a:b]
        if piece.strip() and not _remark(piece, kind, gold_list) and not _heading(piece, kind):
            last = i
    if last + 1 >= len(spans):
        return text
    return text[: spans[last][1]].rstrip()


def _table_answer(text: str, kind: str) -> str:
    """A table of one data row whose first cell is an answer label (``| **Answer** | 33 |``) is that label; a table
    with any other data row is left to grammar 5's table reader (a second row may name a rival)."""
    rows = list(_TABLE_ROW.finditer(text))
    if not rows:
        return text
    cells = [[c.strip() for c in row.group(1).split("|")] for row in rows]
    rule = next(
        (i for i, row in enumerate(cells) if any(row) and all(re.fullmatch(r":?-{2,}:?", c) for c in row if c)), None
    )
    data = [row for row in cells[(rule + 1 if rule is not None else 0) :] if any(row)]
    answers = [[c for c in row if c] for row in data if row and row[0] and _ANSWER_CELL.match(row[0])]
    others = [row for row in data if not (row and row[0] and _ANSWER_CELL.match(row[0]))]
    if len(answers) != 1 or len(answers[0]) != 2:
        return text
    # other rows are working ("| Status | verified |") when they name no candidate of any type
    if any(_names_candidate(" ".join(c for c in row[1:] if c), kind) for row in others):
        return text
    return text[: rows[0].start()] + f"Answer: {answers[0][1]}" + text[rows[-1].end() :]


def _question_echo(text: str) -> str:
    """``text`` without the lines that quote the question ("You asked: .."), when anything else is left: what the
    question says is not what the answer commits to."""

    def drop(m: re.Match[str]) -> str:
        quoted = m.group("quoted")
        # a quoted question is five words or more and keeps no candidate alive ("Q: or 35?" is a remark: it stays)
        return "" if len(quoted.split()) >= 5 and _cue_free(quoted) else m.group(0)

    rest = _ECHO.sub(drop, text)
    return rest if rest.strip() and rest != text else text


def _repeats(text: str) -> str:
    """A sentence or line that repeats the one before it word for word is one statement."""
    lines = text.split("\n")
    kept: list[str] = []
    for line in lines:
        if kept and line.strip() and " ".join(line.split()).lower() == " ".join(kept[-1].split()).lower():
            continue
        kept.append(line)
    out = []
    for line in kept:
        sentences = [s for s in _SENTENCE.findall(line) if s.strip()]
        deduped: list[str] = []
        for s in sentences:
            if deduped and " ".join(s.split()).lower() == " ".join(deduped[-1].split()).lower():
                continue
            deduped.append(s)
        out.append(" ".join(x.strip() for x in deduped) if len(deduped) < len(sentences) else line)
    return "\n".join(out)


def _not_first(m: re.Match[str]) -> str:
    rejected, kept = m.group("rejected"), m.group("kept")
    if not _cue_free(rejected) or re.match(r"(?i)(?:sure|certain|only|just|quite|entirely|exactly)\b", rejected):
        return m.group(0)
    return m.group(1) + kept


def _python_dict(text: str) -> str:
    """A Python dict literal (``{'answer': '33'}``) as the JSON object grammar 5 and 6 read; ``text`` otherwise."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}") and "'" in stripped) or len(stripped) > 2000:
        return text
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return text
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return text


def _python_call(text: str) -> str:
    """A Python call that carries the answer (``final_answer('33')``, ``Result(answer='33', confidence=0.9)``) as the
    JSON object of its arguments (a lone positional one is the answer), which grammar 5 and 6 read: every keyword
    stays, so an ``alternative=`` keeps its second candidate; ``text`` otherwise."""
    stripped = text.strip()
    if not re.fullmatch(r"[A-Za-z_][\w.]{0,40}\(.*\)", stripped, re.S) or len(stripped) > 2000:
        return text
    try:
        call = ast.parse(stripped, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return text
    if not isinstance(call, ast.Call) or len(call.args) > 1 or any(k.arg is None for k in call.keywords):
        return text
    try:
        fields = {str(k.arg): ast.literal_eval(k.value) for k in call.keywords}
        if call.args:
            fields = {"answer": ast.literal_eval(call.args[0]), **fields}
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    if not any(re.fullmatch(r"(?i)(?:final_?)?answer|result|value", key) for key in fields):
        return text
    try:
        return json.dumps(fields, ensure_ascii=False)
    except (TypeError, ValueError):
        return text


def _json_revision(text: str) -> str:
    """A JSON object with a draft key and a revision key (``{"initial_answer": "35", "revised_answer": "33"}``) is the
    revision: only its value is read; ``text`` otherwise."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")) or len(stripped) > 2000:
        return text
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        return text
    if not isinstance(obj, dict):
        return text
    revised = [v for k, v in obj.items() if _REVISION_KEYS.match(str(k))]
    drafts = [k for k in obj if _DRAFT_KEYS.match(str(k))]
    if len(revised) == 1 and drafts and isinstance(revised[0], (str, int, float)):
        return f"Answer: {revised[0]}"
    return text


def _retracted_lines(text: str) -> str:
    """``text`` without a line that retracts an earlier answer, when the line affirms it ("Previous answer (No)
    retracted.", not "has not been withdrawn"), carries no rival cue and an answer label follows it."""

    def drop(m: re.Match[str]) -> str:
        line = m.group("line")
        rest = text[m.end() :]
        keep = _NEGATED.search(line) or not grammar6._cue_free(line) or not _ANSWER_MARK.search(rest)
        return m.group(0) if keep else ""

    return _RETRACTED_LINE.sub(drop, text) if "retract" in text or "withdr" in text else text


def _table_before_answer(text: str) -> str:
    """A table followed by an answer label ("| A | 0.9 | ✓ | .. **Answer: A**") is the working: the label is read."""
    rows = list(_TABLE_ROW.finditer(text))
    if not rows or not _ANSWER_MARK.search(text[rows[-1].end() :]):
        return text
    return text[: rows[0].start()] + text[rows[-1].end() :]


def _second_round(text: str) -> str:
    """The fifth answer set's presentation classes (module doc, step 1 and 2)."""
    # template tokens and role markers are gone already: read_answer takes them out before grammar 3's steps
    text = _GROUNDING_TAG.sub("", text)
    text = _DEBRIS_LINE.sub("", text)
    if "<" in text:
        if not re.search(r"(?i)<(?:final_?answer|answer|result)>", text):
            text = _LONE_CLOSE.sub("", text)
        text = _DETAILS.sub(lambda m: f"{m.group(1)}:" if m.group(1) else "", text)
    text = _HIGHLIGHT.sub(r"\1", text)
    text = _MARKED_LINE.sub("", text)  # a candidate marked wrong is rejected
    text = _CHECK_MARK.sub(r"\1", text)
    text = _RECALL.sub("", text)
    text = _json_revision(_python_dict(_python_call(text)))
    text = _STRUCK.sub("", text)  # struck-out drafts
    text = _CROSSED_VALUE.sub("", text)  # "35 ❌ → 33 ✅": the crossed value is rejected
    text = _FOREIGN_REVISION.sub("\nCorrection: ", text)
    text = _AND_NOT_PAREN.sub("(not ", text)
    text = _MID_ANSWER.sub("\n", text)
    text = _SIGN_OFF.sub("", text)
    text = _OPENER.sub("", text)  # "Sure! X", "Assistant: X", "You're looking for X"
    text = _SAID_EARLIER.sub("Correction: ", text)  # "I said No earlier, but the correct answer is Yes"
    text = _retracted_lines(text)  # "Previous answer (No) retracted.\nFinal answer: Yes"
    text = _SOME_SOURCES.sub("", text)
    text = _table_before_answer(text)
    text = _CORRECTION_LABEL.sub(r"\1Correction: ", text)
    text = _FOREIGN_LABEL7.sub("Answer: ", text)
    text = _MOST_LIKELY_LEAD.sub("Answer: ", text)  # "Most likely X": one candidate, committed to
    text = _MORE_LABELS.sub(
        lambda m: ("\n" if m.start() > 0 and text[m.start() - 1] != "\n" else "") + "Answer: ", text
    )
    return text


# a bound or an estimate is no value ("at least 33", "x \\geq 33", "about 33")
_BOUND = re.compile(
    r"(?i)\b(?:at\s+(?:least|most)|more\s+than|less\s+than|fewer\s+than|greater\s+than|no\s+(?:more|less|fewer)\s+than"
    r"|up\s+to|around|about|approximately|approx|roughly|nearly|almost|over|under|between|within|range)\b"
    r"|\\(?:geq|leq|ge|le|gt|lt|approx|sim|pm)\b|>=|<=|[<>≥≤≈~±]"
)
_NEGATED = re.compile(r"(?i)\b(?:not|isn't|isnt|wasn't|aren't|never|no\s+longer|rather\s+than|instead\s+of)\b")


def _short_bare_line(lines: list[str]) -> bool:
    """Grammar 7's test for a rival of another type beside the one value: any short line without a digit."""
    bare = [line for line in lines if line.strip() and not re.search(r"\d", line)]
    return any(len(_LIST_MARK.sub("", line).split()) <= 4 for line in bare)


def _bare_token(raw: str) -> str:
    """Grammar 7's value token: punctuation, quotes and brackets taken off both ends."""
    return raw.strip(".,;:!?\"'“”‘’()[]{}*_`").rstrip(".")


def only_value(
    text: str,
    kind: str,
    rival_line: Callable[[list[str]], bool] = _short_bare_line,
    token: Callable[[str], str] = _bare_token,
) -> str | None:
    """The one value of the answer's type an answer states, when it states exactly one (written the same way each
    time) and never negates it: "Drumroll please... It's 33!", "Vastaus on -\\frac{1}{2}.". Numbers only (a token
    with a digit; list markers aside); ``None`` otherwise, and for a text with a rival cue, a revision or a
    rejection (those are read by the steps before). ``rival_line``: whether the text's lines hold one that may be
    a rival of another type, ``token`` the value a token holds (grammar 8 passes its own of both)."""
    if kind != "number" or len(text) > 2000 or _NEGATED.search(text) or _BOUND.search(text) or not _cue_free(text):
        return None
    values = {
        token(raw) for line in text.split("\n") for raw in _LIST_MARK.sub("", line).split() if re.search(r"\d", raw)
    }
    values.discard("")
    # a short line without the value may be a rival of another type ("138,535\nPrussian"): no reading then
    if rival_line(text.split("\n")):
        return None
    return values.pop() if len(values) == 1 else None


def _first_single_value(text: str, kind: str) -> str | None:
    """From the first sentence of ``text`` that states exactly one value of the type and does not negate it, the
    rest of the text; ``None`` at a sentence with two values or a cue first."""
    for m in re.finditer(r"[^.!?\n]+[.!?]*", text):
        sentence = m.group(0)
        values = {c for c in _candidates(sentence) if _of_kind(c, kind)}
        if len(values) > 1 or grammar5.UNCERTAIN.search(sentence) or not grammar6._cue_free(sentence):
            return None
        if len(values) == 1 and not _NEGATED.search(sentence):
            return text[m.start() :].strip()
    return None


def drop_drafts(text: str, kind: str) -> tuple[str, str | None, bool]:
    """Grammar 6's revisions, then one more: after a revision cue ("I misread ..", "Redoing that step ..",
    "I need to correct myself:"), when no commitment phrase follows, the first sentence after the cue that states
    exactly one value of the answer's type (numbers and options; a text value needs a commitment phrase)."""
    read, hedge, revised = grammar6.drop_drafts(text, kind)
    if hedge is not None:
        return read, hedge, revised
    if kind == "text":  # "X? My mistake — it's Y": a text revision commits at "it's", "rather", "the answer is"
        cues = [m for m in _REVISION7.finditer(text)] if not revised else []
        if cues:
            after = text[cues[-1].end() :]
            lead = _TEXT_REVISED.match(after)
            if lead is not None and not grammar5.UNCERTAIN.search(after) and grammar6._cue_free(after):
                return after[lead.end() :].strip(), None, True
        return read, hedge, revised
    if revised:  # a revision whose text still names a rejected value ("it isn't 43. It's 33.")
        values = {c for c in _candidates(read) if _of_kind(c, kind)}
        later = _first_single_value(read, kind) if len(values) > 1 else None
        return (later, None, True) if later else (read, hedge, revised)
    cues = [m for cue in (_REVISION, grammar6._REVISION6, _REVISION7) for m in cue.finditer(text)]
    if not cues:
        return read, hedge, revised
    later = _first_single_value(text[max(m.end() for m in cues) :], kind)
    return (later, None, True) if later else (read, hedge, revised)


def presentation(
    text: str, golds: list[str], kind: str, question: str = "", *, grammar: int = 7
) -> tuple[str, str | None]:
    """``text`` with grammar 7's presentation read (steps 1, 2 and 4 of the module doc), then grammar 6's
    (``grammar``: the grammar reading; from 12 a hyphen before a number is its sign, not a dash)."""
    text = _second_round(text)
    if "<" in text:
        text = _HTML_FORMAT.sub("", text)
    text = _question_echo(text)
    text = _FENCED_OUTPUT.sub(r"\1\2 \3", text)  # code output in a fence of its own is the output
    if "print" in text:  # print() code, then what it printed
        text = _CODE_THEN_OUTPUT.sub(lambda m: m.group("value"), text)
    if "|" in text:
        text = _table_answer(text, kind)
    text = _COLON_LABEL_LINE.sub("Answer: ", text)
    text = _BULLET_LABEL_BLOCK.sub("Answer: ", text)
    text = _CJK_FRAME.sub(lambda m: "Answer: " + m.group("value"), text)
    text = _MISTAKE_PAREN.sub("", text)
    text = _CAN_BE_RULED_OUT.sub(r"are \1", text)  # "B, C, D can be ruled out": a rejection, not a possibility
    text = (_NOT_FIRST12 if grammar >= 12 else _NOT_FIRST).sub(_not_first, text)
    text = _NOT_DOT.sub(_not_first, text)  # "Not 43. 33."
    text = _BARE_CONTRAST.sub(", ", text)
    text = _OFTEN_CITED.sub("", text)
    text = _repeats(text)
    text = _AS_THE_ANSWER.sub(lambda m: "the answer is " + m.group("value"), text)
    text = _INTERJECTION.sub(r"\1 ", text)
    text = _MOST_LIKELY.sub(r"the \1 is", text)  # "the most likely diagnosis is B": a commitment, no hedge
    if kind == "number":  # "Eight hundred and nine (809)": number words glossed by their digits
        words = grammar5.number_words(text)
        if words != text:
            glossed = grammar5._glosses(words)
            if glossed != words:
                text = glossed
            elif _WORDS_AND_DIGITS.search(words) and not _WORDS_AND_DIGITS.search(text):
                return text, "its number words and its digits give two values"
    text = re.sub(r"(?i)\bsoit\s+([^,\n]{1,80}?)\s*,\s*soit\s+", r"\1 or ", text)
    # grammar 6 writes "So" in place of "putting these together," with no space after it ("Sogives 33")
    text = grammar6._TOGETHER.sub("So ", text)
    text, hedge = grammar6.presentation(text.strip(), golds, kind, question)
    if hedge is not None:
        return text, hedge
    hedge = _asked(text) or _candidate_list(text, kind)
    if hedge is not None:
        return text, hedge
    return trailing_remarks(_leaked_turn(text, kind), kind, golds), None


def _candidate_list(text: str, kind: str) -> str | None:
    """A numbered or bulleted list whose items each name one value of the type, two or more of them different, and
    none of which carries an answer label ("1) 33 — plausible / 2) 43 — plausible"): candidates, no pick."""
    if kind == "text":
        return None
    items = [line for line in text.split("\n") if _LIST_MARK.match(line)]
    if len(items) < 2 or any(_ANSWER_MARK.search(line) for line in items):
        return None
    named = []
    for line in items:
        values = {c for c in _candidates(_LIST_MARK.sub("", line)) if _of_kind(c, kind)}
        if len(values) == 1:
            named.append(values.pop())
    return "it lists candidates and picks none" if len(set(named)) >= 2 else None


def _asked(text: str) -> str | None:
    parts = [p for p in re.split(r"(?<=\?)[ \t\n]+", text.strip()) if p.strip()]
    if len(parts) >= 2 and all(p.rstrip().endswith("?") for p in parts):
        return "it asks which of several candidates it is, and commits to none"
    return None


def _other_think(text: str) -> str:
    """``text`` with reasoning blocks in other spellings (``◁think▷ .. ◁/think▷``, ``[scratchpad]``) written as
    ``<think>`` blocks; forward finds, linear in the text (an opening with no closing stays as it is)."""
    for opening, closing in _OTHER_THINK:
        if opening not in text:
            continue
        out, pos = [], 0
        while (start := text.find(opening, pos)) >= 0:
            end = text.find(closing, start + len(opening))
            if end < 0:
                break
            out.append(text[pos:start] + "<think>" + text[start + len(opening) : end] + "</think>")
            pos = end + len(closing)
        text = "".join(out) + text[pos:]
    return text


def read_answer(
    prediction: object,
    golds: Iterable[object] = (),
    kind: str = "text",
    question: str = "",
    present: Callable[[str, list[str], str, str], tuple[str, str | None]] | None = None,
    drafts: Callable[[str, str], tuple[str, str | None, bool]] | None = None,
    grammar: int = 7,
) -> Reading:
    """The final answer ``prediction`` read by grammar 7: grammar 6's reader with this module's
    :func:`presentation` (which ends with :func:`trailing_remarks`) in place of grammar 6's. ``present`` and
    ``drafts``: a later grammar's presentation and revision steps (grammar 8 passes its own, built on these);
    ``grammar``: the grammar reading (7 or later)."""
    text = normalize_text(prediction)
    if len(text) <= 20_000:  # the tokens first: "33</s>" hides the end of an <answer> tag's line
        text = _other_think(text)
        text = _ROLE_TOKEN.sub(lambda m: "\nUser: " if m.group("role") == "user" else "", text)
        text = _TEMPLATE_TOKEN.sub("", text)
    present = present or presentation
    if grammar >= 12:
        present = functools.partial(present, grammar=grammar)
    return grammar6.read_answer(
        text,
        golds,
        kind,
        question,
        present=present,
        drafts=drafts or drop_drafts,
        cues=_CUES7,
        grammar=grammar,
    )
