"""The trajectory viewer: pages per run and benchmark, linked from the board's cells, readable from file://.

The Chromium tests drive a real headless browser over the DevTools pipe (tests/headless_chromium.py):
open the board from file://, click a cell, filter, click an episode, read its turns, expand a long tool
result, take a screenshot; they skip when chromium is absent (CI installs it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from leaderboards import viewer
from leaderboards.render import render_site
from leaderboards.runner import EvalConfig, evaluate
from leaderboards.store import (
    RESULTS_DIR,
    TASKS_FILE,
    TRAJECTORIES_FILE,
    JsonlAppender,
    RunRecord,
    TaskOutcome,
    load_run,
    write_json_atomic,
)
from tests.headless_chromium import Chromium, chromium_path

needs_chromium = pytest.mark.skipif(chromium_path() is None, reason="needs chromium (apt-get install chromium)")

TINY = """
name = "tiny-viewer"
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
[[benchmarks]]
env_id = "agentflow/Gen-Science-v1"
label = "Sci"
category = "science"
num_tasks = 6
"""

HOSTILE = '</script><script>document.title="pwned"</script><!-- <b>bold?</b> & "quotes"'
LONG = "".join(f"line {i:05d} of a very long tool result\n" for i in range(2000))  # about 70,000 characters


def _hostile_run(root: Path) -> Path:
    """A stored run (the store's own format) whose texts try to break out of the page, with one long result."""
    run_dir = root / "tiny-viewer" / "hostile"
    rec = RunRecord(
        name="hostile",
        protocol="tiny-viewer",
        protocol_hash="-",
        policy="tests:Hostile",
        benchmarks={"agentflow/Gen-GameOf24-v1": {"label": "G24", "category": "math"}},
        complete=True,
    )
    write_json_atomic(run_dir / "run.json", rec.to_dict())
    with JsonlAppender(run_dir / TRAJECTORIES_FILE) as traj, JsonlAppender(run_dir / TASKS_FILE) as tasks:
        for index, (score, result) in enumerate(((0.0, HOSTILE), (1.0, LONG))):
            key = f"agentflow/Gen-GameOf24-v1#{index}#s0#k0"
            steps = [
                {
                    "turn": 1,
                    "action": f"Tool Name: Python_Coder_Tool\nCommand: {HOSTILE}",
                    "parsed": {"sub_goal": "break the page", "tool_name": "Python_Coder_Tool"},
                    "tool": "Python_Coder_Tool",
                    "command": HOSTILE,
                    "result": result,
                    "verifier": "CONTINUE",
                    "error": None,
                    "seconds": 0.01,
                },
                {"turn": 2, "action": "Final Answer: 24", "parsed": {"final_answer": "24"}, "verifier": None},
            ]
            calls = [  # the paper flow's trace of every module call
                {"module": "planner", "step": 1, "prompt": "plan prompt", "reply": steps[0]["action"], "seconds": 0.5},
                {
                    "module": "verifier",
                    "step": 1,
                    "prompt": "verify prompt",
                    "reply": "Conclusion: CONTINUE",
                    "tokens": {"max_tokens": 64, "usage": {"prompt_tokens": 40, "completion_tokens": 5}},
                    "seconds": 0.2,
                },
            ]
            offset, length = traj.append(
                {
                    "key": key,
                    "question": f"question {index}: {HOSTILE}",
                    "trajectory": steps,
                    "answer": "24",
                    "module_calls": calls,
                }
            )
            outcome = TaskOutcome(
                key=key,
                env_id="agentflow/Gen-GameOf24-v1",
                index=index,
                seed=0,
                sample=0,
                task_id=f"t{index}",
                score=score,
                answer=HOSTILE if index == 0 else "24",
                gold="24",
                turns=2,
                terminated=True,
                truncated=False,
                wall_s=0.1,
                tokens={"prompt": 100 + index, "completion": 7},
                trajectory={"file": TRAJECTORIES_FILE, "offset": offset, "length": length},
            )
            tasks.append(outcome.to_dict())
    return run_dir


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("viewer")
    protocol = root / "tiny-viewer.toml"
    protocol.write_text(TINY)
    for policy in ("scripted", "random"):
        evaluate(EvalConfig(policy=policy, protocol=str(protocol), out=root / "results", progress=False))
    _hostile_run(root / "results")
    return root / "results"


@pytest.fixture(scope="module")
def site(results: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    render_site(results, out, charts=False)
    return out


def _embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    assert m is not None, "the page embeds no data"
    return json.loads(m.group(1))


def test_every_measured_cell_links_to_its_viewer_page(site: Path, results: Path) -> None:
    board = (site / "index.html").read_text(encoding="utf-8")
    hrefs = sorted(set(re.findall(r'<a class="cell" href="([^"]+)"', board)))
    assert hrefs == [
        "trajectories/tiny-viewer/hostile/G24.html",
        "trajectories/tiny-viewer/random/G24.html",
        "trajectories/tiny-viewer/random/Sci.html",
        "trajectories/tiny-viewer/scripted/G24.html",
        "trajectories/tiny-viewer/scripted/Sci.html",
    ]
    for href in hrefs:
        page = (site / href).read_text(encoding="utf-8")
        assert "fetch(" not in page and "http://" not in page and "https://" not in page  # works from file://
        data = _embedded(page)
        run = load_run(results / "tiny-viewer" / data["run"])
        stored = [o for o in run.outcomes if o.env_id == data["env_id"]]
        assert len(data["episodes"]) == len(stored) > 0
        assert data["board"] == "../../../index.html" and (site / href).parent.joinpath(data["board"]).is_file()
    data = _embedded((site / "trajectories/tiny-viewer/scripted/G24.html").read_text(encoding="utf-8"))
    ep = data["episodes"][0]
    assert ep["score"] == 1.0 and ep["question"] and ep["gold"] == ""  # Game of 24 has no single gold answer
    science = _embedded((site / "trajectories/tiny-viewer/scripted/Sci.html").read_text(encoding="utf-8"))["episodes"]
    assert all(e["gold"] in "ABCD" and e["gold"] for e in science)
    tools = [s for s in ep["steps"] if s["tool"]]
    assert tools and all(s["command"] and s["result"] and s["verifier"] for s in tools)
    assert ep["steps"][-1]["action"].startswith("Final Answer") and ep["answer"] == ep["steps"][-1]["final_answer"]


def test_stored_text_cannot_break_out_of_the_page(site: Path) -> None:
    page = (site / "trajectories/tiny-viewer/hostile/G24.html").read_text(encoding="utf-8")
    assert page.count("</script>") == 2 and "<!--" not in page  # the data script's end and the code's end
    data = _embedded(page)
    first = data["episodes"][0]
    assert first["answer"] == HOSTILE and first["steps"][0]["command"] == HOSTILE  # the exact text comes back
    assert first["tokens"] == {"prompt": 100, "completion": 7}


def test_long_texts_are_clipped_saying_how_much(site: Path) -> None:
    data = _embedded((site / "trajectories/tiny-viewer/hostile/G24.html").read_text(encoding="utf-8"))
    result = data["episodes"][1]["steps"][0]["result"]
    limit = viewer.FIELD_CHARS[0]
    assert (
        len(result) < limit + 200
        and result.startswith("line 00000")
        and result.rstrip().endswith("line 01999 of a very long tool result")
    )
    cut = len(LONG) - (limit * 3 // 4) - (limit // 4)
    assert f"[{cut:,} characters cut here; the run's trajectories.jsonl has the full text]" in result


def test_a_page_over_budget_cuts_harder_and_says_so(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = load_run(results / "tiny-viewer" / "hostile")
    monkeypatch.setattr(viewer, "PAGE_BUDGET", 1)  # no cut fits: the page still renders, at the hardest cut
    data = _embedded(viewer.render_viewer(run, "agentflow/Gen-GameOf24-v1", "../../../index.html"))
    assert data["note"].startswith(
        f"long texts are cut to {viewer.FIELD_CHARS[-1]:,} characters; module calls left out"
    )
    assert all("calls" not in e and e["calls_left_out"] == 2 for e in data["episodes"])
    assert len(data["episodes"][1]["steps"][0]["result"]) < viewer.FIELD_CHARS[-1] + 200


def test_a_missing_trajectory_is_said_and_the_outcome_still_shows(results: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "hostile"
    shutil.copytree(results / "tiny-viewer" / "hostile", copy)
    (copy / TRAJECTORIES_FILE).unlink()
    views = viewer.episode_views(load_run(copy), "agentflow/Gen-GameOf24-v1")
    assert [v["score"] for v in views] == [0.0, 1.0] and all("not in the run folder" in v["missing"] for v in views)


def test_viewer_pages_of_removed_runs_go_and_other_files_stay(results: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    render_site(copy, tmp_path / "site", charts=False)
    mine = tmp_path / "site" / "trajectories" / "notes.html"
    mine.write_text("<p>my own notes</p>", encoding="utf-8")
    shutil.rmtree(copy / "tiny-viewer" / "random")
    render_site(copy, tmp_path / "site", charts=False)
    assert not (tmp_path / "site" / "trajectories" / "tiny-viewer" / "random" / "G24.html").exists()
    assert (tmp_path / "site" / "trajectories" / "tiny-viewer" / "scripted" / "G24.html").exists() and mine.exists()


def test_the_header_names_the_folder_it_was_rendered_from(results: Path, site: Path) -> None:
    page = (site / "index.html").read_text(encoding="utf-8")
    assert f"from .../{results.name};" in page and results.resolve().as_posix() not in page  # no absolute path
    from leaderboards.render import describe_source, render_html

    assert describe_source(RESULTS_DIR) == "leaderboards/results"
    assert "from leaderboards/results;" in render_html([], source=describe_source(RESULTS_DIR))


# ------------------------------------------------------------------ in a real browser
def _fits(browser: Chromium) -> list:
    """The page's and each table scroller's (scroll width, visible width) at the current window."""
    return browser.evaluate(
        "[[document.documentElement.scrollWidth, window.innerWidth]].concat(Array.prototype.map.call("
        "document.querySelectorAll('.wrap'), function(w){return [w.scrollWidth, w.clientWidth]}))"
    )


@needs_chromium
def test_the_committed_board_fits_1280_px(tmp_path: Path) -> None:
    render_site(RESULTS_DIR, tmp_path / "site")  # the site is built, not tracked
    with Chromium(width=1280, height=900) as browser:
        browser.open((tmp_path / "site" / "index.html").as_uri())
        widths = _fits(browser)
        assert len(widths) > 1 and all(scroll <= visible for scroll, visible in widths), widths
        # every chart is whole: loaded and no wider than its slot
        charts = browser.evaluate(
            "Array.prototype.map.call(document.querySelectorAll('.charts img'),"
            "function(i){return [i.complete && i.naturalWidth > 0, i.getBoundingClientRect().right <= innerWidth]})"
        )
        assert charts and all(ok and inside for ok, inside in charts), charts


@needs_chromium
def test_click_a_cell_filter_and_read_a_trajectory_in_chromium(site: Path, tmp_path: Path) -> None:
    import matplotlib.image as mpimg
    import numpy as np

    with Chromium(width=1280, height=900) as browser:
        browser.open((site / "index.html").as_uri())
        assert all(scroll <= visible for scroll, visible in _fits(browser))
        browser.click('a.cell[href="trajectories/tiny-viewer/hostile/G24.html"]')
        browser.wait_for(
            "location.pathname.endsWith('/hostile/G24.html') && document.querySelectorAll('#list .ep').length"
        )
        assert browser.evaluate("document.getElementById('count').textContent") == "2 of 2 shown"
        browser.click('#bar button[data-f="solved"]')
        assert browser.evaluate("document.getElementById('count').textContent") == "1 of 2 shown"
        browser.click('#bar button[data-f="failed"]')
        assert browser.evaluate("document.getElementById('count').textContent") == "1 of 2 shown"
        browser.click("#list .ep")
        text = browser.wait_for(
            "document.querySelector('#detail .turn') && document.getElementById('detail').innerText"
        )
        for shown in ("planner action", "tool command", "tool result", "verifier verdict", "CONTINUE", "final answer"):
            assert shown in text, shown
        assert HOSTILE in text and "failed" in text  # the stored text, shown as text
        assert browser.evaluate("document.title").startswith("hostile on G24")  # no injected script ran
        assert browser.evaluate("location.hash") == "#ep=" + "agentflow%2FGen-GameOf24-v1%230%23s0%23k0"
        browser.click("#detail details.calls summary")  # the module calls, folded until asked for
        calls = browser.wait_for(
            "document.querySelector('details.calls[open]') && document.querySelector('details.calls').innerText"
        )
        assert (
            "module calls (2)" in calls
            and "verifier · step 1 · tokens 40 + 5" in calls
            and "Conclusion: CONTINUE" in calls
        )
        # the solved episode's long tool result: clipped, then whole after "show all"
        browser.click('#bar button[data-f="all"]')
        browser.click('#list .ep[data-key$="#1#s0#k0"]')
        browser.wait_for("document.querySelector('#detail button.more')")
        result_len = (
            "Math.max.apply(null, Array.prototype.map.call(document.querySelectorAll('#detail pre'),"
            " function(p){return p.textContent.length}))"
        )
        short = browser.evaluate(result_len)
        browser.click("#detail button.more")
        assert browser.evaluate(result_len) > short > 0
        assert "characters cut here" in browser.evaluate("document.getElementById('detail').innerText")
        # back to the run's failed episode, then a screenshot that must show the page
        browser.click('#list .ep[data-key$="#0#s0#k0"]')
        browser.wait_for("document.getElementById('detail').innerText.indexOf('question 0') >= 0")
        shot = browser.screenshot(tmp_path / "viewer.png")
        browser.open(
            (site / "trajectories/tiny-viewer/scripted/G24.html").as_uri()
            + "#ep="
            + "agentflow%2FGen-GameOf24-v1%231%23s0%23k0"
        )
        deep = browser.wait_for(
            "document.querySelector('#detail .turn') && document.getElementById('detail').innerText"
        )
        assert "Episode #1" in deep and "tool result" in deep  # a link opens one episode directly
    img = mpimg.imread(shot)
    assert img.shape[:2] == (900, 1280)
    gray = img[..., :3].mean(axis=2)
    assert gray.std() > 0.05, "the screenshot is blank"
    assert 0.005 < (gray < 0.5).mean() < 0.5, "text should cover part of the page"
    assert len(np.unique((img[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 30
