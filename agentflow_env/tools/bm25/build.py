"""The streaming index builder: passages in, an index folder (or, for a small corpus, arrays in memory) out.

Chunks of passages are tokenized into postings with chunk-local term ids, in this process or in worker
processes (one chunk a task, never more than a few chunks in flight); a JSON-lines file goes as byte spans
(:mod:`~agentflow_env.tools.bm25.spans`) that the worker reads and parses itself. This process takes the
chunks back in corpus order: it numbers each chunk's new terms after the ones seen before (first appearance in
the corpus, so the vocabulary is the same whatever the number of workers), spools the postings to disk, appends
the passages and the new terms to the folder's files, and at the end writes the term-major score matrix one
block of terms at a time. A parallel build therefore writes the same bytes as a sequential one, and memory holds
a few chunks, the vocabulary and the document lengths, never the corpus or its tokens.

The builder knows nothing of :class:`~agentflow_env.tools.bm25.index.BM25Index`: it returns the folder it wrote
(:func:`build_folder`) or the arrays (:func:`build_arrays`), and the index opens them.
"""

from __future__ import annotations

import array
import io
import itertools
import json
import multiprocessing
import os
import shutil
import tempfile
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from agentflow_env.error import AgentFlowError, ConfigError, DataError, DependencyNotInstalled
from agentflow_env.tools.bm25.check import (
    DATA_FILE,
    INDICES_FILE,
    INDPTR_FILE,
    OFFSETS_FILE,
    PASSAGES_FILE,
    VOCAB_FILE,
    write_meta,
)
from agentflow_env.tools.bm25.corpus import _as_text
from agentflow_env.tools.bm25.spans import (
    JsonlFile,
    ParsedSpan,
    Span,
    _json_str,
    jsonl_spans,
    parse_span,
    span_lines,
)
from agentflow_env.tools.bm25.tokenize import _Tokenizer

__all__ = ["BuiltArrays", "available_cpus", "build_arrays", "build_folder", "build_folder_vocab"]


# raw words (whitespace-separated) whose tokens a tokenizer remembers; more are tokenized each time they appear
_RAW_WORDS_KEPT = 300_000
# postings per block of the score matrix when writing it (8 bytes each: 32 MB a block), and threads filling blocks
_BLOCK_POSTINGS = 4_000_000
_FILL_THREADS = 2
# a raw word's entry in a tokenizer's memo, besides its one term id: no token, several tokens, not remembered
_NONE, _SEVERAL, _UNSEEN = -1, -2, -3
# passages split and numbered by Arrow at once (a default chunk; its temporary arrays: about 100 MB)
_TOKENIZE_BATCH = 20_000


def _pc() -> Any:
    """pyarrow.compute, imported when first needed (the search extra)."""
    import pyarrow.compute as pc

    return pc


def _libc() -> Any:
    """glibc, for giving freed heap memory back to the system; None elsewhere."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes

            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim  # noqa: B018 - glibc has it; musl and others may not
        except (OSError, AttributeError):
            _LIBC = False
    return _LIBC or None


_LIBC: Any = None
_M_MMAP_THRESHOLD, _MMAP_THRESHOLD = -3, 1 << 18  # glibc's mallopt parameter, and the size from which it maps


def _trim() -> None:
    """Give the heap's free pages back to the system (glibc keeps them after a chunk's arrays are freed)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


# --------------------------------------------------------------------------------------------- one chunk


@dataclass
class _ChunkPostings:
    """One chunk tokenized by one tokenizer, with that tokenizer's term ids.

    A tokenizer numbers terms by first appearance in the chunks it saw; ``new_terms`` are the terms this chunk
    added, in that order. ``docs``/``term_ids``/``tfs`` are the chunk's postings sorted by term then passage;
    ``blob`` holds the passages as JSON lines (``ends``: where each ends in it), or ``records`` holds them for
    an in-memory build.
    """

    tokenizer: int
    new_terms: list[str]
    docs: np.ndarray
    term_ids: np.ndarray
    tfs: np.ndarray
    lens: np.ndarray
    blob: bytes = b""
    ends: np.ndarray | None = None
    records: list[dict[str, str]] | None = None


def _record(p: Any, row: int) -> dict[str, str]:
    if not isinstance(p, dict) or "text" not in p:
        raise DataError(f"passage {row} must be a dict with 'text' (and 'title'); got {type(p).__name__}")
    pid = p.get("id")
    return {"id": str(row) if pid is None else str(pid), "title": _as_text(p.get("title")), "text": _as_text(p["text"])}


def _json_line(rec: dict[str, str]) -> bytes:
    """The bytes of ``json.dumps(rec, ensure_ascii=False) + "\\n"``, without its generic encoder per passage."""
    pid, title, text = _json_str(rec["id"]), _json_str(rec["title"]), _json_str(rec["text"])
    return f'{{"id": {pid}, "title": {title}, "text": {text}}}\n'.encode()


class _ChunkTokenizer:
    """Turns chunks of passages, in corpus order, into :class:`_ChunkPostings`.

    Keeps its vocabulary (term -> its id) and a bounded memo of raw words; ``decode``, when given, turns each
    item into a passage first (e.g. parses a JSON line, so a worker does it).
    """

    def __init__(self, stopwords: bool, stem: bool, decode: Callable[[Any], dict[str, Any]] | None = None):
        self.tokenizer = _Tokenizer(stopwords, stem, cache_size=0)  # raw words are remembered here instead
        self.decode = decode
        self.vocab: dict[str, int] = {}
        self._raw: dict[str, int] = {}  # raw word -> its term id, _NONE or _SEVERAL
        self._several: dict[str, list[int]] = {}  # raw word giving several tokens -> their term ids

    def __call__(self, passages: Sequence[Any] | Span, start: int, keep_records: bool) -> _ChunkPostings:
        texts, records, parsed = self._passages(passages, start, keep_records)
        local = self.vocab
        known = len(local)
        docs, ids = self._tokenize(texts, local, ascii_split=parsed is not None and not parsed.separators)
        # a capital sigma lowercases by its context (final or not), which a raw word alone does not show: such
        # passages are tokenized whole, as a query is
        if isinstance(texts, list):
            whole = [i for i, text in enumerate(texts) if "\u03a3" in text]
        elif parsed is not None and not parsed.sigma:
            whole = []
        else:
            whole = np.flatnonzero(_pc().match_substring(texts, "\u03a3").to_numpy(zero_copy_only=False)).tolist()
        if whole:
            keep = ~np.isin(docs, whole)
            per = [
                [
                    local.setdefault(t, len(local))
                    for t in self.tokenizer(texts[i] if isinstance(texts, list) else texts[i].as_py())
                ]
                for i in whole
            ]
            docs = np.concatenate([docs[keep], np.repeat(np.asarray(whole, dtype=np.int64), [len(x) for x in per])])
            ids = np.concatenate([ids[keep], np.asarray([t for x in per for t in x], dtype=np.int64)])
        n = len(texts)
        lens = np.bincount(docs, minlength=n).astype(np.int32)
        # one sort by (term, passage) gives each posting with its term frequency, term-major (np.unique, in place)
        keys = ids.astype(np.int64) * max(n, 1)
        keys += docs
        del ids
        keys.sort()
        first = np.ones(len(keys), dtype=bool)
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        at = np.flatnonzero(first)
        tfs = np.diff(at, append=len(keys))
        term_ids, local_docs = np.divmod(keys[at], max(n, 1))
        del keys, first, at
        new_terms = list(itertools.islice(reversed(local), len(local) - known))[::-1]  # the terms this chunk added
        postings = (local_docs.astype(np.int32), term_ids.astype(np.int32), tfs.astype(np.float32))
        out = _ChunkPostings(os.getpid(), new_terms, *postings, lens)
        if keep_records:
            out.records = records
        elif parsed is not None:
            out.blob, out.ends = parsed.blob, parsed.ends
        else:
            assert records is not None
            encoded = [_json_line(r) for r in records]
            out.ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=n))
            out.blob = b"".join(encoded)
        return out

    def _passages(
        self, passages: Sequence[Any] | Span, start: int, keep_records: bool
    ) -> tuple[Any, list[dict[str, str]] | None, ParsedSpan | None]:
        """``(texts, records, parsed)``: each passage's ``"title text"`` (a list, or an Arrow array from a span
        Arrow parsed, ``parsed``, which holds the passages file's lines), and the passages as records."""
        if isinstance(passages, Span):
            raw = passages.read()
            fields = getattr(self.decode, "fields", None)
            parsed = None if keep_records or not fields else parse_span(raw, len(passages), start, fields)
            if parsed is not None:
                return parsed.texts, None, parsed
            passages = span_lines(passages, raw)
        if self.decode is not None:
            passages = [self.decode(p) for p in passages]
        records = [_record(p, start + i) for i, p in enumerate(passages)]
        return [f"{r['title']} {r['text']}" for r in records], records, None

    def _tokenize(self, texts: Any, local: dict[str, int], ascii_split: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(passage in the chunk, term id) of every token of ``texts``, ``_TOKENIZE_BATCH`` passages at a time.

        In order, batch after batch: terms are still numbered by first appearance in the chunk, and the
        temporary arrays of one batch, not of the chunk, bound the memory.
        """
        docs, ids = [], []
        for lo in range(0, len(texts), _TOKENIZE_BATCH):  # a list or an Arrow array: both slice
            batch_docs, batch_ids = self._tokenize_batch(texts[lo : lo + _TOKENIZE_BATCH], local, ascii_split)
            batch_docs = batch_docs.astype(np.int32, copy=False)
            if lo:
                batch_docs += np.int32(lo)
            docs.append(batch_docs)
            ids.append(batch_ids.astype(np.int32, copy=False))
        if not docs:
            return np.zeros(0, np.int32), np.zeros(0, np.int32)
        if len(docs) == 1:
            return docs[0], ids[0]
        return np.concatenate(docs), np.concatenate(ids)

    def _tokenize_batch(self, texts: Any, local: dict[str, int], ascii_split: bool) -> tuple[np.ndarray, np.ndarray]:
        """(passage in the batch, term id) of every token of ``texts``.

        Arrow's C++ kernels split the texts at whitespace and number the distinct raw words of the chunk; only
        raw words not seen before go through the Python tokenizer (a raw word such as ``don't`` or ``Paris,``
        gives 0, 1 or more tokens), so the tokens are the ones tokenizing each text whole gives, at a cost that
        follows the new words, not the tokens. Terms are numbered in the order of the raw words that first give
        them, which is their order of first appearance in the chunk.
        """
        try:
            import pyarrow as pa
            import pyarrow.compute as pc
        except ImportError:  # pragma: no cover - depends on the install
            raise DependencyNotInstalled("pyarrow", "search") from None

        pool = pa.system_memory_pool()  # malloc gives a chunk's buffers back; arrow's default pool keeps them
        array = texts if isinstance(texts, pa.Array) else pa.array(texts, type=pa.large_string(), memory_pool=pool)
        # on ASCII text without the separators \x1c-\x1f, splitting at ASCII whitespace is str.split(), faster
        ascii_split = ascii_split and len(array) > 0 and pc.all(pc.string_is_ascii(array)).as_py()
        split = pc.ascii_split_whitespace if ascii_split else pc.utf8_split_whitespace
        lists = split(array, memory_pool=pool)
        parents = pc.list_parent_indices(lists, memory_pool=pool).to_numpy()
        encoded = pc.dictionary_encode(pc.list_flatten(lists, memory_pool=pool), memory_pool=pool)
        del lists
        word_of_token = encoded.indices.to_numpy()
        words = encoded.dictionary.to_pylist()
        memo = self._raw
        get = memo.get
        # a remembered raw word maps straight to its term id (or _NONE, or _SEVERAL with its ids in _several):
        # one dict lookup per distinct word of the batch; the vocabulary only grows, so the ids stay valid
        ids = np.fromiter(map(get, words, itertools.repeat(_UNSEEN, len(words))), dtype=np.int64, count=len(words))
        several = self._several
        multi: dict[int, list[int]] = {}
        number, tokenizer = local.setdefault, self.tokenizer
        for i in np.flatnonzero(ids <= _SEVERAL).tolist():  # in dictionary order: numbering follows first appearance
            word = words[i]
            if ids[i] == _SEVERAL:
                multi[i] = several[word]
                continue
            found = [number(t, len(local)) for t in tokenizer(word)]
            value = found[0] if len(found) == 1 else _NONE if not found else _SEVERAL
            ids[i] = value
            if value == _SEVERAL:
                multi[i] = found
            if len(memo) < _RAW_WORDS_KEPT:
                memo[word] = value
                if value == _SEVERAL:
                    several[word] = found
        if not multi:  # the usual chunk: every raw word is one token or none
            per_token = ids.astype(np.int32)[word_of_token]
            keep = per_token >= 0
            return parents[keep].astype(np.int32), per_token[keep]
        single = np.where(ids >= 0, ids, -1)
        counts = (single >= 0).astype(np.int64)
        for i, word_ids in multi.items():
            counts[i] = len(word_ids)
        flat_ids = np.fromiter(
            (t for i, x in enumerate(single.tolist()) for t in (multi[i] if i in multi else (x,) if x >= 0 else ())),
            dtype=np.int64,
            count=int(counts.sum()),
        )
        per_token = counts[word_of_token]
        starts = (np.cumsum(counts) - counts)[word_of_token]
        ends = np.cumsum(per_token)
        within = np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - per_token, per_token)
        return np.repeat(parents, per_token), flat_ids[np.repeat(starts, per_token) + within]


# --------------------------------------------------------------------------------------------- worker processes

_WORKER: _ChunkTokenizer | None = None


def _start_worker(stopwords: bool, stem: bool, decode: Callable[[Any], dict[str, Any]] | None) -> None:
    global _WORKER
    _WORKER = _ChunkTokenizer(stopwords, stem, decode)
    try:  # Arrow's default pool (mimalloc) keeps freed buffers; malloc, with the threshold below, gives them back
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
    except ImportError:  # pragma: no cover - depends on the install
        pass
    libc = _libc()
    if libc is not None:
        # a fixed threshold: a chunk's large arrays are mapped and unmapped, given back when freed; glibc's own
        # threshold grows with the largest array freed, and the heap then keeps a chunk's worth of pages
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)


def _tokenize_in_worker(passages: list[Any], start: int) -> _ChunkPostings:
    assert _WORKER is not None, "the pool's initializer sets the worker's tokenizer"
    _trim()
    return _WORKER(passages, start, keep_records=False)


def _chunks_in_workers(
    chunks: Iterable[list[Any]],
    workers: int,
    settings: tuple[bool, bool, Callable[[Any], dict[str, Any]] | None],
) -> Iterator[tuple[int, _ChunkPostings]]:
    """(passages in the chunk, its postings) for each chunk, in corpus order, tokenized in ``workers`` processes
    with one chunk read ahead."""
    start = 0
    context = multiprocessing.get_context("spawn")  # no fork of a process that may run threads
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=settings)
    pending: deque[tuple[int, Future[_ChunkPostings]]] = deque()
    try:
        for chunk in chunks:
            pending.append((len(chunk), pool.submit(_tokenize_in_worker, chunk, start)))
            start += len(chunk)
            del chunk
            if len(pending) > workers:
                n, future = pending.popleft()
                yield n, future.result()
        while pending:
            n, future = pending.popleft()
            yield n, future.result()
    except BrokenProcessPool:
        raise AgentFlowError(
            "a worker process of the BM25 build stopped (killed for memory, or started from a script that "
            'builds the index without `if __name__ == "__main__":`, which worker processes need); rerun with '
            "workers=1 (--workers 1) or from such a guard"
        ) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------------------------- merging the chunks


@dataclass
class _Spool:
    """Each chunk's postings, sorted by term then passage, in memory or as raw files in ``folder``.

    A chunk keeps its first passage's number, its passages within the chunk and the term frequencies in the
    smallest unsigned type that holds them (2 bytes each for a chunk of 20k passages), and its terms once each
    with where their postings end: about 4 bytes a posting on disk, not 12. On disk, :meth:`plan` finds once
    where each block of terms starts in each chunk, and each block then reads just its slices.
    """

    folder: Path | None
    chunks: list[Any] = field(default_factory=list)

    def add(self, first: int, docs: np.ndarray, terms: np.ndarray, counts: np.ndarray, tfs: np.ndarray) -> None:
        """``docs`` within the chunk; ``terms`` ascending, each with ``counts`` postings; ``tfs`` per posting."""
        docs = docs.astype(np.min_scalar_type(int(docs.max(initial=0))))
        tfs = tfs.astype(np.min_scalar_type(int(tfs.max(initial=0))))
        terms, ends = terms.astype(np.int64), np.cumsum(counts, dtype=np.int64)
        if self.folder is None:
            self.chunks.append([first, docs, terms, ends, tfs])
            return
        stem = str(self.folder / f"chunk{len(self.chunks):06d}")
        for name, arr in (("docs", docs), ("terms", terms), ("ends", ends), ("tfs", tfs)):
            arr.tofile(f"{stem}.{name}")
        self.chunks.append([first, stem, docs.dtype, tfs.dtype, None])

    def plan(self, bounds: np.ndarray) -> None:
        """Where the terms ``bounds[k] <= term < bounds[k + 1]`` start in each chunk on disk (its terms and their
        postings), for :meth:`term_range`'s block ``k``."""
        for chunk in self.chunks:
            if isinstance(chunk[1], str):
                stem = chunk[1]
                at = np.searchsorted(np.fromfile(f"{stem}.terms", dtype=np.int64), bounds)
                ends = np.fromfile(f"{stem}.ends", dtype=np.int64)
                chunk[4] = (at, np.concatenate([[0], ends])[at])  # where the first posting of each block is

    def term_range(self, lo: int, hi: int, block: int = 0) -> Iterator[tuple[np.ndarray, ...]]:
        """Each chunk's postings of the terms ``lo <= term < hi`` (block ``block`` of :meth:`plan` on disk):
        passages, the terms with their number of postings, and the term frequencies as float32."""
        for chunk in self.chunks:
            first = chunk[0]
            if isinstance(chunk[1], str):
                stem, docs_type, tfs_type, (at, starts) = chunk[1:]
                g0, g1 = int(at[block]), int(at[block + 1])
                if g0 == g1:
                    continue
                a, b = int(starts[block]), int(starts[block + 1])
                terms = np.fromfile(f"{stem}.terms", dtype=np.int64, count=g1 - g0, offset=8 * g0)
                counts = np.diff(np.fromfile(f"{stem}.ends", dtype=np.int64, count=g1 - g0, offset=8 * g0), prepend=a)
                docs = np.fromfile(f"{stem}.docs", dtype=docs_type, count=b - a, offset=docs_type.itemsize * a)
                tfs = np.fromfile(f"{stem}.tfs", dtype=tfs_type, count=b - a, offset=tfs_type.itemsize * a)
            else:
                docs, all_terms, ends, tfs = chunk[1:]
                g0, g1 = (int(x) for x in np.searchsorted(all_terms, [lo, hi]))
                if g0 == g1:
                    continue
                a = int(ends[g0 - 1]) if g0 else 0
                terms, counts = all_terms[g0:g1], np.diff(ends[g0:g1], prepend=a)
                b = int(ends[g1 - 1])
                docs, tfs = docs[a:b], tfs[a:b]
            yield docs.astype(np.int64) + first, terms, counts, tfs.astype(np.float32)


class BuiltArrays(NamedTuple):
    """An index built in memory: the score matrix (CSC arrays), the vocabulary, the passages and the params."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    vocab: dict[str, int]
    records: list[dict[str, str]]
    params: dict[str, Any]


class _IndexWriter:
    """Merges tokenized chunks, in corpus order, into the vocabulary, the postings spool and the passages file;
    then writes the BM25 score matrix once document frequencies and the mean length are known.

    Each tokenizer's term ids map to global ones (``_maps``): a chunk's new terms are numbered after the known
    ones in the order the tokenizer met them, which is the order of first appearance in the corpus, since a
    tokenizer sees its chunks in corpus order and a term new to the corpus is new to it.
    """

    def __init__(
        self,
        out_dir: Path | None,
        *,
        k1: float,
        b: float,
        stopwords: bool,
        stem: bool,
        decode: Callable[[Any], dict[str, Any]] | None = None,
    ):
        self.out_dir = out_dir
        self.tokenizer = _ChunkTokenizer(stopwords, stem, decode)  # for chunks tokenized in this process
        self.k1, self.b = k1, b
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
        # the vocabulary file is json.dumps(vocab) written as terms are numbered, not at the end
        self._vocab_fh = open(out_dir / VOCAB_FILE, "wb") if out_dir is not None else None
        self._crcs: dict[str, int] = {PASSAGES_FILE: 0, VOCAB_FILE: 0}  # of the files as far as written
        self._write(self._vocab_fh, VOCAB_FILE, b"{")
        self._maps: dict[int, array.array[int]] = {}  # tokenizer -> its term ids' global ids

    def add_chunk(self, passages: Sequence[Any]) -> None:
        """Tokenize a chunk of passages in this process and add it."""
        self.add(len(passages), self.tokenizer(passages, self.n_docs, keep_records=self.out_dir is None))

    def add(self, n: int, chunk: _ChunkPostings) -> None:
        """Number the chunk's new terms after the known ones and spool its postings with global ids."""
        vocab = self.vocab
        known = len(vocab)
        number = vocab.setdefault  # one dict operation a term: most terms of a chunk are new to the corpus
        ids = self._maps.setdefault(chunk.tokenizer, array.array("q"))
        ids.extend([number(t, len(vocab)) for t in chunk.new_terms])
        if len(vocab) > known and self._vocab_fh is not None:
            missing = list(itertools.islice(reversed(vocab), len(vocab) - known))[::-1]  # the terms just numbered
            # json.dumps of the vocabulary, a chunk's terms at a time: the same items, encoded in C
            items = json.dumps(dict(zip(missing, range(known, len(vocab)))), ensure_ascii=False)[1:-1]
            self._write(self._vocab_fh, VOCAB_FILE, (", " + items if known else items).encode())
        n_vocab = len(vocab)
        if len(self.df) < n_vocab:
            self.df = np.concatenate([self.df, np.zeros(max(n_vocab, 2 * len(self.df)) - len(self.df), np.int64)])
        docs, term_ids, tfs = chunk.docs, chunk.term_ids, chunk.tfs
        starts = np.flatnonzero(np.diff(term_ids, prepend=-1))  # the postings are grouped by term
        counts = np.diff(starts, append=len(term_ids))
        global_ids = np.frombuffer(ids, dtype=np.int64)[term_ids[starts]]
        self.df[global_ids] += counts
        if len(global_ids) > 1 and not bool(np.all(global_ids[1:] > global_ids[:-1])):
            # reorder the chunk's term groups by global id; passages stay ascending within a term
            order = np.argsort(global_ids, kind="stable")
            sizes = counts[order]
            perm = np.repeat(starts[order] - (np.cumsum(sizes) - sizes), sizes) + np.arange(len(term_ids))
            docs, tfs = docs[perm], tfs[perm]
            global_ids, counts = global_ids[order], sizes
        self.spool.add(self.n_docs, docs, global_ids, counts, tfs)
        self.doc_lens.append(chunk.lens)
        if chunk.records is not None:
            self.records.extend(chunk.records)
        elif self._fh is not None and chunk.ends is not None:
            self._write(self._fh, PASSAGES_FILE, chunk.blob)
            self._offsets.frombytes((chunk.ends + self._offsets[-1]).tobytes())
        self.n_docs += n

    def _write(self, fh: Any, name: str, data: Any) -> None:
        """Write ``data`` to ``fh``, the file ``name``, and carry on its checksum."""
        if fh is not None:
            fh.write(data)
            self._crcs[name] = zlib.crc32(data, self._crcs.get(name, 0))

    def cleanup_files(self) -> None:
        """Close the passages and vocabulary files."""
        for fh in (self._fh, self._vocab_fh):
            if fh is not None:
                fh.close()
        self._fh = self._vocab_fh = None

    def cleanup(self) -> None:
        """Close the passages and vocabulary files and delete the spool (after the build, or when it failed)."""
        self.cleanup_files()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _write_block(self, fd: Any, fi: Any, data: np.ndarray, indices: np.ndarray) -> None:
        self._write(fd, DATA_FILE, data.data)  # the array's own buffer: no copy, unlike tobytes()
        self._write(fi, INDICES_FILE, indices.data)

    def _fill(
        self,
        lo: int,
        hi: int,
        indptr: np.ndarray,
        idf: np.ndarray,
        norm: np.ndarray,
        data: np.ndarray,
        indices: np.ndarray,
        block: int = 0,
    ) -> None:
        """Scores and doc ids of the terms ``lo <= term < hi`` into ``data``/``indices`` (that block's postings)."""
        base = indptr[lo]
        cursor = indptr[lo:hi] - base
        for docs, uniq, counts, tfs in self.spool.term_range(lo, hi, block):
            terms = np.repeat(uniq, counts)
            pos = cursor[terms - lo] + (np.arange(len(terms)) - np.repeat(np.cumsum(counts) - counts, counts))
            data[pos] = idf[terms] * tfs / (tfs + norm[docs])
            indices[pos] = docs
            cursor[uniq - lo] += counts

    def finish(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]] | None:
        """Write the folder (returns None) or, in memory, return ``(data, indices, indptr, params)``."""
        if self.n_docs == 0:
            raise DataError("the corpus is empty: give at least one passage with 'title' and 'text'")
        n_vocab = len(self.vocab)
        df = self.df[:n_vocab]
        doc_lens = np.concatenate(self.doc_lens).astype(np.float32)
        avgdl = max(float(doc_lens.mean()), 1e-9)
        idf = np.log1p((self.n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)  # Lucene's idf
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        norm = (self.k1 * (1 - self.b + self.b * doc_lens / avgdl)).astype(np.float32)
        total = int(indptr[-1])
        params = {"k1": self.k1, "b": self.b, "n_docs": self.n_docs, "avgdl": avgdl, **self.settings}
        if self.out_dir is None:
            data, indices = np.empty(total, np.float32), np.empty(total, np.int32)
            self._fill(0, n_vocab, indptr, idf, norm, data, indices)
            return data, indices, indptr, params
        # term blocks of bounded size, each written out in order: memory holds three blocks, not the matrix
        bounds = [0]
        while bounds[-1] < n_vocab:
            lo = bounds[-1]
            hi = max(lo + 1, int(np.searchsorted(indptr, indptr[lo] + _BLOCK_POSTINGS, side="right")) - 1)
            bounds.append(min(hi, n_vocab))
        self.spool.plan(np.asarray(bounds, dtype=np.int64))

        def block(k: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
            size = int(indptr[hi] - indptr[lo])
            block_data, block_indices = np.empty(size, np.float32), np.empty(size, np.int32)
            self._fill(lo, hi, indptr, idf, norm, block_data, block_indices, k)
            return block_data, block_indices

        # two threads fill blocks (numpy and the reads let go of the GIL) while this one writes them in order
        with (
            open(self.out_dir / DATA_FILE, "wb") as fd,
            open(self.out_dir / INDICES_FILE, "wb") as fi,
            ThreadPoolExecutor(_FILL_THREADS) as pool,
        ):
            for fh, name, dtype in ((fd, DATA_FILE, np.float32), (fi, INDICES_FILE, np.int32)):
                header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False}
                head = io.BytesIO()
                np.lib.format.write_array_header_1_0(head, {**header, "shape": (total,)})
                self._write(fh, name, head.getvalue())
            blocks = list(itertools.pairwise(bounds))
            filling: deque[Future[tuple[np.ndarray, np.ndarray]]] = deque()
            for k, (lo, hi) in enumerate(blocks):
                filling.append(pool.submit(block, k, lo, hi))
                if len(filling) > _FILL_THREADS:
                    self._write_block(fd, fi, *filling.popleft().result())
            while filling:
                self._write_block(fd, fi, *filling.popleft().result())
        np.save(self.out_dir / INDPTR_FILE, indptr)
        self._write(self._vocab_fh, VOCAB_FILE, b"}")
        self.cleanup_files()
        np.save(self.out_dir / OFFSETS_FILE, np.frombuffer(self._offsets, dtype=np.int64))
        write_meta(self.out_dir, None, params, self._crcs)
        return None


# --------------------------------------------------------------------------------------------- entry points


def _run(
    writer: _IndexWriter,
    passages: Iterable[Any],
    *,
    workers: int,
    chunk_size: int,
    show_progress: bool,
    total: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]] | None:
    from tqdm.auto import tqdm

    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be at least 1, not {chunk_size}")
    if workers < 1:
        raise ConfigError(f"workers must be at least 1, not {workers}")
    if total is None and hasattr(passages, "__len__"):
        total = len(passages)  # type: ignore[arg-type]
    settings = (bool(writer.settings["stopwords"]), bool(writer.settings["stem"]), writer.tokenizer.decode)
    try:
        with tqdm(total=total, disable=not show_progress, unit="passage", desc="BM25 index") as bar:
            chunks: Iterator[Any]
            if isinstance(passages, JsonlFile) and writer.out_dir is not None:
                chunks = jsonl_spans(passages.path, chunk_size)  # the workers read the file
            else:
                chunks = _chunks(passages, chunk_size)
            head = list(itertools.islice(chunks, 2))  # workers pay off from the second chunk on
            alone = len(head) < 2
            chunks = itertools.chain(_popping(head), chunks)
            if workers == 1 or writer.out_dir is None or alone:
                for chunk in chunks:
                    writer.add_chunk(chunk)
                    bar.update(len(chunk))
            else:
                for n, postings in _chunks_in_workers(chunks, workers, settings):
                    writer.add(n, postings)
                    del postings
                    _trim()
                    bar.update(n)
        return writer.finish()
    finally:
        writer.cleanup()


def build_folder(
    passages: Iterable[Any],
    out_dir: str | os.PathLike[str],
    *,
    workers: int = 1,
    chunk_size: int = 20_000,
    k1: float = 1.5,
    b: float = 0.75,
    stopwords: bool = True,
    stem: bool = True,
    show_progress: bool = False,
    total: int | None = None,
    decode: Callable[[Any], dict[str, Any]] | None = None,
) -> Path:
    """Index ``passages`` (dicts with ``title`` and ``text``, optional ``id``) into the folder ``out_dir``.

    ``workers`` > 1 tokenizes the chunks in that many processes; the folder's bytes are the same for any
    number of workers (for one ``chunk_size``, which only sets how terms are numbered and memory is bounded).
    ``decode`` (a picklable function) turns each item into a passage where the chunk is tokenized, e.g.
    :class:`~agentflow_env.tools.bm25.corpus.JsonlRow` parses raw JSON lines in the workers.
    """
    return build_folder_vocab(
        passages,
        out_dir,
        workers=workers,
        chunk_size=chunk_size,
        k1=k1,
        b=b,
        stopwords=stopwords,
        stem=stem,
        show_progress=show_progress,
        total=total,
        decode=decode,
    )[0]


def build_folder_vocab(
    passages: Iterable[Any], out_dir: str | os.PathLike[str], **options: Any
) -> tuple[Path, dict[str, int]]:
    """:func:`build_folder`, and the vocabulary it wrote (so the index it opens need not read it back)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = {key: options.pop(key) for key in ("k1", "b", "stopwords", "stem", "decode") if key in options}
    writer = _IndexWriter(out, **settings)
    _run(writer, passages, **options)
    return out, writer.vocab


def build_arrays(
    passages: Iterable[Any],
    *,
    chunk_size: int = 20_000,
    k1: float = 1.5,
    b: float = 0.75,
    stopwords: bool = True,
    stem: bool = True,
    show_progress: bool = False,
    total: int | None = None,
    decode: Callable[[Any], dict[str, Any]] | None = None,
) -> BuiltArrays:
    """Index ``passages`` in memory (small corpora, tests): the score matrix, vocabulary and passages."""
    writer = _IndexWriter(None, k1=k1, b=b, stopwords=stopwords, stem=stem, decode=decode)
    built = _run(writer, passages, workers=1, chunk_size=chunk_size, show_progress=show_progress, total=total)
    assert built is not None
    data, indices, indptr, params = built
    return BuiltArrays(data, indices, indptr, writer.vocab, writer.records, params)


def _popping(items: list[Any]) -> Iterator[Any]:
    """The items, each dropped from the list as it is handed out (the list holds no chunk already passed on)."""
    while items:
        yield items.pop(0)


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
