"""The BM25 index: an mmap-able term-major score matrix in bm25s's layout, queried by a numba kernel."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from agentflow_env.error import DataError, DependencyNotInstalled, ToolError
from agentflow_env.tools.bm25.build import build_arrays, build_folder_vocab
from agentflow_env.tools.bm25.check import (
    ARRAY_FILES,
    DATA_FILE,
    FORMAT_NAME,
    FORMAT_VERSION,
    INDEX_FILES,
    INDICES_FILE,
    INDPTR_FILE,
    META_FILE,
    PASSAGES_FILE,
    VOCAB_FILE,
    check_structure,
    corrupted,
    verify_checksums,
    write_meta,
)
from agentflow_env.tools.bm25.corpus import _PassageStore, _write_passages, corpus_items, corpus_length
from agentflow_env.tools.bm25.tokenize import _Tokenizer

__all__ = ["BM25Index", "SearchHit"]

logger = logging.getLogger(__name__)

_warned_unchecked: set[Path] = set()


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
    for key, name in ARRAY_FILES.items():
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


# --------------------------------------------------------------------------------------------- the index


class BM25Index:
    """A BM25 index over passages (``title``, ``text``, ``id``) with bm25s's numba retrieval.

    Build with :meth:`build` (any iterable of dicts) or :meth:`from_corpus` (a file or dataset); pass
    ``out_dir=`` to stream a corpus larger than memory straight to disk, ``workers=`` to tokenize in processes.
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
        workers: int = 1,
        chunk_size: int = 20_000,
        k1: float = 1.5,
        b: float = 0.75,
        stopwords: bool = True,
        stem: bool = True,
        total: int | None = None,
        decode: Callable[[Any], dict[str, Any]] | None = None,
    ) -> BM25Index:
        """Index ``passages`` (dicts with ``title`` and ``text``, optional ``id``), streaming in chunks.

        With ``out_dir`` the postings spool to disk and the matrix is written there, so only a few chunks of
        passages are ever in memory; ``workers`` > 1 tokenizes the chunks in that many processes (same folder,
        byte for byte). The returned index is opened from ``out_dir`` with mmap. Without ``out_dir`` the index
        is built in memory, in this process. ``decode`` turns each item into a passage where it is tokenized.
        """
        options: dict[str, Any] = {"chunk_size": chunk_size, "k1": k1, "b": b, "stopwords": stopwords, "stem": stem}
        options.update(show_progress=show_progress, total=total, decode=decode)
        if out_dir is None:
            built = build_arrays(passages, **options)
            store = _PassageStore(built.records)
            index = cls(built.data, built.indices, built.indptr, built.vocab, store, built.params)
        else:
            folder, vocab = build_folder_vocab(passages, out_dir, workers=workers, **options)
            index = cls.load(folder, mmap=True, verify=False, _just_built=True, _vocab=vocab)
        logger.info("BM25 index: %d passages, %d terms", len(index), len(index.vocab))
        return index

    @classmethod
    def from_corpus(
        cls,
        source: Any,
        *,
        fmt: str | None = None,
        text_field: str = "text",
        title_field: str | None = "title",
        id_field: str | None = "id",
        split: str = "train",
        streaming: bool = True,
        **build_kwargs: Any,
    ) -> BM25Index:
        """Index a corpus: a JSON-lines or Parquet file, or a ``datasets`` corpus (a Dataset object, a
        ``save_to_disk`` folder, or a hub id, streamed). ``fmt`` is ``jsonl``, ``parquet`` or ``dataset``; by
        default the file's suffix says, else a dataset. ``build_kwargs`` go to :meth:`build`."""
        fields: dict[str, Any] = {"text_field": text_field, "title_field": title_field, "id_field": id_field}
        items, decode = corpus_items(source, fmt=fmt, split=split, streaming=streaming, **fields)
        if build_kwargs.get("total") is None:
            build_kwargs["total"] = corpus_length(source, split)
        return cls.build(items, decode=decode, **build_kwargs)

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike[str], **kwargs: Any) -> BM25Index:
        """Index a JSON-lines corpus, one ``{title, text}`` object per line (:meth:`from_corpus`'s arguments)."""
        return cls.from_corpus(path, fmt="jsonl", **kwargs)

    @classmethod
    def from_parquet(cls, path: str | os.PathLike[str], **kwargs: Any) -> BM25Index:
        """Index a Parquet corpus, read one record batch at a time (:meth:`from_corpus`'s arguments)."""
        return cls.from_corpus(path, fmt="parquet", **kwargs)

    @classmethod
    def from_dataset(cls, source: Any, **kwargs: Any) -> BM25Index:
        """Index a ``datasets`` corpus: a Dataset object, a ``save_to_disk`` folder, or a hub id (streamed)."""
        return cls.from_corpus(source, fmt="dataset", **kwargs)

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
        write_meta(out, self.vocab, self.params)
        return out

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        mmap: bool = True,
        verify: bool = True,
        _just_built: bool = False,
        _vocab: dict[str, int] | None = None,
    ) -> BM25Index:
        """Open an index folder written by :meth:`save` or ``build(out_dir=...)``; arrays are memory-mapped.

        The folder is checked before use: with ``verify`` every file against the checksum written when it was
        built, and always the structure the retrieval relies on (shapes, dtypes, ids in range, a monotone
        ``indptr``, positive finite scores). A damaged folder raises :class:`~agentflow_env.error.IndexCorrupted`
        naming the folder and the file, never crashes the process.
        """
        folder = Path(path)
        meta = _read_meta(folder)
        checked = verify and verify_checksums(folder, meta, INDEX_FILES)
        if verify and not checked and folder.resolve() not in _warned_unchecked:
            _warned_unchecked.add(folder.resolve())
            logger.warning("%s was built without checksums: only its structure is checked; rebuild to add them", folder)
        mode: Literal["r"] | None = "r" if mmap else None
        arrays = _read_arrays(folder, mode)
        vocab = _read_vocab(folder) if _vocab is None else _vocab  # the builder's own, just written
        passages = folder / PASSAGES_FILE
        if not passages.is_file():
            raise corrupted(folder, f"the file {PASSAGES_FILE} is missing")
        names = {**ARRAY_FILES, "vocab": VOCAB_FILE}
        if not _just_built:  # the builder that wrote the folder a moment ago skips reading it all back
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
