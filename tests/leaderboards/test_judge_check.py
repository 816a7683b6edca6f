"""`agentflow-env judge-check` end to end against a loopback judge, the labelled set it builds, the judge's
fingerprint in run.json and the board's warning when judged runs used different judges; and the call ledger's
tagging at the engine boundary (role carried by the caller, helper threads included)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LoopbackServer, chat_server


@pytest.fixture
def always_correct() -> Iterator[LoopbackServer]:
    with chat_server(lambda body: "Looks right.\nVERDICT: CORRECT") as srv:
        yield srv


def test_generated_labelled_set_agrees_with_the_rule_scorers() -> None:
    from leaderboards.judge_check import _rule_scorers
    from leaderboards.judge_labels import build_labelled_set

    items = build_labelled_set(None, tasks_per_benchmark=2)
    kinds = Counter((i.kind, i.label) for i in items)
    assert set(kinds) == {("gold", True), ("gold-variant", True), ("hedge", False), ("near-miss", False)}
    rules = _rule_scorers(items, None)
    # the labels are ground truth the exact rule scorers share: a labelled set they contradict is built wrong
    assert all((rules[i.env_id](i.candidate, i.task) >= 0.5) == i.label for i in items)


def test_paper_labelled_set_from_the_test_sets(testsets_dir: Path, tmp_path: Path) -> None:
    from leaderboards.judge_check import _rule_scorers
    from leaderboards.judge_labels import PAPER_BENCHMARKS, build_labelled_set, main, read_labelled_set

    out = tmp_path / "labels.jsonl"
    assert main(["--data-dir", str(testsets_dir), "--tasks-per-benchmark", "1", "--out", str(out)]) == 0
    items = read_labelled_set(out)
    assert {i.env_id for i in items} == set(PAPER_BENCHMARKS)
    rules = _rule_scorers(items, str(testsets_dir))
    assert all((rules[i.env_id](i.candidate, i.task) >= 0.5) == i.label for i in items)
    assert [i.to_dict() for i in items] == [i.to_dict() for i in build_labelled_set(str(testsets_dir), 1)]


def test_judge_check_against_a_loopback_judge(
    tmp_path: Path, always_correct: LoopbackServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentflow_env.cli import main

    monkeypatch.delenv("AGENTFLOW_DATA_DIR", raising=False)  # the generated benchmarks only, as built below
    from leaderboards.judge_labels import build_labelled_set

    items = build_labelled_set(None, tasks_per_benchmark=2)
    report_file = tmp_path / "report.json"
    spec = f"openai:judge@{always_correct.url}"
    code = main(["judge-check", "--judge-engine", spec, "--tasks-per-benchmark", "2", "--output", str(report_file)])
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    report = json.loads(report_file.read_text())
    # a judge that accepts everything: every must-pass agrees, every near miss is a false accept, and the hedges
    # are still refused (the single-commitment rule scores them 0 before any call)
    n = Counter(i.kind for i in items)
    assert report["items"] == len(items)
    assert report["by_kind"]["gold"]["agree"] == n["gold"]
    assert report["by_kind"]["gold-variant"]["agree"] == n["gold-variant"]
    assert report["by_kind"]["hedge"]["agree"] == n["hedge"]
    assert report["by_kind"]["near-miss"]["agree"] == 0
    assert report["false_accepts"] == n["near-miss"] and report["false_rejects"] == 0
    assert report["labels"]["agree"] == len(items) - n["near-miss"]
    assert report["rules"]["agree"] == len(items) - n["near-miss"]  # the rule scorers refuse the near misses
    assert len(always_correct.bodies) == len(items) - n["hedge"]  # hedges never reach the judge
    assert report["judge"]["engine"] == spec and report["judge"]["model"] == "judge"
    assert len(report["judge"]["prompt_hash"]) == 16
    assert f"near-miss (must fail): 0.0% (0/{n['near-miss']}" in printed


def test_judged_runs_record_the_fingerprint_and_the_board_warns(
    tmp_path: Path, always_correct: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentflow_env.cli import main

    protocol = tmp_path / "judged.toml"
    protocol.write_text(
        'name = "judged"\nmax_turns = 3\nfast_tasks = 2\n[env]\nexecutor = "direct"\nverifier = "rule"\n'
        'generator = "planner"\n[[benchmarks]]\nenv_id = "agentflow/Gen-Math-v2"\ncategory = "math"\n'
        'num_tasks = 2\nscorer = "judge"\noptions = { seed = 0 }\n'
    )
    for name, model in (("one", "judge"), ("two", "other-judge")):
        args = ["eval", "--protocol", str(protocol), "--policy", "scripted", "--no-progress", "--name", name]
        args += ["--judge-engine", f"openai:{model}@{always_correct.url}", "--output-dir", str(tmp_path / "runs")]
        assert main(args) == 0, capsys.readouterr().err
    record = json.loads((tmp_path / "runs" / "judged" / "one" / "run.json").read_text())
    fingerprint = record["judges"]["agentflow/Gen-Math-v2"]
    assert fingerprint["engine"] == f"openai:judge@{always_correct.url}" and fingerprint["model"] == "judge"
    assert record["ledger"]["agentflow/Gen-Math-v2"]["judge"]["calls"] >= 1
    capsys.readouterr()
    assert main(["leaderboard", "show", "--results", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "warning: the judged runs here used different judges" in out and "model other-judge" in out
    from leaderboards.render import board_rows, group_by_protocol, render_html, render_markdown

    board = board_rows(group_by_protocol(tmp_path / "runs")["judged"])
    assert board.warnings and "model other-judge" in board.warnings[0]
    assert board.warnings[0] in render_markdown([board], charts=False)
    assert "used different judges" in render_html([board], charts=False)


def test_ledger_tags_calls_where_the_caller_names_its_role() -> None:
    from agentflow_env.engines import ScriptedEngine
    from agentflow_env.engines.ledger import Ledger, enter_benchmark, generate_as
    from agentflow_env.tools.generator import BaseGeneratorTool

    class Reported:
        last_usage: Any = None

        def generate(self, prompts: Any, sampling: Any = None) -> list[str]:
            self.last_usage = [{"prompt_tokens": 7, "completion_tokens": 3} for _ in prompts]
            return ["ok" for _ in prompts]

    ledger = Ledger()
    generate_as(Reported(), ["a"], None, role="judge")  # no ledger active: nothing recorded
    assert not ledger
    enter_benchmark(ledger, "bench")
    try:
        generate_as(Reported(), ["a", "b"], None, role="modules", name="executor")
        generate_as(ScriptedEngine(["abcdefgh"]), ["12345678"], None, role="judge")
        tool = BaseGeneratorTool(ScriptedEngine(["tool reply"]), name="My_Tool")  # calls its engine in a thread
        assert tool.run("question", 5.0).ok
    finally:
        enter_benchmark(None, "")
    data = ledger.to_dict()["bench"]
    assert data["modules"]["executor"] == {
        "calls": 2,
        "prompt_tokens": 14,
        "completion_tokens": 6,
        "seconds": data["modules"]["executor"]["seconds"],
        "estimated_calls": 0,
    }
    assert (data["judge"]["calls"], data["judge"]["prompt_tokens"], data["judge"]["completion_tokens"]) == (1, 2, 2)
    assert data["judge"]["estimated_calls"] == 1  # the scripted engine reports no usage: 8 characters -> 2 tokens
    assert data["tools"]["My_Tool"]["calls"] == 1
    assert Ledger.from_dict(ledger.to_dict()).to_dict() == ledger.to_dict()


def test_old_run_json_without_a_ledger_loads_and_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow_env.cli import main
    from leaderboards.store import RESULTS_DIR, iter_runs

    runs = list(iter_runs(RESULTS_DIR))
    # most stored references predate the ledger (offline-v4's, recorded later, carry one)
    assert runs and any(r.record.ledger is None for r in runs)
    assert main(["leaderboard", "show", "--results", str(RESULTS_DIR), "--ledger"]) == 0
    assert "no ledger (a run.json older than the ledger" in capsys.readouterr().out
