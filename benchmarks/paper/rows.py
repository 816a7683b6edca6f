"""Rows to tasks: one builder per benchmark kind (QA, math, Game of 24; choice in :mod:`.choice`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentflow_env.error import DataError
from agentflow_env.types import Task
from benchmarks.loaders import (
    ColumnMap,
    apply_columns,
)
from benchmarks.paper.catalog import _OPTIONAL, _REQUIRED, PaperBenchmark
from benchmarks.paper.choice import _choice_task
from benchmarks.paper.fields import _agentflow_query, _gold_values, _meta, _question_text

__all__ = ["rows_to_tasks"]

logger = logging.getLogger(__name__)


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
