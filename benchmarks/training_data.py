"""AgentFlow's training sets as :class:`~agentflow_env.types.Task` lists: the search set (Natural Questions, as
Search-R1 released it) and the math set (DeepMath-103K), alone or mixed like AgentFlow's
``data/train/combined_train.parquet`` (182,190 rows: NQ's 79,168 + DeepMath's 103,022, shuffled).

Each loads from the Hugging Face hub (its dataset id), from a dataset folder saved with ``save_to_disk``, or
from a local Parquet/JSON/JSONL file (AgentFlow's own combined file included); columns are found by name.
Tasks carry ``metadata["data_source"]`` and the rule scorer that fits them (``metadata["scorer"]``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentflow_env.error import ConfigError, DataError
from agentflow_env.types import Task
from benchmarks.loaders import HubSource, load_hub_rows, read_records

__all__ = ["TRAIN_SETS", "TrainSet", "load_train_tasks", "rows_to_tasks"]

# the column names each field goes by across the hub sets and AgentFlow's combined file
_QUESTION_COLUMNS = ("question", "problem", "prompt", "query")
_ANSWER_COLUMNS = ("golden_answers", "final_answer", "answer", "result", "ground_truth", "solution")
_SEARCH_SOURCES = {"nq", "hotpotqa", "triviaqa", "popqa", "2wikimultihopqa", "musique", "bamboogle", "search"}


@dataclass(frozen=True)
class TrainSet:
    """One of AgentFlow's training sets: where it lives on the hub and what kind of task it is."""

    hub: HubSource
    family: str  # the paper's category: search or math
    scorer: str  # the rule scorer for its answers (the cheaper alternative to the judge)
    size: int  # rows in the full set


TRAIN_SETS: dict[str, TrainSet] = {
    "nq": TrainSet(
        HubSource(
            "PeterJinGo/nq_hotpotqa_train",
            "train",
            columns={"question": "question", "answer": "golden_answers"},
            keep=lambda row: row.get("data_source") == "nq",
            note="Search-R1's NQ + HotpotQA training file; AgentFlow keeps the NQ rows",
        ),
        family="search",
        scorer="em",
        size=79_168,
    ),
    "deepmath": TrainSet(
        HubSource("zwhe99/DeepMath-103K", "train", columns={"question": "question", "answer": "final_answer"}),
        family="math",
        scorer="math",
        size=103_022,
    ),
}


def load_train_tasks(
    name: str = "combined",
    *,
    path: str | None = None,
    dataset: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    cache_dir: str | None = None,
) -> list[Task]:
    """The tasks of ``name`` (``nq``, ``deepmath``, or ``combined``: both, shuffled with ``seed``).

    ``path``: a local Parquet/JSON/JSONL file (for ``combined``, AgentFlow's ``combined_train.parquet``, whose
    rows say their ``data_source``). ``dataset``: a hub id or ``save_to_disk`` folder in place of the set's
    own (not for ``combined``). ``limit``: the first ``limit`` tasks after shuffling.
    """
    if name not in (*TRAIN_SETS, "combined"):
        raise ConfigError(f"unknown training set {name!r}; choose one of {', '.join([*TRAIN_SETS, 'combined'])}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be at least 1, got {limit}")
    if path is not None:
        tasks = rows_to_tasks(read_records(path), origin=str(path), default=None if name == "combined" else name)
    elif name == "combined":
        if dataset is not None:
            raise ConfigError("dataset= names one set; for 'combined' give path= AgentFlow's combined file")
        tasks = [t for part in TRAIN_SETS for t in load_train_tasks(part, cache_dir=cache_dir, seed=seed)]
    else:
        rows = load_hub_rows(TRAIN_SETS[name].hub, dataset=dataset, cache_dir=cache_dir)
        tasks = rows_to_tasks(rows, origin=dataset or TRAIN_SETS[name].hub.describe(), default=name)
    if name == "combined":
        random.Random(seed).shuffle(tasks)
    return tasks[:limit] if limit is not None else tasks


def rows_to_tasks(rows: Sequence[Mapping[str, Any]], origin: str, default: str | None = None) -> list[Task]:
    """Records -> tasks. A row's set comes from its ``data_source`` (or ``default``); a row that is neither
    search nor math, or lacks a question or answer, is a :class:`DataError` naming the row."""
    tasks = []
    for i, row in enumerate(rows):
        source = _data_source(row, default)
        kind = _set_of(source, default)
        if kind is None:
            raise DataError(
                f"{origin}: record {i} has data_source {source!r}, neither a search set nor DeepMath; "
                "pass the set's name (nq or deepmath) to load it as one"
            )
        question = _first(row, _QUESTION_COLUMNS, origin, i)
        reward_model = row.get("reward_model")  # verl-style rows keep the gold in reward_model.ground_truth
        if isinstance(reward_model, Mapping) and reward_model.get("ground_truth") is not None:
            row = {"ground_truth": reward_model["ground_truth"], **row}
        answer = _golds(_first(row, _ANSWER_COLUMNS, origin, i))
        if not answer:
            raise DataError(f"{origin}: record {i} has an empty answer")
        spec = TRAIN_SETS[kind]
        tasks.append(
            Task(
                id=str(row.get("id") or Task.content_id(source, question, answer)),
                question=_text(question),
                answer=answer if spec.family == "search" else answer[0],
                family=spec.family,
                metadata={"data_source": source, "train_set": kind, "scorer": spec.scorer},
            )
        )
    return tasks


def _data_source(row: Mapping[str, Any], default: str | None) -> str:
    source = row.get("data_source")
    if source is None and isinstance(row.get("extra_info"), Mapping):
        source = row["extra_info"].get("data_source")
    return str(source if source is not None else default or "").strip().lower()


def _set_of(source: str, default: str | None) -> str | None:
    if source in _SEARCH_SOURCES:
        return "nq"
    if "math" in source:
        return "deepmath"
    return default


def _first(row: Mapping[str, Any], names: Sequence[str], origin: str, index: int) -> Any:
    for name in names:
        if row.get(name) is not None:
            return row[name]
    fields = ", ".join(sorted(map(str, row)))[:300]
    raise DataError(f"{origin}: record {index} has none of the fields {', '.join(names)} (its fields: {fields})")


def _text(value: Any) -> str:
    """A question as text: a chat prompt (list of messages) gives its last user message."""
    if isinstance(value, (list, tuple)) and value and isinstance(value[-1], Mapping):
        users = [m for m in value if m.get("role") == "user"] or list(value)
        return str(users[-1].get("content", "")).strip()
    return str(value).strip()


def _golds(value: Any) -> list[str]:
    if isinstance(value, Mapping) and "target" in value:  # Search-R1 stores {"target": [...]}
        value = value["target"]
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy arrays from Parquet
        value = value.tolist()
    items = value if isinstance(value, (list, tuple)) else [value]
    return [str(v).strip() for v in items if v is not None and str(v).strip()]
