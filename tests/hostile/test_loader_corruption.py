"""Damaged test-set files: every paper loader gives a DataError naming the file (and the record, and what
to fix) or loads correct tasks; never a raw UnicodeDecodeError, RecursionError, ValueError or crash.

Byte-level damage (flips, cuts, insertions) and structural damage (binary data, bad UTF-8, very deep JSON,
50,000-digit integers, NaN/Infinity/missing/null/nested golds) on small files made here; the deep-JSON
cases run in a subprocess so that a stack overflow could not take pytest down with it.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import DataError
from benchmarks.paper.catalog import BENCHMARKS
from benchmarks.paper.loading import load_paper_tasks

ROOT = Path(__file__).resolve().parents[2]

VALID: dict[str, list[dict]] = {
    "Bamboogle": [{"pid": i, "question": f"Who founded company {i}?", "answer": [f"Founder {i}"]} for i in range(4)],
    "AIME24": [{"pid": i, "question": f"Compute {i} + 1.", "answer": str(i + 1)} for i in range(4)],
    "GameOf24": [{"pid": i, "question": "4 6 1 1", "query": "", "answer": ["4*6*1*1"]} for i in range(1)]
    + [{"pid": 9, "question": [3, 8, 1, 1], "query": "", "answer": "3*8*1*1"}],
    "GPQA": [
        {
            "pid": i,
            "question": f"Science {i}?",
            "choices": [f"A. x{i}", f"B. y{i}", f"C. z{i}", f"D. w{i}"],
            "answer_idx": i % 4,
        }
        for i in range(4)
    ],
    "MedQA": [
        {
            "pid": i,
            "question": f"Patient {i}?",
            "options": [f"cause {i}", f"other {i}", f"third {i}"],
            "answer": f"other {i}",
        }
        for i in range(4)
    ],
    "GAIA": [{"pid": "g", "question": "How many?", "answer": "3", "task_id": "t1", "Level": 1, "file_name": ""}],
}


def _write(folder: Path, name: str, data: bytes | str, suffix: str = ".json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{BENCHMARKS[name].file}{suffix}"
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def _load(name: str, folder: Path) -> list:
    return list(load_paper_tasks(BENCHMARKS[name], data_dir=folder, seed=0))


def _check_tasks(name: str, tasks: list) -> None:
    """What a successful load must give: real questions, finite non-empty golds, a valid letter."""
    assert tasks
    for t in tasks:
        assert isinstance(t.question, str) and t.question.strip()
        golds = t.answer if isinstance(t.answer, list) else [t.answer]
        assert all(isinstance(g, str) for g in golds)
        if BENCHMARKS[name].kind != "game24":
            assert golds and all(g.strip() for g in golds)
            assert not any(g.strip().lower() in ("nan", "inf", "-inf", "infinity", "none") for g in golds)
        if BENCHMARKS[name].kind == "choice":
            options = t.metadata["options"]
            assert len(options) >= 2 and 0 <= ord(t.answer) - ord("A") < len(options)
        if BENCHMARKS[name].kind == "game24":
            assert len(t.metadata["numbers"]) == 4


def _expect_data_error(name: str, folder: Path, path: Path, *fragments: str) -> DataError:
    with pytest.raises(DataError) as info:
        _load(name, folder)
    message = str(info.value)
    assert str(path) in message, message  # names the file
    for fragment in fragments:
        assert fragment in message, message
    return info.value


@pytest.mark.parametrize("name", list(VALID))
def test_valid_files_load(tmp_path: Path, name: str) -> None:
    _write(tmp_path, name, json.dumps(VALID[name]))
    _check_tasks(name, _load(name, tmp_path))


# ------------------------------------------------------------------ structural damage
BIG = "1" * 50_000


def _row_with(name: str, field: str, raw_json: str) -> str:
    """VALID[name] as JSON with record 1's ``field`` replaced by the raw JSON text ``raw_json``."""
    rows = [dict(r) for r in VALID[name]] + ([dict(VALID[name][0], pid="x")] if len(VALID[name]) < 2 else [])
    rows[1][field] = "__RAW__"
    return json.dumps(rows).replace('"__RAW__"', raw_json)


STRUCTURAL = [
    # (benchmark, file text or bytes, fragments the message must hold)
    ("Bamboogle", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", ["not UTF-8"]),
    ("Bamboogle", b'[{"question": "caf\xe9?", "answer": "x"}]', ["not UTF-8", "offset"]),
    ("Bamboogle", b'[{"question": "q\x00", "answer": "x"}]', ["NUL"]),
    ("Bamboogle", _row_with("Bamboogle", "answer", BIG), ["digits"]),
    ("Bamboogle", _row_with("Bamboogle", "answer", "NaN"), ["NaN"]),
    ("Bamboogle", _row_with("Bamboogle", "answer", "[Infinity]"), ["Infinity"]),
    ("Bamboogle", _row_with("Bamboogle", "answer", "null"), ["record 1", "gold answer"]),
    ("Bamboogle", _row_with("Bamboogle", "answer", "[]"), ["record 1", "gold answer"]),
    ("Bamboogle", _row_with("Bamboogle", "answer", '{"a": 1}'), ["record 1", "gold answer"]),
    ("Bamboogle", _row_with("Bamboogle", "answer", "[[1, 2]]"), ["record 1", "gold answer"]),
    ("Bamboogle", _row_with("Bamboogle", "answer", "true"), ["record 1"]),
    ("Bamboogle", _row_with("Bamboogle", "question", "42"), ["record 1", "question"]),
    ("AIME24", _row_with("AIME24", "answer", "-Infinity"), ["Infinity"]),
    ("AIME24", _row_with("AIME24", "answer", '"  "'), ["record 1", "gold answer"]),
    ("AIME24", _row_with("AIME24", "answer", '["1", "2"]'), ["record 1"]),
    ("GPQA", _row_with("GPQA", "answer_idx", "NaN"), ["NaN"]),
    ("GPQA", _row_with("GPQA", "answer_idx", '"x"'), ["record 1", "answer index"]),
    ("GPQA", _row_with("GPQA", "answer_idx", "2.5"), ["record 1", "answer index"]),
    ("GPQA", _row_with("GPQA", "answer_idx", "7"), ["record 1", "outside"]),
    ("GPQA", _row_with("GPQA", "answer_idx", "true"), ["record 1", "answer index"]),
    ("GPQA", _row_with("GPQA", "answer_idx", BIG), ["digits"]),
    ("GPQA", _row_with("GPQA", "choices", '"abcd"'), ["record 1", "choices"]),
    ("GPQA", _row_with("GPQA", "choices", '[{"x": 1}, "b"]'), ["record 1", "option"]),
    ("GPQA", _row_with("GPQA", "choices", '["same", "same"]'), ["record 1", "distinct options"]),
    ("MedQA", _row_with("MedQA", "answer", "NaN"), ["NaN"]),
    ("MedQA", _row_with("MedQA", "answer", '"not an option"'), ["record 1", "matches 0"]),
    ("MedQA", _row_with("MedQA", "options", '{"A": "x", "B": [1]}'), ["record 1", "option"]),
    ("GameOf24", _row_with("GameOf24", "question", "[1, 2, 3]"), ["record 1", "exactly 4"]),
    ("GameOf24", _row_with("GameOf24", "question", f"[1, 2, 3, {'9' * 30}]"), ["record 1", "normal size"]),
    ("GameOf24", _row_with("GameOf24", "question", '"4 six 1 1"'), ["record 1", "integers"]),
    ("GameOf24", _row_with("GameOf24", "question", "[1.5, 2, 3, 4]"), ["record 1"]),
    ("GameOf24", _row_with("GameOf24", "answer", "7"), ["record 1", "solutions"]),
    ("GAIA", '[{"pid": 1, "question": "q", "task_id": "t", "Level": 1, "file_name": ""}]', ["record 0", "answer"]),
    ("Bamboogle", "", ["empty"]),
    ("Bamboogle", "[]", ["no records"]),
    ("Bamboogle", '{"a": 1}', ["list of records"]),
    ("Bamboogle", "[1, 2]", ["record 0"]),
]


@pytest.mark.parametrize(
    ("name", "data", "fragments"), STRUCTURAL, ids=[f"{c[0]}-{i}" for i, c in enumerate(STRUCTURAL)]
)
def test_structural_damage_is_a_clear_data_error(tmp_path: Path, name: str, data, fragments: list[str]) -> None:
    path = _write(tmp_path, name, data)
    _expect_data_error(name, tmp_path, path, *fragments)


def test_jsonl_damage_names_the_line(tmp_path: Path) -> None:
    lines = [json.dumps(r) for r in VALID["Bamboogle"]]
    path = _write(
        tmp_path, "Bamboogle", "\n".join([*lines[:2], '{"question": "q", "answer": NaN}', *lines[2:]]), ".jsonl"
    )
    _expect_data_error("Bamboogle", tmp_path, path, "line 3", "NaN")
    path.write_bytes(b"\n".join(x.encode() for x in lines) + b'\n{"question": "\xff"}')
    _expect_data_error("Bamboogle", tmp_path, path, "not UTF-8")


def test_gym_make_raises_the_data_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "GPQA", _row_with("GPQA", "answer_idx", "NaN"))
    with pytest.raises(DataError, match="NaN") as info:
        gym.make("agentflow/GPQA-v1", data_dir=str(tmp_path), disable_env_checker=True)
    assert str(path) in str(info.value)


_DEEP_SCRIPT = """
import sys
from pathlib import Path
from agentflow_env.error import DataError
from benchmarks.paper.catalog import BENCHMARKS
from benchmarks.paper.loading import load_paper_tasks
folder = Path(sys.argv[1])
try:
    load_paper_tasks(BENCHMARKS["Bamboogle"], data_dir=folder)
except DataError as exc:
    print("DataError:", exc)
"""


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        '[{"question": "q", "answer": ' + "[" * 100_000 + "]" * 100_000 + "}]",
        '[{"question": "q", "answer": ' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}]",
    ],
    ids=["deep-list", "deep-gold", "deep-object"],
)
def test_very_deep_json_is_a_data_error_in_a_subprocess(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, "Bamboogle", text)
    out = subprocess.run(
        [sys.executable, "-c", _DEEP_SCRIPT, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]  # no crash, no other exception
    assert out.stdout.startswith("DataError:") and str(path) in out.stdout and "deep" in out.stdout, out.stdout


def test_damaged_parquet_is_a_data_error(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "rows.parquet"
    path.write_bytes(b"PAR1" + bytes(range(256)) * 4 + b"PAR1")
    with pytest.raises(DataError, match="Parquet") as info:
        load_paper_tasks(BENCHMARKS["Bamboogle"], path=path)
    assert str(path) in str(info.value)


# ------------------------------------------------------------------ byte-level damage (fuzzed)
def _damage(data: bytes, edits: list[tuple[str, int, bytes]]) -> bytes:
    buf = bytearray(data)
    for kind, pos, blob in edits:
        pos = pos % (len(buf) + 1)
        if kind == "flip" and buf:
            buf[min(pos, len(buf) - 1)] ^= blob[0] or 1
        elif kind == "insert":
            buf[pos:pos] = blob
        elif kind == "delete":
            del buf[pos : pos + len(blob)]
        elif kind == "cut":
            del buf[pos:]
    return bytes(buf)


EDITS = st.lists(
    st.tuples(
        st.sampled_from(["flip", "insert", "delete", "cut"]),
        st.integers(min_value=0, max_value=10_000),
        st.binary(min_size=1, max_size=8),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(list(VALID)), edits=EDITS, jsonl=st.booleans())
def test_byte_damage_gives_data_error_or_correct_tasks(tmp_path_factory, name: str, edits, jsonl: bool) -> None:
    folder = tmp_path_factory.mktemp("bytes")
    rows = VALID[name]
    clean = ("\n".join(json.dumps(r) for r in rows) if jsonl else json.dumps(rows, indent=1)).encode("utf-8")
    path = _write(folder, name, _damage(clean, edits), ".jsonl" if jsonl else ".json")
    try:
        tasks = _load(name, folder)
    except DataError as exc:
        assert str(path) in str(exc)
        return
    _check_tasks(name, tasks)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)
FIELDS = ["question", "answer", "choices", "answer_idx", "options", "query", "pid"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(list(VALID)),
    changes=st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, min_size=1, max_size=3),
    drop=st.lists(st.sampled_from(FIELDS), max_size=2),
)
def test_structural_fuzz_gives_data_error_or_correct_tasks(tmp_path_factory, name: str, changes, drop) -> None:
    folder = tmp_path_factory.mktemp("fields")
    rows = [dict(r) for r in VALID[name]]
    rows[0].update(changes)
    for key in drop:
        rows[0].pop(key, None)
    path = _write(folder, name, json.dumps(rows, allow_nan=True))
    try:
        tasks = _load(name, folder)
    except DataError as exc:
        assert str(path) in str(exc)
        return
    _check_tasks(name, tasks)
    for value in changes.values():  # a non-finite number never becomes a gold or an option
        if isinstance(value, float) and not math.isfinite(value):
            texts = [str(t.answer) for t in tasks] + [o for t in tasks for o in t.metadata.get("options", [])]
            assert not any(x in ("nan", "inf", "-inf") for x in texts)
