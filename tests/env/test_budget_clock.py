"""The token clock (``budget_clock="tokens"``): fixed charges per LLM call by its tokens and per tool call, so the
budget ends an episode at the same turn however long the calls take; the wall clock stays the default."""

from __future__ import annotations

import threading
import time

import pytest

from agentflow_env.clock import EpisodeClock, TokenClock, TokenRates, bind_clock, bound_clock, make_clock
from agentflow_env.config import EnvConfig, PaperConfig
from agentflow_env.core import AgentFlowEnv
from agentflow_env.engines import ScriptedEngine
from agentflow_env.engines.ledger import generate_as
from agentflow_env.engines.scripted import Delayed
from agentflow_env.error import ConfigError
from agentflow_env.paper_flow import PaperFlowEnv
from agentflow_env.tools.calculator.tool import CalculatorTool
from agentflow_env.types import Task
from tests.helpers import FakeSearch, paper_toolbox

RATES = TokenRates(prompt_s_per_1k=0.0, completion_s_per_1k=0.0, call_s=1.0, tool_call_s=1.0)
TASKS = [Task(id="t1", question="What is 2+2?", answer="4", family="math")]
ACTION = "Tool Name: Calculator_Tool\nSub-Goal: add\nCommand: 2+2"


def _exact(prediction: str, task: Task) -> float:
    return float(prediction.strip() == str(task.answer))


def test_token_rates_charge_calls_by_tokens_and_tools_by_name() -> None:
    rates = TokenRates(prompt_s_per_1k=1.0, completion_s_per_1k=10.0, call_s=0.5, tool_call_s=2.0, tool_s={"Web": 3})
    assert rates.tool_s == (("Web", 3.0),) and TokenRates.of(rates.to_dict()) == rates
    clock = TokenClock(rates)
    clock.start()
    clock.charge_call(2000, 100)  # 0.5 + 2 + 1
    clock.charge_tool("Web")
    clock.charge_tool("Calculator_Tool")
    clock.charge(100.0)  # a runner's wall seconds: not on this clock
    clock.resume()
    time.sleep(0.01)
    assert clock.elapsed() == pytest.approx(3.5 + 3.0 + 2.0)
    assert (clock.calls, clock.tool_calls, clock.running) == (1, 2, False)
    clock.start()
    assert clock.elapsed() == 0.0 and clock.calls == 0
    assert type(make_clock("wall")) is EpisodeClock and make_clock("tokens", {"call_s": 2}).rates.call_s == 2.0


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"budget_clock": "cpu"}, "budget_clock='cpu'"),
        ({"clock_rates": {"call_s": 1.0}}, 'budget_clock="tokens" only'),
        ({"budget_clock": "tokens", "clock_rates": {"per_call": 1.0}}, "no field per_call"),
        ({"budget_clock": "tokens", "clock_rates": {"call_s": -1.0}}, "call_s=-1.0"),
        ({"budget_clock": "tokens", "clock_rates": {"tool_s": {"Web": "slow"}}}, "not valid"),
    ],
)
def test_a_bad_clock_or_rates_is_a_clear_error(kwargs: dict, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        EnvConfig(**kwargs)
    with pytest.raises(ConfigError, match=problem):
        PaperConfig(engine="scripted", **kwargs)


def test_generate_as_charges_the_clock_bound_in_its_own_thread_only() -> None:
    clock = TokenClock(TokenRates(prompt_s_per_1k=1000.0, completion_s_per_1k=1000.0, call_s=0.0))
    clock.start()
    engine = ScriptedEngine(["abcdefgh"])  # no usage reported: 4 characters a token
    seen: list[object] = []
    bind_clock(clock)
    try:
        generate_as(engine, ["abcd"], None, role="modules", name="executor")  # 1 + 2 tokens
        other = threading.Thread(target=lambda: seen.append(bound_clock()))
        other.start()
        other.join()
        bind_clock(EpisodeClock())  # a wall clock binds nothing
        assert bound_clock() is None
        generate_as(engine, ["abcd"], None, role="modules", name="executor")
    finally:
        bind_clock(None)
    assert seen == [None]
    assert clock.elapsed() == pytest.approx(3.0) and clock.calls == 1


def _modes_env(clock: str, tool_delay: float = 0.0) -> AgentFlowEnv:
    class SlowCalculator(CalculatorTool):
        def _run(self, command, timeout):  # type: ignore[no-untyped-def]
            time.sleep(tool_delay)
            return super()._run(command, timeout)

    extra = {"clock_rates": RATES} if clock == "tokens" else {}
    return AgentFlowEnv(TASKS, _exact, [SlowCalculator()], max_turns=6, time_budget_s=4.5, budget_clock=clock, **extra)


@pytest.mark.parametrize("tool_delay", [0.0, 0.05])
def test_the_token_clock_ends_an_episode_at_the_same_turn_however_long_its_tool_takes(tool_delay: float) -> None:
    env = _modes_env("tokens", tool_delay)
    env.reset(seed=0)
    ends = []
    for _ in range(6):
        _, _, terminated, truncated, info = env.step(ACTION)
        ends.append((terminated, truncated))
        if terminated or truncated:
            break
    # per turn 1 s for the planner's call, 1 s for the tool: turn 3's tool would start at 5 s, past 4.5 s
    assert ends == [(False, False), (False, False), (False, True)]
    assert info["budget_cut"] is True and "time budget" in info["trajectory"][-1]["error"]
    assert [t["tool"] for t in info["trajectory"]] == ["Calculator_Tool", "Calculator_Tool", None]


def test_the_wall_clock_is_the_default_and_says_when_it_did_not_cut() -> None:
    env = _modes_env("wall")
    assert type(env.clock) is EpisodeClock
    env.reset(seed=0)
    for _ in range(5):
        env.step(ACTION)
    *_, truncated, info = env.step(ACTION)
    assert truncated and info["budget_cut"] is False  # max_turns ended it, not the budget


def test_the_paper_flow_charges_modules_tools_and_the_planner_on_the_token_clock() -> None:
    plan = "Context: none\nSub-Goal: Find the founder.\nTool Name: Wikipedia_RAG_Search_Tool"
    command = 'Generated Command:\n```python\nexecution = tool.execute(query="founder")\n```'
    engine = ScriptedEngine(
        [
            "Summary: one hop.",  # query analysis (before the clock starts)
            Delayed(0.05, command),  # a slow executor: no matter on the token clock
            "Conclusion: CONTINUE",
            command,  # step 2: the verifier does not start (no time left), so the final output is next
            "Answer: 1871",
        ]
    )
    env = PaperFlowEnv(
        TASKS,
        _exact,
        engine=engine,
        tools=paper_toolbox(engine, FakeSearch({"founder": "Ada Stone"})),
        max_turns=10,
        time_budget_s=6.5,
        budget_clock="tokens",
        clock_rates=RATES,
    )
    _, info = env.reset(seed=0)
    assert env.clock.elapsed() == 0.0 and info["paper_mode"]["budget_clock"] == "tokens"
    *_, truncated, info = env.step(plan)  # planner, executor, tool, verifier: 4 s
    assert not truncated and env.clock.elapsed() == pytest.approx(4.0)
    *_, truncated, info = env.step(plan)  # 7 s after the tool, past 6.5 s: no verifier
    assert truncated and info["budget_cut"] is True and info["answer"] == "Answer: 1871"
    assert [c["module"] for c in info["module_calls"]].count("verifier") == 1  # step 2's verifier did not start
