"""The paper's ten benchmarks (Bamboogle, 2Wiki, HotpotQA, Musique, GAIA, AIME24, AMC23, GameOf24, GPQA, MedQA):
their sources, how rows become tasks, their scorers, and one :class:`BenchmarkSpec` each.

Tasks load three ways: an AgentFlow test folder (``data_dir=`` or ``$AGENTFLOW_DATA_DIR``), the Hugging Face
hub (``source='hub'``, or ``hub_dataset=`` a hub id or a folder saved with ``save_to_disk``), or one
JSONL/JSON/Parquet file (``path=`` with ``columns=``). Task ids are content hashes (MedQA repeats pids).
"""

from __future__ import annotations

import logging
import math
import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

from agentflow_env.error import ConfigError, DataError
from agentflow_env.scoring.base import Scorer
from agentflow_env.scoring.choice import ChoiceScorer, option_letters, render_options
from agentflow_env.scoring.game24 import Game24Scorer
from agentflow_env.scoring.qa import QAScorer, normalize_answer
from agentflow_env.types import ListTaskSource, Task
from benchmarks.loaders import (
    ColumnMap,
    HubSource,
    apply_columns,
    find_agentflow_file,
    load_hub_rows,
    read_records,
    resolve_data_dir,
)
from benchmarks.specs import BenchmarkSpec

__all__ = ["BENCHMARKS", "PaperBenchmark", "load_paper_tasks", "make_paper_scorer", "rows_to_tasks"]

logger = logging.getLogger(__name__)

SEARCH_TOOLS = ("generator", "python", "wikipedia", "web_search")
MATH_TOOLS = ("generator", "python", "calculator")
PAPER_MAX_TURNS = 10  # AgentFlow's evaluation runs with --max_steps 10 ...
PAPER_TIME_BUDGET_S = 300.0  # ... and --max_time 300

_KINDS = ("qa", "gaia", "math", "game24", "choice")
_SOURCES = ("auto", "local", "hub", "file")
_SCORERS = ("rule", "judge")

# the output-format instruction AgentFlow appends to some questions; the env gives its own instructions
_ANSWER_TAG_INSTRUCTION = re.compile(r"\s*When ready, output the final answer enclosed in <answer>.*\Z", re.DOTALL)
_OPTION_PREFIX = re.compile(r"^\s*\(?([A-Z])[.):]\s*")
_OPTIONS_BLOCK = re.compile(r"\n\s*A[.)]\s")

_INSTRUCTIONS = {
    "qa": "Give the final answer as a short phrase (a name, date, number or yes/no), not a sentence.",
    "gaia": "Give the final answer as briefly as possible: a number, a few words, or a comma-separated list.",
    "math": "Give the final answer as a number or a simplified expression, with no units or explanation.",
    "game24": "Give the final answer as one arithmetic expression that uses each given number exactly once "
    "with + - * / and parentheses, and equals 24.",
    "choice": "Give the final answer as the letter of the correct option (for example: B).",
}


@dataclass(frozen=True)
class PaperBenchmark:
    """One of the paper's benchmarks: where its data lives and how its fields map to a task."""

    name: str
    file: str  # base name in AgentFlow's test folder
    family: str
    kind: str
    local_columns: Mapping[str, str | Sequence[str]]
    hub: HubSource
    known_size: int  # records in AgentFlow's test file
    paper_size: int  # how many of them the paper's script evaluates (the first N)
    about: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)

    @property
    def tools(self) -> tuple[str, ...]:
        return MATH_TOOLS if self.family == "math" else SEARCH_TOOLS


def _flashrag(config: str, split: str) -> HubSource:
    return HubSource(
        "RUC-NLPIR/FlashRAG_datasets",
        split,
        {"question": "question", "answer": "golden_answers", "id": "id"},
        config=config,
    )


def _no_attachment(row: dict[str, Any]) -> bool:
    return not str(row.get("file_name") or "").strip()


def _solvable(row: dict[str, Any]) -> bool:
    return bool(row.get("solvable", True))


# "query": the text AgentFlow's solver sends (``verbatim_query=True``, the paper mode); absent columns are skipped
_QA_LOCAL = {"question": "question", "answer": "answer", "id": "pid", "query": "query"}
_QUERY_LOCAL = {"question": "query", "answer": "answer", "id": "pid", "query": "query"}

BENCHMARKS: dict[str, PaperBenchmark] = {
    b.name: b
    for b in (
        PaperBenchmark(
            "Bamboogle",
            "bamboogle",
            "search",
            "qa",
            _QA_LOCAL,
            _flashrag("bamboogle", "test"),
            125,
            125,
            "2-hop questions written so that search engines answer them wrongly",
        ),
        PaperBenchmark(
            "TwoWiki",
            "2wiki",
            "search",
            "qa",
            _QUERY_LOCAL,
            _flashrag("2wikimultihopqa", "dev"),
            200,
            100,
            "2WikiMultihopQA: multi-hop questions over Wikipedia and Wikidata",
            ("2wikimultihopqa",),
        ),
        PaperBenchmark(
            "HotpotQA",
            "hotpotqa",
            "search",
            "qa",
            _QA_LOCAL,
            _flashrag("hotpotqa", "dev"),
            100,
            100,
            "HotpotQA: 2-hop bridge and comparison questions over Wikipedia",
        ),
        PaperBenchmark(
            "Musique",
            "musique",
            "search",
            "qa",
            _QUERY_LOCAL,
            _flashrag("musique", "dev"),
            200,
            100,
            "MuSiQue: 2-4 hop composed questions",
        ),
        PaperBenchmark(
            "GAIA",
            "gaia",
            "agentic",
            "gaia",
            {
                "question": "question",
                "answer": "answer",
                "id": "task_id",
                "level": "Level",
                "file_name": "file_name",
                "query": "query",
            },
            HubSource(
                "gaia-benchmark/GAIA",
                "validation",
                {
                    "question": "Question",
                    "answer": "Final answer",
                    "id": "task_id",
                    "level": "Level",
                    "file_name": "file_name",
                },
                config="2023_all",
                keep=_no_attachment,
                note="text-only: questions with an attached file are dropped",
            ),
            127,
            127,
            "GAIA validation, text-only questions (no attached files)",
        ),
        PaperBenchmark(
            "AIME24",
            "aime24",
            "math",
            "math",
            _QA_LOCAL,
            HubSource("HuggingFaceH4/aime_2024", "train", {"question": "problem", "answer": "answer", "id": "id"}),
            30,
            30,
            "AIME 2024: 30 competition problems with integer answers 0-999",
        ),
        PaperBenchmark(
            "AMC23",
            "amc23",
            "math",
            "math",
            _QA_LOCAL,
            HubSource("math-ai/amc23", "test", {"question": "question", "answer": "answer", "id": "id"}),
            40,
            40,
            "AMC 2023: 40 competition problems with numeric answers",
        ),
        PaperBenchmark(
            "GameOf24",
            "gameof24",
            "math",
            "game24",
            {"numbers": "question", "answer": "answer", "question": "query", "id": "pid", "query": "query"},
            HubSource("nlile/24-game", "train", {"numbers": "numbers", "answer": "solutions"}, keep=_solvable),
            300,
            100,
            "Game of 24: combine four numbers with + - * / to make 24 (exact checker)",
        ),
        PaperBenchmark(
            "GPQA",
            "gpqa",
            "science",
            "choice",
            {"question": "question", "choices": "choices", "answer_index": "answer_idx", "id": "pid", "query": "query"},
            HubSource(
                "Idavidrein/gpqa",
                "train",
                {
                    "question": "Question",
                    "correct": "Correct Answer",
                    "incorrect": ["Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3"],
                    "id": "Record ID",
                },
                config="gpqa_diamond",
            ),
            300,
            100,
            "GPQA: graduate-level science multiple choice; options shuffled per seed",
        ),
        PaperBenchmark(
            "MedQA",
            "medqa",
            "science",
            "choice",
            {"question": "question", "choices": "options", "answer": "answer", "id": "pid", "query": "query"},
            HubSource(
                "GBaker/MedQA-USMLE-4-options",
                "test",
                {"question": "question", "choices": "options", "answer_letter": "answer_idx", "answer": "answer"},
            ),
            300,
            100,
            "MedQA (USMLE, 4 options): medical multiple choice",
        ),
    )
}

_REQUIRED = {
    "qa": ("question", "answer"),
    "gaia": ("question", "answer"),
    "math": ("question", "answer"),
    "game24": ("numbers",),
    "choice": ("question",),
}
_OPTIONAL = ("id", "level", "file_name", "answer", "question", "query")


# ------------------------------------------------------------------ rows -> tasks
def _agentflow_query(rec: dict[str, Any]) -> str | None:
    """The text AgentFlow's solver sends for a record: its ``query`` field as it is, else its ``question``."""
    for key in ("query", "question"):
        text = rec.get(key)
        if isinstance(text, str) and text.strip():
            return text
    return None


def _question_text(bench: PaperBenchmark, rec: dict[str, Any], origin: str, keep_instructions: bool) -> str:
    verbatim = rec.get("_verbatim")
    if isinstance(verbatim, str):
        return verbatim  # the paper mode: byte for byte what AgentFlow sends, blanks included
    q = rec.get("question")
    if not isinstance(q, str) or not q.strip():
        raise DataError(
            f"{origin}: record {rec['_row']} has no question text (got {type(q).__name__}); "
            "map the question column with columns={'question': ...}"
        )
    return q.strip() if keep_instructions else _ANSWER_TAG_INSTRUCTION.sub("", q).strip()


def _meta(rec: dict[str, Any], origin: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"source": origin, "row": rec["_row"]}
    if rec.get("id") not in (None, ""):
        meta["source_id"] = str(rec["id"])
    if rec.get("level") not in (None, ""):
        meta["level"] = str(rec["level"])
    return meta


def _gold_values(value: Any, origin: str, row: int) -> list[str]:
    """A gold answer as alias strings; missing, empty, non-finite (NaN) or nested golds are a :class:`DataError`."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    golds = []
    for item in items:
        if item is None or (isinstance(item, str) and not item.strip()):
            continue
        if isinstance(item, float) and item.is_integer():
            item = int(item)
        golds.append(_text(item, origin, row, "gold answer").strip())
    if not golds:
        raise DataError(
            f"{origin}: record {row} has a missing or empty gold answer (got {value!r:.60}); fill in its answer field"
        )
    return golds


def _qa_task(bench: PaperBenchmark, rec: dict[str, Any], origin: str, keep_instructions: bool) -> Task:
    question = _question_text(bench, rec, origin, keep_instructions)
    golds = _gold_values(rec.get("answer"), origin, rec["_row"])
    return Task(
        id=Task.content_id(bench.name, question, golds),
        question=question,
        answer=golds,
        family=bench.family,
        metadata=_meta(rec, origin),
    )


def _math_task(bench: PaperBenchmark, rec: dict[str, Any], origin: str, keep_instructions: bool) -> Task:
    question = _question_text(bench, rec, origin, keep_instructions)
    answer = rec.get("answer")
    if isinstance(answer, (list, tuple)):
        raise DataError(f"{origin}: record {rec['_row']} has a list as its math gold answer; give one value")
    gold = _gold_values(answer, origin, rec["_row"])[0]
    return Task(
        id=Task.content_id(bench.name, question, gold),
        question=question,
        answer=gold,
        family=bench.family,
        metadata=_meta(rec, origin),
    )


def _game24_numbers(value: Any, origin: str, row: int) -> list[int]:
    items = re.split(r"[\s,]+", value.strip(" []")) if isinstance(value, str) else value
    try:
        numbers = [int(x) for x in items if not isinstance(x, bool) and (not isinstance(x, float) or x.is_integer())]
    except (TypeError, ValueError, OverflowError):
        raise DataError(f"{origin}: record {row} numbers {str(value)[:60]!r} are not a list of integers") from None
    if len(numbers) != len(items) or any(abs(n) > 10**6 for n in numbers):
        raise DataError(f"{origin}: record {row} numbers {str(value)[:60]!r} must be 4 whole numbers of normal size")
    if len(numbers) != 4:
        raise DataError(f"{origin}: record {row} has {len(numbers)} numbers; Game of 24 needs exactly 4")
    return numbers


def _game24_task(bench: PaperBenchmark, rec: dict[str, Any], origin: str, keep_instructions: bool) -> Task:
    numbers = _game24_numbers(rec["numbers"], origin, rec["_row"])
    question = rec.get("_verbatim", rec.get("question"))
    if not isinstance(question, str) or not question.strip():
        question = (
            f"Use the four numbers {numbers} to write an arithmetic expression equal to 24. "
            "Every number must be used exactly once; only + - * / and parentheses are allowed."
        )
    raw = rec.get("answer")
    raw = [] if raw is None else [raw] if isinstance(raw, str) else raw
    if not isinstance(raw, (list, tuple)) or not all(isinstance(x, str) for x in raw):
        raise DataError(f"{origin}: record {rec['_row']} solutions must be text or a list of texts, got {raw!r:.60}")
    solutions = [x for x in raw if x.strip()]
    meta = _meta(rec, origin)
    meta.update(numbers=numbers, target=24)
    return Task(
        id=Task.content_id(bench.name, numbers),
        question=question if "_verbatim" in rec else question.strip(),
        answer=solutions,
        family=bench.family,
        metadata=meta,
    )


def _option_texts(choices: Any, origin: str, row: int) -> list[str]:
    if isinstance(choices, Mapping):  # MedQA on the hub: {"A": text, ...}
        return [_text(choices[k], origin, row, f"option {k}") for k in sorted(choices, key=str)]
    if not isinstance(choices, (list, tuple)) or len(choices) < 2:
        raise DataError(
            f"{origin}: record {row} choices must be a list or mapping of at least 2 options, got {choices!r:.80}"
        )
    texts = [_text(c, origin, row, f"option {i + 1}") for i, c in enumerate(choices)]
    prefixes = [_OPTION_PREFIX.match(t) for t in texts]
    if all(prefixes) and "".join(m.group(1) for m in prefixes if m) == option_letters(len(texts)):
        texts = [t[m.end() :] for t, m in zip(texts, prefixes) if m]
    return [t.strip() for t in texts]


def _text(value: Any, origin: str, row: int, what: str) -> str:
    """An option or gold text: strings and finite numbers only (a NaN or a nested object is a broken row)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DataError(f"{origin}: record {row} {what} is a {type(value).__name__}, not text; fix that field")
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(f"{origin}: record {row} {what} is {value!r}; give the option's text")
    return str(value)


def _correct_index(rec: dict[str, Any], texts: list[str], origin: str) -> int:
    row = rec["_row"]
    if "answer_index" in rec:
        raw = rec["answer_index"]
        if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
            raw = int(raw.strip())
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise DataError(f"{origin}: record {row} answer index {raw!r:.40} is not a whole number; fix answer_idx")
        index = raw
    elif isinstance(rec.get("answer_letter"), str) and rec["answer_letter"].strip():
        index = ord(rec["answer_letter"].strip().upper()[0]) - ord("A")
    elif rec.get("answer") is not None:
        gold = _text(rec["answer"], origin, row, "answer").strip()
        m = _OPTION_PREFIX.match(gold)
        by_text = [i for i, t in enumerate(texts) if normalize_answer(t) == normalize_answer(gold)]
        if not by_text and m:
            by_text = [i for i, t in enumerate(texts) if normalize_answer(t) == normalize_answer(gold[m.end() :])]
        if len(by_text) != 1 and len(gold) == 1 and gold.upper() in option_letters(len(texts)):
            by_text = [ord(gold.upper()) - ord("A")]
        if len(by_text) != 1:
            raise DataError(f"{origin}: record {row} answer {gold[:60]!r} matches {len(by_text)} of the options")
        index = by_text[0]
    else:
        raise DataError(f"{origin}: record {row} has no answer_index, answer_letter, answer or correct field")
    if not 0 <= index < len(texts):
        raise DataError(f"{origin}: record {row} answer index {index} is outside its {len(texts)} options")
    return index


# an option whose text begins with a closing token lost its beginning (GPQA row 135: "\rangle\rightarrow...")
_CUT_START = re.compile(r"\A(?:\\right\b|\\rangle|\\rbrace|\\rvert|\\end\{|[)\]}]|[,;:]\s)")
# an option that is only a statement label ("a", "(b)", "c)"): GPQA row 168 answers by the stem's a)-d)
_BARE_LABEL = re.compile(r"\(?([A-Za-z])\)?\.?")


def _squeezed(text: str) -> str:
    return " ".join(text.split())


def _option_problems(texts: list[str], index: int) -> tuple[list[str], int, list[str], bool]:
    """Options cleaned of data faults: ``(texts, correct index, warnings, keep_order)``.

    Exact duplicates (case-sensitive: GPQA task 239 has options differing only by L vs l) collapse into one,
    so the correct text can never be "wrong" for being the other copy; options that look cut off are
    reported; bare-label options are put in label order and never shuffled, so option letter X always is
    label x (any other order makes "C" and "c" name different options).
    """
    warnings: list[str] = []
    kept: list[str] = []
    where: dict[str, int] = {}
    new_index = index
    for i, t in enumerate(texts):
        key = _squeezed(t)
        if key in where:
            other = option_letters(len(texts))[where[key]]
            warnings.append(f"option {option_letters(len(texts))[i]} repeats option {other} ({t[:40]!r}); merged")
            if i == index:
                new_index = where[key]
            continue
        where[key] = len(kept)
        if i == index:
            new_index = len(kept)
        kept.append(t)
    for letter, t in zip(option_letters(len(kept)), kept):
        if not t.strip():
            warnings.append(f"option {letter} is empty")
        elif _CUT_START.match(t.strip()):
            warnings.append(f"option {letter} looks cut off at its start ({t.strip()[:30]!r})")
    labels = [_BARE_LABEL.fullmatch(t.strip()) for t in kept]
    keep_order = False
    if all(labels):
        names = [m.group(1).upper() for m in labels if m]
        if sorted(names) == list(option_letters(len(kept))):
            order = sorted(range(len(kept)), key=lambda i: names[i])
            correct = kept[new_index]
            kept = [kept[i] for i in order]
            new_index = kept.index(correct)
            keep_order = True
            warnings.append("options are bare statement labels; shown in label order (option X is label x), unshuffled")
    return kept, new_index, warnings, keep_order


def _choice_task(
    bench: PaperBenchmark,
    rec: dict[str, Any],
    origin: str,
    keep_instructions: bool,
    seed: int | None,
    shuffle_options: bool = True,
) -> Task:
    query = rec.pop("_verbatim", None)
    stem = _question_text(bench, rec, origin, keep_instructions)
    row = rec["_row"]
    if "correct" in rec:  # GPQA on the hub: one right answer and a list of wrong ones, in no order
        wrong = rec.get("incorrect") or []
        if not isinstance(wrong, (list, tuple)):
            raise DataError(f"{origin}: record {row} wrong answers must be a list, got {type(wrong).__name__}")
        texts = [_text(rec["correct"], origin, row, "correct answer").strip()]
        texts += [_text(w, origin, row, "wrong answer").strip() for w in wrong]
        index = 0
        seed = 0 if seed is None else seed
    else:
        if "choices" not in rec:
            raise DataError(f"{origin}: record {row} has no choices; map them with columns={{'choices': ...}}")
        texts = _option_texts(rec["choices"], origin, row)
        index = _correct_index(rec, texts, origin)
    # MedQA's question text carries its options (twice in AgentFlow's file): keep the stem only
    cut = _OPTIONS_BLOCK.search(stem)
    if cut and normalize_answer(texts[0])[:40] in normalize_answer(stem[cut.start() :]):
        stem = stem[: cut.start()].rstrip()
    task_id = Task.content_id(bench.name, stem, sorted(texts), texts[index])  # before any clean-up: ids stay put
    if query is not None:
        return _verbatim_choice_task(bench, rec, origin, query, texts, index, task_id, seed, shuffle_options)
    texts, index, warnings, keep_order = _option_problems(texts, index)
    if len(texts) < 2:
        raise DataError(f"{origin}: record {row} has fewer than 2 distinct options; fix its choices")
    correct = texts[index]
    order = list(range(len(texts)))
    if seed is not None and shuffle_options and not keep_order:  # a fresh option order per trial seed
        random.Random(f"{seed}:{task_id}").shuffle(order)
    shown = [texts[i] for i in order]
    letter = option_letters(len(shown))[order.index(index)]
    meta = _meta(rec, origin)
    meta.update(options=shown, answer_text=correct, option_seed=seed if not keep_order else None)
    if warnings:
        meta["data_warnings"] = warnings
    question = f"{stem}\nChoices:\n{render_options(shown)}"
    return Task(id=task_id, question=question, answer=letter, family=bench.family, metadata=meta)


def _verbatim_choice_task(
    bench: PaperBenchmark,
    rec: dict[str, Any],
    origin: str,
    query: str,
    texts: list[str],
    index: int,
    task_id: str,
    seed: int | None,
    shuffle_options: bool,
) -> Task:
    """A choice task whose question is AgentFlow's ``query`` as it is (the paper mode).

    The options keep the file's order and letters, as AgentFlow shows them. With ``shuffle_options`` and a
    ``seed``, the query's option lines are re-lettered in the seed's order (the rest of the text unchanged).
    Faulty options are reported, never merged: the query stays what AgentFlow sends.
    """
    row = rec["_row"]
    _, _, warnings, keep_order = _option_problems(texts, index)
    warnings = [w.replace("; merged", "; kept, as AgentFlow shows it") for w in warnings if "label order" not in w]
    order = list(range(len(texts)))
    question = query
    shuffled = shuffle_options and seed is not None and not keep_order
    if shuffled:
        raw = rec["choices"]
        blocks = ["\n".join(str(c) for c in raw)] if isinstance(raw, (list, tuple)) else []
        blocks.append(render_options(texts))
        block = next((b for b in blocks if query.count(b) == 1), None)
        if block is None:
            raise DataError(
                f"{origin}: record {row}: its query does not list its options once, one per line, so they cannot "
                "be shuffled; keep AgentFlow's order (shuffle_options=False) or fix the record"
            )
        random.Random(f"{seed}:{task_id}").shuffle(order)
        at = query.index(block)
        question = query[:at] + render_options([texts[i] for i in order]) + query[at + len(block) :]
    shown = [texts[i] for i in order]
    meta = _meta(rec, origin)
    meta.update(
        options=shown,
        answer_text=texts[index],
        option_seed=seed if shuffled else None,
        question_text="agentflow query",
    )
    if warnings:
        meta["data_warnings"] = warnings
    letter = option_letters(len(shown))[order.index(index)]
    return Task(id=task_id, question=question, answer=letter, family=bench.family, metadata=meta)


def rows_to_tasks(
    bench: PaperBenchmark,
    rows: Sequence[Mapping[str, Any]],
    columns: ColumnMap,
    origin: str,
    *,
    seed: int | None = None,
    keep_instructions: bool = False,
    shuffle_options: bool = True,
    verbatim_query: bool = False,
) -> list[Task]:
    """Map ``rows`` through ``columns`` and build one task per row; exact duplicates (same id) are dropped.

    ``seed`` orders multiple-choice options (one order per seed; ``None`` keeps the file's order unless
    ``shuffle_options`` is off). ``verbatim_query`` (the paper mode): the question is the record's ``query``
    field exactly as AgentFlow's solver sends it (else its ``question``, as the solver falls back); choice
    options then keep the file's order unless ``shuffle_options`` and a ``seed`` ask for a shuffle.
    A row that cannot become a task is a :class:`DataError` naming ``origin``, the record and what to fix;
    rows with suspect options load with a warning (``metadata['data_warnings']``).
    """
    records = apply_columns(
        rows,
        columns,
        origin,
        required=_REQUIRED[bench.kind],
        optional=tuple(k for k in _OPTIONAL if k not in _REQUIRED[bench.kind]),
    )
    tasks: list[Task] = []
    seen: set[str] = set()
    flagged: list[str] = []
    for rec in records:
        if verbatim_query:
            query = rec.get("query") if bench.kind == "choice" else _agentflow_query(rec)
            if isinstance(query, str) and query.strip():
                rec["_verbatim"] = query
        try:
            if bench.kind == "choice":
                task = _choice_task(bench, rec, origin, keep_instructions, seed, shuffle_options)
            else:
                task = _BUILDERS[bench.kind](bench, rec, origin, keep_instructions)
        except DataError:
            raise
        except (ValueError, TypeError, KeyError, OverflowError, RecursionError, AttributeError) as exc:
            raise DataError(
                f"{origin}: record {rec.get('_row')} cannot become a {bench.name} task "
                f"({type(exc).__name__}: {str(exc)[:200]}); fix or remove that record"
            ) from None
        if verbatim_query:  # what AgentFlow's judge reads (judge="agentflow:PATH"): the record as the file has it
            task.metadata["agentflow_record"] = _judge_record(bench, rows[rec["_row"]])
        if task.metadata.get("data_warnings"):
            flagged.append(f"record {rec['_row']}: " + "; ".join(task.metadata["data_warnings"]))
        if task.id in seen:
            logger.info("%s: record %s repeats an earlier task; dropped", origin, rec["_row"])
            continue
        seen.add(task.id)
        tasks.append(task)
    if flagged:
        logger.warning("%s: %d record(s) with suspect options:\n  %s", origin, len(flagged), "\n  ".join(flagged))
    return tasks


def _judge_record(bench: PaperBenchmark, row: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a raw AgentFlow record its scoring script reads, and the task name it is scored under."""
    record = {k: row[k] for k in ("question", "query", "answer", "choices", "options") if k in row}
    record["task"] = bench.file
    return record


_BUILDERS = {"qa": _qa_task, "gaia": _qa_task, "math": _math_task, "game24": _game24_task}


# ------------------------------------------------------------------ loading
def load_paper_tasks(
    bench: PaperBenchmark,
    split: str = "test",
    *,
    data_dir: str | os.PathLike[str] | None = None,
    source: str = "auto",
    path: str | os.PathLike[str] | None = None,
    columns: ColumnMap | None = None,
    hub_dataset: str | None = None,
    hub_config: str | None = None,
    hub_cache_dir: str | None = None,
    num_tasks: int | None = None,
    seed: int | None = None,
    keep_instructions: bool = False,
    shuffle_options: bool = True,
    verbatim_query: bool = False,
) -> ListTaskSource:
    """The tasks of ``bench`` from a local AgentFlow folder, the hub, or one file (see the module doc).

    ``seed`` is the trial seed: multiple-choice options appear in one order per seed (GPQA's official
    protocol; ``shuffle_options=False`` keeps the file's order). Protocols pass each trial's seed here.
    ``verbatim_query``: each question is AgentFlow's ``query`` field as it is (see :func:`rows_to_tasks`).
    """
    if source not in _SOURCES:
        raise ConfigError(f"source={source!r}; choose one of {', '.join(_SOURCES)}")
    if num_tasks is not None and num_tasks < 1:
        raise ConfigError(f"num_tasks must be positive, got {num_tasks}")
    if source == "auto":
        source = "file" if path is not None else "hub" if hub_dataset is not None else "local"
    if source == "file":
        if path is None:
            raise ConfigError("source='file' needs path= a .jsonl, .json or .parquet file")
        rows, origin = read_records(path), str(path)
        cols = columns or bench.local_columns
    elif source == "hub":
        hub_split = bench.hub.split if split in ("test", bench.hub.split) else split
        rows = load_hub_rows(
            bench.hub, dataset=hub_dataset, config=hub_config, split=hub_split, cache_dir=hub_cache_dir
        )
        origin = f"{hub_dataset or bench.hub.dataset} [{hub_split}]"
        cols = columns or bench.hub.columns
    else:
        rows, origin = _local_rows(bench, split, data_dir)
        cols = columns or bench.local_columns
    tasks = rows_to_tasks(
        bench,
        rows,
        cols,
        origin,
        seed=seed,
        keep_instructions=keep_instructions,
        shuffle_options=shuffle_options,
        verbatim_query=verbatim_query,
    )
    if not tasks:
        raise DataError(f"{origin}: no usable {bench.name} tasks")
    return ListTaskSource(tasks[:num_tasks] if num_tasks else tasks)


def _local_rows(bench: PaperBenchmark, split: str, data_dir: Any) -> tuple[list[dict[str, Any]], str]:
    folder = resolve_data_dir(data_dir)
    if folder is None:
        raise DataError(
            f"{bench.name}: no data source. Pass data_dir= a folder of AgentFlow test files "
            f"(with {bench.file}.json), set $AGENTFLOW_DATA_DIR, use source='hub' "
            "(needs network), or path= a JSONL/Parquet file with columns="
        )
    if split not in ("test", bench.hub.split):
        raise ConfigError(
            f"{bench.name}: an AgentFlow folder holds only the evaluation split ('test'), not "
            f"{split!r}; use source='hub' for other splits"
        )
    path = find_agentflow_file(folder, (bench.file, *bench.aliases))
    return read_records(path), str(path)


@lru_cache(maxsize=32)
def _count_file(path: str, mtime: float, bench_name: str) -> int:
    bench = BENCHMARKS[bench_name]
    return len(rows_to_tasks(bench, read_records(path), bench.local_columns, path))


def paper_size(bench: PaperBenchmark) -> int:
    """Tasks in ``$AGENTFLOW_DATA_DIR``'s file when it is set and readable, else the AgentFlow file's count."""
    try:
        folder = resolve_data_dir(None)
        if folder is not None:
            path = find_agentflow_file(folder, (bench.file, *bench.aliases))
            return _count_file(str(path), path.stat().st_mtime, bench.name)
    except (DataError, OSError):
        pass
    return bench.known_size


# ------------------------------------------------------------------ scoring
def make_paper_scorer(
    bench: PaperBenchmark,
    scoring: str = "rule",
    metric: str | None = None,
    judge_engine: Any = None,
    math_timeout_s: float = 5.0,
) -> Scorer:
    """The rule scorer of ``bench`` (default) or an LLM judge (``scoring='judge'``, ``judge_engine=``).

    (The env option is ``scoring``: ``make_env``'s own ``scorer=`` takes a ready scorer object.)
    """
    if scoring not in _SCORERS:
        raise ConfigError(f"scoring={scoring!r}; choose one of {', '.join(_SCORERS)}")
    if metric is not None and bench.kind not in ("qa", "gaia"):
        raise ConfigError(f"{bench.name} has no metric= option (only the QA benchmarks do: em, f1, cover, gaia)")
    if scoring == "judge":
        from agentflow_env.scoring.judge import JudgeScorer

        return JudgeScorer(judge_engine)
    if bench.kind in ("qa", "gaia"):
        return QAScorer(metric or ("gaia" if bench.kind == "gaia" else "em"))
    if bench.kind == "math":
        from agentflow_env.scoring.math import MathScorer

        return MathScorer(timeout_s=math_timeout_s)
    if bench.kind == "game24":
        return Game24Scorer()
    return ChoiceScorer()


# ------------------------------------------------------------------ specs
class _ScorerFactory:
    def __init__(self, bench: PaperBenchmark):
        self.bench = bench

    def __call__(
        self, scoring: str = "rule", metric: str | None = None, judge_engine: Any = None, math_timeout_s: float = 5.0
    ) -> Scorer:
        return make_paper_scorer(self.bench, scoring, metric, judge_engine, math_timeout_s)


def _spec(bench: PaperBenchmark) -> BenchmarkSpec:
    hub = bench.hub.describe() + (f", {bench.hub.note}" if bench.hub.note else "")
    return BenchmarkSpec(
        name=bench.name,
        family=bench.family,
        load_tasks=partial(load_paper_tasks, bench),  # make_env reads its keyword options
        make_scorer=_ScorerFactory(bench),
        tools=bench.tools,
        max_turns=PAPER_MAX_TURNS,
        source=f"AgentFlow file {bench.file}.json (data_dir= or $AGENTFLOW_DATA_DIR) | {hub}",
        description=f"{bench.about}. The paper evaluates the first {bench.paper_size} of {bench.known_size}.",
        instructions=_INSTRUCTIONS[bench.kind],
        size=lambda: paper_size(bench),
        env_defaults={"time_budget_s": PAPER_TIME_BUDGET_S},
    )


BAMBOOGLE = _spec(BENCHMARKS["Bamboogle"])
TWOWIKI = _spec(BENCHMARKS["TwoWiki"])
HOTPOTQA = _spec(BENCHMARKS["HotpotQA"])
MUSIQUE = _spec(BENCHMARKS["Musique"])
GAIA = _spec(BENCHMARKS["GAIA"])
AIME24 = _spec(BENCHMARKS["AIME24"])
AMC23 = _spec(BENCHMARKS["AMC23"])
GAMEOF24 = _spec(BENCHMARKS["GameOf24"])
GPQA = _spec(BENCHMARKS["GPQA"])
MEDQA = _spec(BENCHMARKS["MedQA"])

PAPER_SPECS: dict[str, BenchmarkSpec] = {
    s.name: s for s in (BAMBOOGLE, TWOWIKI, HOTPOTQA, MUSIQUE, GAIA, AIME24, AMC23, GAMEOF24, GPQA, MEDQA)
}
