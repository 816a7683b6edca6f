"""The claims check (experiments/check_claims.py): every registered figure of README.md and docs/**/*.md agrees
with the committed output that produced it, and the check fails when a number in the text, a value in an
output, or the text itself goes (the registry in experiments/claims.toml)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import check_claims as cc

ROOT = Path(__file__).resolve().parents[2]


def test_every_registered_claim_holds_in_this_checkout():
    results = cc.check_all(ROOT)
    assert results, "the registry is empty"
    failed = [f"{r.claim}: {r.status}" for r in results if not r.ok]
    assert not failed, "claims that disagree with their committed outputs:\n" + "\n".join(failed)


def test_the_command_exits_0_when_all_hold():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "check_claims.py")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "claims hold" in proc.stdout


@pytest.fixture()
def copy(tmp_path) -> Path:
    """A checkout-shaped copy: README, the registry, and the outputs it reads (the text moved into docs/ too)."""
    root = tmp_path / "root"
    (root / "experiments").mkdir(parents=True)
    shutil.copy(ROOT / "experiments" / "claims.toml", root / "experiments" / "claims.toml")
    for claim in cc.load_registry(ROOT / "experiments" / "claims.toml"):
        target = root / claim.output
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / claim.output, target)
    shutil.copy(ROOT / "README.md", root / "README.md")
    if (ROOT / "docs").is_dir():
        shutil.copytree(ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns("_build"))
    return root


def _status(root: Path, claim_id: str) -> cc.Result:
    return next(r for r in cc.check_all(root) if r.claim == claim_id)


def test_a_changed_number_in_the_text_fails(copy):
    claim = next(c for c in cc.load_registry(copy / "experiments" / "claims.toml") if not c.expect_fail)
    docs = cc.documents(copy)  # wherever the text lives now (README.md or a docs page)
    name, match = next((n, m) for n, text in docs.items() if (m := claim.pattern.search(text)))
    group = next(iter(claim.values))
    start, end = match.span(group)
    text = docs[name]
    stated = text[start:end]
    changed = stated[:-1] + ("1" if stated[-1] != "1" else "2")
    (copy / name).write_text(text[:start] + changed + text[end:], encoding="utf-8")
    result = _status(copy, claim.id)
    assert not result.ok and "states" in result.status


def test_a_changed_output_value_fails(copy):
    claim = next(
        c for c in cc.load_registry(copy / "experiments" / "claims.toml") if not c.expect_fail and ":" not in
        next(iter(c.values.values()))
    )  # fmt: skip
    path = copy / claim.output
    data = json.loads(path.read_text(encoding="utf-8"))
    keys = next(iter(claim.values.values())).split(".")
    node = data
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    last = int(keys[-1]) if isinstance(node, list) else keys[-1]
    node[last] = node[last] * 1.5 + 1  # type: ignore[index]
    path.write_text(json.dumps(data), encoding="utf-8")
    result = _status(copy, claim.id)
    assert not result.ok and "the output gives" in result.status


def test_text_moved_into_docs_still_counts_and_text_found_nowhere_fails(copy):
    claim_id = "speed.eval-throughput.c64-l500"
    claim = next(c for c in cc.load_registry(copy / "experiments" / "claims.toml") if c.id == claim_id)
    name, text = next((n, t) for n, t in cc.documents(copy).items() if claim.pattern.search(t))
    match = claim.pattern.search(text)
    (copy / "docs").mkdir(exist_ok=True)
    reflowed = match.group(0).replace(", ", ",\n  ")  # the new page breaks its lines elsewhere
    marker = f" (committed in {claim.measured_on})" if claim.measured_on else ""  # the commit moves with it
    (copy / "docs" / "moved.md").write_text(f"# Moved\n\nMeasured{marker} {reflowed}.\n", encoding="utf-8")
    (copy / name).write_text(text[: match.start()] + text[match.end() :], encoding="utf-8")
    assert all(r.ok for r in cc.check_all(copy))
    moved = _status(copy, claim_id)
    assert moved.ok and {f["file"] for f in moved.found} == {"docs/moved.md"}
    (copy / "docs" / "moved.md").unlink()
    gone = _status(copy, claim_id)
    assert not gone.ok and "found nowhere" in gone.status


def test_a_missing_output_and_a_bad_registry_are_clear(copy, tmp_path):
    claim = cc.load_registry(copy / "experiments" / "claims.toml")[0]
    (copy / claim.output).unlink()
    assert "is missing" in _status(copy, claim.id).status
    bad = tmp_path / "bad.toml"
    bad.write_text('[[claim]]\nid = "x"\npattern = "(?P<a>1)"\noutput = "o.json"\nvalues = { b = "k" }\n')
    with pytest.raises(cc.RegistryError, match="groups"):
        cc.load_registry(bad)


def test_a_tie_in_the_shown_value_reads_either_way(tmp_path):
    """0.2425 in the JSON is 225/928 = 0.24246 rounded once: 24.2 and 24.3 both agree with it, 24.4 does not."""
    (tmp_path / "experiments").mkdir()
    (tmp_path / "out.json").write_text('{"v": 0.2425}')
    (tmp_path / "experiments" / "claims.toml").write_text(
        '[[claim]]\nid = "t"\npattern = "rate (?P<v>[0-9.]+)%"\noutput = "out.json"\n'
        'values = { v = "v" }\nscale = 100\n'
    )
    for text, ok in (("24.2", True), ("24.3", True), ("24.4", False)):
        (tmp_path / "README.md").write_text(f"the rate {text}% here")
        assert cc.check_all(tmp_path)[0].ok is ok, text


def test_rounding_and_value_paths():
    assert cc.formatted(0.825, 1, ".2f") == "0.83"  # half up on the figure the JSON shows
    assert cc.formatted(-0.43348, 100, ".1f") == "-43.3"
    assert cc.formatted(0.1142, 100, "+.1f") == "+11.4"
    assert cc.formatted(1117.2, 1, ",.0f") == "1,117"
    assert cc.formatted(-0.0001, 100, ".1f") == "0.0"
    data = {"runs": [{"r": 0.5, "k": "a"}, {"r": 0.7, "k": "b"}], "d": {"0": 1.0}}
    assert cc.resolve(data, "runs.1.r") == 0.7 and cc.resolve(data, "d.0") == 1.0
    assert cc.resolve(data, "max:runs.*.r") == 0.7 and cc.resolve(data, "len:runs.*") == 2
    assert cc.resolve(data, "len:d.0*") == 1 and cc.resolve(data, "len:d.x*") == 0
    assert cc.resolve(data, "runs.[k=b].r") == 0.7 and cc.resolve(data, "mean:runs.[r=0.5].r") == 0.5
    with pytest.raises(KeyError, match="reducer"):
        cc.resolve(data, "runs.*.r")
    assert cc.resolve(data, "tlo:runs.*.r") < 0.6 < cc.resolve(data, "thi:runs.*.r")


def test_an_unknown_rerun_word_is_a_registry_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[[claim]]\nid = "x"\npattern = "(?P<a>1)"\noutput = "o.json"\nvalues = { a = "k" }\nrerun = "yes"\n'
    )
    with pytest.raises(cc.RegistryError, match="rerun"):
        cc.load_registry(bad)
