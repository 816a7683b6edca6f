"""Row readers for the paper's benchmarks: AgentFlow JSON folders, the Hugging Face hub, and JSONL/JSON/Parquet files.

Each reader returns plain dicts renamed to canonical keys (``question``, ``answer``, ...) by a column map;
turning rows into :class:`~agentflow_env.types.Task` records is :mod:`benchmarks.paper.rows`' job.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentflow_env.error import ConfigError, DataError, DependencyNotInstalled

__all__ = [
    "DATA_DIR_ENV",
    "ColumnMap",
    "HubSource",
    "apply_columns",
    "find_agentflow_file",
    "load_hub_rows",
    "read_records",
    "resolve_data_dir",
]

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "AGENTFLOW_DATA_DIR"

# canonical key -> one source column, or a list of columns gathered into a list (GPQA's wrong answers)
ColumnMap = Mapping[str, "str | Sequence[str]"]


@dataclass(frozen=True)
class HubSource:
    """Where a benchmark lives on the Hugging Face hub and how its columns map to canonical keys.

    ``keep`` filters rows (GAIA keeps only questions without an attached file).
    """

    dataset: str
    split: str
    columns: Mapping[str, str | Sequence[str]]
    config: str | None = None
    keep: Callable[[dict[str, Any]], bool] | None = field(default=None, compare=False)
    note: str = ""

    def describe(self) -> str:
        config = f" ({self.config})" if self.config else ""
        return f"hub {self.dataset}{config} split {self.split}"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """``data_dir`` if given, else ``$AGENTFLOW_DATA_DIR``, else ``None``."""
    if data_dir is None:
        env = os.environ.get(DATA_DIR_ENV, "").strip()
        if not env:
            return None
        data_dir = env
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise DataError(
            f"data_dir {str(path)!r} is not a directory; point data_dir= (or ${DATA_DIR_ENV}) at a "
            "folder of AgentFlow test files such as bamboogle.json"
        )
    return path


def find_agentflow_file(data_dir: Path, names: Sequence[str]) -> Path:
    """The benchmark's file in an AgentFlow folder: ``<name>.json`` or AgentFlow's ``<name>/data/data.json``."""
    candidates = []
    for name in names:
        candidates += [
            data_dir / f"{name}.json",
            data_dir / f"{name}.jsonl",
            data_dir / name / "data" / "data.json",
            data_dir / name / "data.json",
        ]
    for path in candidates:
        if path.is_file():
            return path
    tried = ", ".join(str(p.relative_to(data_dir)) for p in candidates[:4])
    raise DataError(
        f"no file for this benchmark in {str(data_dir)!r} (looked for {tried}); "
        "pass data_dir= the folder that holds AgentFlow's test files, or use source='hub'"
    )


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All records of a ``.json`` (a list, or a dict of records), ``.jsonl`` or ``.parquet`` file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _read_parquet(path)
    if suffix in (".jsonl", ".ndjson"):
        return _read_jsonl(path)
    if suffix == ".json":
        return _read_json(path)
    raise DataError(f"{path}: unsupported file type {suffix!r}; use .json, .jsonl or .parquet")


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc}); check the path and its permissions") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path}: not UTF-8 text (invalid byte at offset {exc.start}); the file is damaged or binary: "
            "re-download it or save it as UTF-8 JSON"
        ) from None
    if "\x00" in text:
        raise DataError(f"{path}: holds NUL bytes at offset {text.index(chr(0))}; the file is damaged or binary")
    return text


def _loads(text: str, where: str) -> Any:
    """``json.loads`` that turns every failure into a :class:`DataError` (NaN/Infinity are refused)."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise DataError(f"{where}: JSON nested too deeply to read; the file is damaged") from None
    except ValueError as exc:  # 4,300+ digit integers, NaN/Infinity
        raise DataError(f"{where}: {str(exc)[:200]}; fix that value") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} in the JSON (answers and options must be finite)")


def _read_json(path: Path) -> list[dict[str, Any]]:
    text = _read_text(path)
    if not text.strip():
        raise DataError(f"{path}: the file is empty; expected a JSON list of records")
    try:
        data = _loads(text, str(path))
    except DataError:
        # a JSONL file saved with a .json name is common; try it before giving up
        if "\n" in text.strip():
            try:
                return _rows_of_jsonl(path, text)
            except DataError:
                pass
        raise
    if isinstance(data, dict):
        for key in ("data", "records", "examples", "rows"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
        else:
            if data and all(isinstance(v, dict) for v in data.values()):
                data = list(data.values())
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list of records (objects), got {type(data).__name__}")
    return _check_records(path, data)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return _rows_of_jsonl(path, _read_text(path))


def _rows_of_jsonl(path: Path, text: str) -> list[dict[str, Any]]:
    rows: list[Any] = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.strip():
            rows.append(_loads(line, f"{path} line {lineno}"))
    return _check_records(path, rows)


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DependencyNotInstalled("pyarrow", "datasets") from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise DataError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    return _check_records(path, table.to_pylist())


def _check_records(path: Path | str, rows: list[Any]) -> list[dict[str, Any]]:
    if not rows:
        raise DataError(f"{path}: the file holds no records")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"{path}: record {i} is a {type(row).__name__}, not an object with named fields")
    return rows


def apply_columns(
    rows: Sequence[Mapping[str, Any]],
    columns: ColumnMap,
    origin: str,
    required: Sequence[str] = ("question",),
    optional: Sequence[str] = ("id",),
) -> list[dict[str, Any]]:
    """Rename each row's fields to canonical keys; a missing mapped column is a :class:`DataError`.

    Unmapped canonical keys are simply absent; ``required`` ones must be mapped and present;
    ``optional`` ones are skipped when the row lacks their column.
    """
    missing_keys = [k for k in required if k not in columns]
    if missing_keys:
        raise ConfigError(
            f"{origin}: the column map has no entry for {', '.join(missing_keys)}; "
            f"pass columns={{'{missing_keys[0]}': '<column name>', ...}}"
        )
    out = []
    for i, row in enumerate(rows):
        record: dict[str, Any] = {"_row": i}
        for key, col in columns.items():
            if isinstance(col, str):
                if col not in row:
                    if key in optional:
                        continue
                    raise DataError(_missing_column(origin, i, col, row))
                record[key] = row[col]
            else:
                absent = [c for c in col if c not in row]
                if absent:
                    raise DataError(_missing_column(origin, i, absent[0], row))
                record[key] = [row[c] for c in col]
        out.append(record)
    return out


def _missing_column(origin: str, index: int, col: str, row: Mapping[str, Any]) -> str:
    fields = ", ".join(sorted(map(str, row)))[:300]
    return (
        f"{origin}: record {index} has no field {col!r} (its fields: {fields}); "
        f"fix the file or pass a columns= map naming the right field"
    )


def load_hub_rows(
    source: HubSource,
    *,
    dataset: str | None = None,
    config: str | None = None,
    split: str | None = None,
    revision: str | None = None,
    cache_dir: str | None = None,
) -> list[dict[str, Any]]:
    """Rows of a hub dataset (or of a dataset saved with ``save_to_disk``, when ``dataset`` is a folder).

    ``dataset``/``config``/``split`` override the source's; ``keep`` filters the rows; ``cache_dir`` is
    where ``datasets`` caches downloads (its default when ``None``).
    """
    try:
        import datasets
    except ImportError:
        raise DependencyNotInstalled("datasets", "datasets") from None
    name = dataset or source.dataset
    split = split or source.split
    config = config if config is not None else (source.config if dataset is None else None)
    local = Path(name).expanduser()
    try:
        if local.is_dir() and ((local / "dataset_info.json").is_file() or (local / "dataset_dict.json").is_file()):
            ds = datasets.load_from_disk(str(local))
            if isinstance(ds, datasets.DatasetDict):
                if split not in ds:
                    raise DataError(f"{local}: no split {split!r} in the saved dataset (splits: {', '.join(ds)})")
                ds = ds[split]
        else:
            ds = datasets.load_dataset(name, config, split=split, revision=revision, cache_dir=cache_dir)
    except DataError:
        raise
    except Exception as exc:  # datasets raises many types (network, auth, missing split)
        raise DataError(
            f"could not load {name!r} (config {config!r}, split {split!r}) from the Hugging Face hub: "
            f"{type(exc).__name__}: {exc}. Gated sets (GAIA, GPQA) need `huggingface-cli login`; "
            "offline, use data_dir= or path= instead"
        ) from None
    rows = ds.to_list() if hasattr(ds, "to_list") else [dict(r) for r in ds]
    if source.keep is not None:
        before = len(rows)
        rows = [r for r in rows if source.keep(r)]
        logger.info("%s: kept %d of %d rows", source.describe(), len(rows), before)
    return _check_records(f"{name} [{split}]", rows)
