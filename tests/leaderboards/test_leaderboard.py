"""Leaderboard protocols, statistics, the resumable results store, the eval runner, policy specs and the CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow_env.error import ConfigError
from agents.policies.registry import is_env_specific, make_policies, make_policy
from leaderboards.protocol import load_protocol
from leaderboards.runner import EvalConfig, evaluate, normalize_actions
from leaderboards.stats import category_averages, wilson_interval
from leaderboards.store import TASKS_FILE, JsonlAppender, load_run, read_jsonl, read_trajectory

TINY = """
name = "tiny-test"
description = "Gen-GameOf24 only, for tests"
max_turns = 4
seeds = [0, 1]
samples_per_task = 1
fast_tasks = 3
[env]
executor = "direct"
verifier = "rule"
generator = "planner"
[[benchmarks]]
env_id = "agentflow/Gen-GameOf24-v1"
label = "G24"
category = "math"
num_tasks = 6
options = { seed = 1 }
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-test.toml"
    path.write_text(TINY)
    return path


# ---------------------------------------------------------------- protocols
def test_builtin_protocols_parse_and_hash_is_stable() -> None:
    offline, paper = load_protocol("offline-v0"), load_protocol("paper-v0")
    assert offline.mode == "offline" and paper.mode == "paper"
    assert all(e.startswith("agentflow/Gen-") for e in offline.env_ids)
    assert len(paper.env_ids) == 10 and paper.max_turns == 10 and paper.sampling["temperature"] == 0.0
    assert paper.env_kwargs()["engine"].startswith("openai:") and paper.env["executor"] == "llm"
    assert {b.category for b in paper.benchmarks} == {"search", "agentic", "math", "science"}
    assert len(offline.hash) == 16 and offline.hash == load_protocol("offline-v0").hash != paper.hash


def test_hash_ignores_comments_but_not_content(tmp_path: Path, tiny: Path) -> None:
    a = load_protocol(tiny)
    other = tmp_path / "b.toml"
    other.write_text("# a comment\n" + TINY)
    assert load_protocol(other).hash == a.hash
    other.write_text(TINY.replace("max_turns = 4", "max_turns = 5"))
    assert load_protocol(other).hash != a.hash


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('category = "math"', 'category = "maths"'), "category"),
        (("num_tasks = 6", "num_tasks = 0"), "num_tasks"),
        (("max_turns = 4\n", ""), "max_turns"),
    ],
)
def test_bad_protocols_say_what_to_change(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(TINY.replace(*edit))
    with pytest.raises(ConfigError, match=message):
        load_protocol(path)
    with pytest.raises(ConfigError, match=r"known: .*offline-v0"):
        load_protocol("no-such-protocol")


def test_units_cover_tasks_seeds_samples_and_fast_subset(tiny: Path) -> None:
    p = load_protocol(tiny)
    units = p.units("agentflow/Gen-GameOf24-v1", num_tasks=100)
    assert len(units) == 6 * 2 and len({u.key for u in units}) == 12
    assert len({u.episode_seed() for u in units}) == 12
    assert len(p.units("agentflow/Gen-GameOf24-v1", 100, fast=True)) == 3 * 2
    assert len(p.units("agentflow/Gen-GameOf24-v1", 4)) == 4 * 2  # never more than the source has


# ---------------------------------------------------------------- statistics
def test_wilson_interval_known_values() -> None:
    lo, hi = wilson_interval(5, 10)
    assert math.isclose(lo, 0.2366, abs_tol=1e-4) and math.isclose(hi, 0.7634, abs_tol=1e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and math.isclose(hi, 0.2775, abs_tol=1e-4)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(3, 0) == (0.0, 1.0)
    narrow, wide = wilson_interval(50, 100), wilson_interval(5, 10)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]


def test_category_averages_match_the_paper() -> None:
    # AgentFlow w/ Flow-GRPO, Tables 1-2 of the paper: search Avg. 57.3, math Avg. 51.5, science Avg. 63.5
    acc = {
        "b": 69.6,
        "w": 77.2,
        "h": 57.0,
        "m": 25.3,
        "g": 33.1,
        "a1": 40.0,
        "a2": 61.5,
        "24": 53.0,
        "gp": 47.0,
        "md": 80.0,
    }
    cats = dict.fromkeys(["b", "w", "h", "m"], "search") | {"g": "agentic"}
    cats |= dict.fromkeys(["a1", "a2", "24"], "math") | dict.fromkeys(["gp", "md"], "science")
    avg = category_averages(acc, cats)
    assert [round(avg[c], 1) for c in ("search", "agentic", "math", "science")] == [57.3, 33.1, 51.5, 63.5]
    partial = category_averages({**acc, "h": None}, cats)
    assert "search" not in partial and round(partial["math"], 1) == 51.5


# ---------------------------------------------------------------- store
def test_jsonl_tolerates_and_repairs_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    with JsonlAppender(path) as app:
        app.append({"a": 1})
        app.append({"a": 2})
    with open(path, "ab") as fh:
        fh.write(b'{"a": 3, "b"')  # a crash mid-write
    assert [r["a"] for r in read_jsonl(path)] == [1, 2]
    with JsonlAppender(path) as app:  # reopening cuts the torn tail so the next line starts clean
        off, length = app.append({"a": 4})
    assert [r["a"] for r in read_jsonl(path)] == [1, 2, 4]
    assert json.loads(path.read_bytes()[off : off + length]) == {"a": 4}


# ---------------------------------------------------------------- runner
def test_eval_writes_a_complete_result_record(tmp_path: Path, tiny: Path) -> None:
    result = evaluate(EvalConfig(policy="scripted", protocol=str(tiny), out=tmp_path, progress=False))
    rec = result.record
    assert rec.complete and rec.policy == "scripted" and rec.protocol == "tiny-test"
    assert rec.protocol_hash == load_protocol(tiny).hash and rec.package_version and rec.seeds == [0, 1]
    assert rec.wall_s > 0 and rec.sessions == 1
    assert len(result.outcomes) == 12 and all(o.score == 1.0 for o in result.outcomes)
    o = result.outcomes[0]
    traj = read_trajectory(result.path, o.trajectory)
    assert traj["key"] == o.key and traj["trajectory"] and o.tokens is None and result.tokens() is None
    assert len({x.episode_seed for x in result.outcomes}) == 12
    summary = result.summary()["benchmarks"]["agentflow/Gen-GameOf24-v1"]
    assert summary["n"] == 12 and summary["accuracy"] == 1.0 and summary["ci95"][1] == 1.0
    stored = {p.name: p.read_bytes() for p in result.path.iterdir()}
    again = evaluate(EvalConfig(policy="scripted", protocol=str(tiny), out=tmp_path, progress=False))
    assert len(again.outcomes) == 12 and {p.name: p.read_bytes() for p in result.path.iterdir()} == stored


class _Interrupting:
    """Scripted Game-of-24 play that raises KeyboardInterrupt at its ``stop_after``-th act call."""

    def __init__(self, stop_after: int | None = None):
        from agents.policies.baselines import ScriptedGameOf24Planner

        self.inner = ScriptedGameOf24Planner()
        self.calls = 0
        self.stop_after = stop_after
        self.questions: set[str] = set()

    def act(self, observations):
        self.calls += 1
        if self.stop_after is not None and self.calls >= self.stop_after:
            raise KeyboardInterrupt
        self.questions.update(o["question"] for o in observations)
        return self.inner.act(observations)


def test_interrupted_eval_resumes_without_redoing_finished_tasks(tmp_path: Path) -> None:
    one_seed = tmp_path / "tiny-test.toml"  # one trial, so each question is one unit
    one_seed.write_text(TINY.replace("seeds = [0, 1]", "seeds = [0]").replace("num_tasks = 6", "num_tasks = 12"))
    first = _Interrupting(stop_after=5)  # batch of 2: two turns per episode, so ~4 tasks finish first
    config = EvalConfig(
        policy="scripted",
        protocol=str(one_seed),
        out=tmp_path,
        progress=False,
        concurrency=2,
        policy_factory=lambda env_id: first,
    )
    with pytest.raises(KeyboardInterrupt):
        evaluate(config)
    run_dir = tmp_path / "tiny-test" / "scripted"
    done = read_jsonl(run_dir / TASKS_FILE)
    assert 0 < len(done) < 12 and not load_run(run_dir).record.complete
    with open(run_dir / TASKS_FILE, "ab") as fh:
        fh.write(b'{"key": "torn')
    second = _Interrupting()
    config.policy_factory = lambda env_id: second
    result = evaluate(config)
    assert result.record.complete and result.record.sessions == 2
    keys = [o.key for o in result.outcomes]
    assert len(keys) == 12 == len(set(keys)) == len(read_jsonl(run_dir / TASKS_FILE))
    finished_questions = {read_trajectory(run_dir, d["trajectory"])["question"] for d in done}
    assert not (finished_questions & second.questions), "a finished task was played again"


def test_resume_refuses_a_different_run_in_the_same_folder(tmp_path: Path, tiny: Path) -> None:
    evaluate(EvalConfig(policy="scripted", protocol=str(tiny), out=tmp_path, progress=False, fast=True, name="x"))
    with pytest.raises(ConfigError, match="--overwrite"):
        evaluate(EvalConfig(policy="random", protocol=str(tiny), out=tmp_path, progress=False, fast=True, name="x"))
    again = evaluate(
        EvalConfig(
            policy="random", protocol=str(tiny), out=tmp_path, progress=False, fast=True, name="x", overwrite=True
        )
    )
    assert again.record.policy == "random" and len(again.outcomes) == 6


def test_same_seed_runs_are_identical(tmp_path: Path, tiny: Path) -> None:
    runs = [
        evaluate(EvalConfig(policy="random:7", protocol=str(tiny), out=tmp_path / str(i), progress=False))
        for i in range(2)
    ]
    assert [(o.key, o.answer, o.score) for o in runs[0].outcomes] == [
        (o.key, o.answer, o.score) for o in runs[1].outcomes
    ]


def test_missing_env_id_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(TINY.replace("agentflow/Gen-GameOf24-v1", "agentflow/Nope-v1"))
    with pytest.raises(ConfigError, match="not registered"):
        evaluate(EvalConfig(policy="random", protocol=str(path), out=tmp_path, progress=False))


def test_normalize_actions_counts_tokens_when_reported() -> None:
    class Sample:
        def __init__(self, text: str):
            self.text, self.prompt_ids, self.response_ids = text, [1, 2, 3], [4, 5]

    texts, tokens = normalize_actions(None, [Sample("a"), {"text": "b", "prompt_tokens": 7, "completion_tokens": 1}], 2)
    assert texts == ["a", "b"] and tokens == [{"prompt": 3, "completion": 2}, {"prompt": 7, "completion": 1}]
    assert normalize_actions(None, ["c"], 1) == (["c"], [None])
    with pytest.raises(ConfigError, match="one action per observation"):
        normalize_actions(None, ["c"], 2)


def test_token_counts_reach_the_result(tmp_path: Path, tiny: Path) -> None:
    from agents.policies.baselines import ScriptedGameOf24Planner

    class Counting(ScriptedGameOf24Planner):
        def act(self, observations):
            actions = super().act(observations)
            self.last_usage = [
                {"prompt_tokens": len(o["prompt"]), "completion_tokens": len(a)} for o, a in zip(observations, actions)
            ]
            return actions

    result = evaluate(
        EvalConfig(
            policy="scripted",
            protocol=str(tiny),
            out=tmp_path,
            progress=False,
            fast=True,
            policy_factory=lambda env_id: Counting(),
        )
    )
    tokens = result.tokens()
    assert tokens is not None and tokens["prompt"] > 0 and tokens["completion"] > 0


# ---------------------------------------------------------------- policy specs
def test_policy_specs() -> None:
    assert type(make_policy("random")).__name__ == "RandomPlanner"
    assert make_policy("random:3").rng.integers(1000) == make_policy("random:3").rng.integers(1000)
    assert callable(make_policy("scripted", "agentflow/Gen-GameOf24-v1").act)
    assert is_env_specific("scripted") and not is_env_specific("random")
    shared = make_policies("random", ["a", "b"])
    assert shared["a"] is shared["b"]
    user = make_policy("agents.policies.baselines:RandomPlanner")
    assert type(user).__name__ == "RandomPlanner"
    for bad, msg in (
        ("nonsense", "unknown policy spec"),
        ("scripted", "pass env_id"),
        ("no_such_mod:X", "cannot import"),
        ("agents.policies.baselines:Nope", "no attribute"),
        ("random:x", "integer"),
        ("hf:", "needs a path"),
    ):
        with pytest.raises(ConfigError, match=msg):
            make_policy(bad)


def test_registry_and_eval_stay_torch_free() -> None:
    code = (
        "import sys; import agents.policies.registry, leaderboards.runner, leaderboards.render, leaderboards.cli; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---------------------------------------------------------------- CLI, the way users call it
def test_cli_eval_then_render(tmp_path: Path, tiny: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentflow_env.cli",
            "eval",
            "--policy",
            "random",
            "--protocol",
            str(tiny),
            "--output-dir",
            str(tmp_path / "res"),
            "--no-progress",
            "--fast",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "G24" in out.stdout and "95% CI" in out.stdout and "math avg" in out.stdout
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentflow_env.cli",
            "leaderboard",
            "render",
            "--results",
            str(tmp_path / "res"),
            "--output-dir",
            str(tmp_path / "site"),
            "--no-charts",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "random-fast" in (tmp_path / "site" / "leaderboard.md").read_text()


def test_cli_reports_bad_input_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow_env.cli import main

    assert main(["eval", "--policy", "random", "--protocol", "nope", "--output-dir", str(tmp_path)]) == 2
    assert "known:" in capsys.readouterr().err
    assert main(["eval", "--policy", "bogus", "--protocol", "offline-v0", "--output-dir", str(tmp_path)]) == 2
    assert "unknown policy spec" in capsys.readouterr().err
    assert main(["leaderboard"]) == 2 and "render" in capsys.readouterr().out
    assert main(["leaderboard", "show", "--protocol", "paper-v0"]) == 0
    shown = capsys.readouterr().out
    assert "agentflow-7b-flow-grpo (reported)" in shown and "| 69.6 | 77.2 | 57.0 | 25.3 | 33.1 |" in shown


def test_paper_protocol_runs_llm_modes_and_records_the_engine(tmp_path: Path, testsets_dir: Path) -> None:
    """paper-v0's real settings (llm executor/verifier/generator, 10 turns) on one task per benchmark,
    with an offline echo engine standing in for Qwen2.5-7B-Instruct."""
    text = (Path(__file__).resolve().parents[2] / "leaderboards" / "protocols" / "paper-v0.toml").read_text()
    small = tmp_path / "paper-small.toml"
    small.write_text(text.replace("seeds = [0, 1, 2]", "seeds = [0]").replace("fast_tasks = 5", "fast_tasks = 1"))

    class AnswerAtOnce:
        def act(self, observations):
            return ["Final Answer: 42" for _ in observations]

    result = evaluate(
        EvalConfig(
            policy="test:answer-at-once",
            protocol=str(small),
            out=tmp_path,
            fast=True,
            progress=False,
            data_dir=str(testsets_dir),
            engine="scripted:echo",
            policy_factory=lambda env_id: AnswerAtOnce(),
        )
    )
    assert result.record.env["engine"] == "scripted:echo" and result.record.env["verifier"] == "llm"
    assert result.record.max_turns == 10 and result.record.sampling["temperature"] == 0.0
    assert len(result.outcomes) == 10 and {o.env_id for o in result.outcomes} == set(load_protocol("paper-v0").env_ids)
    assert all(o.turns == 1 and o.terminated for o in result.outcomes)


def test_one_act_call_per_turn_spans_benchmarks(tmp_path: Path) -> None:
    two = tmp_path / "two.toml"
    science = '[[benchmarks]]\nenv_id = "agentflow/Gen-Science-v1"\ncategory = "science"\nnum_tasks = 5\n'
    two.write_text(TINY + "\n" + science)

    class AnswerAtOnce:
        def __init__(self) -> None:
            self.batches: list[int] = []

        def act(self, observations):
            self.batches.append(len(observations))
            return ["Final Answer: A" for _ in observations]

    shared = AnswerAtOnce()
    result = evaluate(
        EvalConfig(
            policy="test:shared",
            protocol=str(two),
            out=tmp_path,
            progress=False,
            concurrency=32,
            batch_window_s=60.0,  # a batch goes when every episode in flight is waiting, or after the window
            policy_factory=lambda env_id: shared,
        )
    )
    assert len(result.outcomes) == 6 * 2 + 5 * 2
    assert shared.batches == [22], "all episodes of both benchmarks should share one act() call per turn"


def test_llm_backed_policy_specs_build_without_a_server() -> None:
    from agents.policies.llm_planner import LLMPlanner

    assert isinstance(make_policy("engine:scripted:echo"), LLMPlanner)
    assert isinstance(make_policy("openai:some-model@http://127.0.0.1:9/v1", sampling={"temperature": 0.0}), LLMPlanner)


class SlowScripted:
    """Scripted Game-of-24 play that takes 0.1 s per call (so a test can kill a run part-way).

    With ``AGENTFLOW_TEST_GATE`` set to a file, each call also waits (at most 120 s) while that file exists, so a
    test can hold a run part-way for as long as it needs, however slowly a busy machine starts processes."""

    def __init__(self) -> None:
        from agents.policies.baselines import ScriptedGameOf24Planner

        self.inner = ScriptedGameOf24Planner()

    def act(self, observations):
        import os
        import time

        time.sleep(0.1)
        gate = os.environ.get("AGENTFLOW_TEST_GATE")
        deadline = time.monotonic() + 120
        while gate and os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.inner.act(observations)


def test_a_killed_eval_resumes_from_disk(tmp_path: Path) -> None:
    import signal
    import time

    protocol = tmp_path / "tiny-test.toml"
    protocol.write_text(TINY.replace("seeds = [0, 1]", "seeds = [0]").replace("num_tasks = 6", "num_tasks = 12"))
    cmd = [
        sys.executable,
        "-m",
        "agentflow_env.cli",
        "eval",
        "--policy",
        "tests.leaderboards.test_leaderboard:SlowScripted",
        "--protocol",
        str(protocol),
        "--output-dir",
        str(tmp_path),
        "--concurrency",
        "1",
        "--no-progress",
    ]
    root = Path(__file__).resolve().parents[2]
    tasks = tmp_path / "tiny-test" / "tests.leaderboards.test_leaderboard-SlowScripted" / TASKS_FILE
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not tasks.exists() or len(read_jsonl(tasks)) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # a hard crash: no cleanup runs
    proc.wait(timeout=30)
    first = {d["key"] for d in read_jsonl(tasks)}
    assert 3 <= len(first) < 12
    out = subprocess.run(cmd + ["--json"], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"resuming: {len(first)} of 12" in out.stderr
    keys = [d["key"] for d in read_jsonl(tasks)]
    assert len(keys) == 12 == len(set(keys)) and first <= set(keys)
    assert json.loads(out.stdout)["overall"] == 1.0
