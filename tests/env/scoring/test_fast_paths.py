"""The scorers' fast paths answer as the slow ones do.

``normalize_text`` and ``fold`` skip their per-character Unicode work for ASCII text, and :class:`Cued` patterns run
only where their cue occurs. Each shortcut must give the same output as the path it skips: these tests compare the
two on random text (Unicode, format characters and the grammars' own cue words) and on every string the grammar
tests write.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import random
import re
import unicodedata
from pathlib import Path

import pytest

from agentflow_env import scoring
from agentflow_env.scoring.cued import Cued, lowered
from agentflow_env.scoring.markers import _CHARS, GOLD_MARK, normalize_text
from agentflow_env.scoring.typed import _FOLD, fold
from agentflow_env.scoring.words import WORD, TokensBefore, tokens, word_after, word_before

HERE = Path(__file__).parent
WORDS = (
    "I i my mi meine ma minha mia first initially earlier originally before previously wrote said had thought answer "
    "was is were are so as nor and not wrong incorrect a mistake error typo scratch strike cross out retract withdraw "
    "disregard revised corrected changed updated amended to now later but 35 33 -2.5 1/2 Paris New York ( ) , . ; ! — "
    "– : primera respuesta fue erste antwort war première réponse était primeira resposta foi prima risposta era "
    "No, nein, no. actually oops my bad I meant should be correct if unless I'm I recall correctly mistaken memory "
    "serves ❌ ✗ confidence: high 90% sure certainty either soit ou bien 不对， нет, поправка: en realidad "
    "いや、 違います"
).split()

# whole remarks some patterns need more than single words for
PHRASES = [
    "if I recall correctly,",
    ", if I'm not mistaken",
    "if memory serves me",
    "unless I am mistaken",
    "if I'm reading the question right",
    "IF I REMEMBER RIGHT",
    "(confidence: 80%)",
    "I'm 90% sure",
    "Confidence level is high.",
    "não, na verdade é",
    "No, en realidad es",
    "non, en fait, c'est",
    "Although 44 is often cited, the correct answer is 33",
    "whereas 12 was widely reported, the true answer is 21",
    "I cross-checked it against a second source.",
    "verified with another reference",
    "a common mistake is 44",
    "often confused with",
    '"a quoted remark that is long enough to count"',
    "3.2e5",
    "3 \\times 10^{5}",
    "x + y = 3",
    "a / b",
    "Paris | Lyon",
    "Paris & Lyon",
    "some sources say",
    "according to the list",
    "can be ruled out",
    "does not fit",
    "toss-up",
    "hard to say",
    "I can't tell",
    "not 100% sure",
    "\n✅ 33",
    "Output:\n```\n33\n```",
    "<s>44</s>",
    "4\u03364\u0336",
    "(previously 44, a mistake)",
    "Final answer:\n33",
    "Paris¹",
    "33 (about 30)",
    "≈ 3.14",
    "I first found 44",
    "Earlier, I found 44",
    "1{,}234",
    "35 → revised: 33",
    "-> **Corrected answer**: 33",
    "Zuerst dachte ich an",
    "Ich dachte zuerst, es sei",
    "J'ai d'abord pensé à",
    "Al principio creí que era",
    "Сначала я думал, что",
    "is a distractor",
    "was just a red herring",
    "are the common traps",
    "That would suggest",
    "This might give",
    "The calculation should yield",
    "lautet die Antwort",
    "la réponse est",
    "La respuesta correcta es",
    "ответ: ",
    "答案是",
]


def _slow_normalize(text: object) -> str:
    text = "" if text is None else str(text)
    text = text.translate(_CHARS).replace(GOLD_MARK, " ")
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def _slow_fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", str(text).translate(_FOLD))
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).casefold()
    text = re.sub(r"[^\w\s'-]|_", " ", text).replace("'", "")
    return " ".join(text.split())


def _grammar_test_strings() -> list[str]:
    out = []
    for path in sorted(HERE.glob("test_answer_grammar*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append(node.value)
    return out


def _random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    odd = ["\u200b", "\u200d", "\ufeff", "\u00ad", "\x00", "ß", "Æ", "ı", "İ", "１", "٣", "\u3000", "\u2212", "é", "K"]
    texts = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(0, 14))]
        if rng.random() < 0.2:
            words.insert(rng.randint(0, len(words)), rng.choice(PHRASES))
        text = rng.choice([" ", "  ", "\n"]).join(words)
        if rng.random() < 0.3:
            text = "".join(rng.choice(odd) if rng.random() < 0.1 else ch for ch in text)
        texts.append(text.upper() if rng.random() < 0.1 else text)
    return texts


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return _grammar_test_strings() + _random_texts(20_000, seed=5)


def test_the_grammar_tests_supply_strings(texts: list[str]) -> None:
    assert len(_grammar_test_strings()) > 500


def test_normalize_and_fold_fast_paths_equal_the_slow_ones(texts: list[str]) -> None:
    for text in texts:
        assert normalize_text(text) == _slow_normalize(text), text
        assert fold(text) == _slow_fold(text), text
    assert normalize_text(None) == "" and normalize_text(12) == "12" and fold(3.5) == "3 5"


SCORING = [importlib.import_module(f"agentflow_env.scoring.{m.name}") for m in pkgutil.iter_modules(scoring.__path__)]
CUED = [(f"{m.__name__}.{k}", v) for m in SCORING for k, v in vars(m).items() if isinstance(v, Cued)]


def test_the_grammars_have_cued_patterns() -> None:
    assert {name for name, _ in CUED} >= {
        f"agentflow_env.scoring.{name}"
        for name in (
            "grammar8._DENIED_TOO",
            "grammar8._MARKER",
            "grammar9._WITHDRAWN",
            "grammar9._EITHER",
            "grammar7._RECALL",
            "grammar7._CROSSED_VALUE",
            "grammar7._FOREIGN_REVISION",
            "grammar._CONFIDENCE_BITS",
            "grammar8._DOUBT",
            "grammar8._UNSURE",
            "grammar8._ATTRIBUTION",
            "grammar8._DECOY",
            "grammar6._REJECTS",
            "grammar7._OFTEN_CITED",
            "grammar10._SECOND_SOURCE",
            "grammar5._QUOTED",
            "extract._SCI",
            "commitment._TIGHTEN",
            "commitment._SEPARATORS",
            "grammar7._CHECK_MARK",
            "grammar7._FENCED_OUTPUT",
            "grammar7._STRUCK",
            "grammar7._MISTAKE_PAREN",
            "grammar7._COLON_LABEL_LINE",
            "grammar5._SUPERSCRIPT_MARK",
            "grammar5._GLOSS",
            "grammar10._I_FIRST_FOUND",
            "grammar10._EARLIER_I_FOUND",
            "extract._BRACE_COMMA",
            "grammar11._ARROW_REVISION",
            "grammar11._FOREIGN_DRAFT",
            "grammar11._DISTRACTOR",
            "grammar11._TENTATIVE",
            "grammar11._FOREIGN_FRAME",
        )
    }


def test_lowered_keeps_positions_and_reads_as_a_case_insensitive_pattern() -> None:
    for text in ["İstanbul ıs ſure", "ABC", "Straße K", "ΣΑΣ", "é\u0130x"]:
        low = lowered(text)
        assert len(low) == len(text)
        for i, ch in enumerate(text):
            assert re.fullmatch(re.escape(low[i]), ch, re.IGNORECASE) or low[i] == ch.lower(), (text, i)
    assert lowered("Scratch THAT") == "scratch that"
    with pytest.raises(ValueError):
        Cued(re.compile("a"), re.compile("(?i)a"), lowered=True)


def test_join_end_gate_is_necessary(texts: list[str]) -> None:
    from agentflow_env.scoring import grammar6

    matched = 0
    for text in texts + [t[-60:] + j for t in texts[:3000] for j in (", ", " and", " or\n", " vs. ", "/", " versus")]:
        if grammar6._VALUE_BEFORE.search(text):
            matched += 1
            assert grammar6._JOIN_ENDS.search(text[:-1] if text.endswith("\n") else text), text
    assert matched >= 1000


def test_filler_suffix_gate_is_necessary(texts: list[str]) -> None:
    from agentflow_env.scoring import extract

    endings = [" I think.", ", I'm pretty sure!", " is the correct answer", " in total ", " exactly.\n", " SURE"]
    matched = 0
    for text in texts + [t + e for t in texts[:2000] for e in endings]:
        if extract._FILLER_SUFFIX.search(text):
            matched += 1
            ending = lowered(text.rstrip().rstrip(".!").rstrip()[-9:])
            assert ending.endswith(extract._FILLER_ENDS), text
    assert matched >= 1000


@pytest.mark.parametrize("name,cued", CUED, ids=[name for name, _ in CUED])
def test_a_cue_is_necessary_for_its_pattern(name: str, cued: Cued, texts: list[str]) -> None:
    matched = 0
    for text in texts:
        if cued.pattern.search(text):
            matched += 1
            assert cued.cued(text), f"{name} matches {text!r} where its cue does not"
        assert cued.sub("#", text) == cued.pattern.sub("#", text)
        assert cued.split(text) == cued.pattern.split(text)
        assert [m.span() for m in cued.finditer(text)] == [m.span() for m in cued.pattern.finditer(text)]
    assert matched >= 20, f"{name}: too few matching texts to test the cue ({matched})"


def _slow_strip_edges(span: str) -> str:
    from agentflow_env.scoring import extract

    prev = None
    while prev != span:
        prev = span
        span = extract._EMPHASIS.sub("", span) if "**" in span or "__" in span or "`" in span else span
        span = span.strip(extract._EDGES).strip()
        span = extract._DOLLARS.sub(r"\1", span) if span.count("$") == 2 else span
        span = extract._MATH_DELIMITERS.sub(lambda m: m.group(1) or m.group(2) or "", span)
        span = extract._FINAL_STOPS.sub("", span).strip()
        span = extract._ITEM_MARK.sub("", span)
    return span


def test_strip_edges_skips_only_what_cannot_match(texts: list[str]) -> None:
    from agentflow_env.scoring.extract import _strip_edges

    shapes = ["{}", "\\({}\\)", "\\[{}\\]", "- {}", "12. {}", "٣) {}", "{}.\n", "{}!", "{}。", "* **{}**.", "$ {} $"]
    for text in texts[:5000]:
        for shape in shapes:
            span = shape.format(text)
            assert _strip_edges(span) == _slow_strip_edges(span), span


def _neighbour_texts(texts: list[str]) -> list[str]:
    """Texts for the word windows: the module's texts, plus words far apart, final sigma and long words."""
    rng = random.Random(9)
    far = [
        "was" + " " * 100 + "x" + "." * 200 + "is",
        "ΟΔΟΣ. was ΣΟΦΟΣ is Σ",
        "a" * 300 + " also " + "b" * 300,
        "İstanbul'un was K'S also",
        "'" * 70 + "or" + "'" * 70,
        "B.'Σ" + " " * 61 + "was",  # the window starts at ".": a final sigma only by the "B" outside it
        " " * 61 + "xΣ.B",  # the window ends after ".": not final only by the "B" outside it
    ]
    for _ in range(300):
        far.append(
            "".join(
                rng.choice(["was ", "is", " " * rng.randint(1, 90), "Σ", "ς", "x" * rng.randint(1, 80), ".", "'"])
                for _ in range(rng.randint(1, 12))
            )
        )
    return texts[:6000] + far


def test_the_word_windows_equal_reading_the_whole_clause(texts: list[str]) -> None:
    """A rival cue's neighbouring words, read from windows, are the words a read of the whole prefix or suffix gives
    (the windows keep a clause of many cues linear)."""
    for text in _neighbour_texts(texts):
        for i in sorted({0, len(text), *range(0, len(text), 7), *(m.start() for m in re.finditer("was", text))}):
            assert word_before(text, i) == WORD.findall(text[:i].lower())[-1:], (text, i)
            assert word_after(text, i) == WORD.findall(text[i:].lower())[:1], (text, i)


def test_tokens_before_a_position_equal_the_prefixs_tokens(texts: list[str]) -> None:
    """grammar.rival_clause asks which tokens the text names before each clause from one index of the text."""
    for text in _neighbour_texts(texts)[::3]:
        index = TokensBefore(text)
        words = tokens(text) | {w[:3] for w in tokens(text)} | {"33", "A", "was"}
        for i in sorted({0, len(text), *range(0, len(text), 5)}):
            before = tokens(text[:i])
            for word in words:
                assert index.named_before(word, i) == (word in before), (text, i, word)
