"""``env.step`` on long and pathological actions: no exception, a bound on time per step, linear scaling.

Sizes reach a few MB. Time bounds are generous (a busy two-core CI box must not flake): they catch
the quadratic parser this suite guards against (a 40,000-character whitespace line took 89 s), not
small slowdowns; ``perf/env_step.py`` measures the real numbers. A SIGALRM guard turns a hang into a
failure instead of a stuck run.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentflow_env import AgentFlowEnv, Task
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import ToolResult
from tests.helpers import cpu_step_seconds, hang_guard, repeat_to

MAX_CHARS = 3_200_000
STEP_BOUND_S = 10.0  # per step of up to MAX_CHARS characters; about 0.5 s here on one core
HANG_S = 60  # the guard: a step this long is a hang


class EchoTool(BaseTool):
    name = "Echo_Tool"
    description = "Returns its input."
    input_spec = "any text"
    examples = ("hello",)

    def _run(self, command: str, timeout: float) -> ToolResult:
        return ToolResult(text=command)


def make_env(max_turns: int = 50, **kwargs: object) -> AgentFlowEnv:
    tasks = [Task(id="t0", question="What is 2+2?", answer="4")]
    return AgentFlowEnv(tasks, lambda p, t: float(p.strip() == t.answer), [EchoTool()], max_turns=max_turns, **kwargs)


_RNG = random.Random(19)
_UNICODE = "".join(
    _RNG.choice("abc xyz\n\t:{}<>`*#_-/\x00\u00e9\u03b1\u4e2d\U0001f600\u200b\u2028\ufeff\U0010ffff\ud800")
    for _ in range(4096)
)

# the classes of input that made the old parser quadratic, and their neighbours
SHAPES: dict[str, Callable[[int], str]] = {
    "whitespace_line": lambda n: "Tool Name: Echo_Tool\nCommand: hi\n" + repeat_to(" \t", n),
    "whitespace_lines": lambda n: repeat_to(" " * 1000 + "\n", n),
    "header_then_spaces": lambda n: "Tool Name" + " " * n + "x",
    "answer_tags": lambda n: repeat_to("<answer>", n),
    "answer_pairs": lambda n: repeat_to("<answer>x</answer>", n),
    "json_fences": lambda n: repeat_to("```json\n{", n),
    "repeated_headers": lambda n: repeat_to("\n**Tool Name:** x", n),
    "nested_markdown": lambda n: repeat_to("\n> # - * 1. **_`", n),
    "backticks_then_spaces": lambda n: "Command: " + "`" * (n // 2) + " " * (n // 2) + "x",
    "braces": lambda n: repeat_to("{", n) + "}",
    "unicode_and_nuls": lambda n: repeat_to(_UNICODE, n),
}

PIECES = st.sampled_from(
    [
        " ",
        "\t",
        " \t",
        "\n",
        " \n",
        "\r\n",
        "\x00",
        "<answer>",
        "</answer>",
        "<ANSWER>4",
        "```json\n{",
        "```",
        "```python\n",
        "\n```",
        "{",
        "}",
        '{"command": ',
        '"tool_name": "Echo_Tool", ',
        "**Tool Name:** ",
        "Tool Name: Echo_Tool\n",
        "Command: ",
        "Final Answer: ",
        "> # - * 1. **_`",
        "#",
        ">",
        "- ",
        "12) ",
        "*",
        "_",
        ":",
        "\u2028",
        "\u017fub goal:",
    ]
) | st.text(max_size=40)
ACTIONS = st.builds(
    lambda prefix, unit, size: prefix + repeat_to("".join(unit) or " ", size),
    st.sampled_from(["", "Tool Name: Echo_Tool\nCommand: hi\n", "Final Answer: 4\n", "```json\n"]),
    st.lists(PIECES, min_size=1, max_size=6),
    st.sampled_from([MAX_CHARS, 1_000_000, 300_000, 30_000, 1_000]),  # the first is drawn most
)


def timed_step(env: AgentFlowEnv, action: str) -> tuple[float, tuple]:
    """CPU seconds of one step (this process's: the echo tool runs in it), so a busy machine does not count."""
    with hang_guard(HANG_S):
        start = time.process_time()
        out = env.step(action)
        return time.process_time() - start, out


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(ACTIONS)
def test_step_on_long_pathological_actions(action):
    env = make_env(max_action_chars=MAX_CHARS + 100)  # parse everything: the cap is tested below
    env.reset(seed=0)
    seconds, (obs, reward, terminated, truncated, info) = timed_step(env, action)
    assert seconds < STEP_BOUND_S, f"one step on {len(action):,} characters took {seconds:.1f} s"
    assert len(obs["memory"]) <= env.memory_budget
    assert 0.0 <= reward <= 1.0
    if not (terminated or truncated):  # the episode goes on normally
        seconds, (obs, *_rest, info) = timed_step(env, "Tool Name: Echo_Tool\nCommand: still here")
        assert info["memory_steps"][-1]["result"] == "still here"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_step_time_grows_linearly_with_action_length(shape):
    """time(16N) / time(N) is 16 for a linear parser and 256 for a quadratic one; allow up to 100.

    The slack is for caches: 200k characters fit in them, 3.2M do not, which alone can double the
    time per character.
    """
    env = make_env(max_action_chars=MAX_CHARS + 300_000)
    small, big = SHAPES[shape](200_000), SHAPES[shape](3_200_000)

    def best_of(action: str, reps: int = 3) -> float:
        times = []
        for i in range(reps):
            env.reset(seed=i)
            times.append(cpu_step_seconds(env, action))
        return min(times)  # the least disturbed run

    t_small, t_big = best_of(small), best_of(big)
    assert t_big < STEP_BOUND_S
    # a floor for the small size: below ~1 ms the fixed cost of a step and timer noise dominate
    ratio = t_big / max(t_small, 1e-3)
    assert ratio < 100, f"{shape}: {t_small * 1e3:.2f} ms at 200k chars, {t_big * 1e3:.2f} ms at 3.2M (x{ratio:.0f})"


def test_over_long_action_is_rejected_fast_and_says_so():
    env = make_env()
    env.reset(seed=0)
    action = "Tool Name: Echo_Tool\nCommand: " + "x" * MAX_CHARS
    seconds, (obs, reward, terminated, truncated, info) = timed_step(env, action)
    assert seconds < 1.0
    assert not terminated and not truncated and env.turn == 1  # the turn is spent
    assert f"{len(action):,} characters" in info["action_rejected"]
    assert "max_action_chars" in info["memory_steps"][-1]["result"]
    assert info["memory_steps"][-1]["ok"] is False
    recorded = env._trajectory[-1]["action"]
    assert len(recorded) <= env.max_action_chars and "chars cut" in recorded


def test_per_step_time_stays_flat_over_a_long_episode():
    """Old code: 0.04 ms per step at turn 10, 3.97 ms at turn 5,000. Compare turns 100-300 with 2,800-3,000."""
    env = make_env(max_turns=3_001)
    env.reset(seed=0)
    action = "Tool Name: Echo_Tool\nCommand: " + "result text " * 10

    def window(n: int) -> float:
        times = [timed_step(env, action)[0] for _ in range(n)]
        return sorted(times)[len(times) // 2]  # the median step

    for _ in range(100):
        env.step(action)
    early = window(200)
    for _ in range(2_500):
        env.step(action)
    late = window(200)
    assert late < 5 * early + 1e-4, f"median step {early * 1e3:.3f} ms at turn ~200, {late * 1e3:.3f} ms at ~2,900"


LLM_REPLIES = {
    "whitespace_line": lambda n: "Command: x\n" + " " * n + "y",
    "conclusion_then_spaces": lambda n: "Conclusion" + " " * n + "!",
    "answer_label_then_spaces": lambda n: "answer" + " " * n + "x",
    "commentary_markers": lambda n: "Command: x\n" + "#" * n + " " * n + "y",
    "think_unclosed": lambda n: repeat_to("<think>", n),
    "fences_unclosed": lambda n: repeat_to("```python\n", n),
}


@pytest.mark.parametrize("shape", sorted(LLM_REPLIES))
def test_llm_module_replies_parse_in_linear_time(shape):
    """The LLM executor, verifier and generator read engine replies: 1 MB of any of these is fast."""
    from agentflow_env.engines.scripted import ScriptedEngine

    reply = LLM_REPLIES[shape](1_000_000)
    engine = ScriptedEngine([reply])  # every module gets the same pathological reply
    env = make_env(executor="llm", verifier="llm", generator="llm", engine=engine, max_turns=1)
    env.reset(seed=0)
    seconds, (*_, truncated, info) = timed_step(env, "Sub-Goal: echo something\nTool Name: Echo_Tool")
    assert truncated and len(engine.calls) == 3  # executor, verifier, generator
    assert seconds < STEP_BOUND_S, f"{shape}: one step with 1 MB replies took {seconds:.1f} s"
