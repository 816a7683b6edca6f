"""Integrity of a BM25 index folder: checksums written at build time, and a structural check on every load.

The retrieval kernel indexes arrays without bounds checks, so a damaged folder could crash the process or
silently return wrong passages. :func:`file_checksums` records each file's size and CRC-32 when the index is
written; :func:`verify_checksums` compares them on load; :func:`check_structure` checks what the kernel relies
on (shapes, dtypes, a monotone ``indptr`` from 0 to nnz, document and term ids in range, positive finite scores,
passage offsets matching the passages file), in bounded-memory chunks. Problems raise :class:`IndexCorrupted`
naming the folder, the file and how to rebuild.
"""

from __future__ import annotations

import json
import math
import threading
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from agentflow_env.error import IndexCorrupted

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "INDEX_FILES",
    "META_FILE",
    "check_structure",
    "corrupted",
    "file_checksums",
    "settings_checksum",
    "verify_checksums",
    "write_meta",
]

# the layout of an index folder
FORMAT_NAME = "agentflow-bm25"
FORMAT_VERSION = 1
META_FILE = "agentflow_index.json"
PASSAGES_FILE = "passages.jsonl"
OFFSETS_FILE = "passages.offsets.npy"
# bm25s's own file names, so ``bm25s.BM25.load(dir)`` reads our indexes too
DATA_FILE, INDICES_FILE, INDPTR_FILE = "data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy"
VOCAB_FILE, PARAMS_FILE = "vocab.index.json", "params.index.json"

# every file of an index folder but the metadata, which holds their checksums
INDEX_FILES = (DATA_FILE, INDICES_FILE, INDPTR_FILE, VOCAB_FILE, PARAMS_FILE, PASSAGES_FILE, OFFSETS_FILE)
ARRAY_FILES = {"data": DATA_FILE, "indices": INDICES_FILE, "indptr": INDPTR_FILE, "offsets": OFFSETS_FILE}

_CHUNK = 1 << 22  # elements per pass over a large array (bounded temporary memory)
_READ = 1 << 24  # bytes per read when checksumming


def corrupted(folder: Path, problem: str) -> IndexCorrupted:
    return IndexCorrupted(
        f"the BM25 index {folder} is damaged: {problem}. Rebuild it from its corpus with "
        f"`agentflow-env build-index --format FORMAT --input CORPUS --output-dir {folder} --force` "
        "(or BM25Index.build(passages, out_dir=...))"
    )


def _crc32(path: Path) -> str:
    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_READ):
            crc = zlib.crc32(chunk, crc)
    return f"{crc:08x}"


def file_checksums(folder: Path, names: list[str], known: dict[str, int] | None = None) -> dict[str, dict[str, Any]]:
    """``{name: {"bytes": size, "crc32": hex}}`` for the named files of ``folder``; ``known``: the CRC-32 of
    files whose bytes were checksummed as they were written (not read again)."""
    known = known or {}
    return {
        name: {
            "bytes": (folder / name).stat().st_size,
            "crc32": f"{known[name]:08x}" if name in known else _crc32(folder / name),
        }
        for name in names
    }


def settings_checksum(meta: dict[str, Any]) -> str:
    """CRC-32 of the metadata itself (everything but the checksums), in a canonical JSON form."""
    body = {k: v for k, v in meta.items() if k != "checksums"}
    return f"{zlib.crc32(json.dumps(body, sort_keys=True).encode()):08x}"


def write_meta(
    out: Path, vocab: dict[str, int] | None, params: dict[str, Any], crcs: dict[str, int] | None = None
) -> None:
    """Write the vocabulary (``None``: already written), bm25s's params and our metadata, with the checksum of
    every file of the folder (``crcs``: those known from writing the files)."""
    if vocab is not None:
        with open(out / VOCAB_FILE, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(vocab, ensure_ascii=False))  # json.dumps encodes in C; json.dump in Python pieces
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
    meta["checksums"] = {"files": file_checksums(out, list(INDEX_FILES), crcs), "settings": settings_checksum(meta)}
    (out / META_FILE).write_text(json.dumps(meta, indent=2))


# folders whose files matched their checksums in this process, with the files' identity and times then
_verified: dict[Path, tuple[tuple[str, int, int, int], ...]] = {}
_verified_lock = threading.Lock()


def _signature(folder: Path, names: list[str]) -> tuple[tuple[str, int, int, int], ...]:
    stats = [(name, (folder / name).stat()) for name in names]
    return tuple((name, st.st_ino, st.st_size, st.st_mtime_ns) for name, st in stats)


def verify_checksums(folder: Path, meta: dict[str, Any], required: tuple[str, ...] = ()) -> bool:
    """Compare every file with the checksums in ``meta`` (which must list ``required``); ``False`` when the index
    predates checksums.

    A folder verified earlier in this process is not read again while none of its files was replaced or
    modified since (same inode, size and modification time): many environments may open one large index.
    """
    sums = meta.get("checksums")
    if sums is None:
        return False
    if not isinstance(sums, dict) or not isinstance(sums.get("files"), dict):
        raise corrupted(folder, "the checksum table in agentflow_index.json is malformed")
    if sums.get("settings") != settings_checksum(meta):
        raise corrupted(folder, "agentflow_index.json was changed after the index was built (its checksum differs)")
    names = [str(name) for name in sums["files"]]
    if unlisted := sorted(set(required) - set(names)):
        raise corrupted(folder, f"the checksum table in agentflow_index.json lacks {', '.join(unlisted)}")
    for name in names:
        if not (folder / name).is_file():
            raise corrupted(folder, f"the file {name} is missing")
    key = folder.resolve()
    signature = _signature(folder, [*names, "agentflow_index.json"])
    with _verified_lock:
        if _verified.get(key) == signature:
            return True
    for name, want in sums["files"].items():
        path = folder / str(name)
        if not isinstance(want, dict):
            raise corrupted(folder, "the checksum table in agentflow_index.json is malformed")
        size = path.stat().st_size
        if size != want.get("bytes"):
            raise corrupted(folder, f"{name} has {size} bytes, but {want.get('bytes')} were written (truncated?)")
        if _crc32(path) != want.get("crc32"):
            raise corrupted(folder, f"{name} does not match the checksum written when the index was built")
    with _verified_lock:
        _verified[key] = signature
    return True


def _expect(folder: Path, name: str, arr: Any, dtype: Any) -> None:
    if not isinstance(arr, np.ndarray) or arr.ndim != 1:
        shape = getattr(arr, "shape", type(arr).__name__)
        raise corrupted(folder, f"{name} should hold a 1-d array, not {shape}")
    if arr.dtype != np.dtype(dtype):
        raise corrupted(folder, f"{name} has dtype {arr.dtype}, expected {np.dtype(dtype)}")


def _chunks(n: int) -> range:
    return range(0, n, _CHUNK)


def _increasing(arr: np.ndarray, strict: bool) -> bool:
    """Whether ``arr`` never decreases (``strict``: always increases), checked chunk by chunk."""
    for lo in _chunks(max(len(arr) - 1, 0)):
        step = np.diff(np.asarray(arr[lo : min(len(arr), lo + _CHUNK + 1)]))
        if (step <= 0).any() if strict else (step < 0).any():
            return False
    return True


def _check_meta(folder: Path, meta: dict[str, Any]) -> int:
    n_docs = meta.get("n_docs")
    if isinstance(n_docs, bool) or not isinstance(n_docs, int) or n_docs < 1:
        raise corrupted(folder, f"agentflow_index.json has n_docs={n_docs!r}, expected a positive integer")
    for key in ("k1", "b", "avgdl"):
        value = meta.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise corrupted(folder, f"agentflow_index.json has {key}={value!r}, expected a finite number")
    for key in ("stopwords", "stem"):
        if not isinstance(meta.get(key, True), bool):
            raise corrupted(folder, f"agentflow_index.json has {key}={meta.get(key)!r}, expected true or false")
    return n_docs


def _check_vocab(folder: Path, vocab: Any, name: str) -> None:
    if not isinstance(vocab, dict):
        raise corrupted(folder, f"{name} should hold a JSON object of term ids")
    n = len(vocab)
    if not n:
        return
    ids = np.array(list(vocab.values()))
    if ids.dtype.kind not in "iub":  # text, fractions, or integers too large for int64
        raise corrupted(folder, f"{name} has a term id that is not an integer (or out of range)")
    if ids.min() < 0 or ids.max() >= n:
        raise corrupted(folder, f"{name} has term ids outside 0..{n - 1}")
    if not (np.bincount(ids, minlength=n) == 1).all():
        raise corrupted(folder, f"{name} gives two terms the same id")


def check_structure(
    folder: Path,
    meta: dict[str, Any],
    arrays: dict[str, Any],
    vocab: Any,
    passages_bytes: int,
    names: dict[str, str],
) -> None:
    """Everything the retrieval kernel and the passage store rely on, or :class:`IndexCorrupted`.

    ``arrays`` holds ``data``, ``indices``, ``indptr`` and ``offsets``; ``names`` maps those keys (and
    ``vocab``) to file names for the messages.
    """
    n_docs = _check_meta(folder, meta)
    data, indices, indptr, offsets = (arrays[k] for k in ("data", "indices", "indptr", "offsets"))
    _expect(folder, names["data"], data, np.float32)
    _expect(folder, names["indices"], indices, np.int32)
    _expect(folder, names["indptr"], indptr, np.int64)
    _expect(folder, names["offsets"], offsets, np.int64)
    _check_vocab(folder, vocab, names["vocab"])

    n_terms, nnz = len(vocab), len(data)
    if len(indptr) != n_terms + 1:
        raise corrupted(folder, f"{names['indptr']} has {len(indptr)} entries for {n_terms} terms (expected terms + 1)")
    if len(indices) != nnz:
        raise corrupted(folder, f"{names['indices']} has {len(indices)} entries but {names['data']} has {nnz}")
    if indptr[0] != 0 or indptr[-1] != nnz:
        raise corrupted(folder, f"{names['indptr']} must run from 0 to {nnz}, not {indptr[0]} to {indptr[-1]}")
    starts = np.asarray(indptr[1:-1])
    if not _increasing(indptr, strict=False):
        raise corrupted(folder, f"{names['indptr']} is not monotone")
    last = None
    for lo in _chunks(nnz):  # one pass, bounded temporaries: ids in range, sorted within a term; scores > 0
        hi = min(nnz, lo + _CHUNK)
        ids = np.asarray(indices[lo:hi])
        if ids.min() < 0 or ids.max() >= n_docs:
            raise corrupted(folder, f"{names['indices']} has document ids outside 0..{n_docs - 1}")
        # a document id may only fall (or repeat) where a new term's postings start
        down = np.empty(hi - lo, dtype=bool)
        down[1:] = ids[1:] <= ids[:-1]
        down[0] = last is not None and ids[0] <= last
        first, end = np.searchsorted(starts, [lo, hi])
        down[starts[first:end] - lo] = False
        if down.any():
            raise corrupted(folder, f"{names['indices']} repeats or reorders documents within a term")
        last = ids[-1]
        scores = np.asarray(data[lo:hi])
        if not (np.isfinite(scores) & (scores > 0)).all():
            raise corrupted(folder, f"{names['data']} holds a score that is not a positive finite number")
    if len(offsets) != n_docs + 1:
        raise corrupted(folder, f"{names['offsets']} has {len(offsets)} entries for n_docs={n_docs} (expected + 1)")
    if offsets[0] != 0 or offsets[-1] != passages_bytes:
        raise corrupted(folder, f"{names['offsets']} must run from 0 to the passages file's {passages_bytes} bytes")
    if not _increasing(offsets, strict=True):
        raise corrupted(folder, f"{names['offsets']} is not increasing")
