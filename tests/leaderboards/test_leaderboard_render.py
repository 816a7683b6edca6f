"""Leaderboard rendering: the committed site matches the stored results; HTML, charts, tokens per episode from an
LLM policy's server usage, and the page in headless Chromium (screenshot, header sorting)."""

from __future__ import annotations

import html
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from leaderboards.render import (
    BOARD_FILE,
    board_rows,
    describe_source,
    group_by_protocol,
    render_charts,
    render_html,
    render_markdown,
    render_site,
    tokens_per_episode,
)
from leaderboards.runner import EvalConfig, evaluate
from leaderboards.store import RESULTS_DIR, RunRecord, write_json_atomic
from leaderboards.viewer import viewer_pages
from tests.headless_chromium import Chromium, chromium_path

TINY = """
name = "tiny-render"
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
        benchmarks={"agentflow/Gen-GameOf24-v1": {"label": "G24", "category": "math"}},
        reported={"agentflow/Gen-GameOf24-v1": 0.53},
        source="a paper, Table 2",
    )
    write_json_atomic(root / "results" / "tiny-render" / "paper-number" / "run.json", rec.to_dict())
    return root / "results"


def test_committed_board_is_generated_from_the_committed_results() -> None:
    groups = group_by_protocol(RESULTS_DIR)
    boards = [board_rows(runs) for runs in groups.values()]
    source = describe_source(RESULTS_DIR)
    assert source == "leaderboards/results"
    fix = (
        'leaderboards/leaderboard.md is stale: rewrite it with `python -c "from leaderboards.render import '
        'write_board; write_board()"` and commit it'
    )
    assert BOARD_FILE.read_text(encoding="utf-8") == render_markdown(boards, charts=False, source=source), fix


def test_the_site_builds_from_the_committed_results(tmp_path: Path) -> None:
    # the HTML site is built, not tracked: it builds from the stored references, trajectory pages included
    site = tmp_path / "site"
    render_site(RESULTS_DIR, site)
    groups = group_by_protocol(RESULTS_DIR)
    boards = [board_rows(runs) for runs in groups.values()]
    source = describe_source(RESULTS_DIR)
    assert (site / "index.html").read_text(encoding="utf-8") == render_html(boards, source=source)
    for board in boards:
        for _, label, _ in board.columns:
            assert (site / "charts" / board.protocol / f"{label}.png").stat().st_size > 5000
    pages = {href: page for runs in groups.values() for run in runs for href, page in viewer_pages(run).items()}
    assert pages, "the stored measured runs have viewer pages"
    assert sorted(p.relative_to(site).as_posix() for p in (site / "trajectories").rglob("*.html")) == sorted(pages)


def test_boards_order_rows_and_mark_reported_numbers(results: Path) -> None:
    (board,) = [board_rows(runs) for runs in group_by_protocol(results).values()]
    assert [r.name for r in board.rows] == ["scripted", "paper-number", "random"]
    reported = board.rows[1]
    assert reported.kind == "reported" and reported.cells["agentflow/Gen-GameOf24-v1"].lo is None
    scripted = board.rows[0].cells["agentflow/Gen-GameOf24-v1"]
    assert scripted.accuracy == 1.0 and scripted.n == 8 and scripted.lo < 1.0 == scripted.hi
    md = render_markdown([board])
    # rule-scored rows beside reported (LLM-judged) numbers always carry a mark
    mark = "exact-match/rule scored, not comparable with the paper's LLM-judged numbers"
    assert f"| scripted ({mark}) | `scripted` | 100.0 [67.6, 100.0]" in md and "paper-number (reported)" in md
    assert [r.comparable for r in board.rows] == [False, True, False]
    assert [r.scoring for r in board.rows] == ["rule", "paper", "rule"]
    page = render_html([board])
    assert html.escape(mark) in page and 'class=" incomparable"' in page
    assert "rule scored, not comparable</span>" in page  # the short mark beside the name; the full one in its title


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


@pytest.mark.skipif(chromium_path() is None, reason="needs chromium (apt-get install chromium)")
def test_header_click_sorts_the_table_in_chromium(results: Path, tmp_path: Path) -> None:
    render_site(results, tmp_path, charts=False)
    order = (
        "Array.prototype.map.call(document.querySelectorAll('table.board tbody tr'),"
        " function(r){return r.cells[0].getAttribute('data-v')})"
    )
    with Chromium(width=1280, height=900) as browser:
        browser.open((tmp_path / "index.html").as_uri())
        assert browser.evaluate(order) == ["scripted", "paper-number", "random"]  # best first as rendered
        browser.click("table.board th")  # the "run" header: ascending by name
        assert browser.evaluate("document.querySelector('table.board th').className") == "l run asc"
        assert browser.evaluate(order) == ["paper-number", "random", "scripted"]
        browser.click("table.board th")
        assert browser.evaluate(order) == ["scripted", "random", "paper-number"]


def test_llm_policy_tokens_per_episode_reach_the_board(tmp_path: Path) -> None:
    """An ``engine:openai:`` planner against a real loopback server around the tiny LM: the server's usage
    is recorded per episode and the board shows prompt plus completion tokens per episode."""
    pytest.importorskip("openai")
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from agentflow_env.engines.server import EngineServer
    from agentflow_env.engines.transformers_engine import TransformersEngine
    from agents.tiny_lm import tiny_lm_path

    protocol = tmp_path / "tiny-tokens.toml"
    protocol.write_text(
        TINY.replace("tiny-render", "tiny-tokens")
        .replace("num_tasks = 8", "num_tasks = 3")
        .replace("max_turns = 4", "max_turns = 2")
        + "[sampling]\ntemperature = 0.0\nmax_tokens = 12\n"
    )
    engine = TransformersEngine(str(tiny_lm_path()), device="cpu", threads=1)
    with EngineServer(engine, model_name="tiny") as server:
        result = evaluate(
            EvalConfig(
                policy=f"engine:openai:tiny@{server.url}", protocol=str(protocol), out=tmp_path / "r", progress=False
            )
        )
    assert len(result.outcomes) == 3
    for o in result.outcomes:  # every planner call's usage, summed per episode
        assert o.tokens is not None and o.tokens["prompt"] > 20 * o.turns and 0 < o.tokens["completion"] <= 12 * o.turns
    total = result.tokens()
    assert total is not None
    (board,) = [board_rows(runs) for runs in group_by_protocol(tmp_path / "r").values()]
    (row,) = board.rows
    per = (total["prompt"] + total["completion"]) / 3
    assert tokens_per_episode(row) == pytest.approx(per)
    assert f"| {per:,.0f} |" in render_markdown([board], charts=False)
    page = render_html([board], charts=False)
    assert f">{per:,.0f}</td>" in page and f"prompt {total['prompt']:,} + completion {total['completion']:,}" in page


def test_chart_labels_are_never_cut_on_the_left(results: Path, tmp_path: Path) -> None:
    import matplotlib.image as mpimg

    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    long_name = "a-run-name-long-enough-to-overflow-any-fixed-margin-of-the-chart"
    rec = RunRecord.from_dict(json.loads((copy / "tiny-render" / "paper-number" / "run.json").read_text()))
    rec.name = long_name
    write_json_atomic(copy / "tiny-render" / long_name / "run.json", rec.to_dict())
    (board,) = [board_rows(runs) for runs in group_by_protocol(copy).values()]
    (chart,) = render_charts(board, tmp_path / "site")
    img = mpimg.imread(chart)[..., :3]
    assert img[:, :4].min() > 0.95, "ink touches the left edge: a label is cut"
    assert img[:, -4:].min() > 0.95 and img[:4].min() > 0.95 and img[-4:].min() > 0.95
    dark_columns = (img.mean(axis=2) < 0.5).any(axis=0).nonzero()[0]
    assert dark_columns.min() < 0.25 * img.shape[1], "the long label is drawn, left of the bars"


def test_llm_planner_passes_on_the_engines_usage_per_prompt() -> None:
    """What ``normalize_actions`` reads from an LLM planner: one usage per prompt of the last call, or nothing."""
    from agents.policies.llm_planner import LLMPlanner
    from leaderboards.runner import normalize_actions

    class Reporting:  # an engine that reports usage the way OpenAIEngine does
        def __init__(self, usage):
            self.usage = usage
            self.last_usage: list = []

        def generate(self, prompts, sampling=None):
            self.last_usage = self.usage[: len(prompts)]
            return ["Final Answer: 1"] * len(prompts)

    planner = LLMPlanner(Reporting([{"prompt_tokens": 11, "completion_tokens": 3}, None]))
    texts, tokens = normalize_actions(planner, planner.act([{"prompt": "a"}, {"prompt": "b"}]), 2)
    assert texts == ["Final Answer: 1"] * 2 and tokens == [{"prompt": 11, "completion": 3}, None]
    short = LLMPlanner(Reporting([{"prompt_tokens": 11, "completion_tokens": 3}]))  # one usage for two prompts
    assert normalize_actions(short, short.act([{"prompt": "a"}, {"prompt": "b"}]), 2)[1] == [None, None]
