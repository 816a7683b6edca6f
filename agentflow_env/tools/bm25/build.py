"""The streaming index builder: two passes over the corpus, postings spooled to disk, never all in memory."""

from __future__ import annotations

import array
import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentflow_env.error import DataError, DependencyNotInstalled
from agentflow_env.tools.bm25.check import (
    DATA_FILE,
    FORMAT_NAME,
    FORMAT_VERSION,
    INDEX_FILES,
    INDICES_FILE,
    INDPTR_FILE,
    META_FILE,
    OFFSETS_FILE,
    PARAMS_FILE,
    PASSAGES_FILE,
    VOCAB_FILE,
    file_checksums,
    settings_checksum,
)
from agentflow_env.tools.bm25.corpus import _as_text, _PassageStore
from agentflow_env.tools.bm25.index import BM25Index
from agentflow_env.tools.bm25.tokenize import _Tokenizer

# --------------------------------------------------------------------------------------------- streaming builder

# a str as a JSON string, non-ASCII kept (json.dumps(..., ensure_ascii=False) of a str)
_json_str: Any = json.encoder.encode_basestring  # type: ignore[attr-defined]

# raw words (whitespace-separated) whose term ids a build remembers; more are tokenized each time they appear
_RAW_WORDS_KEPT = 300_000
# postings per block of the score matrix when writing it (8 bytes each: 128 MB a block)
_BLOCK_POSTINGS = 16_000_000


@dataclass
class _Spool:
    """Per-chunk postings (doc, term, tf), sorted by term then doc; in memory or as .npy files in ``folder``."""

    folder: Path | None
    chunks: list[Any] = field(default_factory=list)

    def add(self, docs: np.ndarray, terms: np.ndarray, tfs: np.ndarray) -> None:
        if self.folder is None:
            self.chunks.append((docs, terms, tfs))
            return
        stem = self.folder / f"chunk{len(self.chunks):06d}"
        for name, arr in (("docs", docs), ("terms", terms), ("tfs", tfs)):
            np.save(f"{stem}.{name}.npy", arr)
        self.chunks.append(stem)

    def term_range(self, lo: int, hi: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Each chunk's postings of the terms ``lo <= term < hi``; on disk only that slice is read (mmap)."""
        for chunk in self.chunks:
            if isinstance(chunk, Path):
                terms = np.load(f"{chunk}.terms.npy", mmap_mode="r")
                a, b = np.searchsorted(terms, [lo, hi])
                if a == b:
                    continue
                docs = np.load(f"{chunk}.docs.npy", mmap_mode="r")
                tfs = np.load(f"{chunk}.tfs.npy", mmap_mode="r")
                yield np.array(docs[a:b]), np.array(terms[a:b]), np.array(tfs[a:b])
                del docs, terms, tfs
            else:
                docs, terms, tfs = chunk
                a, b = np.searchsorted(terms, [lo, hi])
                if a < b:
                    yield docs[a:b], terms[a:b], tfs[a:b]


class _IndexWriter:
    """Builds the BM25 score matrix in two passes without holding the corpus.

    Pass 1 tokenizes chunk by chunk, spooling each chunk's postings and writing passages out; pass 2 turns the
    spool into the term-major (CSC) score matrix once document frequencies and the mean length are known.
    """

    def __init__(self, out_dir: Path | None, *, k1: float, b: float, stopwords: bool, stem: bool):
        self.out_dir = out_dir
        self.k1, self.b = k1, b
        self.tokenizer = _Tokenizer(stopwords, stem, cache_size=0)  # raw words are remembered here instead
        self.settings = {"stopwords": stopwords, "stem": stem}
        self.vocab: dict[str, int] = {}
        self._raw_words: dict[str, int | tuple[int, ...]] = {}  # raw word -> its term id, -1 (none) or ids
        self.df = np.zeros(1 << 12, dtype=np.int64)
        self.doc_lens: list[np.ndarray] = []
        self.n_docs = 0
        self._tmp = tempfile.mkdtemp(prefix="bm25spool-", dir=out_dir) if out_dir is not None else None
        self.spool = _Spool(Path(self._tmp) if self._tmp else None)
        self.records: list[dict[str, str]] = []
        self._offsets = array.array("q", [0])  # 8 bytes a passage, not a Python int each
        self._fh = open(out_dir / PASSAGES_FILE, "wb") if out_dir is not None else None

    def add_chunk(self, passages: Sequence[dict[str, Any]]) -> None:
        records = [self._record(p, self.n_docs + i) for i, p in enumerate(passages)]
        for rec in records:
            self._keep(rec)
        texts = [f"{r['title']} {r['text']}" for r in records]
        local, terms = self._tokenize_chunk(texts)
        # a capital sigma lowercases by its context (final or not), which a raw word alone does not show: such
        # passages are tokenized whole, as a query is
        whole = [i for i, text in enumerate(texts) if "\u03a3" in text]
        if whole:
            keep = ~np.isin(local, whole)
            ids = [self._term_ids(texts[i]) for i in whole]
            local = np.concatenate([local[keep], np.repeat(np.asarray(whole, dtype=np.int64), [len(x) for x in ids])])
            terms = np.concatenate([terms[keep], np.asarray([t for x in ids for t in x], dtype=np.int64)])
        self._add_postings(len(records), local, terms)

    def _tokenize_chunk(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(passage in the chunk, term id) of every token of ``texts``.

        Arrow's C++ kernels split the texts at whitespace and number the distinct raw words of the chunk; only
        raw words not seen before go through the Python tokenizer (a raw word such as ``don't`` or ``Paris,``
        gives 0, 1 or more tokens), so the tokens are the ones tokenizing each text whole gives, at a cost that
        follows the new words, not the tokens.
        """
        try:
            import pyarrow as pa
            import pyarrow.compute as pc
        except ImportError:  # pragma: no cover - depends on the install
            raise DependencyNotInstalled("pyarrow", "search") from None

        lists = pc.utf8_split_whitespace(pa.array(texts, type=pa.large_string()))
        parents = pc.list_parent_indices(lists).to_numpy()
        encoded = pc.dictionary_encode(pc.list_flatten(lists))
        word_of_token = encoded.indices.to_numpy()
        words = encoded.dictionary.to_pylist()
        known = self._raw_words
        per_word = [known.get(w) for w in words]
        for i, ids in enumerate(per_word):
            if ids is None:
                terms = self._term_ids(words[i])
                ids = terms[0] if len(terms) == 1 else -1 if not terms else tuple(terms)
                if len(known) < _RAW_WORDS_KEPT:
                    known[words[i]] = ids
                per_word[i] = ids
        multi = [i for i, ids in enumerate(per_word) if type(ids) is tuple]
        if multi:
            single = np.fromiter((-1 if type(x) is tuple else x for x in per_word), dtype=np.int64, count=len(words))
        else:
            single = np.fromiter(per_word, dtype=np.int64, count=len(words))  # type: ignore[arg-type]
        if not multi:  # the usual chunk: every raw word is one token or none
            ids = single[word_of_token]
            keep = ids >= 0
            return parents[keep], ids[keep]
        counts = (single >= 0).astype(np.int64)
        for i in multi:
            word_ids = per_word[i]
            assert isinstance(word_ids, tuple)  # multi lists the raw words of several tokens
            counts[i] = len(word_ids)
        flat_ids = np.fromiter(
            (t for x in per_word if x != -1 for t in (x if isinstance(x, tuple) else (x,))),
            dtype=np.int64,
            count=int(counts.sum()),
        )
        per_token = counts[word_of_token]
        starts = (np.cumsum(counts) - counts)[word_of_token]
        ends = np.cumsum(per_token)
        within = np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - per_token, per_token)
        return np.repeat(parents, per_token), flat_ids[np.repeat(starts, per_token) + within]

    def _term_ids(self, word: str) -> list[int]:
        vocab = self.vocab
        return [vocab.setdefault(t, len(vocab)) for t in self.tokenizer(word)]

    def _add_postings(self, n_passages: int, local: np.ndarray, term_ids: np.ndarray) -> None:
        n_vocab = max(len(self.vocab), 1)
        lens = np.bincount(local, minlength=n_passages).astype(np.int64)
        keys, tfs = np.unique(local.astype(np.int64) * n_vocab + term_ids, return_counts=True)
        docs, terms = np.divmod(keys, n_vocab)
        order = np.argsort(terms, kind="stable")  # term-major, docs stay ascending within a term
        if len(self.df) < n_vocab:
            self.df = np.concatenate([self.df, np.zeros(max(n_vocab, 2 * len(self.df)) - len(self.df), np.int64)])
        self.df[:n_vocab] += np.bincount(terms, minlength=n_vocab)
        self.spool.add(
            (docs[order] + self.n_docs).astype(np.int32), terms[order].astype(np.int32), tfs[order].astype(np.float32)
        )
        self.doc_lens.append(lens.astype(np.int32))
        self.n_docs += n_passages

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
            # the bytes of json.dumps(rec, ensure_ascii=False), without its generic encoder per passage
            pid, title, text = _json_str(rec["id"]), _json_str(rec["title"]), _json_str(rec["text"])
            self._fh.write(f'{{"id": {pid}, "title": {title}, "text": {text}}}\n'.encode())
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

    def _fill(
        self,
        lo: int,
        hi: int,
        indptr: np.ndarray,
        idf: np.ndarray,
        norm: np.ndarray,
        data: np.ndarray,
        indices: np.ndarray,
    ) -> None:
        """Scores and doc ids of the terms ``lo <= term < hi`` into ``data``/``indices`` (that block's postings)."""
        base = indptr[lo]
        cursor = indptr[lo:hi] - base
        for docs, terms, tfs in self.spool.term_range(lo, hi):
            uniq, starts, counts = np.unique(terms, return_index=True, return_counts=True)
            pos = cursor[terms - lo] + (np.arange(len(terms)) - np.repeat(starts, counts))
            data[pos] = idf[terms] * tfs / (tfs + norm[docs])
            indices[pos] = docs
            cursor[uniq - lo] += counts

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
        norm = (self.k1 * (1 - self.b + self.b * doc_lens / avgdl)).astype(np.float32)
        total = int(indptr[-1])
        if self.out_dir is None:
            data, indices = np.empty(total, np.float32), np.empty(total, np.int32)
            self._fill(0, n_vocab, indptr, idf, norm, data, indices)
        else:  # term blocks of bounded size, each written out in order: memory holds one block, not the matrix
            with open(self.out_dir / DATA_FILE, "wb") as fd, open(self.out_dir / INDICES_FILE, "wb") as fi:
                for fh, dtype in ((fd, np.float32), (fi, np.int32)):
                    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False}
                    np.lib.format.write_array_header_1_0(fh, {**header, "shape": (total,)})
                lo = 0
                while lo < n_vocab:
                    hi = max(lo + 1, int(np.searchsorted(indptr, indptr[lo] + _BLOCK_POSTINGS, side="right")) - 1)
                    hi = min(hi, n_vocab)
                    size = int(indptr[hi] - indptr[lo])
                    block_data, block_indices = np.empty(size, np.float32), np.empty(size, np.int32)
                    self._fill(lo, hi, indptr, idf, norm, block_data, block_indices)
                    fd.write(block_data.tobytes())
                    fi.write(block_indices.tobytes())
                    lo = hi
        params = {"k1": self.k1, "b": self.b, "n_docs": self.n_docs, "avgdl": avgdl, **self.settings}
        if self.out_dir is None:
            return BM25Index(data, indices, indptr, self.vocab, _PassageStore(self.records), params)
        np.save(self.out_dir / INDPTR_FILE, indptr)
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        np.save(self.out_dir / OFFSETS_FILE, np.frombuffer(self._offsets, dtype=np.int64))
        _write_meta(self.out_dir, self.vocab, params)
        return BM25Index.load(self.out_dir, mmap=True, verify=False, _just_built=True)


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
    meta["checksums"] = {"files": file_checksums(out, list(INDEX_FILES)), "settings": settings_checksum(meta)}
    (out / META_FILE).write_text(json.dumps(meta, indent=2))


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
