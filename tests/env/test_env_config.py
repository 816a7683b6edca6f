"""EnvConfig/PaperConfig hold every env option once; both flows extend TaskEnv and grade through it."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from agentflow_env import AgentFlowEnv, Task
from agentflow_env.base import TaskEnv
from agentflow_env.config import EnvConfig, FlowLimits, PaperConfig
from agentflow_env.engines.scripted import ScriptedEngine
from agentflow_env.error import ConfigError
from agentflow_env.paper_flow import PaperFlowEnv
from agentflow_env.paper_flow.toolbox import STATED_TOOLS, PaperTool
from benchmarks.specs import BenchmarkSpec, get_spec, make_env, spec_names

TASK = Task(id="t1", question="What is 2+2?", answer="4", family="math")


def _defaults(cls: type) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(("env_cls", "config_cls"), [(AgentFlowEnv, EnvConfig), (PaperFlowEnv, PaperConfig)])
def test_each_env_takes_exactly_its_config_options_with_the_same_defaults(env_cls, config_cls) -> None:
    params = inspect.signature(env_cls).parameters
    for name, default in _defaults(config_cls).items():
        assert name in params, f"{env_cls.__name__} lacks option {name}"
        if name != "engine":  # the paper flow's engine is required
            assert params[name].default == default, name


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"max_turns": 0}, "max_turns"),
        ({"time_budget_s": 0}, "positive"),
        ({"tool_timeout_s": -1}, "positive"),
        ({"max_action_chars": 10}, "max_action_chars"),
        ({"render_mode": "rgb"}, "render_mode"),
        ({"memory_budget": 10}, "memory_budget"),
    ],
)
def test_env_config_refuses_bad_values_and_the_env_says_the_same(bad: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        EnvConfig(**bad)
    with pytest.raises(ConfigError, match=match):
        AgentFlowEnv([TASK], lambda a, t: 0.0, **bad)


def test_paper_config_checks_engine_and_toolbox() -> None:
    with pytest.raises(ConfigError, match="engine"):
        PaperConfig()
    with pytest.raises(ConfigError, match="toolbox"):
        PaperConfig(engine="x", toolbox="mine")
    with pytest.raises(ConfigError, match="max_turns"):
        PaperConfig(engine="x", max_turns=0)


def test_pop_from_takes_only_its_options_and_fills_defaults() -> None:
    kwargs = {"max_turns": 3, "seed": 7, "memory_budget": 500, "num_tasks": 2}
    config = EnvConfig.pop_from(kwargs, {"max_turns": 9, "time_budget_s": 60.0})
    assert kwargs == {"seed": 7, "num_tasks": 2}
    assert (config.max_turns, config.time_budget_s, config.memory_budget) == (3, 60.0, 500)
    assert config.kwargs()["executor"] == "direct"
    assert FlowLimits.names() <= EnvConfig.names() and FlowLimits.names() <= PaperConfig.names()


def test_the_two_flows_are_siblings_on_task_env() -> None:
    assert issubclass(AgentFlowEnv, TaskEnv) and issubclass(PaperFlowEnv, TaskEnv)
    assert not issubclass(PaperFlowEnv, AgentFlowEnv)
    for cls in (AgentFlowEnv, PaperFlowEnv):
        assert "_grade" not in vars(cls) and "_choose_task" not in vars(cls)


class _Echo(PaperTool):
    def __init__(self, name: str):
        super().__init__(name, ("query",))

    def _call(self, **kwargs):
        return "4"


def _paper_env(scorer, answer: str) -> PaperFlowEnv:
    engine = ScriptedEngine(["analysis", "Conclusion: STOP", answer])  # query analysis, verifier, final output
    tools = {n: _Echo(n) for n in STATED_TOOLS}
    return PaperFlowEnv([TASK], scorer, engine=engine, tools=tools, toolbox="as_stated")


def _boom(answer, task):
    raise ValueError("scorer bug")


def test_both_flows_grade_the_same_way() -> None:
    env = AgentFlowEnv([TASK], _boom)
    env.reset(seed=0)
    *_, info = env.step("Final Answer: 4")
    assert info["score"] == 0.0 and info["score_error"] == "ValueError: scorer bug" and info["gold"] == "4"
    env = AgentFlowEnv([TASK], lambda a, t: 7.0)  # clamped into [0, 1]
    env.reset(seed=0)
    assert env.step("Final Answer: 4")[1] == 1.0
    env = _paper_env(_boom, "Answer: 4")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("Tool Name: none")
    assert terminated and reward == 0.0 and info["score_error"] == "ValueError: scorer bug"
    assert info["module_calls"][-1]["module"] == "final_output"
    seen: list[str] = []
    env = _paper_env(lambda a, t: seen.append(a) or 1.0, "   ")  # a blank final output is not graded
    env.reset(seed=0)
    assert env.step("Tool Name: none")[1] == 0.0 and seen == []
    env = _paper_env(lambda a, t: 5.0, "Answer: 4")
    env.reset(seed=0)
    assert env.step("Tool Name: none")[1] == 1.0


def test_benchmark_spec_states_its_options() -> None:
    for name in spec_names():
        spec = get_spec(name)
        assert spec.options and "num_tasks" in spec.loader_options
    multihop = get_spec("Gen-MultiHop")
    assert {"top_k", "world_size"} <= multihop.tool_options and "top_k" not in multihop.loader_options
    with pytest.raises(ConfigError, match="does not take"):
        BenchmarkSpec("X", "math", lambda split="test", seed=0: [TASK], lambda: None, loader_options={"sed"})
    with pytest.raises(ConfigError, match="must state"):
        BenchmarkSpec("X", "math", lambda split="test", **kw: [TASK], lambda: None)
    with pytest.raises(ConfigError, match=r"valid options: .*top_k"):
        make_env("Gen-MultiHop", num_tasks=2, top_kk=3)
    env = make_env("Gen-MultiHop", num_tasks=2, top_k=1, max_turns=3)
    assert env.unwrapped.max_turns == 3 and len(env.unwrapped.tasks) == 2


def test_dataclass_flags_round_trip_through_argparse() -> None:
    import argparse
    from dataclasses import dataclass

    from agentflow_env.config import add_dataclass_flags, doc_field, flag_values

    @dataclass
    class Demo:
        ids: str | list[str] = doc_field("ids", repeat=True, default="a")
        table: dict = doc_field("a table", default_factory=dict)
        limit: int | None = doc_field("a cap", default=None)
        keep: bool = doc_field("drop nothing", flag="--drop-none", switch=True, default=True)
        rate: float = doc_field("a rate in %", default=0.5)

    parser = argparse.ArgumentParser()
    add_dataclass_flags(parser, Demo)
    assert "--drop-none" in parser.format_help() and "--rate" in parser.format_help()
    args = parser.parse_args(["--ids", "x", "--ids", "y", "--table", '{"k": 1}', "--limit", "3", "--drop-none"])
    assert flag_values(args, Demo) == {"ids": ["x", "y"], "table": {"k": 1}, "limit": 3, "keep": False}
    assert flag_values(parser.parse_args([]), Demo) == {}  # only given flags override
    with pytest.raises(ConfigError, match="JSON object"):
        flag_values(parser.parse_args(["--table", "[1, 2]"]), Demo)
    with pytest.raises(ConfigError, match="limit"):
        flag_values(parser.parse_args(["--limit", "many"]), Demo)


def test_the_flows_and_the_options_only_the_modes_flow_takes_are_stated_once(tmp_path) -> None:
    """``MODES_ONLY`` is what EnvConfig takes beyond PaperConfig: a shared budget such as ``max_action_chars``
    applies to both flows, through make_env and through a paper-flow protocol's [env] alike."""
    from agentflow_env.config import FLOWS, MODES_ONLY
    from leaderboards.protocol import PROTOCOL_DIR, load_protocol

    assert FLOWS == ("modes", "paper")
    assert MODES_ONLY == {
        "executor",
        "verifier",
        "generator",
        "llm_kwargs",
        "memory_budget",
        "turn_rewards",
        "headers_first",
    }
    assert FlowLimits.names() <= PaperConfig.names() and not FlowLimits.names() & MODES_ONLY
    env = make_env("Gen-GameOf24", flow="paper", engine=ScriptedEngine(["x"]), max_action_chars=5000)
    assert env.max_action_chars == 5000
    text = (PROTOCOL_DIR / "paper-v1.toml").read_text(encoding="utf-8")
    for extra, refused in (("max_action_chars = 5000", False), ("memory_budget = 900", True)):
        path = tmp_path / f"{extra.split()[0]}.toml"
        path.write_text(text.replace('\nflow = "paper"', f'\nflow = "paper"\n{extra}', 1), encoding="utf-8")
        if refused:
            with pytest.raises(ConfigError, match="memory_budget do not apply"):
                load_protocol(path)
        else:
            assert load_protocol(path).env["max_action_chars"] == 5000
