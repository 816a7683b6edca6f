"""AgentFlowEnv: the gym contract, invalid actions, budgets, determinism, memory, vector envs, registry."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentflow_env
from agentflow_env import AgentFlowEnv, Task
from agentflow_env.error import ConfigError
from agentflow_env.tools.base import BaseTool
from agentflow_env.tools.calculator.tool import CalculatorTool
from agentflow_env.turn.memory import Memory
from agentflow_env.types import MemoryStep, ToolResult
from agents.policies.baselines import RandomPlanner, ScriptedGameOf24Planner, final_answer, tool_call
from tests.conftest import TESTSETS


class EchoTool(BaseTool):
    name = "Echo_Tool"
    description = "Returns its input."
    input_spec = "any text"
    examples = ("hello",)

    def __init__(self, delay: float = 0.0, fail: bool = False):
        self.delay, self.fail = delay, fail

    def _run(self, command, timeout):
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("boom")
        return ToolResult(text=command)


def exact_scorer(prediction, task):
    return float(prediction.strip() == str(task.answer))


TASKS = [Task(id=f"t{i}", question=f"What is {i}+{i}?", answer=str(2 * i), family="math") for i in range(5)]


def make(**kw):
    kw.setdefault("tools", [EchoTool(), CalculatorTool()])
    return AgentFlowEnv(TASKS, exact_scorer, max_turns=kw.pop("max_turns", 4), **kw)


def _env_kwargs(env_id: str) -> dict:
    bench = gym.spec(env_id).kwargs.get("benchmark", "")
    if bench.startswith("Gen-"):
        return {}
    if not TESTSETS.is_dir():
        pytest.skip(f"{env_id} needs the AgentFlow test sets at {TESTSETS}")
    return {"data_dir": str(TESTSETS)}


@pytest.mark.parametrize("env_id", agentflow_env.registered_ids())
def test_check_env_every_registered_id(env_id):
    env = gym.make(env_id, **_env_kwargs(env_id)).unwrapped
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_observation_and_info_contract():
    env = make()
    obs, info = env.reset(seed=3)
    assert set(obs) == {"question", "memory", "tools", "prompt"}
    assert obs in env.observation_space
    assert info["task_id"] in {t.id for t in TASKS} and info["turn"] == 0
    assert info["tool_names"] == ["Echo_Tool", "Calculator_Tool"]
    assert obs["question"] in obs["prompt"] and "Echo_Tool" in obs["prompt"] and "Turns left: 4" in obs["prompt"]
    # the Text space accepts any Unicode the env can produce
    assert {"question": "π ≈ 3.14 中文 ✓\n", "memory": "", "tools": "", "prompt": "×÷"} in env.observation_space


def test_reward_only_at_the_end_and_final_info():
    env = make()
    obs, info = env.reset(options={"task_id": "t3"})
    obs, r, term, trunc, info = env.step(tool_call("Calculator_Tool", "3+3"))
    assert (r, term, trunc) == (0.0, False, False)
    assert "3+3 = 6" in obs["memory"]
    obs, r, term, trunc, info = env.step(final_answer("6"))
    assert (r, term, trunc) == (1.0, True, False)
    assert info["answer"] == "6" and info["score"] == 1.0
    traj = info["trajectory"]
    json.dumps(traj)
    assert [t["turn"] for t in traj] == [1, 2]
    assert traj[0]["tool"] == "Calculator_Tool" and traj[0]["command"] == "3+3" and traj[0]["result"] == "3+3 = 6"
    assert {"action", "parsed", "seconds", "error"} <= set(traj[0])
    with pytest.raises(RuntimeError, match="reset"):
        env.step("Final Answer: 1")


def test_reset_by_index_and_unknown_id():
    env = make()
    assert env.reset(options={"index": 2})[1]["task_id"] == "t2"
    with pytest.raises(KeyError):
        env.reset(options={"task_id": "nope"})
    with pytest.raises(IndexError):
        env.reset(options={"index": 99})


@pytest.mark.parametrize(
    ("action", "needle"),
    [
        ("complete junk", "no recognisable fields"),
        ("Tool Name: Nonexistent_Tool\nCommand: x", "unknown tool"),
        ("Sub-Goal: do something\nCommand: 1+1", "no 'Tool Name:'"),
        ("Tool Name: Calculator_Tool\nSub-Goal: add", "no 'Command:'"),
    ],
)
def test_invalid_actions_cost_the_turn_and_explain(action, needle):
    env = make()
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step(action)
    assert (r, term, trunc) == (0.0, False, False)
    assert needle in obs["memory"]
    assert "Valid tools: Echo_Tool, Calculator_Tool" in obs["memory"]
    assert info["turn"] == 1 and info["memory_steps"][-1]["ok"] is False


def test_tool_that_raises_does_not_crash():
    env = make(tools=[EchoTool(fail=True)])
    env.reset(seed=0)
    obs, *_ = env.step(tool_call("Echo_Tool", "x"))
    assert "RuntimeError: boom" in obs["memory"]


def test_turn_budget_truncates_with_zero_reward():
    env = make(max_turns=2)
    env.reset(seed=0)
    assert env.step(tool_call("Echo_Tool", "a"))[3] is False
    obs, r, term, trunc, info = env.step(tool_call("Echo_Tool", "b"))
    assert (r, term, trunc) == (0.0, False, True)
    assert info["answer"] == "" and len(info["trajectory"]) == 2


def test_time_budget_truncates():
    env = make(tools=[EchoTool(delay=0.3)], time_budget_s=0.2, max_turns=10)
    env.reset(seed=0)
    *_, term, trunc, info = env.step(tool_call("Echo_Tool", "a"))
    assert trunc and not term and "time budget" in info["trajectory"][-1]["error"]


def test_last_turn_prompt_asks_for_the_answer():
    env = make(max_turns=2)
    env.reset(seed=0)
    obs, *_ = env.step(tool_call("Echo_Tool", "a"))
    assert "last turn" in obs["prompt"]


def test_config_errors_say_what_to_change():
    with pytest.raises(ConfigError, match="max_turns"):
        make(max_turns=0)
    with pytest.raises(ConfigError, match="choose one of direct, llm"):
        make(executor="magic")
    with pytest.raises(ConfigError, match="engine"):
        make(executor="llm")
    with pytest.raises(ConfigError, match="generator='llm'"):
        make(verifier="llm", generator="planner", engine=object())
    with pytest.raises(ConfigError, match="both named"):
        make(tools=[EchoTool(), EchoTool()])


def _rollout(env, seed, actions):
    obs, info = env.reset(seed=seed)
    out = [obs]
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        out.append(obs)
        if term or trunc:
            break
    traj = [{k: v for k, v in t.items() if k != "seconds"} for t in info.get("trajectory", [])]
    return out, traj, info["task_id"]


def test_same_seed_same_actions_same_everything():
    actions = [tool_call("Calculator_Tool", "1+1"), "junk", tool_call("Echo_Tool", "π"), final_answer("2")]
    a = _rollout(make(), 123, actions)
    b = _rollout(make(), 123, actions)
    assert a == b
    ids = {_rollout(make(), s, actions[-1:])[2] for s in range(20)}
    assert len(ids) > 1  # the seed really drives task choice


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    st.lists(
        st.text(max_size=500) | st.builds(lambda s, n: (s * n)[:100_000], st.text(max_size=50), st.integers(1, 5000)),
        min_size=1,
        max_size=5,
    )
)
def test_fuzz_step_never_raises(actions):
    env = make(max_turns=5, memory_budget=2000)
    env.reset(seed=0)
    for action in actions:
        obs, r, term, trunc, info = env.step(action)
        assert obs in env.observation_space and 0.0 <= r <= 1.0
        assert len(obs["memory"]) <= 2000
        if term or trunc:
            json.dumps(info["trajectory"])
            break


# ---------------------------------------------------------------------------- memory


def _step(i, result):
    return MemoryStep(turn=i, tool="Echo_Tool", sub_goal=f"goal {i}", command=f"cmd {i}", result=result)


def test_memory_fits_budget_shortening_oldest_first():
    mem = Memory([_step(1, "a" * 3000), _step(2, "b" * 3000), _step(3, "c" * 500)])
    text = mem.render(budget=2500)
    assert len(text) <= 2500
    assert "c" * 500 in text  # the newest result is intact
    assert "chars cut" in text  # shortening says so
    assert "Step 1" in text and "Step 2" in text


def test_memory_never_silently_drops_the_newest_step():
    mem = Memory([_step(i, "x" * 400) for i in range(1, 30)] + [_step(30, "NEWEST " + "y" * 50)])
    text = mem.render(budget=1000)
    assert len(text) <= 1000
    assert "Step 30" in text and "NEWEST" in text
    assert "omitted to fit the memory budget" in text


def test_memory_renders_as_one_built_at_once_whatever_was_rendered_before():
    """Memory keeps lengths between renders (some only once a render over budget needs them): a memory rendered
    along the way, at budgets that fold and shorten and at ones that do not, renders as a fresh copy of it."""
    rng = random.Random(0)
    for _ in range(300):
        mem, steps = Memory(), []
        for i in range(1, rng.randint(2, 20)):
            steps.append(_step(i, "r" * rng.choice([0, 5, 59, 60, 61, 300, 1500])))
            mem.add(steps[-1])
            if rng.random() < 0.5:
                budget = rng.choice([60, 300, 900, 3000, 8000])
                assert mem.text(budget) == Memory(steps).render(budget)
        for budget in (60, 300, 900, 3000, 8000):
            assert mem.text(budget) == mem.render(budget) == Memory(steps).render(budget)


def test_memory_round_trip():
    mem = Memory([_step(1, "r1"), _step(2, "r2")])
    again = Memory.from_list(json.loads(json.dumps(mem.to_list())))
    assert again.render() == mem.render()


# ---------------------------------------------------------------------------- Gen-GameOf24 end to end


def _play(env, policy, n, seed=0):
    total = 0.0
    for i in range(n):
        obs, _ = env.reset(seed=seed + i, options={"index": i})
        done = False
        while not done:
            obs, r, term, trunc, _ = env.step(policy.act([obs])[0])
            done = term or trunc
        total += r
    return total / n


def test_gen_gameof24_scripted_and_random_planners():
    env = gym.make("agentflow/Gen-GameOf24-v1", split="test")
    n = len(env.unwrapped.tasks)
    assert n > 100
    assert _play(env, ScriptedGameOf24Planner(), n) == 1.0
    assert _play(env, RandomPlanner(seed=0), 40) < 0.3


def test_gen_gameof24_splits_are_disjoint_and_cover_the_space():
    from benchmarks.synthetic.game24 import load_tasks, solvable_puzzles

    splits = {s: {t.id for t in load_tasks(split=s)} for s in ("train", "validation", "test")}
    assert not (splits["train"] & splits["test"]) and not (splits["train"] & splits["validation"])
    assert sum(len(v) for v in splits.values()) == len(solvable_puzzles()) == 1362


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_envs_run_whole_episodes(mode):
    n = 3
    if mode == "sync":
        envs = gym.vector.SyncVectorEnv([lambda: gym.make("agentflow/Gen-GameOf24-v1")] * n)
    else:
        envs = gym.vector.AsyncVectorEnv([lambda: gym.make("agentflow/Gen-GameOf24-v1")] * n, shared_memory=False)
    policy = ScriptedGameOf24Planner()
    obs, _ = envs.reset(seed=0)
    finished, rewards = 0, []
    for _ in range(6):
        actions = policy.act([{k: obs[k][i] for k in obs} for i in range(n)])
        obs, r, term, trunc, _ = envs.step(tuple(actions))
        done = term | trunc
        finished += int(done.sum())
        rewards.extend(r[done].tolist())
        if finished >= n:
            break
    envs.close()
    assert finished >= n and all(x == 1.0 for x in rewards)


def test_make_vec():
    envs = gym.make_vec("agentflow/Gen-GameOf24-v1", num_envs=2, vectorization_mode="sync")
    obs, _ = envs.reset(seed=1)
    assert len(obs["prompt"]) == 2
    envs.close()


def test_unknown_option_is_a_clear_error():
    with pytest.raises(ConfigError, match="does not take option"):
        gym.make("agentflow/Gen-GameOf24-v1", max_numbr=13)


def test_import_does_not_pull_torch():
    code = (
        "import agentflow_env, sys; assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_list_shows_registry():
    out = subprocess.run(
        [sys.executable, "-m", "agentflow_env.cli", "list", "--json", "--no-size"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = json.loads(out)
    from agentflow_env.registration import LATEST_VERSION

    assert f"agentflow/Gen-GameOf24-v{LATEST_VERSION}" in {r["id"] for r in rows}  # the newest version of each name


def test_llm_kwargs_reach_the_modes_and_notes_reach_info():
    from agentflow_env.engines.scripted import ScriptedEngine

    engine = ScriptedEngine(["Command: 2+2", "maybe?", "The answer is 4"])
    env = make(
        executor="llm",
        verifier="llm",
        generator="llm",
        engine=engine,
        llm_kwargs={"sampling": {"temperature": 0.7, "max_tokens": 33}},
    )
    env.reset(options={"task_id": "t2"})
    _, _, term, trunc, info = env.step("Sub-Goal: add two and two\nTool Name: Calculator_Tool")
    assert {(c.sampling.temperature, c.sampling.max_tokens) for c in engine.calls} == {(0.7, 33)}
    assert info["memory_steps"][-1]["command"] == "2+2"
    assert "verifier_note" in info  # "maybe?" is no verdict: the note says so and the episode continues
    assert not (term or trunc)
    with pytest.raises(ConfigError, match="SamplingParams"):
        make(executor="llm", engine=engine, llm_kwargs={"sampling": {"temprature": 1}})


# ---------------------------------------------------------------------------- action cap and time budget


class TimeoutRecordingTool(EchoTool):
    """Echoes, and remembers the timeouts it was given and how often it ran."""

    name = "Recording_Tool"

    def __init__(self):
        super().__init__()
        self.timeouts: list[float] = []

    def _run(self, command, timeout):
        self.timeouts.append(timeout)
        return ToolResult(text=command)


def test_over_long_action_is_rejected_with_a_clear_message():
    tool = TimeoutRecordingTool()
    env = make(tools=[tool], max_action_chars=1000)
    env.reset(seed=0)
    fits = tool_call("Recording_Tool", "x" * (1000 - len(tool_call("Recording_Tool", ""))))
    assert len(fits) == 1000
    *_, info = env.step(fits)
    assert "action_rejected" not in info and tool.timeouts and info["memory_steps"][-1]["ok"]
    _, reward, term, trunc, info = env.step(fits + "x")
    assert (reward, term, trunc) == (0.0, False, False) and len(tool.timeouts) == 1  # spent, nothing run
    assert info["action_rejected"].startswith("the action is 1,001 characters long, over the limit of 1,000")
    step = info["memory_steps"][-1]
    assert not step["ok"] and "max_action_chars" in step["result"] and "Invalid action" in step["result"]
    recorded = env._trajectory[-1]["action"]  # head and tail within the limit, saying what was cut
    assert len(recorded) == 1000 and "[1 chars cut]" in recorded and recorded.startswith(fits[:600])
    with pytest.raises(ConfigError, match="max_action_chars"):
        make(max_action_chars=10)


def test_max_action_chars_through_gym_make():
    env = gym.make("agentflow/Gen-GameOf24-v1", max_action_chars=5000)
    assert env.unwrapped.max_action_chars == 5000
    env.close()


def test_tool_timeout_is_the_time_left_when_that_is_shorter():
    tool = TimeoutRecordingTool()
    env = make(tools=[tool], time_budget_s=5.0, tool_timeout_s=30.0)
    env.reset(seed=0)
    env.step(tool_call("Recording_Tool", "a"))
    assert 4.0 < tool.timeouts[-1] <= 5.0
    env = make(tools=[tool], time_budget_s=100.0, tool_timeout_s=2.0)
    env.reset(seed=0)
    env.step(tool_call("Recording_Tool", "a"))
    assert tool.timeouts[-1] == 2.0


def test_nothing_starts_once_the_budget_is_spent_but_a_final_answer_counts():
    tool = TimeoutRecordingTool()
    env = make(tools=[tool], time_budget_s=0.05)
    env.reset(options={"task_id": "t2"})
    time.sleep(0.1)
    _, _, term, trunc, info = env.step(tool_call("Recording_Tool", "a"))
    assert trunc and not term and tool.timeouts == []
    assert info["memory_steps"][-1]["result"].startswith("Not run: the time budget of 0.05 s ran out")
    env.reset(options={"task_id": "t2"})
    time.sleep(0.1)
    _, reward, term, trunc, _ = env.step(final_answer("4"))
    assert term and reward == 1.0


def test_no_verifier_call_after_a_slow_executor_spends_the_budget():
    from agentflow_env.engines.scripted import ScriptedEngine

    tool = TimeoutRecordingTool()
    engine = ScriptedEngine(
        [("team's planner has picked", "Command: hi"), ("Final Answer", "Final Answer: 4")], delay=0.3
    )
    env = make(tools=[tool], executor="llm", verifier="llm", generator="llm", engine=engine, time_budget_s=0.2)
    env.reset(options={"task_id": "t2"})
    _, reward, term, trunc, info = env.step("Sub-Goal: echo hi\nTool Name: Recording_Tool")
    assert trunc and not term and tool.timeouts == []  # the executor ran out the clock: no tool run
    assert "ran out before the tool could run" in info["memory_steps"][-1]["result"]
    prompts = [json.dumps(c.prompt) for c in engine.calls]
    assert len(prompts) == 2 and "decide whether to stop" not in "".join(prompts)  # executor + generator only
    assert info["trajectory"][-1]["verifier"] is None and reward == 1.0


def test_a_step_with_a_real_hung_tool_ends_at_the_budget():
    """The Python tool is killed at the time left, not at its own 30 s timeout."""
    from agentflow_env.tools.python.tool import PythonCoderTool

    try:
        tool = PythonCoderTool()
    except ConfigError as exc:
        pytest.skip(f"no sandbox for the Python tool here: {exc}")
    env = make(tools=[tool], time_budget_s=30.0, tool_timeout_s=30.0)
    try:
        env.reset(seed=0)
        env.step(tool_call("Python_Coder_Tool", "print(1)"))  # a warm worker: its start is not timed
        env.time_budget_s = 1.5
        env.reset(seed=0)
        *_, trunc, info = env.step(tool_call("Python_Coder_Tool", "while True: pass"))
        elapsed = env.clock.elapsed()
    finally:
        env.close()
    assert trunc and "TimeoutError" in info["memory_steps"][-1]["result"]
    assert elapsed < 1.5 + 1.0, f"the step ended {elapsed - 1.5:.2f} s past the budget"


# ---------------------------------------------------------------------------- memory: incremental rendering


def _reference_render(steps, budget):
    """Memory.render as first written: every step's block rebuilt on every call."""
    from agentflow_env.turn.memory import _header, shorten

    if not steps:
        return "(no steps yet)"
    results = [s.result for s in steps]
    headers = [_header(s) for s in steps]

    def block(i):
        return f"{headers[i]}\n  Result: {results[i]}"

    blocks = [block(i) for i in range(len(steps))]
    total = sum(len(b) for b in blocks) + len(blocks) - 1
    if total <= budget:
        return "\n".join(blocks)
    last = len(results) - 1
    for i in range(last):
        if total <= budget:
            break
        limit = max(len(results[i]) - (total - budget), 60)
        if limit < len(results[i]):
            results[i] = shorten(results[i], limit)
            new = block(i)
            total += len(new) - len(blocks[i])
            blocks[i] = new
    folded, marker = 0, ""
    while total > budget and folded < last:
        total -= len(blocks[folded]) + 1
        folded += 1
        new_marker = f"(steps 1-{folded} omitted to fit the memory budget)"
        total += len(new_marker) - len(marker) + (0 if marker else 1)
        marker = new_marker
    if total > budget:
        results[last] = shorten(results[last], max(len(results[last]) - (total - budget), 0))
        new = block(last)
        total += len(new) - len(blocks[last])
        blocks[last] = new
    text = "\n".join(([marker] if marker else []) + blocks[folded:])
    return text if len(text) <= budget else shorten(text, budget)


_STEPS = st.lists(
    st.builds(
        MemoryStep,
        turn=st.integers(1, 5000),
        tool=st.sampled_from([None, "Echo_Tool"]),
        sub_goal=st.sampled_from(["", "goal", "g" * 300]),
        command=st.sampled_from(["", "cmd", "c" * 2000]),
        result=st.sampled_from(["", "ok", "r" * 59, "r" * 60, "r" * 61, "r" * 500, "r" * 5000]) | st.text(max_size=300),
        ok=st.booleans(),
    ),
    max_size=120,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_STEPS, st.lists(st.integers(1, 20_000), min_size=1, max_size=3))
def test_incremental_render_matches_the_reference(steps, budgets):
    mem = Memory()
    for i, step in enumerate(steps):
        mem.add(step)
        if i % 7 == 0 or i == len(steps) - 1:
            for budget in budgets:
                assert mem.render(budget) == _reference_render(steps[: i + 1], budget)
    if not steps:
        assert mem.render(budgets[0]) == "(no steps yet)"


def test_render_only_builds_the_blocks_it_shows(monkeypatch):
    """A rendering's work is bounded by the budget, not by the number of steps."""
    mem = Memory(_step(i, "r" * 200) for i in range(1, 20_001))
    built = []
    real_block = Memory._block
    monkeypatch.setattr(Memory, "_block", lambda self, i, r: built.append(i) or real_block(self, i, r))
    text = mem.render(8000)
    assert len(text) <= 8000 and "Step 20000" in text and "(steps 1-" in text
    assert len(built) < 8000 // 60  # each shown block is over 60 characters
    built.clear()
    mem.add(_step(20_001, "newest"))
    assert "newest" in mem.render(8000) and len(built) < 8000 // 60
    assert mem.render(8000) == _reference_render(mem.steps, 8000)


def test_info_memory_steps_are_read_only_snapshots():
    import copy
    import pickle

    env = make()
    env.reset(seed=0)
    *_, first = env.step(tool_call("Echo_Tool", "a"))
    *_, second = env.step(tool_call("Echo_Tool", "b"))
    assert len(first["memory_steps"]) == 1 and len(second["memory_steps"]) == 2  # earlier infos keep theirs
    step = second["memory_steps"][-1]
    with pytest.raises(TypeError, match="read-only"):
        step["result"] = "forged"
    with pytest.raises(TypeError, match="read-only"):
        step.update(result="forged")
    assert json.loads(json.dumps(second["memory_steps"]))[-1]["result"] == "b"
    for again in (pickle.loads(pickle.dumps(step)), copy.deepcopy(step), copy.copy(step)):
        assert again == step
    changed = dict(step)
    changed["result"] = "mine"  # a copy is an ordinary dict
    assert Memory.from_list(second["memory_steps"]).render() == env.memory.render()
