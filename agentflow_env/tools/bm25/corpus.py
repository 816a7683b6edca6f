"""Corpus readers (JSONL, Parquet, Hugging Face datasets) and the passage store of an index folder."""

from __future__ import annotations

import json
import mmap
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentflow_env.error import DataError, DependencyNotInstalled
from agentflow_env.tools.bm25.check import (
    OFFSETS_FILE,
    PASSAGES_FILE,
    corrupted,
)
from agentflow_env.tools.bm25.spans import JsonlFile, jsonl_lines

__all__ = [
    "CORPUS_FORMATS",
    "JsonlRow",
    "corpus_items",
    "corpus_length",
    "iter_corpus",
    "iter_dataset",
    "iter_dataset_rows",
    "iter_jsonl",
    "iter_parquet",
    "jsonl_lines",
    "jsonl_rows",
    "parquet_rows",
]

# --------------------------------------------------------------------------------------------- corpus readers


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):  # e.g. KILT's {"paragraph": [...]}
        for key in ("paragraph", "text", "paragraphs"):
            if key in value:
                return _as_text(value[key])
        return " ".join(_as_text(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return " ".join(_as_text(v) for v in value)
    return str(value)


def _passage(row: dict[str, Any], text_field: str, title_field: str | None, id_field: str | None) -> dict[str, str]:
    if text_field not in row:
        raise DataError(
            f"record has no {text_field!r} field (fields: {', '.join(map(str, row))}); "
            f"pass text_field= to name the passage text"
        )
    out = {"title": _as_text(row.get(title_field)) if title_field else "", "text": _as_text(row[text_field])}
    if id_field and row.get(id_field) is not None:
        out["id"] = str(row[id_field])
    return out


@dataclass(frozen=True)
class JsonlRow:
    """Parses a line of :func:`jsonl_lines` into its object; with ``fields``, into a passage.

    A plain picklable function of one line, so an index build can parse lines in its worker processes.
    """

    path: str
    fields: tuple[str, str | None, str | None] | None = None  # text, title and id fields

    def __call__(self, item: tuple[int, str]) -> dict[str, Any]:
        lineno, line = item
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{self.path}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise DataError(f"{self.path}:{lineno}: expected a JSON object per line")
        return row if self.fields is None else _passage(row, *self.fields)


def jsonl_rows(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Raw objects of a JSON-lines file, one line at a time; blank lines are skipped."""
    return map(JsonlRow(str(path)), jsonl_lines(path))


def parquet_rows(
    path: str | os.PathLike[str], columns: Sequence[str] | None = None, batch_size: int = 8192
) -> Iterator[dict[str, Any]]:
    """Raw rows of a Parquet file, one record batch at a time (only ``columns`` when given and present)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the install
        raise DependencyNotInstalled("pyarrow", "search") from None
    path = Path(path)
    if not path.is_file():
        raise DataError(f"corpus file not found: {path}")
    pf = pq.ParquetFile(path)
    names = pf.schema_arrow.names
    keep = [c for c in columns if c in names] if columns is not None else None
    for batch in pf.iter_batches(batch_size=batch_size, columns=keep):
        yield from batch.to_pylist()


def iter_dataset_rows(
    source: Any, *, split: str = "train", streaming: bool = True, **load_kwargs: Any
) -> Iterator[dict[str, Any]]:
    """Raw rows of a ``datasets`` corpus: a Dataset/IterableDataset(Dict), a ``save_to_disk`` folder, or a hub id."""
    rows: Iterable[dict[str, Any]]
    if isinstance(source, (str, os.PathLike)):
        try:
            import datasets
        except ImportError:  # pragma: no cover - depends on the install
            raise DependencyNotInstalled("datasets", "datasets") from None
        local = Path(source)
        if (local / "dataset_info.json").is_file() or (local / "dataset_dict.json").is_file():
            loaded = datasets.load_from_disk(str(local))
            rows = loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
        elif local.is_file() and local.suffix == ".parquet":  # read directly: datasets' builders are slow to start
            rows = parquet_rows(local)
        elif local.is_file() and local.suffix == ".jsonl":
            rows = jsonl_rows(local)
        elif local.is_file() and local.suffix in (".json", ".csv"):
            builder = "csv" if local.suffix == ".csv" else "json"
            rows = datasets.load_dataset(builder, data_files=str(local), split="train", streaming=streaming)
        else:
            rows = datasets.load_dataset(str(source), split=split, streaming=streaming, **load_kwargs)
    elif hasattr(source, "keys") and split in source.keys():  # a DatasetDict
        rows = source[split]
    else:
        rows = source
    yield from rows


CORPUS_FORMATS = ("jsonl", "parquet", "dataset")


def _corpus_format(source: Any, fmt: str | None) -> str:
    """``fmt``, or by default the format a file's suffix names (``.jsonl``, ``.parquet``), else ``dataset``."""
    if fmt is not None:
        return fmt
    suffix = Path(source).suffix if isinstance(source, (str, os.PathLike)) else ""
    return {".jsonl": "jsonl", ".parquet": "parquet"}.get(suffix, "dataset")


def iter_corpus(
    source: Any,
    *,
    fmt: str | None = None,
    text_field: str = "text",
    title_field: str | None = "title",
    id_field: str | None = "id",
    split: str = "train",
    streaming: bool = True,
    batch_size: int = 8192,
    **load_kwargs: Any,
) -> Iterator[dict[str, str]]:
    """Stream ``{title, text, id}`` passages from a corpus, whatever its format.

    ``fmt``: ``jsonl`` (one object per line, e.g. KILT-like ``{title, text}``), ``parquet`` (one record batch
    at a time) or ``dataset`` (a Dataset/IterableDataset, a ``save_to_disk`` folder, or a hub id); by default
    a ``.jsonl``/``.parquet`` suffix says, else a dataset.
    """
    fmt = _corpus_format(source, fmt)
    rows: Iterable[dict[str, Any]]
    if fmt == "jsonl":
        rows = jsonl_rows(source)
    elif fmt == "parquet":
        rows = parquet_rows(source, [c for c in (text_field, title_field, id_field) if c], batch_size)
    elif fmt == "dataset":
        rows = iter_dataset_rows(source, split=split, streaming=streaming, **load_kwargs)
    else:
        raise DataError(f"unknown corpus format {fmt!r}; use one of: {', '.join(CORPUS_FORMATS)}")
    for row in rows:
        yield _passage(row, text_field, title_field, id_field)


def corpus_length(source: Any, split: str = "train") -> int | None:
    """The number of rows of an in-memory dataset (for a progress bar); None for files and streams."""
    if isinstance(source, (str, os.PathLike)) or not hasattr(source, "__len__"):
        return None
    return len(source[split]) if hasattr(source, "keys") else len(source)


def corpus_items(
    source: Any,
    *,
    fmt: str | None = None,
    text_field: str = "text",
    title_field: str | None = "title",
    id_field: str | None = "id",
    **options: Any,
) -> tuple[Iterable[Any], Callable[[Any], dict[str, str]] | None]:
    """:func:`iter_corpus`'s passages as ``(items, decode)``: a JSON-lines file gives its raw lines and the
    function that parses one into a passage (so a parallel build parses in its workers); other formats give the
    passages and ``None``."""
    if _corpus_format(source, fmt) == "jsonl":
        return JsonlFile(str(source)), JsonlRow(str(source), (text_field, title_field, id_field))
    rows = iter_corpus(source, fmt=fmt, text_field=text_field, title_field=title_field, id_field=id_field, **options)
    return rows, None


def iter_jsonl(path: str | os.PathLike[str], **fields: Any) -> Iterator[dict[str, str]]:
    """Stream passages from a JSON-lines file (:func:`iter_corpus` with ``fmt="jsonl"``)."""
    return iter_corpus(path, fmt="jsonl", **fields)


def iter_parquet(path: str | os.PathLike[str], **fields: Any) -> Iterator[dict[str, str]]:
    """Stream passages from a Parquet file, one record batch at a time (:func:`iter_corpus`, ``fmt="parquet"``)."""
    return iter_corpus(path, fmt="parquet", **fields)


def iter_dataset(source: Any, **fields: Any) -> Iterator[dict[str, str]]:
    """Stream passages from a ``datasets`` corpus (:func:`iter_corpus` with ``fmt="dataset"``)."""
    return iter_corpus(source, fmt="dataset", **fields)


# --------------------------------------------------------------------------------------------- passage store


class _PassageStore:
    """Passages by row number: in memory after a build, or read from ``passages.jsonl`` through an mmap.

    The file is mapped on first use and again after :meth:`close`, so a closed index still answers.
    """

    def __init__(
        self,
        records: list[dict[str, str]] | None = None,
        path: Path | None = None,
        offsets: np.ndarray | None = None,
    ):
        self._records = records
        self._path = path
        self._mm: mmap.mmap | None = None
        self._lock = threading.Lock()
        self._offsets: np.ndarray | None = None
        if path is not None:
            # a plain ndarray view of the mapped file: indexing an np.memmap costs a Python object per lookup
            self._offsets = np.asarray(np.load(path / OFFSETS_FILE, mmap_mode="r") if offsets is None else offsets)

    def __len__(self) -> int:
        if self._records is not None:
            return len(self._records)
        assert self._offsets is not None
        return len(self._offsets) - 1

    def _map(self) -> mmap.mmap:
        with self._lock:
            if self._mm is None:
                assert self._path is not None
                with open(self._path / PASSAGES_FILE, "rb") as fh:  # the mapping outlives the descriptor
                    self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            return self._mm

    def __getitem__(self, i: int) -> dict[str, str]:
        if self._records is not None:
            return self._records[i]
        assert self._offsets is not None
        mm = self._mm if self._mm is not None else self._map()
        try:
            record = json.loads(mm[int(self._offsets[i]) : int(self._offsets[i + 1])])
        except (ValueError, UnicodeDecodeError):
            record = None
        if not isinstance(record, dict):
            assert self._path is not None
            raise corrupted(self._path, f"passage {i} in {PASSAGES_FILE} is not a JSON object")
        return record

    def __iter__(self) -> Iterator[dict[str, str]]:
        return (self[i] for i in range(len(self)))

    def close(self) -> None:
        with self._lock:
            if self._mm is not None:
                self._mm.close()
                self._mm = None


def _write_passages(records: Iterable[dict[str, str]], out: Path) -> None:
    offsets = [0]
    with open(out / PASSAGES_FILE, "wb") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False).encode("utf-8") + b"\n")
            offsets.append(fh.tell())
    np.save(out / OFFSETS_FILE, np.asarray(offsets, dtype=np.int64))
