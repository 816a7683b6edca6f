"""Loading a benchmark's tasks: an AgentFlow test folder, the Hugging Face hub, or one file."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from agentflow_env.error import ConfigError, DataError
from agentflow_env.types import ListTaskSource
from benchmarks.loaders import (
    ColumnMap,
    find_agentflow_file,
    load_hub_rows,
    read_records,
    resolve_data_dir,
)
from benchmarks.paper.catalog import BENCHMARKS, PaperBenchmark
from benchmarks.paper.rows import rows_to_tasks

__all__ = ["load_paper_tasks", "paper_size"]

_SOURCES = ("auto", "local", "hub", "file")


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
