"""Leaderboard rendering: the committed site matches the stored results; HTML, charts and a Chromium screenshot."""

from __future__ import annotations

import html
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from leaderboards.render import board_rows, group_by_protocol, render_html, render_markdown, render_site
from leaderboards.runner import EvalConfig, evaluate
from leaderboards.store import RESULTS_DIR, RunRecord, write_json_atomic

SITE = Path(__file__).resolve().parents[1] / "leaderboards" / "site"

TINY = """
name = "tiny-render"
max_turns = 4
seeds = [0]
[env]
executor = "direct"
verifier = "rule"
generator = "planner"
[[benchmarks]]
env_id = "agentflow/Gen-GameOf24-v0"
label = "G24"
category = "math"
num_tasks = 8
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("render")
    protocol = root / "tiny-render.toml"
    protocol.write_text(TINY)
    for policy in ("scripted", "random"):
        evaluate(EvalConfig(policy=policy, protocol=str(protocol), out=root / "results", progress=False))
    rec = RunRecord(
        name="paper-number",
        protocol="tiny-render",
        protocol_hash="-",
        policy="published <b>model</b>",
        kind="reported",
        benchmarks={"agentflow/Gen-GameOf24-v0": {"label": "G24", "category": "math"}},
        reported={"agentflow/Gen-GameOf24-v0": 0.53},
        source="a paper, Table 2",
    )
    write_json_atomic(root / "results" / "tiny-render" / "paper-number" / "run.json", rec.to_dict())
    return root / "results"


def test_committed_site_is_generated_from_the_committed_results() -> None:
    boards = [board_rows(runs) for runs in group_by_protocol(RESULTS_DIR).values()]
    fix = "the site is stale: run `agentflow-env leaderboard render` and commit leaderboards/site"
    assert (SITE / "leaderboard.md").read_text(encoding="utf-8") == render_markdown(boards), fix
    assert (SITE / "index.html").read_text(encoding="utf-8") == render_html(boards), fix
    for board in boards:
        for _, label, _ in board.columns:
            assert (SITE / "charts" / board.protocol / f"{label}.png").stat().st_size > 5000


def test_boards_order_rows_and_mark_reported_numbers(results: Path) -> None:
    (board,) = [board_rows(runs) for runs in group_by_protocol(results).values()]
    assert [r.name for r in board.rows] == ["scripted", "paper-number", "random"]
    reported = board.rows[1]
    assert reported.kind == "reported" and reported.cells["agentflow/Gen-GameOf24-v0"].lo is None
    scripted = board.rows[0].cells["agentflow/Gen-GameOf24-v0"]
    assert scripted.accuracy == 1.0 and scripted.n == 8 and scripted.lo < 1.0 == scripted.hi
    md = render_markdown([board])
    # rule-scored rows beside reported (LLM-judged) numbers always carry a mark
    mark = "exact-match/rule scored, not comparable with the paper's LLM-judged numbers"
    assert f"| scripted ({mark}) | `scripted` | 100.0 [67.6, 100.0]" in md and "paper-number (reported)" in md
    assert [r.comparable for r in board.rows] == [False, True, False]
    assert [r.scoring for r in board.rows] == ["rule", "paper", "rule"]
    page = render_html([board])
    assert html.escape(mark) in page and 'class=" incomparable"' in page


def test_judge_scored_rows_sit_beside_reported_rows_unmarked(results: Path, tmp_path: Path) -> None:
    import shutil as sh

    copy = tmp_path / "results"
    sh.copytree(results, copy)
    run = copy / "tiny-render" / "scripted" / "run.json"
    rec = RunRecord.from_dict(json.loads(run.read_text()))
    rec.scorers = {e: "judge:scripted:x" for e in rec.benchmarks}
    write_json_atomic(run, rec.to_dict())
    old = copy / "tiny-render" / "random" / "run.json"
    legacy = RunRecord.from_dict(json.loads(old.read_text()))
    legacy.scorers = {}  # a record from before scorers were stored
    write_json_atomic(old, legacy.to_dict())
    (board,) = [board_rows(runs) for runs in group_by_protocol(copy).values()]
    by_name = {r.name: r for r in board.rows}
    assert by_name["scripted"].comparable and by_name["scripted"].scoring == "judge"
    assert not by_name["random"].comparable and by_name["random"].scoring == "unknown"
    md = render_markdown([board])
    assert "| scripted | `scripted` |" in md and "random (scorer unknown, not comparable" in md


def test_render_site_writes_a_self_contained_sortable_page_and_charts(results: Path, tmp_path: Path) -> None:
    written = render_site(results, tmp_path)
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "<script>" in page and "addEventListener('click'" in page and 'class="board"' in page
    assert "http://" not in page and "https://" not in page  # no CDN: works offline
    assert "published &lt;b&gt;model&lt;/b&gt;" in page  # stored text is escaped
    chart = tmp_path / "charts" / "tiny-render" / "G24.png"
    assert chart in written and chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 5000
    before = chart.read_bytes()
    render_site(results, tmp_path)
    assert chart.read_bytes() == before, "rendering must be deterministic"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_page_renders_in_headless_chromium(results: Path, tmp_path: Path) -> None:
    import matplotlib.image as mpimg
    import numpy as np

    render_site(results, tmp_path / "site")
    shot = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                f"--screenshot={shot}",
                "--window-size=1280,900",
                (tmp_path / "site" / "index.html").as_uri(),
            ],
            capture_output=True,
            timeout=90,
            check=False,
        )
    assert shot.exists() and shot.stat().st_size > 20_000, "chromium produced no screenshot"
    img = mpimg.imread(shot)
    assert img.shape[0] == 900 and img.shape[1] == 1280
    colors = np.unique((img[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colors) > 50, "the screenshot is nearly blank"
    dark = (img[..., :3].mean(axis=2) < 0.5).mean()
    assert 0.005 < dark < 0.5, f"text and chart pixels should cover part of the page, got {dark:.3f}"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_header_click_sorts_the_table_in_chromium(results: Path, tmp_path: Path) -> None:
    render_site(results, tmp_path, charts=False)
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert page.index(">scripted<") < page.index(">random<")  # best first as rendered
    # click the "run" header once (ascending by name), after the page's own script has run
    clicked = page.replace("</body>", "<script>document.querySelector('table.board th').click()</script></body>")
    (tmp_path / "clicked.html").write_text(clicked, encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--dump-dom",
                (tmp_path / "clicked.html").as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    dom = out.stdout
    assert '<th class="l asc"' in dom, "the clicked header did not get its sort mark"
    assert dom.index(">paper-number (reported)<") < dom.index(">random<") < dom.index(">scripted<")
