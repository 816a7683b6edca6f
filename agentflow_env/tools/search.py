"""BM25 search over a local corpus: a streaming index builder, an mmap-able index, and the search tool.

Scores are precomputed into a term-major sparse matrix in bm25s's on-disk layout; queries run on bm25s's numba backend.
"""

from __future__ import annotations

import array
import json
import logging
import mmap
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from agentflow_env.error import DataError, DependencyNotInstalled, ToolError
from agentflow_env.tools.base import BaseTool
from agentflow_env.tools.index_check import (
    check_structure,
    corrupted,
    file_checksums,
    settings_checksum,
    verify_checksums,
)
from agentflow_env.types import ToolResult

__all__ = [
    "BM25Index",
    "BM25SearchTool",
    "SearchHit",
    "format_hits",
    "iter_dataset",
    "iter_dataset_rows",
    "iter_jsonl",
    "iter_parquet",
    "jsonl_rows",
    "parquet_rows",
    "tokenize",
]

logger = logging.getLogger(__name__)

FORMAT_NAME = "agentflow-bm25"
FORMAT_VERSION = 1
META_FILE = "agentflow_index.json"
PASSAGES_FILE = "passages.jsonl"
OFFSETS_FILE = "passages.offsets.npy"
# bm25s's own file names, so ``bm25s.BM25.load(dir)`` reads our indexes too
DATA_FILE, INDICES_FILE, INDPTR_FILE = "data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy"
VOCAB_FILE, PARAMS_FILE = "vocab.index.json", "params.index.json"

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Common English function words: they match nearly every passage and only add noise to BM25.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
    off on once only or other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves""".split()
)


def _light_stem(word: str) -> str:
    """Fold the commonest English plural endings so ``cities``/``city`` and ``boxes``/``box`` match."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


class _Tokenizer:
    """Lowercase words (letters and digits), stopwords dropped, plurals folded; memoised per word."""

    def __init__(self, stopwords: bool = True, stem: bool = True):
        self.stopwords = stopwords
        self.stem = stem
        self._cache: dict[str, str | None] = {}

    def _norm(self, word: str) -> str | None:
        if self.stopwords and word in STOPWORDS:
            return None
        return _light_stem(word) if self.stem else word

    def __call__(self, text: str) -> list[str]:
        cache = self._cache
        out = []
        for word in _WORD.findall(text.lower()):
            tok = cache.get(word, "")
            if tok == "":
                tok = self._norm(word)
                if len(cache) < 2_000_000:  # bound the memo on huge corpora
                    cache[word] = tok
            if tok is not None:
                out.append(tok)
        return out


_DEFAULT_TOKENIZER = _Tokenizer()


def tokenize(text: str, *, stopwords: bool = True, stem: bool = True) -> list[str]:
    """The tokens BM25 indexes: lowercase words, stopwords dropped, plural endings folded."""
    if stopwords and stem:
        return _DEFAULT_TOKENIZER(text)
    return _Tokenizer(stopwords, stem)(text)


@dataclass
class SearchHit:
    """One retrieved passage: 1-based rank, BM25 score, and the passage itself."""

    rank: int
    score: float
    title: str
    text: str
    id: str

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "score": self.score, "title": self.title, "text": self.text, "id": self.id}


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


def jsonl_rows(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Raw objects of a JSON-lines file, one line at a time; blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"corpus file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object per line")
            yield row


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


def iter_jsonl(
    path: str | os.PathLike[str],
    *,
    text_field: str = "text",
    title_field: str | None = "title",
    id_field: str | None = "id",
) -> Iterator[dict[str, str]]:
    """Stream passages from a JSON-lines file (one object per line, e.g. KILT-like ``{title, text}``)."""
    for row in jsonl_rows(path):
        yield _passage(row, text_field, title_field, id_field)


def iter_parquet(
    path: str | os.PathLike[str],
    *,
    text_field: str = "text",
    title_field: str | None = "title",
    id_field: str | None = "id",
    batch_size: int = 8192,
) -> Iterator[dict[str, str]]:
    """Stream passages from a Parquet file, one record batch at a time."""
    wanted = [c for c in (text_field, title_field, id_field) if c]
    for row in parquet_rows(path, wanted, batch_size):
        yield _passage(row, text_field, title_field, id_field)


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


def iter_dataset(
    source: Any,
    *,
    split: str = "train",
    text_field: str = "text",
    title_field: str | None = "title",
    id_field: str | None = "id",
    streaming: bool = True,
    **load_kwargs: Any,
) -> Iterator[dict[str, str]]:
    """Stream passages from a ``datasets`` corpus: a Dataset/IterableDataset, a saved folder, or a hub id."""
    for row in iter_dataset_rows(source, split=split, streaming=streaming, **load_kwargs):
        yield _passage(row, text_field, title_field, id_field)


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


# --------------------------------------------------------------------------------------------- streaming builder


@dataclass
class _Spool:
    """Per-chunk postings (doc, term, tf), sorted by term then doc; in memory or as .npy files in ``folder``."""

    folder: Path | None
    chunks: list[Any] = field(default_factory=list)

    def add(self, docs: np.ndarray, terms: np.ndarray, tfs: np.ndarray) -> None:
        if self.folder is None:
            self.chunks.append((docs, terms, tfs))
            return
        stem = self.folder / f"chunk{len(self.chunks):06d}.npz"
        np.savez(stem, docs=docs, terms=terms, tfs=tfs)
        self.chunks.append(stem)

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for chunk in self.chunks:
            if isinstance(chunk, Path):
                with np.load(chunk) as z:
                    yield z["docs"], z["terms"], z["tfs"]
            else:
                yield chunk


class _IndexWriter:
    """Builds the BM25 score matrix in two passes without holding the corpus.

    Pass 1 tokenizes chunk by chunk, spooling each chunk's postings and writing passages out; pass 2 turns the
    spool into the term-major (CSC) score matrix once document frequencies and the mean length are known.
    """

    def __init__(self, out_dir: Path | None, *, k1: float, b: float, stopwords: bool, stem: bool):
        self.out_dir = out_dir
        self.k1, self.b = k1, b
        self.tokenizer = _Tokenizer(stopwords, stem)
        self.settings = {"stopwords": stopwords, "stem": stem}
        self.vocab: dict[str, int] = {}
        self.df = np.zeros(1 << 12, dtype=np.int64)
        self.doc_lens: list[np.ndarray] = []
        self.n_docs = 0
        self._tmp = tempfile.mkdtemp(prefix="bm25spool-", dir=out_dir) if out_dir is not None else None
        self.spool = _Spool(Path(self._tmp) if self._tmp else None)
        self.records: list[dict[str, str]] = []
        self._offsets = array.array("q", [0])  # 8 bytes a passage, not a Python int each
        self._fh = open(out_dir / PASSAGES_FILE, "wb") if out_dir is not None else None

    def add_chunk(self, passages: Sequence[dict[str, Any]]) -> None:
        vocab, tok = self.vocab, self.tokenizer
        flat: list[int] = []
        lens = np.empty(len(passages), dtype=np.int64)
        for i, p in enumerate(passages):
            rec = self._record(p, self.n_docs + i)
            ids = [vocab.setdefault(t, len(vocab)) for t in tok(f"{rec['title']} {rec['text']}")]
            flat.extend(ids)
            lens[i] = len(ids)
            self._keep(rec)
        n_vocab = max(len(vocab), 1)
        local = np.repeat(np.arange(len(passages), dtype=np.int64), lens)
        keys, tfs = np.unique(local * n_vocab + np.asarray(flat, dtype=np.int64), return_counts=True)
        docs, terms = np.divmod(keys, n_vocab)
        order = np.argsort(terms, kind="stable")  # term-major, docs stay ascending within a term
        if len(self.df) < n_vocab:
            self.df = np.concatenate([self.df, np.zeros(max(n_vocab, 2 * len(self.df)) - len(self.df), np.int64)])
        self.df[:n_vocab] += np.bincount(terms, minlength=n_vocab)
        self.spool.add(
            (docs[order] + self.n_docs).astype(np.int32), terms[order].astype(np.int32), tfs[order].astype(np.float32)
        )
        self.doc_lens.append(lens.astype(np.int32))
        self.n_docs += len(passages)

    def _record(self, p: dict[str, Any], row: int) -> dict[str, str]:
        if not isinstance(p, dict) or "text" not in p:
            raise DataError(f"passage {row} must be a dict with 'text' (and 'title'); got {type(p).__name__}")
        pid = p.get("id")
        return {
            "id": str(row) if pid is None else str(pid),
            "title": _as_text(p.get("title")),
            "text": _as_text(p["text"]),
        }

    def _keep(self, rec: dict[str, str]) -> None:
        if self._fh is None:
            self.records.append(rec)
        else:
            self._fh.write(json.dumps(rec, ensure_ascii=False).encode("utf-8") + b"\n")
            self._offsets.append(self._fh.tell())

    def finish(self) -> BM25Index:
        try:
            return self._finish()
        finally:
            self.cleanup()

    def cleanup(self) -> None:
        """Close the passages file and delete the spool (after the build, or when it failed)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _alloc(self, name: str, dtype: Any, n: int) -> np.ndarray:
        if self.out_dir is None:
            return np.zeros(n, dtype=dtype)
        return np.lib.format.open_memmap(self.out_dir / name, mode="w+", dtype=dtype, shape=(n,))

    def _finish(self) -> BM25Index:
        if self.n_docs == 0:
            raise DataError("the corpus is empty: give at least one passage with 'title' and 'text'")
        n_vocab = len(self.vocab)
        df = self.df[:n_vocab]
        doc_lens = np.concatenate(self.doc_lens).astype(np.float32)
        avgdl = max(float(doc_lens.mean()), 1e-9)
        idf = np.log1p((self.n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)  # Lucene's idf
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        data = self._alloc(DATA_FILE, np.float32, int(indptr[-1]))
        indices = self._alloc(INDICES_FILE, np.int32, int(indptr[-1]))
        cursor = indptr[:-1].copy()
        norm = (self.k1 * (1 - self.b + self.b * doc_lens / avgdl)).astype(np.float32)
        for docs, terms, tfs in self.spool:
            if len(terms) == 0:
                continue
            uniq, starts, counts = np.unique(terms, return_index=True, return_counts=True)
            pos = cursor[terms] + (np.arange(len(terms)) - np.repeat(starts, counts))
            data[pos] = idf[terms] * tfs / (tfs + norm[docs])
            indices[pos] = docs
            cursor[uniq] += counts
        params = {"k1": self.k1, "b": self.b, "n_docs": self.n_docs, "avgdl": avgdl, **self.settings}
        if self.out_dir is None:
            return BM25Index(data, indices, indptr, self.vocab, _PassageStore(self.records), params)
        np.save(self.out_dir / INDPTR_FILE, indptr)
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        for arr in (data, indices):
            if isinstance(arr, np.memmap):
                arr.flush()
        np.save(self.out_dir / OFFSETS_FILE, np.frombuffer(self._offsets, dtype=np.int64))
        del data, indices
        _write_meta(self.out_dir, self.vocab, params)
        return BM25Index.load(self.out_dir, mmap=True)


def _write_meta(out: Path, vocab: dict[str, int], params: dict[str, Any]) -> None:
    """Write the vocabulary, bm25s's params and our metadata, with the checksum of every file of the folder."""
    with open(out / VOCAB_FILE, "w", encoding="utf-8") as fh:
        json.dump(vocab, fh, ensure_ascii=False)
    bm25s_params = {
        "k1": params["k1"],
        "b": params["b"],
        "delta": 0.5,
        "method": "lucene",
        "idf_method": "lucene",
        "dtype": "float32",
        "int_dtype": "int32",
        "num_docs": params["n_docs"],
        "backend": "numba",
    }
    (out / PARAMS_FILE).write_text(json.dumps(bm25s_params, indent=2))
    meta = {"format": FORMAT_NAME, "version": FORMAT_VERSION, **params}
    meta["checksums"] = {"files": file_checksums(out, list(_INDEX_FILES)), "settings": settings_checksum(meta)}
    (out / META_FILE).write_text(json.dumps(meta, indent=2))


# every file of an index folder but the metadata, which holds their checksums
_INDEX_FILES = (DATA_FILE, INDICES_FILE, INDPTR_FILE, VOCAB_FILE, PARAMS_FILE, PASSAGES_FILE, OFFSETS_FILE)
_ARRAY_FILES = {"data": DATA_FILE, "indices": INDICES_FILE, "indptr": INDPTR_FILE, "offsets": OFFSETS_FILE}
_warned_unchecked: set[Path] = set()


def _read_meta(folder: Path) -> dict[str, Any]:
    meta_path = folder / META_FILE
    if not meta_path.is_file():
        raise DataError(
            f"{folder} is not a BM25 index folder (no {META_FILE}); build one with "
            f"BM25Index.build(...).save(path) or `agentflow-env build-index`"
        )
    try:
        meta = json.loads(meta_path.read_bytes())
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise corrupted(folder, f"{META_FILE} is not valid JSON") from None
    if not isinstance(meta, dict):
        raise corrupted(folder, f"{META_FILE} should hold a JSON object")
    if (
        meta.get("format") != FORMAT_NAME
        or not isinstance(meta.get("version"), int)
        or meta["version"] > FORMAT_VERSION
    ):
        raise DataError(
            f"{meta_path}: unsupported index format {meta.get('format')!r} "
            f"v{meta.get('version')}; rebuild the index with this version of agentflow-env"
        )
    return meta


def _read_arrays(folder: Path, mode: Literal["r"] | None) -> dict[str, np.ndarray]:
    arrays = {}
    for key, name in _ARRAY_FILES.items():
        path = folder / name
        if not path.is_file():
            raise corrupted(folder, f"the file {name} is missing")
        try:
            arrays[key] = np.load(path, mmap_mode=mode, allow_pickle=False)
        except Exception as exc:  # numpy's header parser raises many kinds on garbage
            raise corrupted(folder, f"{name} is not a readable .npy array ({type(exc).__name__}: {exc})") from None
    return arrays


def _read_vocab(folder: Path) -> Any:
    path = folder / VOCAB_FILE
    if not path.is_file():
        raise corrupted(folder, f"the file {VOCAB_FILE} is missing")
    try:
        return json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise corrupted(folder, f"{VOCAB_FILE} is not valid JSON") from None


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# --------------------------------------------------------------------------------------------- the index


class BM25Index:
    """A BM25 index over passages (``title``, ``text``, ``id``) with bm25s's numba retrieval.

    Build with :meth:`build` (any iterable of dicts), :meth:`from_jsonl`, :meth:`from_parquet` or
    :meth:`from_dataset`; pass ``out_dir=`` to stream a corpus larger than memory straight to disk.
    """

    def __init__(
        self,
        data: np.ndarray,
        indices: np.ndarray,
        indptr: np.ndarray,
        vocab: dict[str, int],
        store: _PassageStore,
        params: dict[str, Any],
        path: Path | None = None,
    ):
        self.params = dict(params)
        self.vocab = vocab
        self.store = store
        self.path = path
        self._tokenizer = _Tokenizer(bool(params.get("stopwords", True)), bool(params.get("stem", True)))
        for arr in (data, indices, indptr):  # read-only everywhere: one compiled kernel signature, not two
            if arr.flags.writeable:
                arr.setflags(write=False)
        self.data, self.indices, self.indptr = data, indices, indptr
        self._local = threading.local()  # per-thread scratch buffers for the kernel

    # ---- building
    @classmethod
    def build(
        cls,
        passages: Iterable[dict[str, Any]],
        *,
        show_progress: bool = False,
        out_dir: str | os.PathLike[str] | None = None,
        chunk_size: int = 20_000,
        k1: float = 1.5,
        b: float = 0.75,
        stopwords: bool = True,
        stem: bool = True,
        total: int | None = None,
    ) -> BM25Index:
        """Index ``passages`` (dicts with ``title`` and ``text``, optional ``id``), streaming in chunks.

        With ``out_dir`` the postings spool to disk and the matrix is written there memory-mapped, so only one
        chunk of passages is ever in memory; the returned index is loaded from ``out_dir`` with mmap.
        """
        from tqdm.auto import tqdm

        out = None
        if out_dir is not None:
            out = Path(out_dir)
            out.mkdir(parents=True, exist_ok=True)
        writer = _IndexWriter(out, k1=k1, b=b, stopwords=stopwords, stem=stem)
        if total is None and hasattr(passages, "__len__"):
            total = len(passages)  # type: ignore[arg-type]
        try:
            with tqdm(total=total, disable=not show_progress, unit="passage", desc="BM25 index") as bar:
                for chunk in _chunks(passages, chunk_size):
                    writer.add_chunk(chunk)
                    bar.update(len(chunk))
        except BaseException:
            writer.cleanup()
            raise
        index = writer.finish()
        logger.info("BM25 index: %d passages, %d terms", len(index), len(index.vocab))
        return index

    @classmethod
    def from_jsonl(
        cls,
        path: str | os.PathLike[str],
        *,
        text_field: str = "text",
        title_field: str | None = "title",
        id_field: str | None = "id",
        **build_kwargs: Any,
    ) -> BM25Index:
        """Index a JSON-lines corpus, one ``{title, text}`` object per line."""
        rows = iter_jsonl(path, text_field=text_field, title_field=title_field, id_field=id_field)
        return cls.build(rows, **build_kwargs)

    @classmethod
    def from_parquet(
        cls,
        path: str | os.PathLike[str],
        *,
        text_field: str = "text",
        title_field: str | None = "title",
        id_field: str | None = "id",
        **build_kwargs: Any,
    ) -> BM25Index:
        """Index a Parquet corpus, read one record batch at a time."""
        rows = iter_parquet(path, text_field=text_field, title_field=title_field, id_field=id_field)
        return cls.build(rows, **build_kwargs)

    @classmethod
    def from_dataset(
        cls,
        source: Any,
        *,
        split: str = "train",
        text_field: str = "text",
        title_field: str | None = "title",
        id_field: str | None = "id",
        streaming: bool = True,
        **build_kwargs: Any,
    ) -> BM25Index:
        """Index a ``datasets`` corpus: a Dataset object, a ``save_to_disk`` folder, or a hub id (streamed)."""
        if "total" not in build_kwargs and hasattr(source, "__len__") and not isinstance(source, (str, os.PathLike)):
            build_kwargs["total"] = len(source[split]) if hasattr(source, "keys") else len(source)
        rows = iter_dataset(
            source, split=split, text_field=text_field, title_field=title_field, id_field=id_field, streaming=streaming
        )
        return cls.build(rows, **build_kwargs)

    # ---- persistence
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the index to folder ``path`` (bm25s's array files plus the passages and our metadata)."""
        out = Path(path)
        if self.path is not None and out.resolve() == self.path.resolve():
            return out
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / DATA_FILE, np.asarray(self.data))
        np.save(out / INDICES_FILE, np.asarray(self.indices))
        np.save(out / INDPTR_FILE, np.asarray(self.indptr))
        _write_passages(self.store, out)
        _write_meta(out, self.vocab, self.params)
        return out

    @classmethod
    def load(cls, path: str | os.PathLike[str], mmap: bool = True, verify: bool = True) -> BM25Index:
        """Open an index folder written by :meth:`save` or ``build(out_dir=...)``; arrays are memory-mapped.

        The folder is checked before use: with ``verify`` every file against the checksum written when it was
        built, and always the structure the retrieval relies on (shapes, dtypes, ids in range, a monotone
        ``indptr``, positive finite scores). A damaged folder raises :class:`~agentflow_env.error.IndexCorrupted`
        naming the folder and the file, never crashes the process.
        """
        folder = Path(path)
        meta = _read_meta(folder)
        checked = verify and verify_checksums(folder, meta, _INDEX_FILES)
        if verify and not checked and folder.resolve() not in _warned_unchecked:
            _warned_unchecked.add(folder.resolve())
            logger.warning("%s was built without checksums: only its structure is checked; rebuild to add them", folder)
        mode: Literal["r"] | None = "r" if mmap else None
        arrays = _read_arrays(folder, mode)
        vocab = _read_vocab(folder)
        passages = folder / PASSAGES_FILE
        if not passages.is_file():
            raise corrupted(folder, f"the file {PASSAGES_FILE} is missing")
        names = {**_ARRAY_FILES, "vocab": VOCAB_FILE}
        check_structure(folder, meta, arrays, vocab, passages.stat().st_size, names)
        params = {k: v for k, v in meta.items() if k != "checksums"}
        store = _PassageStore(path=folder, offsets=arrays["offsets"])
        return cls(arrays["data"], arrays["indices"], arrays["indptr"], vocab, store, params, path=folder)

    # ---- querying
    def __len__(self) -> int:
        return int(self.params["n_docs"])

    def tokenize(self, text: str) -> list[str]:
        return self._tokenizer(text)

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The ``k`` best passages for ``query`` (fewer if fewer passages share a word with it)."""
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int = 5) -> list[list[SearchHit]]:
        """Top-``k`` hits for each query, all scored in one numba call."""
        if not queries:
            return []
        k = max(1, min(int(k), len(self)))
        vocab = self.vocab
        ids = [[vocab[t] for t in self._tokenizer(q) if t in vocab] for q in queries]
        qptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum([len(q) for q in ids], out=qptr[1:])
        qflat = np.fromiter((t for q in ids for t in q), dtype=np.int64, count=int(qptr[-1]))
        scores, docs = _kernel()(qflat, qptr, self.data, self.indices, self.indptr, *self._buffers(), k)
        return [self._hits(d, s) for d, s in zip(docs, scores, strict=True)]

    def _buffers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scratch scores (kept all-zero between calls), touched doc ids and their scores, one set per thread."""
        bufs = getattr(self._local, "bufs", None)
        if bufs is None:
            n = len(self)
            bufs = (np.zeros(n, dtype=np.float32), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.float32))
            self._local.bufs = bufs
        return bufs

    def _hits(self, docs: np.ndarray, scores: np.ndarray) -> list[SearchHit]:
        hits: list[SearchHit] = []
        for doc, score in zip(docs.tolist(), scores.tolist(), strict=True):
            if doc < 0 or score <= 0.0:  # fewer than k passages matched
                break
            rec = self.store[doc]
            hits.append(
                SearchHit(
                    len(hits) + 1, float(score), rec.get("title", ""), rec.get("text", ""), str(rec.get("id", doc))
                )
            )
        return hits

    def close(self) -> None:
        self.store.close()

    def __repr__(self) -> str:
        where = f", path={str(self.path)!r}" if self.path else ""
        return f"BM25Index(passages={len(self)}, terms={len(self.vocab)}{where})"


_sorted_top_k: Any = None  # bm25s's numba heap top-k, bound when the kernel is first compiled
_KERNEL: Any = None


def _retrieve_kernel(qflat, qptr, data, indices, indptr, scratch, touched, values, k):  # type: ignore[no-untyped-def]
    """Score each query by scattering its terms' posting lists into ``scratch``, then take the top ``k``.

    bm25s's own path zero-fills and scans a dense ``num_docs`` vector per query. Here, when the postings are few
    next to the corpus, a second pass over them collects just the touched documents for the top-k (cost follows
    the postings, not the corpus size); otherwise the dense vector goes to the top-k. ``scratch`` is all zeros
    on entry and on exit; every BM25 weight is > 0, so a zero means "not touched".
    """
    nq = len(qptr) - 1
    num_docs = len(scratch)
    out_scores = np.zeros((nq, k), dtype=np.float32)
    out_docs = np.full((nq, k), -1, dtype=np.int64)
    for q in range(nq):
        total = 0
        for t in range(qptr[q], qptr[q + 1]):
            term = qflat[t]
            total += indptr[term + 1] - indptr[term]
            for j in range(indptr[term], indptr[term + 1]):
                scratch[indices[j]] += data[j]
        if total == 0:
            continue
        if total * 8 < num_docs:
            n = 0
            for t in range(qptr[q], qptr[q + 1]):
                term = qflat[t]
                for j in range(indptr[term], indptr[term + 1]):
                    doc = indices[j]
                    if scratch[doc] != 0.0:
                        values[n] = scratch[doc]
                        touched[n] = doc
                        scratch[doc] = 0.0
                        n += 1
            kk = min(k, n)
            top_values, top_pos = _sorted_top_k(values[:n], kk, True)
            for r in range(kk):
                out_scores[q, r] = top_values[r]
                out_docs[q, r] = touched[top_pos[r]]
        else:
            kk = min(k, num_docs)
            top_values, top_pos = _sorted_top_k(scratch, kk, True)
            for r in range(kk):
                out_scores[q, r] = top_values[r]
                out_docs[q, r] = top_pos[r]
            scratch[:] = 0.0
    return out_scores, out_docs


def _kernel() -> Any:
    """Compile (or load from numba's on-disk cache) the retrieval kernel on first use."""
    global _KERNEL, _sorted_top_k
    if _KERNEL is None:
        try:
            import numba
        except ImportError:  # pragma: no cover - depends on the install
            raise DependencyNotInstalled("numba", "search") from None
        try:
            import bm25s
        except ImportError:  # pragma: no cover - depends on the install
            raise DependencyNotInstalled("bm25s", "search") from None
        try:
            from bm25s.numba.selection import _numba_sorted_top_k
        except ImportError:  # pragma: no cover - depends on the install
            raise ToolError(
                f"bm25s {getattr(bm25s, '__version__', '?')} has no numba top-k "
                "(bm25s.numba.selection._numba_sorted_top_k); install bm25s>=0.2.10,<0.4"
            ) from None
        _sorted_top_k = _numba_sorted_top_k
        _KERNEL = numba.njit(cache=True, nogil=True)(_retrieve_kernel)
    return _KERNEL


# --------------------------------------------------------------------------------------------- rendering + tool


def format_hits(hits: Sequence[SearchHit], max_chars: int = 2000) -> str:
    """Numbered passages with titles; the whole text is trimmed to ``max_chars`` with a visible notice."""
    if not hits:
        return "No passage matched the query; try other keywords (names, dates, distinctive words)."
    blocks = []
    for hit in hits:
        head = f"[{hit.rank}] {hit.title}".rstrip() if hit.title else f"[{hit.rank}]"
        blocks.append(f"{head}\n{hit.text.strip()}")
    text = "\n\n".join(blocks)
    if len(text) <= max_chars:
        return text
    notice = f"\n... [cut: results trimmed to {max_chars} of {len(text)} characters]"
    keep = max(0, max_chars - len(notice))
    return text[:keep].rstrip() + notice


class BM25SearchTool(BaseTool):
    """Keyword (BM25) search over a local passage corpus; returns numbered passages with titles.

    An index folder is checked when first opened (see :meth:`BM25Index.load`); ``verify=False`` skips only the
    checksums, for a very large index on a slow disk. A damaged folder makes every call answer with an error.
    """

    name = "Local_Search_Tool"
    description = (
        "Searches a local collection of passages with BM25 keyword matching and returns the best "
        "passages, numbered, with their titles. Use short keyword queries naming the entity and fact."
    )
    input_spec = "a search query (keywords or a short question)"
    examples = ("capital city of Australia", "who founded the Acme Corporation")
    env_var = "AGENTFLOW_SEARCH_INDEX"

    def __init__(
        self,
        index: BM25Index | None = None,
        *,
        index_path: str | os.PathLike[str] | None = None,
        passages: Iterable[dict[str, Any]] | None = None,
        top_k: int = 3,
        max_chars: int = 2000,
        name: str | None = None,
        description: str | None = None,
        verify: bool = True,
    ):
        if name is not None:
            self.name = name
        if description is not None:
            self.description = description
        self.top_k = max(1, int(top_k))
        self.max_chars = max(80, int(max_chars))
        self._index = index
        self._owns_index = False  # an index handed in may be shared (e.g. cached per world): never close it
        self._index_path = Path(index_path) if index_path is not None else None
        self._passages = passages
        self._verify = verify  # check an index folder's checksums on opening (its structure is always checked)
        self._load_error: str | None = None

    @property
    def index(self) -> BM25Index | None:
        """The index, built or opened on first use."""
        if self._index is None and self._load_error is None:
            try:
                self._index = self._open()
                self._owns_index = self._index is not None
            except Exception as exc:  # reported in run(), never raised there
                self._load_error = f"{type(exc).__name__}: {exc}"
        return self._index

    def _default_path(self) -> Path | None:
        if self._index_path is not None:
            return self._index_path
        env = os.environ.get(self.env_var)
        return Path(env) if env else None

    def _open(self) -> BM25Index | None:
        if self._passages is not None:
            passages, self._passages = self._passages, None
            return BM25Index.build(passages)
        path = self._default_path()
        return BM25Index.load(path, verify=self._verify) if path is not None else None

    def _missing_message(self) -> str:
        return (
            f"Error: {self.name} has no corpus. Give it one with make_tool('search', index=BM25Index...), "
            f"passages=[{{'title': ..., 'text': ...}}], index_path=DIR, or set ${self.env_var} to an index "
            f"folder (build one with `agentflow-env build-index`)."
        )

    def _run(self, command: str, timeout: float) -> ToolResult:
        index = self.index
        if index is None:
            if self._load_error:
                msg = f"Error: {self.name} could not open its index ({self._load_error})"
                return ToolResult(text=msg, ok=False, error=self._load_error)
            return ToolResult(text=self._missing_message(), ok=False, error="no search index")
        query = " ".join(command.split())
        if not query:
            return ToolResult(text="Error: empty query; give keywords to search for.", ok=False, error="empty query")
        if not index.tokenize(query):
            return ToolResult(
                text="Error: the query has no searchable words (only stopwords or symbols).",
                ok=False,
                error="no searchable words",
            )
        hits = index.search(query, k=self.top_k)
        return ToolResult(text=format_hits(hits, self.max_chars), ok=True)

    def close(self) -> None:
        if self._index is not None and self._owns_index:
            self._index.close()
