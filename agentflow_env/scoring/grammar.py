"""The answer grammar, version 3: what a final answer commits to, read once before every scorer.

A reward is an adversary's target and a teacher. So the reader closes *classes* of answers, not examples:
a naturally written correct answer must not score 0 (that teaches the wrong thing), and an answer that
keeps a second candidate alive must not pay (that teaches hedging). :func:`read_answer` runs three steps
on the final answer (the text of ``Final Answer:``, of the JSON ``final_answer`` field, or of the
``final_answer`` tool call), then every scorer reads the result with its own rule
(:mod:`agentflow_env.scoring.extract`, :mod:`~agentflow_env.scoring.commitment`, choice, Game of 24, judge):

1. **Presentation is stripped.** ``<think>..</think>`` reasoning, ``<answer>`` tags (several with different
   contents are a hedge), Markdown (``**bold**``, ``__``, blockquote ``>``, header lines: an ``## Answer``
   or a whole-bold ``**Final Answer**`` line above the value becomes ``Answer:``, another header line such
   as ``**Summary**`` is dropped), LaTeX wrappers (``\\displaystyle``, ``\\text{..}``, ``\\mathrm{..}``,
   ``\\textbf{..}``, ``\\left``/``\\right``), citation markers (``[1]``, ``[^2]``, ``【3†source】``),
   confidence trailers ("Confidence: 90%", "(confidence: high)", "I'm 95% sure."), verification marks
   (``✓``, "(verified)"), and label phrasings ("Here is the answer: ..", "Correct option: C", "One solution
   is ..", ".. is the answer to this question", ".. is correct").
2. **The last commitment wins.** A self-correction ("Wait, actually it's 34", "on second thought, 34", "I
   first thought 34, but after checking, it is 33", "Correction: 34") ends the draft: only what follows the
   last one is read, when it commits to a value (a verb of commitment, "it's", "the answer is", "I meant",
   or a bare value). Text that merely *mentions* a revision ("Actually, I double-checked the sources") drops
   nothing.
3. **Rivals are found anywhere in the answer region** (from the first explicit answer marker, "Answer:",
   "the answer is" or a box, after the last self-correction; the whole text when there is none: working
   before a marked answer is not a rival, the marked answer commits). A clause (a sentence, a line, a
   parenthesis, a ``;``, ``but`` or ``though`` part) after the committed value that carries a rival cue ("in
   some sources", "also a reasonable answer", "if not", "otherwise", "second choice", "backup",
   "alternatively", "could also be", "maybe", ...) *and* names a candidate that the text before it does not
   (of the task's kind: a number or expression, an option letter, or for text answers any word that is not a
   common English word) is a hedge: "33 (34 in some sources)", "33\\n\\nBut 34 is also a reasonable
   answer.", "33; if not, 34", "A (second choice: B)". The rules of the span reader still apply after this
   (a second line, ``or``, lists, several boxes are hedges).

Why a cue *and* a new candidate: a remark that names no other answer ("Alternatively, verify it with a
calculator") commits to nothing else, and a remark that repeats the committed value ("33 in most sources")
does not hedge; a new candidate under a cue is exactly the second chance a hedge buys.

Comparison by the gold's type (dates, names, lists, numbers with units) is in
:mod:`agentflow_env.scoring.typed`; the versioned scorer that puts the two together is in
:mod:`agentflow_env.scoring.versioned`. Every step is a bounded number of linear regex passes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from agentflow_env.scoring.cued import Cued
from agentflow_env.scoring.extract import _ANSWER_TAG, normalize_text
from agentflow_env.scoring.words import TOKEN_EDGES, WORD, TokensBefore, capital, tokens, word_after, word_before

__all__ = ["LaterSteps", "Reading", "read_answer", "remark_cue", "rival_clause", "strip_presentation"]

MAX_READ_CHARS = 20_000  # longer answers are left to the span reader, which refuses them

# ------------------------------------------------------------------ 1. presentation
_LATEX_NOISE = re.compile(r"\\(?:displaystyle|textstyle|scriptstyle|left(?=[(\[|.])|right(?=[)\]|.])|!)")
_LATEX_WORD = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textup|mathrm|mathbf|mathit|mathsf|operatorname|mbox|hbox|emph)"
    r"\s*\{([^{}]*)\}"
)
_CITATION = re.compile(
    r"(?<=[^\s\[(])\s?(?:\[\^?\d{1,3}(?:\s*[,–-]\s*\d{1,3})*\])+|【[^】\n]{0,60}】|\s?\[(?:source|citation|ref)[^\]\n]{0,40}\]",
    re.IGNORECASE,
)
_CHECK_MARKS = re.compile(r"[✓✔✅☑]\ufe0f?|\((?:verified|checked|confirmed|double-checked)\)", re.IGNORECASE)
_CONFIDENCE_LINE = re.compile(
    r"(?im)^[ \t>*_#-]*(?:\(?\s*)?(?:overall\s+)?(?:confidence|certainty)(?:\s+(?:level|score))?\s*[:=(-][^\n]*$"
)
_CONFIDENCE_BITS = re.compile(
    r"(?i)\s*[(\[]\s*(?:confidence|certainty)[^)\]\n]{0,40}[)\]]"
    r"|(?:(?:i\s*(?:'m|am)|with)\s+)?(?:about\s+|roughly\s+)?\d{1,3}\s*%\s*(?:confident|sure|certain|confidence)\b"
    r"(?:\s+(?:that|of\s+(?:this|it)|in\s+(?:this|it|my\s+answer)(?:\s+answer)?))?[,:]?"
    r"|(?:^|(?<=[.!?\n]))[ \t]*(?:my\s+)?(?:confidence|certainty)\s+(?:is\s+|level\s+is\s+)?"
    r"(?:very\s+)?(?:high|medium|moderate|low|\d{1,3}\s*%)\b[^.!?\n]*[.!?]?"
)
# each confidence remark names confidence or certainty, or a percentage
_CONFIDENCE_BITS = Cued(_CONFIDENCE_BITS, re.compile(r"confidence|certainty|%"), lowered=True)
_HEADER_LINE = re.compile(r"^[ \t]*(?:#{1,6}[ \t]*(.+?)|(?:\*\*|__)([^*_\n]+?)(?:\*\*|__))[ \t]*:?[ \t]*$")
_ANSWER_WORDS = re.compile(
    r"(?i)(?:my\s+|the\s+|short\s+|final\s+|correct\s+|best\s+)*(?:answer|result|conclusion|verdict|response|choice|option)s?"
)
_HEADER_WORDS = re.compile(
    r"(?i)^(?:summary|reasoning|explanation|analysis|approach|solution|steps?|working|sources?|notes?|"
    r"verification|check|details|context|background|tl;?dr|bottom\s+line|in\s+short|key\s+findings?)\b"
)
_BLOCKQUOTE = re.compile(r"(?m)^[ \t]*(?:>[ \t]?)+")
_LABELS = re.compile(
    r"(?im)^([ \t*_-]*)(?:here(?:'s|\s+is)\s+(?:the|my)\s+(?:final\s+|short\s+)?answer"
    r"|(?:my\s+|the\s+)?(?:final|short|correct|best)\s+(?:answer|option|choice|response|result|pick)"
    r"|(?:my\s+)?(?:final\s+)?(?:result|conclusion|verdict|pick|selection)"
    r"|(?:the\s+)?(?:correct|right)\s+(?:letter|option|choice)(?:\s+is)?"
    r"|answer\s+to\s+(?:the|this)\s+question)[ \t]*(?:\*\*|__)?[ \t]*[:：][ \t]*(?:\*\*|__)?"
)
_PHRASES = (
    # "One solution is (1+1+1)*8", "A valid expression is ...": the value follows
    re.compile(
        r"(?i)\b(?:one|a|my|the)\s+(?:possible\s+|valid\s+|working\s+|correct\s+)?(?:solution|expression)\s+"
        r"(?:is|would\s+be)\s*:?\s*"
    ),
)
_SUFFIX = re.compile(
    r"(?i)\s+(?:is|would\s+be)\s+(?:the\s+|my\s+)?(?:final\s+|correct\s+|right\s+|best\s+)?"
    r"(?:answer|correct|right|option|choice)"
    r"(?:\s+(?:to|for)\s+(?:this|the)\s+(?:question|problem|puzzle))?\s*[.!]?[ \t]*$"
)


def _headers(text: str) -> str:
    """Header lines above more text: an answer header becomes ``Answer:`` (the value is on a later line),
    another Markdown header (``## Reasoning``, ``**Summary**``) is dropped."""
    lines = text.split("\n")
    out: list[str] = []
    for i, line in enumerate(lines):
        later = any(ln.strip() for ln in lines[i + 1 :])
        bare = line.strip().strip("*_#:> \t")
        m = _HEADER_LINE.match(line)
        if later and bare and _ANSWER_WORDS.fullmatch(bare):
            out.append("Answer:")  # "**Final Answer**", "## Answer", "Final Answer**" (a parser took the "**")
        elif later and m is not None and (line.lstrip().startswith("#") or _HEADER_WORDS.match(bare)):
            continue
        else:
            out.append(line)
    return "\n".join(out)


_ITALIC = re.compile(r"(?m)(?:^|(?<=[\s:(]))\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?=\s|$|[=.,;:!?)])")
_LATEX_PRODUCT = re.compile(r"\s*\\(?:cdot|times)(?![A-Za-z])(?!\s*10\s*\^)\s*")
_STRAY_EMPHASIS = re.compile(
    r"(?m)(?:^|(?<=[\s:(]))[*_](?=[^\W_(])|(?<=[^\W_)])[*_](?=\s*(?:$|[=.,;:!?]))"
)  # an emphasis mark the parser cut in two
_MATH_DELIMS = re.compile(r"(?<!\\)\$([^$\n]+)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]")


_QUOTE_PAIR = re.compile(r"[“\"]([^“”\"\n]+)[”\"]")


def _unquote(line: str) -> str:
    """A line's one quoted value without its quotes (``“6*(7-3)” = 24``); lines quoting more keep them."""
    pairs = _QUOTE_PAIR.findall(line)
    return _QUOTE_PAIR.sub(r"\1", line) if len(pairs) == 1 else line


def strip_presentation(text: str) -> str:
    """``text`` without presentation (step 1 of the module doc); values and words are kept."""
    text = _BLOCKQUOTE.sub("", text)
    text = _headers(text)
    text = text.replace("**", "").replace("__", "")
    text = _ITALIC.sub(r"\1", text)
    text = _STRAY_EMPHASIS.sub("", text)
    text = _MATH_DELIMS.sub(lambda m: m.group(1) or m.group(2) or m.group(3) or "", text)
    text = _LATEX_NOISE.sub("", text)
    text = _LATEX_PRODUCT.sub("*", text)  # "\\sqrt{5} \\cdot 4" is one product, not two values
    for _ in range(3):  # nested: \\boxed{\\text{\\textbf{C}}}
        new = _LATEX_WORD.sub(lambda m: f" {m.group(1)} " if m.group(1).strip() else " ", text)
        if new == text:
            break
        text = new
    text = _CITATION.sub("", text)
    text = _CHECK_MARKS.sub("", text)
    text = _CONFIDENCE_LINE.sub("", text)
    text = _CONFIDENCE_BITS.sub("", text)
    text = "\n".join(_unquote(line) for line in text.split("\n"))
    text = _LABELS.sub(lambda m: f"{m.group(1)}Answer: ", text)
    for phrase in _PHRASES:
        text = phrase.sub("the answer is ", text)
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = _SUFFIX.search(line)
        if m and m.start() > 0 and len(line[: m.start()].split()) <= 12:
            lines[i] = line[: m.start()]
            break
    return "\n".join(ln.rstrip() for ln in lines).strip()


# ------------------------------------------------------------------ 2. drafts and the last commitment
_REVISION = re.compile(
    r"(?i)(?:\bwait\b[,.!:]*\s*(?:no\b[,.!]*\s*)?(?:actually\b[,:]?)?"
    r"|(?:^|(?<=[.!?;,\n—–-])|(?<=\bbut))\s*(?:no[,.!]\s*)?actually\b[,:]?"
    r"|\bon\s+(?:second|further)\s+thought\b[,:]?|\bon\s+reflection\b[,:]?|\bcorrection\s*[:,-]"
    r"|\bscratch\s+that\b[,.:]?|\bi\s+(?:was\s+wrong|stand\s+corrected|misread|miscalculated)\b[,.:]?"
    r"|\bmy\s+(?:mistake|bad|error)\b[,.:]?|\blet\s+me\s+(?:correct|fix|revise)\s+(?:that|this)\b[,.:]?"
    r"|\b(?:after|upon|on)\s+(?:re-?checking|double-checking|checking|verifying|re-?reading|reconsidering|"
    r"further\s+(?:checking|review|thought)|a\s+closer\s+look|closer\s+inspection|reflection)\b"
    r"(?:\s+(?:it|this|that)\b(?![''’]))?[,:]?"  # "on checking it, 33" drops "it"; "on checking it's 33" keeps it
    r"|\bhmm[,.!]*\s*no\b[,.!]?"
    r")"
)
_DRAFT_INTRO = re.compile(
    r"(?i)\b(?:i\s+)?(?:first|initially|originally|at\s+first)\s+(?:i\s+)?(?:thought|got|said|guessed|wrote|answered|believed|had)\b"
    r"|\bmy\s+(?:first|initial)\s+(?:answer|guess|thought)\b"
)
_DRAFT_END = re.compile(r"(?i)\bbut\b[,:]?|;\s*|\.\s+(?:now|however|but)?\b[,:]?")
_COMMIT = re.compile(
    r"(?i)^\s*(?:no[,.!]?\s*)?(?:it(?:'s|\s+is|\s+should\s+be|\s+must\s+be|\s+was)\b(?:\s+actually)?"
    r"|(?:the|my)\s+(?:\w+\s+){0,2}(?:answer|value|result|option|choice|total|number|date|name|letter|expression)\s+"
    r"(?:is|should\s+be|would\s+be|must\s+be)\b|i\s+meant\b|make\s+(?:that|it)\b|that\s+should\s+be\b"
    r"|(?:final\s+)?answer\s*[:：]|the\s+answer\s+is\b|i(?:'ll|\s+will)\s+(?:go\s+with|say|pick|choose)\b"
    r"|(?:i\s+)?(?:choose|pick|select|go\s+with)\b)"
)
_NOT_A_VALUE = frozenset(
    """i we you he she they it this that these those the a an my our so let let's please hope here there which
    what when where who how if then also both all each everything nothing i'm i've i'll it's that's there's""".split()
)


def _commits(after: str) -> bool:
    """Whether the text after a revision marker commits to a value (a commitment phrase, or a bare value)."""
    head = re.sub(r"^[\s,:;—–]+|^-+\s+", "", after)
    if not head:
        return False
    if _COMMIT.match(head):
        return True
    first = re.split(r"(?<=[.!?])\s|\n", head, maxsplit=1)[0].strip().rstrip(".!")
    words = first.split()
    if not words or len(words) > 8:
        return False
    if re.fullmatch(r"[(\[]?[A-Z](?:[.)\]:]|[)\]]\.?)?", words[0]) and (len(words) == 1 or not words[0][-1].isalpha()):
        return True  # an option letter: "A.", "(B)", "C"
    return words[0].lower().strip("\"'“(") not in _NOT_A_VALUE


def _drop_drafts(text: str) -> tuple[str, bool]:
    """What follows the last self-correction that commits to a value (step 2), and whether one was found."""
    cut = None
    for m in _REVISION.finditer(text):
        if _commits(text[m.end() :]):
            cut = m.end()
    intros = list(_DRAFT_INTRO.finditer(text))
    intro = intros[-1] if intros else None
    if intro is not None and (cut is None or cut < intro.start()):
        end = _DRAFT_END.search(text, intro.end())
        if end is not None and _commits(text[end.end() :]):
            cut = end.end()
            for later in _REVISION.finditer(text, end.end()):  # "but after checking, it is 33"
                if _commits(text[later.end() :]):
                    cut = later.end()
    if cut is None:
        return text, False
    return re.sub(r"^[\s,:;—–]+|^-+\s+", "", text[cut:]).strip(), True


# ------------------------------------------------------------------ 3. rivals
_CUES = re.compile(
    r"(?i)\bin\s+(?:some|other|certain|a\s+few|many|several|older|newer)\s+(?:sources|accounts|references|records|texts|"
    r"versions|editions|reports|lists|databases)\b"
    r"|\b(?:some|other|certain|a\s+few|many|several)\s+(?:sources|accounts|references|records|people|historians|authors|"
    r"scholars|databases|reports)\b"
    r"|\baccording\s+to\s+(?:some|others|other\s+sources)\b|\bothers?\s+(?:say|give|list|claim)\b"
    r"|\b(?:also|equally|another)\s+(?:a\s+|an\s+)?(?:reasonable|possible|plausible|valid|acceptable|correct|"
    r"defensible|viable|likely|good|right)\b"
    r"|\b(?:is|are|seems?|looks?)\s+(?:also\s+)?(?:possible|plausible|defensible|acceptable)\b"
    r"|\bif\b|\bin\s+case\b|\botherwise\b|\bor\s+else\b|\bfailing\s+that\b|\bback-?up\b|\bfall-?back\b|\brunner[- ]up\b"
    r"|\b(?:second|next|2nd)\s+(?:choice|guess|option|pick|best|most\s+likely|candidate)\b"
    r"|\balternative(?:ly|s)?\b|\banother\s+(?:possibility|option|candidate|answer|reading)\b"
    r"|\bother\s+(?:possibility|candidate|option)\b|\bcan(?:no|')?t\s+rule\s+out\b|\bcannot\s+rule\s+out\b"
    r"|\b(?:might|may|could|can)\s+(?:also\s+|instead\s+|equally\s+|well\s+)?be\b|\bpossibly\b|\bperhaps\b|\bmaybe\b"
    r"|\beither\b|\bor\b|\bunless\b|\bnot\s+sure\b|\bunsure\b|\buncertain\b|\bdepending\s+on\b|\bsome\s+say\b"
    r"|\bif\s+(?:you|we)\s+(?:count|include|mean|consider)\b|\bdisputed\b|\bsometimes\s+(?:given|listed|cited)\b"
)
_CLAUSE_SPLIT = re.compile(
    r"(?<=[.!?])(?<!\b[A-Z]\.)\s+(?=\S)|\n+|;|\s+(?:but|though|although|however)\b|,\s*(?:but|though)\b|\s[—–]\s"
)
# words that never name a candidate answer in a remark: function words, the cue vocabulary, and the
# common words of an explanation or a sign-off
_COMMON = frozenset(
    """i a an the but however some other others also if or though although it its it's this that these those in on at
    alternatively otherwise possibly perhaps maybe second backup note still yet and as for from with either another
    according depending unless my our we you they he she not no yes source sources many several few older newer
    certain equally correct answer answers option options choice final wait actually hmm so thus hence therefore here
    there which what when where who how is are was were be been being can could might may will would should must
    do does did done have has had let let's me us him her them your his their its one two three first next then
    than to of by about into over under after before between through during without within up down out off again
    further once all any both each more most such only own same too very just now know need needs anything
    everything something nothing else please hope helps help thanks thank sure think believe guess say says said
    give gives given list lists listed state states stated report reports reported claim claims cite cites cited
    put puts reasonable possible possibly plausible valid acceptable defensible viable likely good right wrong
    true false instead well rule cannot can't couldn't isn't wasn't aren't don't doesn't didn't won't count
    include includes including mean means consider considered disputed sometimes fallback runner-up pick guess
    candidate candidates possibility reading readings accounts account reference references record records text
    texts version versions edition editions reports database databases people historians authors scholars
    check checked checking verified verify confirmed confirm found find search searched searching result results
    retrieved documents document information data recall remember correctly exactly approximately roughly around
    case cases question questions problem puzzle value values number numbers way ways time times also equally
    case let's i'm i've i'll i'd that's there's what's clear clearly likely unlikely slightly fairly quite pretty
    rather somewhat much many lot lots bit whether instead primary secondary main best better worse worst
    alternative""".split()
)
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[^\W\d_]")
_ALNUM = re.compile(r"[^\W_]")


def _candidates(clause: str) -> list[str]:
    """The candidate tokens a clause names, in order: tokens with a digit, single capital letters
    (options), other words that are not common words (:data:`_COMMON`), and quoted texts."""
    found: list[str] = []
    for raw in clause.split():
        token = raw.strip(TOKEN_EDGES)
        if not token:
            continue
        if _DIGIT.search(token):
            found.append(token.lower())
        elif capital(token) and token != "I":
            found.append(token)
        elif _LETTER.search(token) and token.lower() not in _COMMON and token.lower().removesuffix("'s") not in _COMMON:
            found.append(token.lower())
    for quoted in re.findall(r"[\"“]([^\"“”]{1,60})[\"”]", clause):
        found.append(quoted.strip().lower())
    return list(dict.fromkeys(found))


KINDS = ("text", "number", "option")


def _of_kind(token: str, kind: str) -> bool:
    if kind == "number":
        return bool(re.search(r"\d", token))
    if kind == "option":
        return bool(re.fullmatch(r"[A-Z]", token))
    return True


def rival_clause(
    text: str,
    golds: Iterable[str] = (),
    kind: str = "text",
    version: int = 3,
    question: str = "",
    extra_cues: re.Pattern[str] | None = None,
) -> str | None:
    """The first clause after a committed value that names a new candidate under a rival cue (step 3), or
    ``None``. ``golds`` are never split (a gold that holds "or" keeps it). ``kind`` is the kind of answer
    the task asks for: ``number`` (numbers and expressions: only tokens with a digit are candidates),
    ``option`` (only option letters), or ``text`` (any candidate). From ``version`` 4 on, a weaker cue
    (:data:`_WEAK_CUES`: "also", "instead", "another", "some say", "lists", ...) is a rival cue too when the
    new candidate has the answer's type and the ``question`` does not name it (:func:`_typed_candidates`).
    ``extra_cues`` are a later grammar's strong cues (grammar 5: "would also be acceptable", "vs", ..). From
    ``version`` 12 on, a clause that is only a predicate ('"X!" is also possible') joins the clause right before
    it, never a chain of such clauses."""
    masked = text
    golds = [str(g).strip() for g in golds]
    for gold in golds:
        if len(gold) > 1 and (_CUES.search(gold) or (version >= 4 and _WEAK_CUES.search(gold))):
            masked = re.sub(re.escape(gold), " Q9gold ", masked, flags=re.I)
    # the question's words are no rival under grammar 4, except the gold's own words (a gold the question names)
    question_tokens = tokens(question) - {t for g in golds for t in tokens(g)} if version >= 4 else set()
    previous = (0, "")
    earlier_tokens = None
    for start, clause in _clauses(masked):
        own = (start, clause)
        if version >= 4 and _PREDICATE_ONLY.match(clause) and previous[1]:
            start, clause = previous[0], masked[previous[0] : start + len(clause)]  # '"X!" is also possible'
        # grammars 4-11 carry the joined clause on, so a chain of predicates ("(was 5) (was 5) ..") re-read the whole
        # chain at each link (quadratic); from grammar 12 a predicate completes only the clause right before it
        previous = own if version >= 12 else (start, clause)
        if version >= 4 and kind == "option" and start > 0 and masked[start - 1] == "\n":
            bare = re.fullmatch(r"\s*[(\[]?([A-J])[)\].:]?\s*", clause)
            earlier = [c for c in _candidates(masked[:start]) if _of_kind(c, "option")] if bare else []
            if bare and earlier and bare.group(1) not in earlier:
                return clause.strip()  # "(C)\nA": a second letter on its own line
        strong = _cue(_CUES, clause, question) or (extra_cues is not None and _cue(extra_cues, clause, question))
        if not strong and not (version >= 4 and _cue(_WEAK_CUES, clause, question) and not _ALIAS.search(clause)):
            continue
        named = [c for c in _candidates(clause) if _of_kind(c, kind)]
        if version >= 4 and kind == "text":  # "yes is also possible", "if not, no"
            named += [m.group(1).lower() for m in _YES_NO.finditer(clause)]
        elif version >= 4 and kind == "number" and (strong or (version >= 5 and _SOURCE_CUES.search(clause))):
            # "33 (Paris in some sources)", "33. But I've also seen Paris" (grammar 5): a word for a number
            words = [c for c in _candidates(clause) if not _of_kind(c, kind) and c not in question_tokens]
            named += words if len(words) == 1 else []
        if not strong:  # a weaker cue: a candidate of the answer's type that the question does not name
            named = _typed_candidates(clause, kind)
            if kind != "option" and not _SOURCE_CUES.search(clause):
                named = [c for c in named if c not in question_tokens]
        if _ALNUM.search(masked, 0, start):
            earlier_tokens = earlier_tokens or TokensBefore(masked)
            new = {c for c in named if not earlier_tokens.named_before(c, start)}  # set(named) - tokens(masked[:start])
        elif kind != "text" and len(named) > 1:
            new = set(named[1:])  # "C. Some sources say B": the value and its rival in one clause
        else:
            continue  # the cue is not after a committed value
        if new:
            return clause.strip()
    return None


# answer grammar 4: weaker cues, read only with a candidate of the answer's type
_WEAK_CUES = re.compile(
    r"(?i)\b(?:also|too|as\s+well|instead|another|others?|else|second|then\s+again|besides|additionally|"
    r"(?:some|one|a\s+few|other)\s+(?:\w+\s+)?(?:say|says|said|give|gives|list|lists|put|puts|cite|cites|"
    r"report|reports|record|records|mention|mentions|suggest|suggests|claim|claims|state|states)|"
    r"(?:lists?|gives?|puts?|cites?|cited|reports?|mentions?|records?|suggests?|claims?|seen|heard|read)\b"
    r"(?:\s+\w+){0,3}\s+(?:instead|too|also|as\s+well)|footnote|close\s+second|appears?\s+in|"
    r"(?:in|from|by|per)\s+(?:one|another|a\s+different|a\s+second|an\s+older|a\s+newer)\s+"
    r"(?:source|document|record|account|reference|article|text|report|list|version|edition))\b"
)


@lru_cache(maxsize=64)
def _question_words(question: str) -> str:
    """The ``question``'s words in lower case, one space between each (every clause of an answer asks again)."""
    return " ".join(WORD.findall(question.lower()))


def _cue(cues: re.Pattern[str], clause: str, question: str) -> bool:
    """Whether ``clause`` holds a cue that does not restate the ``question``: a cue with a neighbouring word
    that the question writes next to it ("either a side or a diagonal" is the question's own "either ..
    or") is the question restated; grammar 3 passes no question."""
    folded = _question_words(question) if question else ""
    if not folded:
        return cues.search(clause) is not None
    padded = f" {folded} "  # words, so a window is whole words of the question where it occurs between spaces
    for m in cues.finditer(clause):
        cue = " ".join(WORD.findall(m.group(0).lower()))
        before, after = word_before(clause, m.start()), word_after(clause, m.end())
        windows = [" ".join([*before, cue]) if before else None, " ".join([cue, *after]) if after else None]
        if not cue or not any(w and f" {w} " in padded for w in windows):
            return True
    return False


def remark_cue(text: str, question: str = "") -> bool:
    """Whether ``text`` holds a rival cue, strong or weak, that does not restate the ``question``."""
    return _cue(_CUES, text, question) or (_cue(_WEAK_CUES, text, question) and not _ALIAS.search(text))


# a clause that is only a predicate: its subject ended the clause before ('"Archibald, certainly not!" is also
# possible' splits after the "!")
_PREDICATE_ONLY = re.compile(r"(?i)^[\s\"'”’)]*(?:is|are|was|were|would|could|might|may|seems?|looks?)\b")
_YES_NO = re.compile(r"(?i)\b(yes|no)\b(?!\s*[,!—–:.]|\s+(?:one|longer|more|other|doubt|need|problem)\b)")
_SOURCE_CUES = re.compile(
    r"(?i)\bi(?:'ve|\s+have)\s+(?:also\s+)?(?:seen|heard|read|found)\b"
    r"|\b(?:some|others?|one\s+(?:source|document|record|account))\s+(?:\w+\s+)?"
    r"(?:say|says|give|gives|list|lists|put|puts|cite|cites|report|reports|mention|mentions|claim|claims)\b"
    r"|\b(?:lists?|gives?|puts?|cites?|reports?|mentions?|records?|says?)\b(?:\s+\S+){0,3}\s+instead\b"
    r"|\b(?:second|next)\s+guess\b|\bclose\s+second\b"
    r"|\b(?:in|from|by|per|according\s+to)\s+(?:one|another|a\s+different|a\s+second|some|other)\s+"
    r"(?:source|document|record|account|reference|article|text|report|list|version|edition)s?\b"
)
_ALIAS = re.compile(r"(?i)\b(?:also|otherwise)\s+(?:known|called|named|spelled|spelt|written|styled)\b|\ba\.?k\.?a\b")
_FRAME_START = frozenset("the a an it its this that i we but and so yes no some one other others".split())


def _typed_candidates(clause: str, kind: str) -> list[str]:
    """Candidates of the answer's type in a clause under a weak cue: numbers (tokens with a digit) for
    ``number``, letters for ``option``; for ``text``, tokens with a digit and capitalised words that do not
    start the clause (a name, a place, a title), lower-cased."""
    if kind != "text" or _SOURCE_CUES.search(clause):  # "I've also seen X", "some say X": any candidate
        return [c for c in _candidates(clause) if _of_kind(c, kind)]
    found: list[str] = []
    for i, raw in enumerate(clause.split()):
        token = raw.strip(TOKEN_EDGES)
        if not token or token == "I":
            continue
        if re.search(r"\d", token) or (
            token[:1].isupper() and not (i == 0 and token.lower() in _FRAME_START) and token.lower() not in _COMMON
        ):
            found.append(token.lower())
    return list(dict.fromkeys(found))


_PAREN = re.compile(r"\((?:[^()]|\([^()]*\))*\)|\[(?:[^\[\]]|\[[^\[\]]*\])*\]")


def _clauses(text: str) -> list[tuple[int, str]]:
    """``(start, clause)`` pairs: the text split at sentence ends, newlines, ``;``, dashes and
    "but"/"though"/"however" (never inside brackets), and every bracketed remark again on its own."""
    spans = [(m.start(), m.end()) for m in _PAREN.finditer(text)]
    out = [(a, text[a + 1 : b - 1]) for a, b in spans]
    start = 0
    for m in _CLAUSE_SPLIT.finditer(text):
        if any(a <= m.start() < b for a, b in spans):
            continue
        out.append((start, text[start : m.start()]))
        start = m.end()
    out.append((start, text[start:]))
    return sorted((s, c) for s, c in out if c.strip())


# ------------------------------------------------------------------ 2b. reasoning, then a conclusion (grammar 4)
_CONCLUSION = re.compile(
    r"(?i)(?:^|(?<=[.!?:])[ \t]+|\n[ \t>*_#-]*)(?:so|thus|hence|therefore|consequently|accordingly|"
    r"in\s+conclusion|to\s+conclude|in\s+summary|to\s+summari[sz]e|in\s+short|overall|all\s+in\s+all|"
    r"(?:putting|taking)\s+(?:this|it|these|everything|all\s+of\s+this)\s+together|that\s+(?:gives|means|makes)|"
    r"this\s+(?:gives|means|makes)|which\s+gives|we\s+(?:get|obtain|conclude\s+that|find\s+that)|"
    r"conclusion\s*:|(?:the\s+)?bottom\s+line\s*:|finally)\b[ \t]*[,:]?[ \t]*"
)
_UNSURE = re.compile(r"(?i)\b(?:maybe|might|could|perhaps|possibly|probably|not\s+sure|unsure|or)\b|\?")
# a last paragraph that is a trailer, not a conclusion: a label line, or words of a sign-off or remark
_NOT_A_CONCLUSION = re.compile(r"(?i)^[\s*_#>(\[-]*(?:sources?|references?|notes?|confidence|citations?|see|cf)\b")
_SIGN_OFF_WORDS = frozenset(
    """i i'm i've me my we you your this that it it's let know hope helps thanks thank if need anything else
    verified checked sure confident sources documents consistent with was were is are have has""".split()
)
_PROSE = re.compile(r"[A-Za-z][^.!?\n]{20,}[.!?](?:\s|$)")


def _conclusion(text: str, question: str = "") -> str:
    """``text`` from its last conclusion on (grammar 4): reasoning, then "So ..", "Therefore, ..", "That
    gives .." (or, after prose paragraphs, a short last paragraph) commits to what the conclusion states;
    the reasoning before it is working, as working before a marked answer is. Nothing is cut when the
    conclusion hedges ("So it might be 34"; a word of the ``question`` restated is no hedge), when the text
    before it marks an answer, or when the text before it is no prose (a bare value: "33\n\n34" stays two
    candidates)."""
    cut = None
    for m in _CONCLUSION.finditer(text):
        if m.start() > 0:
            cut = m
    start = None
    if cut is not None:
        sentence = re.split(r"(?<=[.!?])\s|\n", text[cut.end() :], maxsplit=1)[0]
        if sentence.strip() and not _cue(_UNSURE, sentence, question):
            start = cut.end()
    else:
        paragraphs = [m.start() for m in re.finditer(r"\n[ \t]*\n(?=\s*\S)", text)]
        if paragraphs:
            last = text[paragraphs[-1] :].strip()
            words = [w.strip(TOKEN_EDGES).lower() for w in last.split()]
            if (
                len(words) <= 6
                and "\n" not in last
                and not _cue(_UNSURE, last, question)
                and not _NOT_A_CONCLUSION.match(last)
                and not any(w in _SIGN_OFF_WORDS for w in words)
            ):
                start = paragraphs[-1]
    if start is None:
        return text
    before = text[:start]
    if _ANSWER_MARK.search(before) or not _PROSE.search(before):
        return text
    return text[start:].strip()


# ------------------------------------------------------------------ the reader
@dataclass(frozen=True)
class Reading:
    """A final answer as the grammar reads it: ``text`` (presentation stripped, drafts dropped: what the
    scorer's span reader then reads), ``hedge`` (why it names a rival, ``None`` when it does not) and
    ``revised`` (whether a self-correction dropped an earlier draft)."""

    text: str
    hedge: str | None = None
    revised: bool = False


_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_ANSWER_MARK = re.compile(
    r"(?im)^[ \t>*_#-]*(?:my\s+|the\s+)?(?:final\s+|correct\s+)?answer\s*[:：]"
    r"|\b(?:the|my|our)\s+(?:final\s+|correct\s+|best\s+)?answer\s+(?:is|would\s+be|should\s+be|will\s+be)\b"
    r"|\\(?:boxed|fbox)\s*\{"
)


def _answer_start(text: str) -> int:
    """Where the answer region starts: at the first explicit answer marker ("Answer:", "the answer is", a
    box) after the last self-correction, else at the start. Working before it is not read for rivals (the
    marked answer commits); everything from it on is, so a second marker cannot hide a rival remark."""
    m = _ANSWER_MARK.search(text)
    return m.start() if m else 0


def _squeeze(text: str) -> str:
    return "".join(text.split()).lower().rstrip(".")


@dataclass(frozen=True)
class LaterSteps:
    """The steps a later grammar adds to :func:`read_answer` (grammar 5's are in
    :mod:`agentflow_env.scoring.grammar5`, which passes them in; this module never imports it):
    ``presentation(text, golds, kind, question) -> (text, hedge)`` before :func:`strip_presentation`,
    ``drop_drafts(text, kind) -> (text, hedge, revised)`` instead of grammar 3's, ``both(text, golds) ->
    hedge or None`` after it, and ``cues``, more strong rival cues for :func:`rival_clause`."""

    presentation: Callable[[str, list[str], str, str], tuple[str, str | None]]
    drop_drafts: Callable[[str, str], tuple[str, str | None, bool]]
    both: Callable[[str, list[str]], str | None]
    cues: re.Pattern[str]


def read_answer(
    prediction: object,
    golds: Iterable[object] = (),
    kind: str = "text",
    version: int = 3,
    question: str = "",
    later: LaterSteps | None = None,
) -> Reading:
    """The final answer ``prediction`` read by the grammar ``version`` (3 or 4; see the module doc; grammar 5
    is :func:`agentflow_env.scoring.grammar5.read_answer`, which passes its ``later`` steps); ``kind`` says
    which candidates a remark can name (see :func:`rival_clause`), ``question`` is the task's question
    (grammar 4 does not count its words as rivals)."""
    if version >= 5 and later is None:
        raise ValueError("grammar 5 reads with agentflow_env.scoring.grammar5.read_answer")
    gold_list = [normalize_text(g) for g in golds if g is not None and str(g).strip()]
    text = normalize_text(prediction)
    if len(text) > MAX_READ_CHARS:
        return Reading(text)
    text = _THINK.sub("", text)
    tags = list(_ANSWER_TAG.finditer(text))
    if len({_squeeze(t.group(1)) for t in tags if t.group(1).strip()}) > 1:
        return Reading(tags[-1].group(1).strip(), "several <answer> tags with different answers")
    if tags:
        rest_of_line = text[tags[-1].end() :].split("\n", 1)[0]
        text = tags[-1].group(1).strip() + (" " + rest_of_line.strip() if rest_of_line.strip() else "")
    if later is not None:
        text, hedge = later.presentation(text, gold_list, kind, question)
        if hedge is not None:
            return Reading(text, hedge)
    text = strip_presentation(text)
    if later is not None:
        text, hedge, revised = later.drop_drafts(text, kind)
        hedge = hedge or later.both(text, gold_list)
        if hedge is not None:
            return Reading(text, hedge, revised)
    else:
        text, revised = _drop_drafts(text)
    if version >= 4:
        text = _conclusion(text, question)
    extra = later.cues if later is not None else None
    rival = rival_clause(text[_answer_start(text) :], gold_list, kind, version, question, extra)
    if rival is not None:
        return Reading(text, f"a remark names a rival answer ({rival[:60]!r})", revised)
    return Reading(text, None, revised)
