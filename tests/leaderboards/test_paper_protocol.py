"""paper-v1 measures what the paper measured: AgentFlow's task counts, the LLM judge (a scripted judge
engine here), trial seeds that reach the loaders, and results that record how they were scored."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import ConfigError, EngineError
from benchmarks.paper.catalog import BENCHMARKS
from leaderboards.protocol import PROTOCOL_DIR, load_protocol
from leaderboards.runner import EvalConfig, evaluate
from leaderboards.store import RESULTS_DIR, TASKS_FILE, read_jsonl

ROOT = Path(__file__).resolve().parents[2]
AGENTFLOW_SRC = Path(os.environ.get("AGENTFLOW_SRC") or ROOT.parent / "shared" / "data" / "agentflow-src")


def _bench(env_id: str):
    return BENCHMARKS[gym.spec(env_id).kwargs["benchmark"]]


# ------------------------------------------------------------------ the protocol file
@pytest.mark.parametrize("name", [f"paper-v{n}" for n in range(1, 9)])
def test_paper_task_counts_follow_agentflow_run_scripts(testsets_dir: Path, name: str) -> None:
    if not (AGENTFLOW_SRC / "test").is_dir():
        pytest.skip(f"AgentFlow's sources not found at {AGENTFLOW_SRC}")
    protocol = load_protocol(name)
    text = (PROTOCOL_DIR / f"{name}.toml").read_text(encoding="utf-8")
    for entry in protocol.benchmarks:
        bench = _bench(entry.env_id)
        script = (AGENTFLOW_SRC / "test" / bench.file / "run.sh").read_text(encoding="utf-8")
        (last,) = re.findall(r"INDICES=\(\$\(seq 0 (\d+)\)\)", script)
        records = len(json.loads((testsets_dir / f"{bench.file}.json").read_text(encoding="utf-8")))
        expected = min(int(last) + 1, records)  # solve.py rejects an index past the file's end
        assert entry.num_tasks == expected == bench.paper_size, (entry.label, entry.num_tasks, expected)
        assert f"test/{bench.file}/run.sh: seq 0 {last}" in text  # the TOML states its source


def test_paper_v1_is_judge_scored_and_paper_v0_is_superseded() -> None:
    v0, v1 = load_protocol("paper-v0"), load_protocol("paper-v1")
    assert v1.paper_comparable and not v0.paper_comparable
    assert {b.scorer for b in v1.benchmarks} == {"judge"} and v1.judge_engine().startswith("openai:gpt-4o")
    assert v1.judge_engine("scripted:echo") == "scripted:echo"  # --judge-engine wins
    assert v1.trial_seed_option == "seed" and v1.seeds == (0, 1, 2)
    assert v0.superseded_by == "paper-v1" and v1.superseded_by == "paper-v2"
    v2 = load_protocol("paper-v2")  # the same measurement on the v2 ids (issue 25)
    assert v2.superseded_by == "paper-v3" and v2.paper_comparable and v2.hash != v1.hash
    assert [b.env_id.replace("-v2", "-v1") for b in v2.benchmarks] == [b.env_id for b in v1.benchmarks]
    v3 = load_protocol("paper-v3")  # and on the v3 ids (issue 38: the answer grammar before the judge)
    assert v3.superseded_by == "paper-v4" and v3.paper_comparable and v3.hash == "995f67c33ab0971a" != v2.hash
    assert [b.env_id.replace("-v3", "-v2") for b in v3.benchmarks] == [b.env_id for b in v2.benchmarks]
    assert v3.judge_rules == v2.judge_rules and v3.seeds == v2.seeds
    v4 = load_protocol("paper-v4")  # and on the v4 ids (answer grammar 4: sentences read by the gold's type)
    assert v4.superseded_by == "paper-v5" and v4.paper_comparable and v4.hash == "30bade5454afe3db"
    assert v4.hash not in (v3.hash, v2.hash)
    assert [b.env_id.replace("-v4", "-v3") for b in v4.benchmarks] == [b.env_id for b in v3.benchmarks]
    assert v4.judge_rules == v3.judge_rules and v4.seeds == v3.seeds
    v5 = load_protocol("paper-v5")  # and on the v5 ids (answer grammar 5)
    assert v5.superseded_by == "paper-v6" and v5.paper_comparable and v5.hash == "3da1476fe77b5382"
    assert v5.hash not in (v4.hash, v3.hash, v2.hash)
    assert [b.env_id.replace("-v5", "-v4") for b in v5.benchmarks] == [b.env_id for b in v4.benchmarks]
    assert v5.judge_rules == v4.judge_rules and v5.seeds == v4.seeds
    v6 = load_protocol("paper-v6")  # and on the v6 ids (answer grammar 6)
    assert v6.superseded_by == "paper-v7" and v6.paper_comparable and v6.hash == "ea5dfb239774ac63"
    assert v6.hash not in (v5.hash, v4.hash, v3.hash, v2.hash)
    assert [b.env_id.replace("-v6", "-v5") for b in v6.benchmarks] == [b.env_id for b in v5.benchmarks]
    assert v6.judge_rules == v5.judge_rules and v6.seeds == v5.seeds
    v7 = load_protocol("paper-v7")  # and on the v7 ids (answer grammar 7)
    assert v7.superseded_by == "paper-v8" and v7.paper_comparable and v7.hash == "ebfa0beb2284fe9a"
    assert v7.hash not in (v6.hash, v5.hash, v4.hash, v3.hash, v2.hash)
    assert [b.env_id.replace("-v7", "-v6") for b in v7.benchmarks] == [b.env_id for b in v6.benchmarks]
    assert v7.judge_rules == v6.judge_rules and v7.seeds == v6.seeds
    v8 = load_protocol("paper-v8")  # and on the v8 ids (answer grammar 8)
    assert v8.superseded_by == "paper-v9" and v8.paper_comparable and v8.hash == "827ecc671346016f"
    assert v8.hash not in (v7.hash, v6.hash, v5.hash, v4.hash, v3.hash, v2.hash)
    assert [b.env_id.replace("-v8", "-v7") for b in v8.benchmarks] == [b.env_id for b in v7.benchmarks]
    assert v8.judge_rules == v7.judge_rules and v8.seeds == v7.seeds
    v9 = load_protocol("paper-v9")  # and on the v9 ids (answer grammar 9)
    assert v9.superseded_by == "paper-v10" and v9.paper_comparable and v9.hash == "87eb7f8397c0f5ef"
    assert v9.hash not in (v8.hash, v7.hash, v6.hash, v5.hash, v4.hash, v3.hash, v2.hash)
    assert [b.env_id.replace("-v9", "-v8") for b in v9.benchmarks] == [b.env_id for b in v8.benchmarks]
    assert v9.judge_rules == v8.judge_rules and v9.seeds == v8.seeds
    v10 = load_protocol("paper-v10")  # and on the v10 ids (answer grammar 10)
    assert v10.superseded_by == "paper-v11" and v10.paper_comparable and v10.hash == "a6251c7fbb337a33"
    assert v10.hash not in (v9.hash, v8.hash, v7.hash, v6.hash, v5.hash, v4.hash, v3.hash, v2.hash)
    assert [b.env_id.replace("-v10", "-v9") for b in v10.benchmarks] == [b.env_id for b in v9.benchmarks]
    assert v10.judge_rules == v9.judge_rules and v10.seeds == v9.seeds
    v11 = load_protocol("paper-v11")  # and on the v11 ids (answer grammar 11)
    assert v11.superseded_by == "paper-v12" and v11.paper_comparable and v11.hash == "e2885d05f469ea71"
    assert v11.hash not in (v10.hash, v9.hash, v8.hash, v7.hash, v6.hash, v5.hash, v4.hash, v3.hash, v2.hash)
    assert [b.env_id.replace("-v11", "-v10") for b in v11.benchmarks] == [b.env_id for b in v10.benchmarks]
    assert v11.judge_rules == v10.judge_rules and v11.seeds == v10.seeds
    v12 = load_protocol("paper-v12")  # and on the v12 ids (answer grammar 12)
    assert v12.superseded_by is None and v12.paper_comparable
    assert v12.hash not in (v11.hash, v10.hash, v9.hash, v8.hash, v7.hash, v6.hash, v5.hash, v4.hash, v3.hash, v2.hash)
    assert [b.env_id.replace("-v12", "-v11") for b in v12.benchmarks] == [b.env_id for b in v11.benchmarks]
    assert v12.judge_rules == v11.judge_rules and v12.seeds == v11.seeds
    stored = json.loads((RESULTS_DIR / "paper-v0" / "gpt-4o" / "run.json").read_text(encoding="utf-8"))
    assert stored["protocol_hash"] == v0.hash  # marking v0 superseded did not change what its results mean
    for name in ("gpt-4o", "agentflow-7b-flow-grpo"):
        again = json.loads((RESULTS_DIR / "paper-v1" / name / "run.json").read_text(encoding="utf-8"))
        assert again["kind"] == "reported" and again["protocol_hash"] == v1.hash
        for protocol in (
            v2,
            v3,
            v4,
            v5,
            v6,
            v7,
            v8,
            v9,
            v10,
            v11,
            v12,
        ):  # the published rows, carried to each later version
            row = json.loads((RESULTS_DIR / protocol.name / name / "run.json").read_text(encoding="utf-8"))
            assert row["kind"] == "reported" and row["protocol_hash"] == protocol.hash
            assert list(row["benchmarks"]) == protocol.env_ids


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('scorer = "judge"', 'scorer = "judgy"', "scorer="),
        ('trial_seed_option = "seed"', 'trial_seed_option = ""', "trial_seed_option"),
    ],
)
def test_bad_scorer_and_trial_option_are_config_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(PROTOCOL.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_protocol(path)
    clash = tmp_path / "clash.toml"
    clash.write_text(PROTOCOL.replace('category = "science"\n', 'category = "science"\noptions = { seed = 3 }\n', 1))
    with pytest.raises(ConfigError, match="trial_seed_option"):
        load_protocol(clash)


# ------------------------------------------------------------------ runs with a scripted judge
def _rows(n: int, medqa: bool = False) -> list[dict]:
    rows = []
    for i in range(n):
        options = [f"right {i}", f"wrong {i} x", f"wrong {i} y", f"wrong {i} z"]
        order = options[i % 4 :] + options[: i % 4]
        if medqa:
            rows.append({"pid": i, "question": f"Medical question {i}?", "options": order, "answer": f"right {i}"})
        else:
            rows.append(
                {
                    "pid": i,
                    "question": f"Science question {i}?",
                    "choices": order,
                    "answer_idx": order.index(options[0]),
                }
            )
    return rows


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "gpqa.json").write_text(json.dumps(_rows(6)), encoding="utf-8")
    (folder / "medqa.json").write_text(json.dumps(_rows(6, medqa=True)), encoding="utf-8")
    return folder


_BLOCK = re.compile(r"⟦BEGIN (\w+) (\w+)⟧\n(.*?)\n⟦END \1 \2⟧", re.DOTALL)


def honest_judge(prompt: str) -> str:
    """A scripted judge engine: CORRECT when the candidate names the reference option's letter or text."""
    blocks = {m.group(1): "\n".join(x[2:] for x in m.group(3).split("\n")) for m in _BLOCK.finditer(prompt)}
    letter, _, text = blocks["REFERENCE"].partition(". ")
    candidate = blocks["CANDIDATE"].strip()
    return "VERDICT: CORRECT" if candidate in (letter, text) else "Not the reference.\nVERDICT: INCORRECT"


def broken_judge(prompt: str) -> str:
    raise RuntimeError("judge server down")


class PickRight:
    """Answers the letter of the option whose text starts with 'right'; records the option orders it saw."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def act(self, observations):
        out = []
        for obs in observations:
            self.seen.append(obs["question"])
            (letter,) = re.findall(r"^([A-D])\. right", obs["question"], re.MULTILINE)
            out.append(f"Final Answer: {letter}")
        return out


class AlwaysA:
    def act(self, observations):
        return ["Final Answer: A" for _ in observations]


PROTOCOL = """
name = "paper-mini"
mode = "paper"
max_turns = 3
seeds = [0, 1, 2]
fast_tasks = 2
trial_seed_option = "seed"
[env]
executor = "direct"
verifier = "rule"
generator = "planner"
[judge]
engine = "scripted:tests.leaderboards.test_paper_protocol:honest_judge"
[[benchmarks]]
env_id = "agentflow/GPQA-v1"
category = "science"
num_tasks = 5
scorer = "judge"
[[benchmarks]]
env_id = "agentflow/MedQA-v1"
category = "science"
num_tasks = 5
scorer = "judge"
"""


def _protocol(tmp_path: Path, text: str = PROTOCOL) -> Path:
    path = tmp_path / "paper-mini.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _orders(seen: list[str]) -> dict[str, list[list[str]]]:
    by_question: dict[str, list[list[str]]] = {}
    for q in seen:
        stem = q.split("\nChoices:")[0]
        by_question.setdefault(stem, []).append(re.findall(r"^[A-D]\. (.*)$", q, re.MULTILINE))
    return by_question


def test_trial_seeds_reach_the_loaders_and_the_judge_scores(tmp_path: Path, data_dir: Path) -> None:
    policy = PickRight()
    result = evaluate(
        EvalConfig(
            policy="test:pick-right",
            protocol=str(_protocol(tmp_path)),
            out=tmp_path / "out",
            data_dir=str(data_dir),
            progress=False,
            policy_factory=lambda env_id: policy,
        )
    )
    assert len(result.outcomes) == 2 * 5 * 3 and all(o.score == 1.0 for o in result.outcomes)
    orders = _orders(policy.seen)
    assert len(orders) == 10 and all(len(v) == 3 for v in orders.values())
    # GPQA and MedQA: each trial shows its own option order (the same task, the same options)
    for trials in orders.values():
        assert all(sorted(t) == sorted(trials[0]) for t in trials)
    assert sum(len({tuple(t) for t in trials}) > 1 for trials in orders.values()) >= 8
    rec = result.record
    assert rec.scoring == "judge" and rec.judge_engine == "scripted:tests.leaderboards.test_paper_protocol:honest_judge"
    assert set(rec.scorers.values()) == {"judge:scripted:tests.leaderboards.test_paper_protocol:honest_judge"}
    assert rec.trial_seed_option == "seed"
    stored = json.loads((result.path / "run.json").read_text(encoding="utf-8"))
    assert stored["scorers"] == rec.scorers and stored["judge_engine"] == rec.judge_engine


def test_without_trial_seed_option_every_trial_sees_one_order(tmp_path: Path, data_dir: Path) -> None:
    policy = PickRight()
    evaluate(
        EvalConfig(
            policy="test:pick-right",
            protocol=str(_protocol(tmp_path, PROTOCOL.replace('trial_seed_option = "seed"\n', ""))),
            out=tmp_path / "out",
            data_dir=str(data_dir),
            progress=False,
            policy_factory=lambda env_id: policy,
        )
    )
    assert all(len({tuple(t) for t in trials}) == 1 for trials in _orders(policy.seen).values())


def test_the_judge_grades_a_fixed_letter_at_chance(tmp_path: Path, data_dir: Path) -> None:
    result = evaluate(
        EvalConfig(
            policy="test:always-a",
            protocol=str(_protocol(tmp_path)),
            out=tmp_path / "out",
            data_dir=str(data_dir),
            progress=False,
            policy_factory=lambda env_id: AlwaysA(),
        )
    )
    mean = sum(o.score for o in result.outcomes) / len(result.outcomes)
    assert 0.0 < mean < 0.6


def test_a_failing_judge_stops_the_run_and_stores_nothing_it_could_not_judge(tmp_path: Path, data_dir: Path) -> None:
    text = PROTOCOL.replace("honest_judge", "broken_judge")
    config = EvalConfig(
        policy="test:pick-right",
        protocol=str(_protocol(tmp_path, text)),
        out=tmp_path / "out",
        data_dir=str(data_dir),
        progress=False,
        policy_factory=lambda env_id: PickRight(),
    )
    with pytest.raises(EngineError, match="judge failed"):
        evaluate(config)
    tasks = tmp_path / "out" / "paper-mini" / "test-pick-right" / TASKS_FILE
    assert read_jsonl(tasks) == []


def test_cli_judge_engine_flag(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow_env.cli import main

    no_engine = _protocol(
        tmp_path,
        PROTOCOL.replace('[judge]\nengine = "scripted:tests.leaderboards.test_paper_protocol:honest_judge"\n', ""),
    )
    base = [
        "eval",
        "--policy",
        "tests.leaderboards.test_paper_protocol:PickRight",
        "--protocol",
        str(no_engine),
        "--fast",
    ]
    base += ["--output-dir", str(tmp_path / "out"), "--data-dir", str(data_dir), "--no-progress"]
    assert main(base) == 2
    assert "--judge-engine" in capsys.readouterr().err
    assert main([*base, "--judge-engine", "scripted:tests.leaderboards.test_paper_protocol:honest_judge"]) == 0
    out = capsys.readouterr().out
    assert (
        "scored by the LLM judge scripted:tests.leaderboards.test_paper_protocol:honest_judge (the paper's metric)"
        in out
    )
    rule = _protocol(tmp_path, PROTOCOL.replace('scorer = "judge"', 'scorer = "default"'))
    assert main([*base[:4], str(rule), *base[5:], "--name", "rule"]) == 0
    assert "NOT comparable with the paper's LLM-judged numbers" in capsys.readouterr().out


def test_paper_v1_runs_the_paper_flow_with_the_judge_on_every_benchmark(
    tmp_path: Path, testsets_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """paper-v1 itself (one task per benchmark, one trial): AgentFlow's modules on an echo engine, every answer
    judged (tests/leaderboards/test_paper_flow_eval.py checks the call order over HTTP)."""
    text = (PROTOCOL_DIR / "paper-v1.toml").read_text(encoding="utf-8")
    small = tmp_path / "paper-v1-small.toml"
    small.write_text(text.replace("seeds = [0, 1, 2]", "seeds = [0]").replace("fast_tasks = 5", "fast_tasks = 1"))
    prompts: list[str] = []

    def record(prompt: str) -> str:
        prompts.append(prompt)
        return "The candidate gives no usable answer.\nVERDICT: INCORRECT"

    import tests.leaderboards.test_paper_protocol as me

    monkeypatch.setattr(me, "recording_judge", record, raising=False)  # reached through the engine spec below
    result = evaluate(
        EvalConfig(
            policy="test:answer-at-once",
            protocol=str(small),
            out=tmp_path,
            fast=True,
            progress=False,
            data_dir=str(testsets_dir),
            engine="scripted:echo",
            judge_engine="scripted:tests.leaderboards.test_paper_protocol:recording_judge",
            policy_factory=lambda env_id: AlwaysA(),
        )
    )
    assert len(result.outcomes) == 10 and result.record.scoring == "judge"
    assert result.record.paper_settings["flow"] == "paper" and result.record.env["flow"] == "paper"
    assert result.record.paper_settings["planner_sends"] == dict.fromkeys(("sampling", "extra_body", "system_prompt"))
    # the commitment rule settles echoed outputs before any judge call: since v2 it reads every answer's span
    # (the echoed template's "**Answer:** ..." line, its rival lines), so most echoes are settled without one
    assert 1 <= len(prompts) <= sum(1 for o in result.outcomes if o.answer.strip())
    assert all("⟦BEGIN CANDIDATE" in p and "⟦BEGIN REFERENCE" in p for p in prompts)
    # (that the judge is told any valid 24 expression counts: tests/env/scoring/test_judge.py;
    # the echo here is settled first)
