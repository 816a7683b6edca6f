"""The board as a user renders it: their own runs beside the stored references, no rows for empty runs, the
hash of a protocol given as a TOML path, no absolute paths, and a page that fits a 900 px window."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from leaderboards.protocol import load_protocol
from leaderboards.render import board_rows, group_by_protocol, render_site
from leaderboards.runner import EvalConfig, evaluate
from leaderboards.store import RESULTS_DIR, RunRecord, write_json_atomic
from tests.headless_chromium import Chromium, chromium_path

TINY = """
name = "tiny-board"
max_turns = 4
seeds = [0]
[env]
executor = "direct"
verifier = "rule"
generator = "planner"
[[benchmarks]]
env_id = "agentflow/Gen-GameOf24-v1"
label = "G24"
category = "math"
num_tasks = 6
"""


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A references folder and a folder of one's own runs (one with a name the references use, one empty)."""
    root = tmp_path_factory.mktemp("board")
    protocol = root / "tiny-board.toml"
    protocol.write_text(TINY)
    refs, mine = root / "refs", root / "mine"
    evaluate(EvalConfig(policy="scripted", protocol=str(protocol), out=refs, progress=False))
    evaluate(EvalConfig(policy="random", protocol=str(protocol), out=mine, name="scripted", progress=False))
    evaluate(EvalConfig(policy="random", protocol=str(protocol), out=mine, name="my-random", progress=False))
    empty = RunRecord.from_dict(json.loads((mine / "tiny-board" / "my-random" / "run.json").read_text()))
    empty.name = "crashed"
    write_json_atomic(mine / "tiny-board" / "crashed" / "run.json", empty.to_dict())  # no tasks.jsonl: 0 episodes
    return protocol, refs, mine


def test_several_results_folders_render_together(folders: tuple[Path, Path, Path]) -> None:
    protocol, refs, mine = folders
    (board,) = [board_rows(runs) for runs in group_by_protocol([refs, mine]).values()]
    names = [r.name for r in board.rows]
    assert names[0] == "scripted" and "my-random" in names
    assert any(n.startswith("scripted @ ") and n.endswith("mine") for n in names)  # same name, other folder
    assert "crashed" not in names  # a run with no finished episode gets no row
    # a protocol given by path: its hash comes from the runs, and they are current under it
    assert board.protocol_hash == load_protocol(str(protocol)).hash
    assert all(r.current for r in board.rows)


def test_the_site_prints_no_absolute_paths(folders: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, refs, mine = folders
    site = tmp_path / "site"
    render_site([refs, mine], site, charts=False)
    for name in ("index.html", "leaderboard.md", "leaderboard.json"):
        text = (site / name).read_text(encoding="utf-8")
        assert str(refs.parent) not in text and "/tmp/" not in text, name
        assert "protocol hash unknown" not in text and "unknown</code>" not in text, name
    assert ".../refs + .../mine" in (site / "index.html").read_text(encoding="utf-8")


def test_show_lists_the_references_and_ones_own_runs_together(
    folders: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Run in a folder whose ./runs/leaderboard holds one's runs: the packaged references stay on the board."""
    from agentflow_env.cli import main

    _, _, mine = folders
    shutil.copytree(mine, tmp_path / "runs" / "leaderboard")
    monkeypatch.chdir(tmp_path)
    assert main(["leaderboard", "show"]) == 0
    out = capsys.readouterr().out
    assert "## offline-v1" in out and "## tiny-board" in out and "my-random" in out
    assert main(["leaderboard", "show", "--results", str(mine)]) == 0
    assert "## offline-v1" not in capsys.readouterr().out


@pytest.mark.skipif(chromium_path() is None, reason="needs chromium (apt-get install chromium)")
def test_the_board_fits_900_px(tmp_path: Path) -> None:
    """At 900 px the page never scrolls sideways; five-benchmark boards fit whole, and wider boards (the
    paper's ten) scroll inside their own box, where the last column can be reached."""
    render_site(RESULTS_DIR, tmp_path, charts=False)
    with Chromium(width=900, height=900) as browser:
        browser.open((tmp_path / "index.html").as_uri())
        page, view = browser.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert page <= view, (page, view)
        boxes = browser.evaluate(
            "Array.prototype.map.call(document.querySelectorAll('.wrap'), function(w){"
            " var shown = Array.prototype.filter.call(w.querySelectorAll('th'), function(h){"
            "  return h.getBoundingClientRect().width > 0});"
            " var n = shown.length; w.scrollLeft = w.scrollWidth;"
            " var last = shown[n - 1].getBoundingClientRect();"
            " var box = w.getBoundingClientRect();"
            " return [n, w.scrollWidth, w.clientWidth, last.right <= box.right + 1, last.left >= box.left]})"
        )
        assert boxes, "the site has tables"
        for columns, scroll, visible, right_in, left_in in boxes:
            assert right_in and left_in, (columns, scroll, visible)
            if columns <= 12:  # the offline boards: 5 benchmarks (episodes, wall time, commit hidden)
                assert scroll <= visible, (columns, scroll, visible)
