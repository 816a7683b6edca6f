"""Answer grammar 10 (the ``-v10`` ids): grammar 9 (:mod:`agentflow_env.scoring.grammar9`) after a first step that
writes six more shapes of a committed answer the way grammar 9 reads them, and one more hedge.

A tenth answer set, written outside the project by someone who never read the scorers, was run blind through
grammar 9: 4.4% of its correct answers scored 0 and 2.8% of its retract-and-commit mirrors were paid. Most of both
were six shapes, each a class of answers rather than one phrase:

1. **The answer after a reasoning block**: ``<think> .. </think>`` (or ``<thinking>``, ``<reasoning>``) followed
   by the answer. The answer is what follows the last closing tag (:func:`after_reasoning`); the block is the
   model's scratchpad, as every reasoning-model harness reads it. An unclosed block, or nothing after it, leaves
   the text as it is.
2. **An agent's code action**: smolagents' ``final_answer("33")`` in a code block, with its ``Code:`` label. One
   call with a literal argument, and nothing else in the block, is the answer's commitment, read as ``Final
   Answer: 33`` (:func:`code_answer`); a block that computes the value first is left alone.
3. **A draft reported with another verb**: "My first attempt gave 35, but ..", "I initially computed 35",
   "Earlier, I obtained 35". Grammar 9 drops a draft reported as past with a fixed list of verbs ("I initially
   said", "My first answer was"); these are written in its words (:func:`canonical_drafts`), so its rules,
   conditions and doubts included, decide. "(previously 8/1×(1+1))" may hold one level of brackets.
4. **"Otherwise" as "the contrary"**: "the tool output shows otherwise" says the draft is wrong; it is no
   condition (grammar 9 reads every "otherwise" as one, so the answer's marks did not count).
5. **A check against a second source**, at the end of a sentence ("I cross-checked the fact against a second
   source."): corroboration, not a rival ("second" and "another" are rival cues elsewhere).
6. **Answer labels and section headers**: "Resposta final: Sim", "Die Antwort lautet: Ja", "最终答案：是" read as
   yes or no (grammar 9 localized a bare "Sim" only); a header alone on its line ("Notes:", "**Explanation:**")
   joined to the line under it, so a bulleted note reads as the note it is; ``\\boxed{C}`` written as ``C`` where
   a number or option answer boxes more than one value, so a boxed draft is a value grammar 9 can drop; a JSON
   object written with a template's doubled braces (``{{"answer": "33"}}``) with single ones (grammars 7 to 9 raised
   on one with a quote inside, and the env scored the answer 0 with a ``score_error``).

Two hedges: an answer that is nothing but two or more option lines ("B) ..\\nA) ..") offers each (grammar 9 read
the first, :func:`option_lines`); a number answer that is nothing but its number and a capitalised word as list items
("5,922, Prussian", "5,922 ‖ Prussian") offers both (grammar 9 read the number, :func:`number_beside_a_word`).

Every step is a bounded number of linear passes over an answer of at most 20,000 characters; the answer is then
read by grammar 9 (the ``-v9`` ids keep their digests).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from agentflow_env.scoring import grammar9
from agentflow_env.scoring.cued import Cued
from agentflow_env.scoring.extract import normalize_text
from agentflow_env.scoring.grammar import _COMMON, Reading

__all__ = [
    "after_reasoning",
    "canonical_drafts",
    "code_answer",
    "drop_draft_sentence",
    "expression_contrast",
    "labels_and_headers",
    "number_beside_a_word",
    "option_lines",
    "read_answer",
    "second_source",
    "template_braces",
]

_LIMIT = grammar9._LIMIT

# ------------------------------------------------------------------ 1. after a reasoning block
_CLOSE_REASONING = re.compile(r"(?i)</(?:think|thinking|reasoning|reflection)>")


def after_reasoning(text: str) -> str:
    """What follows the last closing reasoning tag, when something does; ``text`` otherwise."""
    end = max((m.end() for m in _CLOSE_REASONING.finditer(text)), default=None)
    if end is None:
        return text
    tail = text[end:].strip()
    return tail if tail else text


# ------------------------------------------------------------------ 2. an agent's code action
_CODE_LABEL = r"(?:^[ \t]*(?:\*\*)?code(?:\*\*)?[ \t]*[:：][ \t]*\n)?"
_CODE_BLOCK = re.compile(
    rf"(?ims){_CODE_LABEL}```[ \t]*(?:py|python)?[ \t]*\n(?P<code>.*?)```(?:[ \t]*<end_code>)?"
    rf"|{_CODE_LABEL}^[ \t]*(?P<line>final_answer\([^\n]*\))[ \t]*(?:<end_code>)?[ \t]*$"
)


def _literal_call(code: str) -> str | None:
    """The argument of ``code`` when it is one ``final_answer(<literal>)`` call and nothing else."""
    lines = [ln for ln in code.strip().splitlines() if ln.strip() and not ln.strip().startswith("#")]
    source = "\n".join(lines).strip().removesuffix("<end_code>").strip()
    if not source.startswith("final_answer(") or len(source) > 2000:
        return None
    try:
        tree = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "final_answer"):
        return None
    args = list(tree.args) + [k.value for k in tree.keywords if k.arg in ("answer", "final_answer")]
    if len(args) != 1 or len(tree.args) + len(tree.keywords) != 1:
        return None
    try:
        value = ast.literal_eval(args[0])
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    return str(value).strip() or None


def code_answer(text: str) -> str:
    """The one ``final_answer(<literal>)`` code action in ``text`` as ``Final Answer: <literal>``; ``text``
    unchanged when it has none, several, or one that computes its argument."""
    if text.count("final_answer(") != 1:
        return text
    found = [(m, _literal_call(m.group("code") or m.group("line") or "")) for m in _CODE_BLOCK.finditer(text)]
    calls = [(m, value) for m, value in found if "final_answer(" in (m.group("code") or m.group("line") or "")]
    if len(calls) != 1 or calls[0][1] is None:
        return text
    match, value = calls[0]
    return f"{text[: match.start()]}Final Answer: {value}{text[match.end() :]}".strip()


# ------------------------------------------------------------------ 3. drafts reported with another verb
_DRAFT_NOUN = (
    r"attempt|pass|try|calculation|computation|draft|estimate|reading|solution|run|take|result|answer|guess"
    r"|response|reply|lookup|search|derivation|pick|choice"
)
_DRAFT_VERB = (
    r"gave|got|came\s+to|came\s+out\s+(?:to|as|at)|yielded|returned|produced|said|showed|suggested|pointed\s+to"
    r"|found|was|is|had\s+been|led\s+(?:me\s+)?to|landed\s+on"
)
_FOUND_VERB = (
    r"obtained|computed|calculated|found|arrived\s+at|came\s+up\s+with|concluded|reached|derived|estimated"
    r"|determined|identified|selected|went\s+with|settled\s+on|answered\s+with|landed\s+on|wrote\s+down"
)
# the draft itself follows the verb, not a determiner, a pronoun or a verdict ("I first found the sum of .."
# describes a step, "My first calculation was wrong" judges one)
_VALUE_NEXT = (
    r"(?=\s+(?!(?:the|a|an|that|this|these|those|each|every|all|how|what|which|whether|out|it|its|their|them|some"
    r"|my|our|his|her|both|several|many|most|any|no|to|by|in|on|of|for|with|from|at|as|wrong|incorrect|off|flawed"
    r"|mistaken|not|too|close|right|correct|also|just|only|quite|very)\b)\S)"
)
_MY_DRAFT = re.compile(
    rf"(?i)\b(?:my|the)\s+(?:very\s+)?(?:first|initial|earlier|previous|original|preliminary)\s+(?:{_DRAFT_NOUN})"
    rf"\s+(?:{_DRAFT_VERB})\b{_VALUE_NEXT}"
)
_I_FIRST_FOUND = re.compile(
    rf"(?i)\bI\s+(first|initially|originally|earlier|previously)\s+(?:{_FOUND_VERB})\b{_VALUE_NEXT}"
)
_I_FIRST_FOUND = Cued(
    _I_FIRST_FOUND, re.compile(r"i\s+(?:first|initially|originally|earlier|previously)"), lowered=True
)
_EARLIER_I_FOUND = re.compile(
    rf"(?i)\b(earlier|before|previously|initially|originally|at\s+first)(,?)\s+I\s+(?:{_FOUND_VERB})\b{_VALUE_NEXT}"
)
_EARLIER_I_FOUND = Cued(
    _EARLIER_I_FOUND, re.compile(r"earlier|before|previously|initially|originally|at\s+first"), lowered=True
)
# "(previously 8/1×(1+1))": grammar 9's withdrawn parenthesis, with one level of brackets inside
_NESTED_WAS = re.compile(
    r"(?i)\(\s*(was|previously|formerly|originally|initially|earlier|before|not|old)\b([:\s](?:[^()\n]|\([^()\n]{0,30}\)){1,60})\)"
)


# "Going with 33.", "I'll settle on 33.": the answer frame, at the start of a sentence
_GOING_WITH = re.compile(
    r"(?im)(?:^|(?<=[.!?]\s))[ \t]*(?:so,?\s+)?(?:I(?:'m|’m|\s+am)\s+going\s+with|I(?:'ll|’ll|\s+will)\s+go\s+with"
    r"|going\s+with|settling\s+on|I(?:'ll|’ll|\s+will)\s+settle\s+on|sticking\s+with|I(?:'ll|’ll|\s+will)\s+stick"
    r"\s+with)\s+(?=\S)"
)


def canonical_drafts(text: str) -> str:
    """Drafts reported as past with another verb written as grammar 9 reads them ("my first answer was", "I first
    got"), "Going with 33." as "The answer is 33.", and a withdrawn parenthesis with brackets inside with its
    brackets as square ones."""
    text = _MY_DRAFT.sub("my first answer was", text)
    text = _I_FIRST_FOUND.sub(lambda m: f"I {m.group(1)} got", text)
    text = _EARLIER_I_FOUND.sub(lambda m: f"{m.group(1)}{m.group(2)} I got", text)
    if "with" in text or "settl" in text:
        text = _GOING_WITH.sub("The answer is ", text)
    if "(" in text:
        text = _NESTED_WAS.sub(
            lambda m: (
                m.group(0)
                if "(" not in m.group(2)
                else f"({m.group(1)}{m.group(2).replace('(', '[').replace(')', ']')})"
            ),
            text,
        )
    return text


# a sentence that reports a draft and says why it was wrong ("My first answer was 35, but a row was missing.")
_REPORT = (
    r"(?:earlier|before|previously|initially|originally|at\s+first),?\s+I\s+(?:wrote|said|answered|gave|typed|put|had"
    r"|thought|guessed|got|picked|chose)|I\s+(?:first|initially|originally|earlier|previously)\s+(?:wrote|said"
    r"|answered|gave|typed|put|had|thought|guessed|got|picked|chose)|my\s+first\s+answer\s+was"
)
_DRAFT_SENTENCE = re.compile(
    rf"(?im)(?:^|(?<=[.!?]\s))[ \t]*(?:{_REPORT})\s+(?P<draft>[^\n]{{1,100}}?),\s*but\s+(?P<why>[^.!?\n]{{1,160}})"
    r"[.!?](?=\s|$)"
)


# a name or a number in the reason: a capitalised word other than "I", or a digit
_NAMES_SOMETHING = re.compile(r"\d|\b(?!I\b|I['’])[^\W\d_]*[A-Z]")


def _reason_in_the_way(reason: str, kind: str, question: str) -> bool:
    """Whether a draft's reason keeps grammar 9 from reading the answer and names nothing of its own: for a text
    answer, a reason with no capitalised word (but "I") and no digit (grammar 9 would read it as part of the
    answer); for a number or option answer, one that names only values the question holds ("does not reach 24":
    grammar 9 would count the 24 as a second value; a reason without values grammar 9 reads past by itself)."""
    if kind == "text":
        return _NAMES_SOMETHING.search(reason) is None
    named = grammar9._values(reason, kind)
    return bool(named) and not named - grammar9._values(question, kind)


def drop_draft_sentence(text: str, kind: str, question: str = "") -> str:
    """``text`` without its one sentence that reports a draft and says why it was wrong ("Earlier I said Leroux, but
    that page was about someone else."), when the reason is in grammar 9's way (:func:`_reason_in_the_way`), a value
    follows the sentence, and the answer neither doubts nor makes anything conditional (grammar 9's rules); grammar
    9 drops the draft but keeps the reason."""
    if grammar9._doubts(text):
        return text
    found = list(_DRAFT_SENTENCE.finditer(text))
    if len(found) != 1:
        return text
    match = found[0]
    rest = text[match.end() :].strip()
    if not rest or not _reason_in_the_way(match.group("why"), kind, question) or not grammar9._values(rest, kind):
        return text
    return (text[: match.start()] + " " + rest).strip()


# "(3+2+1)×4, not (1+4)×(2+3).", "-\\frac{1}{2} (not \\frac{1}{2})": a contrast of two expressions, each one token
_EXPRESSION_CONTRAST = re.compile(
    r"^\s*(?P<x>[^\s,]+?)\s*(?:,\s*|\s+)not\s+(?P<y>\S+?)\s*[.!]?\s*$|^\s*(?P<x2>\S+?)\s*\(\s*not\s+(?P<y2>\S+)\s*\)\s*[.!]?\s*$",
    re.I,
)


def _balanced(token: str) -> bool:
    depth = 0
    for ch in token:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def expression_contrast(text: str, kind: str) -> str:
    """A number answer that is one expression contrasted with another ("X, not Y.", "X (not Y)"), each a token with
    balanced brackets and a digit, as "Answer: X" (grammar 9's contrast values stop at a bracket)."""
    if kind == "text" or len(text) > 400 or "not" not in text.lower() or text.rstrip().endswith("?"):
        return text
    match = _EXPRESSION_CONTRAST.match(text)
    if match is None:
        return text
    x, y = (match.group("x"), match.group("y")) if match.group("x") else (match.group("x2"), match.group("y2"))
    if not (_balanced(x) and _balanced(y) and re.search(r"\d", x) and re.search(r"\d", y)) or x == y:
        return text
    return f"Answer: {x}"


# ------------------------------------------------------------------ 4. "otherwise" as "the contrary"
_CONTRARY = re.compile(
    r"(?i)\b(shows?|showed|shown|says?|said|suggests?|suggested|indicates?|indicated|proves?|proved|proven|states?"
    r"|stated|tells?|told|reads?|reports?|reported|confirms?|confirmed|argues?|argued|decided|determined|implies"
    r"|implied|points?|pointed)\s+otherwise\b"
)


def _contrary(text: str) -> str:
    return _CONTRARY.sub(r"\1 the contrary", text) if "otherwise" in text.lower() else text


# ------------------------------------------------------------------ 5. a check against a second source
_SECOND_SOURCE = re.compile(
    r"(?i)\b((?:cross-?check|double-?check|check|verif|confirm|corroborat|validat|compar|match)\w*\b[^.!?\n]{0,80}?"
    r"\b(?:against|with|in|by|using|via|from|through)\s+(?:a|an|the|one)?\s*)"
    r"(?:second|another|other|additional|separate|2nd|further)"
    r"(\s+(?:independent\s+|reliable\s+|trusted\s+|official\s+)?(?:source|reference|site|website|page|record|database"
    r"|tool|search|document|dataset|calculation|method|check|lookup)s?)(?=[ \t]*(?:[.!;]|\n|$))"
)
_SECOND_SOURCE = Cued(_SECOND_SOURCE, re.compile(r"check|verif|confirm|corroborat|validat|compar|match"), lowered=True)


def second_source(text: str) -> str:
    """A check against a second source, at the end of its sentence, written as a check against an independent one
    (the word "second" names no rival there)."""
    return _SECOND_SOURCE.sub(r"\1independent\2", text)


# ------------------------------------------------------------------ 6. labels and headers
_FOREIGN_LABEL = re.compile(
    r"(?i)^\s*(?:\*\*)?(?:resposta(?:\s+final)?|a\s+resposta\s+(?:final\s+)?é|die\s+(?:endgültige\s+)?antwort"
    r"(?:\s+(?:lautet|ist))?|(?:endgültige\s+)?antwort|(?:la\s+)?réponse(?:\s+finale)?(?:\s+est)?"
    r"|(?:la\s+)?respuesta(?:\s+final)?(?:\s+es)?|(?:la\s+)?risposta(?:\s+finale)?(?:\s+è)?|(?:окончательный\s+)?ответ"
    r"|最终答案|答案|最終答案|答え|回答|最終回答|정답|최종\s*답변|답)(?:\*\*)?\s*[:：]?\s*(?:\*\*)?\s*"
    r"(?P<value>[^\n*]{1,12}?)\s*(?:\*\*)?\s*[.!。！]?\s*$"
)
_HEADER_ALONE = re.compile(
    r"(?im)^([ \t]*[*_#]*[ \t]*(?:notes?|explanation|reasoning|rationale|justification|method|methodology|approach"
    r"|sources?|references?|evidence|details|context|verification|caveats?|comments?|remarks?)[ \t]*[*_]*[ \t]*[:：]"
    r"[ \t]*[*_]*)[ \t]*\n+[ \t]*(?:[-*•][ \t]+)?(?=\S)"
)
_LETTER = re.compile(r"\s*[A-J]\s*")
_BOXED = re.compile(r"\${0,2}\\boxed\{([^{}\n]{1,60})\}\${0,2}")


def template_braces(text: str) -> str:
    """A JSON object written with a template's doubled braces (``{{"answer": "33"}}``) with single ones."""
    stripped = text.strip()
    if stripped.startswith("{{") and stripped.endswith("}}") and not stripped.startswith("{{{"):
        return stripped[1:-1]
    return text


def labels_and_headers(text: str, golds: list[str], kind: str = "text") -> str:
    """A foreign answer label before yes or no read as "Answer: Yes" / "Answer: No" (when a gold is yes or no), a
    header alone on its line joined to the line under it, and boxed values unboxed where more than one is boxed, in
    a number answer or where each box holds an option letter (two boxed names side by side would read as one)."""
    if any(g.strip().lower() in ("yes", "no") for g in golds):
        label = _FOREIGN_LABEL.match(text)
        if label is not None:
            word = grammar9.localize(label.group("value"), golds)
            if word in ("Yes", "No"):
                return f"Answer: {word}"
    if ":" in text or "：" in text:
        text = _HEADER_ALONE.sub(r"\1 ", text)
    if text.count("\\boxed{") > 1 and (kind != "text" or all(_LETTER.fullmatch(b) for b in _BOXED.findall(text))):
        text = _BOXED.sub(r"\1", text)
    return text


# ------------------------------------------------------------------ the hedge: only option lines
_OPTION_LINE = re.compile(r"^[ \t>*_-]*\(?(?P<letter>[A-J])[).:][ \t]+\S[^\n]*$")


def option_lines(text: str, kind: str) -> str | None:
    """Why an option answer that is nothing but two or more lines, each an option letter and its text, commits to
    none of them ("B) ..\\nA) .."), else ``None``."""
    if kind != "option" or "\n" not in text:
        return None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    letters = []
    for line in lines:
        match = _OPTION_LINE.match(line)
        if match is None:
            return None
        letters.append(match.group("letter"))
    if len(set(letters)) > 1:
        return "it lists two or more options, one per line, and picks none"
    return None


# ------------------------------------------------------------------ the hedge: a number beside a word
_ITEM_BREAK = re.compile(
    r"\s*(?:,(?!\d)|[;‖|]|\\text\{\?\}|\b(?:or|and)\b|(?<![^\W\d_])[оo]r(?![^\W\d_])|\n[ \t]*(?:[-*•][ \t]+)?|\.\s+)\s*"
)
_WORD_ITEM = re.compile(r"[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*){0,2}")
_NUMBER_ITEM = re.compile(r"[-+−]?\$?\d[\d,.]*%?")
# labels ("**Final Answer**\n\\boxed{33}"), sign-offs and agent frameworks' end tokens ("33\n\nTERMINATE")
_NOT_A_RIVAL = re.compile(
    r"(?i)(?:(?:final|short|my|the|correct)\s+)?(?:answer|result|solution|conclusion|summary|output|response|value"
    r"|number|total|count)s?|final|done|thanks|cheers|finished|complete|correct|verified|confirmed|yes|no|terminate"
    r"|end|stop|exit|ok|okay|sincerely|regards|best|(?:verification|explanation|reasoning|note|source|step|check"
    r"|method|approach|proof|justification|detail|reference|evidence|work|working|calculation)s?"
)


def _common(item: str) -> bool:
    """A lead-in or common word ("Thus, 33.", "Overall: 33"), not a rival."""
    return all(w.lower().strip(".") in _COMMON for w in item.split())


def number_beside_a_word(text: str, kind: str) -> str | None:
    """Why a number answer that is nothing but its number and a capitalised word or name, as list items ("5,922,
    Prussian", "5,922 ‖ Prussian", "- 5,922\n- Prussian", two boxes), commits to neither, else ``None`` (grammar 9
    read the number: a word is not a candidate of a number's type)."""
    if kind != "number" or len(text) > 200:
        return None
    plain = re.sub(r"\\boxed\{([^{}]*)\}", r" \1 ;", text).replace("**", "").replace("$", " ")
    plain = re.sub(r"(?m)^[ \t]*[-*•][ \t]+", "", plain).strip(" \t\n.;")
    items = [i.strip(" \t.") for i in _ITEM_BREAK.split(plain) if i and i.strip(" \t.")]
    if not 2 <= len(items) <= 4:
        return None
    numbers = [i for i in items if _NUMBER_ITEM.fullmatch(i)]
    words = [i for i in items if _WORD_ITEM.fullmatch(i) and not _NOT_A_RIVAL.fullmatch(i) and not _common(i)]
    if len(numbers) == 1 and words and len(numbers) + len(words) == len(items):
        return "it lists its number beside another answer, a word: it commits to neither"
    return None


def read_answer(
    prediction: object,
    golds: Iterable[object] = (),
    kind: str = "text",
    question: str = "",
    *,
    grammar: int = 10,
) -> Reading:
    """The final answer ``prediction`` read by grammar 10: the module doc's six shapes written as grammar 9 reads
    them, the option-lines hedge, then grammar 9's reader (``grammar``: the grammar reading, 10 or later)."""
    text = normalize_text(prediction)
    if len(text) <= _LIMIT:
        gold_texts = [str(g) for g in golds]
        text = after_reasoning(text)
        text = code_answer(template_braces(text))
        reason = number_beside_a_word(text, kind)
        if reason is not None:
            return Reading(text, reason)
        text = labels_and_headers(text, gold_texts, kind)
        text = second_source(_contrary(canonical_drafts(text)))
        text = expression_contrast(drop_draft_sentence(text, kind, question), kind)
        reason = option_lines(text, kind)
        if reason is not None:
            return Reading(text, reason)
    return grammar9.read_answer(text, golds, kind, question, grammar=grammar)
