"""Damaged BM25 index folders: a clear error naming the folder (or the correct results), never a crash.

A small index is built, then copied and damaged byte by byte (flips over every file's header and body) and
structurally (truncated or missing files, swapped arrays, wrong dtypes or shapes, halved ``n_docs``, term ids out
of range, document ids out of range or unsorted, NaN or negative scores, a non-monotone ``indptr``, bad offsets,
bad JSON). The retrieval kernel has no bounds checks, so opening and querying the damaged folders runs in a child
Python process: a segfault or abort fails the case it happened in instead of killing pytest.

Two ways to meet damage: as built (the checksums written at build time are verified on load), and with the
checksum table removed, as in a folder built before checksums or with ``verify=False``, where the structural
checks alone must stop everything that could crash or mislead the kernel.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentflow_env.error import DataError, IndexCorrupted
from agentflow_env.tools.bm25 import BM25Index
from agentflow_env.tools.bm25.check import (
    DATA_FILE,
    INDICES_FILE,
    INDPTR_FILE,
    META_FILE,
    OFFSETS_FILE,
    PARAMS_FILE,
    PASSAGES_FILE,
    VOCAB_FILE,
)
from agentflow_env.tools.search import BM25SearchTool

pytest.importorskip("numba")
pytest.importorskip("bm25s")

WORDS = [f"w{i}" for i in range(150)]
QUERIES = [" ".join(WORDS[i : i + 3]) for i in range(0, len(WORDS), 3)]
FILES = (DATA_FILE, INDICES_FILE, INDPTR_FILE, VOCAB_FILE, PARAMS_FILE, PASSAGES_FILE, OFFSETS_FILE, META_FILE)
ARRAYS = {"data": DATA_FILE, "indices": INDICES_FILE, "indptr": INDPTR_FILE, "offsets": OFFSETS_FILE}

# the child: open each folder, query every word, and print one JSON line before and after each case
CHILD = r"""
import json, sys
from agentflow_env.tools.bm25 import BM25Index
from agentflow_env.tools.search import BM25SearchTool
cases, queries = json.load(open(sys.argv[1]))
for name, folder, verify in cases:
    print(json.dumps({"begin": name}), flush=True)
    out = {"case": name, "stage": "load"}
    try:
        index = BM25Index.load(folder, verify=verify)
        out["stage"] = "query"  # a damaged passage is found when it is read
        hits = index.search_batch(queries, 8)
        out["hits"] = [[[h.id, round(h.score, 4), h.title] for h in q] for q in hits]
        index.close()
    except Exception as exc:
        out["error"] = type(exc).__name__
        out["message"] = str(exc)
    tool = BM25SearchTool(index_path=folder, top_k=3)
    result = tool.run(queries[0])
    tool.close()
    out["tool_ok"], out["tool_text"] = result.ok, result.text
    print(json.dumps(out), flush=True)
"""


def build_index(folder: Path) -> None:
    rng = np.random.default_rng(7)
    probs = 1.0 / np.arange(1, len(WORDS) + 1)
    probs /= probs.sum()
    passages = [
        {"id": f"d{i}", "title": f"T{i}", "text": " ".join(rng.choice(WORDS, size=int(rng.integers(4, 25)), p=probs))}
        for i in range(120)
    ]
    BM25Index.build(passages, out_dir=folder, chunk_size=50).close()


def strip_checksums(folder: Path) -> None:
    meta = json.loads((folder / META_FILE).read_text())
    meta.pop("checksums", None)
    (folder / META_FILE).write_text(json.dumps(meta))


# ------------------------------------------------------------------------------------------ the damage


def flip(name: str, pos: int) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        raw = bytearray((folder / name).read_bytes())
        raw[pos % len(raw)] ^= 0xA5
        (folder / name).write_bytes(bytes(raw))

    return damage


def truncate(name: str, fraction: float) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        raw = (folder / name).read_bytes()
        (folder / name).write_bytes(raw[: int(len(raw) * fraction)])

    return damage


def missing(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).unlink()


def swap(a: str, b: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        (folder / a).rename(folder / "tmp")
        (folder / b).rename(folder / a)
        (folder / "tmp").rename(folder / b)

    return damage


def edit_array(key: str, change: Callable[[np.ndarray], np.ndarray | None]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / ARRAYS[key]
        arr = np.load(path).copy()
        out = change(arr)
        np.save(path, arr if out is None else out, allow_pickle=True)

    return damage


def edit_json(name: str, change: Callable[[Any], Any]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        value = json.loads((folder / name).read_text())
        out = change(value)
        (folder / name).write_text(json.dumps(value if out is None else out))

    return damage


def random_bytes(name: str, seed: int = 0) -> Callable[[Path], None]:
    """Random bytes over the body of a .npy file (its header kept), as a damaged disk would leave it."""

    def damage(folder: Path) -> None:
        raw = bytearray((folder / name).read_bytes())
        start = 128 if name.endswith(".npy") else 0
        raw[start:] = np.random.default_rng(seed).integers(0, 256, size=len(raw) - start, dtype=np.uint8).tobytes()
        (folder / name).write_bytes(bytes(raw))

    return damage


def _set(arr: np.ndarray, where: Any, value: Any) -> None:
    arr[where] = value


def _swap_two(arr: np.ndarray, i: int, j: int) -> None:
    arr[[i, j]] = arr[[j, i]]


def _vocab_set(vocab: dict[str, int], value: Any) -> None:
    vocab[next(iter(vocab))] = value


def _vocab_duplicate(vocab: dict[str, int]) -> None:
    keys = list(vocab)
    vocab[keys[0]] = vocab[keys[1]]


def _vocab_drop(vocab: dict[str, int]) -> None:
    last = max(vocab, key=vocab.__getitem__)
    del vocab[last]


def _meta_set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda meta: meta.__setitem__(key, value)


def _term_with_postings(folder: Path, at_least: int = 2) -> tuple[int, int]:
    indptr = np.load(folder / INDPTR_FILE)
    term = int(np.flatnonzero(np.diff(indptr) >= at_least)[0])
    return int(indptr[term]), int(indptr[term + 1])


def _unsort_postings(folder: Path) -> None:
    lo, _ = _term_with_postings(folder)
    edit_array("indices", lambda a: _swap_two(a, lo, lo + 1))(folder)


def _repeat_posting(folder: Path) -> None:
    lo, _ = _term_with_postings(folder)
    edit_array("indices", lambda a: _set(a, lo + 1, a[lo]))(folder)


STRUCTURAL: dict[str, Callable[[Path], None]] = {
    **{f"truncate_half_{n}": truncate(n, 0.5) for n in FILES},
    **{f"truncate_empty_{n}": truncate(n, 0.0) for n in FILES},
    **{f"missing_{n}": missing(n) for n in FILES},
    "swap_data_indices": swap(DATA_FILE, INDICES_FILE),
    "swap_indices_indptr": swap(INDICES_FILE, INDPTR_FILE),
    "swap_indptr_offsets": swap(INDPTR_FILE, OFFSETS_FILE),
    "halve_n_docs": edit_json(META_FILE, lambda m: m.__setitem__("n_docs", m["n_docs"] // 2)),
    "double_n_docs": edit_json(META_FILE, lambda m: m.__setitem__("n_docs", m["n_docs"] * 2)),
    "zero_n_docs": edit_json(META_FILE, _meta_set("n_docs", 0)),
    "text_n_docs": edit_json(META_FILE, _meta_set("n_docs", "120")),
    "nan_k1": edit_json(META_FILE, _meta_set("avgdl", float("nan"))),
    "stem_not_bool": edit_json(META_FILE, _meta_set("stem", "yes")),
    "meta_not_json": lambda f: (f / META_FILE).write_bytes(b"{\xff not json"),
    "meta_a_list": edit_json(META_FILE, lambda m: [m]),
    "vocab_id_out_of_range": edit_json(VOCAB_FILE, lambda v: _vocab_set(v, len(v) + 3)),
    "vocab_id_huge": edit_json(VOCAB_FILE, lambda v: _vocab_set(v, 2**40)),
    "vocab_id_negative": edit_json(VOCAB_FILE, lambda v: _vocab_set(v, -1)),
    "vocab_id_text": edit_json(VOCAB_FILE, lambda v: _vocab_set(v, "3")),
    "vocab_id_float": edit_json(VOCAB_FILE, lambda v: _vocab_set(v, 1.5)),
    "vocab_id_duplicate": edit_json(VOCAB_FILE, _vocab_duplicate),
    "vocab_term_dropped": edit_json(VOCAB_FILE, _vocab_drop),
    "vocab_term_added": edit_json(VOCAB_FILE, lambda v: v.__setitem__("zzz", len(v))),
    "vocab_a_list": edit_json(VOCAB_FILE, lambda v: list(v)),
    "vocab_not_json": lambda f: (f / VOCAB_FILE).write_bytes(b"\x00\x01garbage"),
    "data_float64": edit_array("data", lambda a: a.astype(np.float64)),
    "data_2d": edit_array("data", lambda a: a.reshape(1, -1)),
    "data_nan": edit_array("data", lambda a: _set(a, 3, np.nan)),
    "data_inf": edit_array("data", lambda a: _set(a, -1, np.inf)),
    "data_negative": edit_array("data", lambda a: _set(a, 0, -1.0)),
    "data_zero": edit_array("data", lambda a: _set(a, 5, 0.0)),
    "data_object_pickle": edit_array("data", lambda a: a.astype(object)),
    "indices_int64": edit_array("indices", lambda a: a.astype(np.int64)),
    "indices_big_endian": edit_array("indices", lambda a: a.astype(">i4")),
    "indices_out_of_range": edit_array("indices", lambda a: _set(a, len(a) // 2, 10**6)),
    "indices_negative": edit_array("indices", lambda a: _set(a, 0, -5)),
    "indices_random_bytes": random_bytes(INDICES_FILE),
    "indices_unsorted_in_a_term": _unsort_postings,
    "indices_repeated_in_a_term": _repeat_posting,
    "indptr_int32": edit_array("indptr", lambda a: a.astype(np.int32)),
    "indptr_random_bytes": random_bytes(INDPTR_FILE),
    "indptr_not_from_zero": edit_array("indptr", lambda a: _set(a, 0, 1)),
    "indptr_past_the_end": edit_array("indptr", lambda a: _set(a, -1, a[-1] + 1000)),
    "indptr_not_monotone": edit_array("indptr", lambda a: _swap_two(a, 3, 10)),
    "indptr_huge_entry": edit_array("indptr", lambda a: _set(a, 4, 2**40)),
    "indptr_shorter": edit_array("indptr", lambda a: a[:-5]),
    "offsets_float": edit_array("offsets", lambda a: a.astype(np.float64)),
    "offsets_not_increasing": edit_array("offsets", lambda a: _swap_two(a, 2, 7)),
    "offsets_past_the_end": edit_array("offsets", lambda a: _set(a, -1, a[-1] + 99)),
    "offsets_shorter": edit_array("offsets", lambda a: a[:-3]),
    "npy_header_garbage": lambda f: (f / INDICES_FILE).write_bytes(b"\x93NUMPY garbage" + b"\x00" * 64),
}
# damage the structural checks cannot see: another valid-looking score, other passage text (the checksums can)
SILENT_WITHOUT_CHECKSUMS = {
    "data_random_bytes": random_bytes(DATA_FILE),
    "passages_random_bytes": random_bytes(PASSAGES_FILE),
}


def byte_flips(clean: Path) -> dict[str, Callable[[Path], None]]:
    """Every 8th byte of each file's first 160 bytes (the .npy header, the JSON head) and 16 spread over the rest."""
    cases = {}
    for name in FILES:
        size = (clean / name).stat().st_size
        positions = sorted({*range(0, min(size, 160), 8), *np.linspace(0, size - 1, 16).astype(int).tolist()})
        for pos in positions:
            cases[f"flip_{name}_{pos}"] = flip(name, pos)
    return cases


# ------------------------------------------------------------------------------------------ running them


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("clean") / "index"
    build_index(folder)
    return folder


def prepare(clean: Path, root: Path, cases: dict[str, Callable[[Path], None]], checked: bool) -> list[list[Any]]:
    specs: list[list[Any]] = [["clean", str(clean), True]]
    for name, damage in cases.items():
        folder = root / name
        shutil.copytree(clean, folder)
        if not checked:
            strip_checksums(folder)
        damage(folder)
        specs.append([name, str(folder), checked])
    return specs


def run_child(specs: list[list[Any]], work: Path) -> dict[str, dict[str, Any]]:
    """Open and query every folder in one child process; a crash is recorded against the case it hit."""
    spec_file = work / "cases.json"
    spec_file.write_text(json.dumps([specs, QUERIES]))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(spec_file)], capture_output=True, text=True, timeout=600)
    results: dict[str, dict[str, Any]] = {}
    current = None
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        if "begin" in row:
            current = row["begin"]
        else:
            results[row["case"]] = row
            current = None
    if current is not None:
        results[current] = {"case": current, "crash": f"exit status {proc.returncode}: {proc.stderr[-800:]}"}
    return results


def assert_clear_error(row: dict[str, Any], folder: str) -> None:
    assert "crash" not in row, row["crash"]
    assert row.get("error") in ("IndexCorrupted", "DataError"), row
    assert folder in row["message"] and "build" in row["message"].lower(), row["message"]
    if row["stage"] == "load":
        assert not row["tool_ok"] and "could not open its index" in row["tool_text"], row["tool_text"]


def assert_error_or_same(row: dict[str, Any], clean_row: dict[str, Any], folder: str) -> None:
    assert "crash" not in row, row["crash"]
    if "error" in row:
        assert_clear_error(row, folder)
    else:
        assert row["hits"] == clean_row["hits"], f"{row['case']}: different results, no error"


@pytest.fixture(scope="module")
def checked_results(clean: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("checked")
    cases = {**byte_flips(clean), **STRUCTURAL, **SILENT_WITHOUT_CHECKSUMS}
    return run_child(prepare(clean, root, cases, checked=True), root)


@pytest.fixture(scope="module")
def unchecked_results(clean: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("unchecked")
    cases = {**byte_flips(clean), **STRUCTURAL, **SILENT_WITHOUT_CHECKSUMS}
    return run_child(prepare(clean, root, cases, checked=False), root)


def test_the_clean_index_answers(checked_results: dict[str, dict[str, Any]]) -> None:
    row = checked_results["clean"]
    assert "hits" in row and sum(len(q) for q in row["hits"]) > 100
    assert row["tool_ok"]


def test_every_byte_flip_is_caught_by_the_checksums(clean: Path, checked_results: dict[str, dict[str, Any]]) -> None:
    flips = {k: v for k, v in checked_results.items() if k.startswith("flip_")}
    assert len(flips) > 150
    for name, row in flips.items():
        assert_error_or_same(row, checked_results["clean"], name)


@pytest.mark.parametrize("case", [*STRUCTURAL, *SILENT_WITHOUT_CHECKSUMS])
def test_structural_damage_with_checksums_is_a_clear_error(
    case: str, checked_results: dict[str, dict[str, Any]]
) -> None:
    assert_clear_error(checked_results[case], case)


@pytest.mark.parametrize("case", list(STRUCTURAL))
def test_structural_damage_without_checksums_is_still_a_clear_error(
    case: str, unchecked_results: dict[str, dict[str, Any]]
) -> None:
    if case.endswith(PARAMS_FILE):  # bm25s's own parameters: this package never reads them
        assert_error_or_same(unchecked_results[case], unchecked_results["clean"], case)
    else:
        assert_clear_error(unchecked_results[case], case)


def test_byte_flips_without_checksums_never_crash(unchecked_results: dict[str, dict[str, Any]]) -> None:
    """Without checksums a flip that leaves every structure valid (a score, a letter of a passage or a term, a
    posting moved to a neighbouring term) can go unseen: that is what the checksums are for. Anything else is a
    clear error, and nothing crashes."""
    cases = [name for name in unchecked_results if name.startswith("flip_") or name in SILENT_WITHOUT_CHECKSUMS]
    assert len(cases) > 150
    errors = 0
    for name in cases:
        row = unchecked_results[name]
        assert "crash" not in row, f"{name}: {row['crash']}"
        if "error" in row:
            assert_clear_error(row, name)
            errors += 1
    assert errors > len(cases) // 3  # most flips break a structure the checks see


# ------------------------------------------------------------------------------------------ in this process


def test_load_names_the_folder_file_and_fix(clean: Path, tmp_path: Path) -> None:
    folder = tmp_path / "idx"
    shutil.copytree(clean, folder)
    flip(DATA_FILE, 200)(folder)
    with pytest.raises(IndexCorrupted, match=r"data\.csc\.index\.npy does not match the checksum") as info:
        BM25Index.load(folder)
    message = str(info.value)
    assert str(folder) in message and "agentflow-env build-index" in message and "--force" in message
    assert isinstance(info.value, DataError)


def _drop_data_checksum(meta: dict[str, Any]) -> None:
    del meta["checksums"]["files"][DATA_FILE]


def test_a_tampered_checksum_table_is_an_error(clean: Path, tmp_path: Path) -> None:
    folder = tmp_path / "idx"
    shutil.copytree(clean, folder)
    edit_json(META_FILE, _drop_data_checksum)(folder)
    with pytest.raises(IndexCorrupted, match=r"lacks data\.csc\.index\.npy"):
        BM25Index.load(folder)
    edit_json(META_FILE, lambda m: m.__setitem__("checksums", "none"))(folder)
    with pytest.raises(IndexCorrupted, match="malformed"):
        BM25Index.load(folder)


def test_verify_false_skips_only_the_checksums(clean: Path, tmp_path: Path) -> None:
    folder = tmp_path / "idx"
    shutil.copytree(clean, folder)
    edit_array("data", lambda a: _set(a, 0, a[0] * 1.5))(folder)  # still a valid score: only the checksum sees it
    with pytest.raises(IndexCorrupted, match="checksum"):
        BM25Index.load(folder)
    assert len(BM25Index.load(folder, verify=False)) == 120
    edit_array("indices", lambda a: _set(a, 0, 10**6))(folder)
    with pytest.raises(IndexCorrupted, match="document ids outside"):
        BM25Index.load(folder, verify=False)


def test_an_index_without_checksums_loads_with_a_warning(clean: Path, tmp_path: Path, caplog) -> None:
    folder = tmp_path / "old"
    shutil.copytree(clean, folder)
    strip_checksums(folder)
    with caplog.at_level("WARNING"):
        index = BM25Index.load(folder)
    assert index.search("w1 w2", 3) == BM25Index.load(clean).search("w1 w2", 3)
    assert "without checksums" in caplog.text


def test_save_writes_checksums_that_verify(clean: Path, tmp_path: Path) -> None:
    saved = BM25Index.load(clean, mmap=False).save(tmp_path / "copy")
    meta = json.loads((saved / META_FILE).read_text())
    assert set(meta["checksums"]["files"]) == set(FILES) - {META_FILE}
    assert BM25Index.load(saved).search("w3", 2) == BM25Index.load(clean).search("w3", 2)


def test_an_index_of_stopwords_only_still_loads(tmp_path: Path) -> None:
    folder = tmp_path / "empty_vocab"
    BM25Index.build([{"title": "", "text": "the of and"}], out_dir=folder).close()
    index = BM25Index.load(folder)
    assert len(index) == 1 and index.vocab == {} and index.search("anything") == []


def test_the_search_tool_reports_a_damaged_index(clean: Path, tmp_path: Path) -> None:
    folder = tmp_path / "idx"
    shutil.copytree(clean, folder)
    truncate(INDICES_FILE, 0.5)(folder)
    result = BM25SearchTool(index_path=folder).run("w1")
    assert not result.ok and "IndexCorrupted" in result.text and str(folder) in result.text


def test_a_verified_folder_is_not_read_again_until_a_file_changes(clean: Path, tmp_path: Path, monkeypatch) -> None:
    from agentflow_env.tools.bm25 import check as index_check

    folder = tmp_path / "idx"
    shutil.copytree(clean, folder)
    reads: list[str] = []
    original = index_check._crc32
    monkeypatch.setattr(index_check, "_crc32", lambda path: reads.append(path.name) or original(path))
    BM25Index.load(folder)
    assert len(reads) == len(FILES) - 1
    BM25Index.load(folder)
    assert len(reads) == len(FILES) - 1  # same files, same times: not read again
    flip(PASSAGES_FILE, 40)(folder)  # rewritten: a new modification time
    with pytest.raises(IndexCorrupted, match=r"passages\.jsonl does not match"):
        BM25Index.load(folder)
    result = BM25SearchTool(index_path=folder, verify=False).run("w1")  # opens: the structure is intact
    assert "could not open" not in result.text
    assert result.ok or "IndexCorrupted" in result.text  # unless the damaged passage is among the hits
