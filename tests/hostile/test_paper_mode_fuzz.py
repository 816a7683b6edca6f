"""The paper flow (``flow="paper"``) on long and pathological replies: no exception, a bound on time per
step, linear scaling, the reply cap and an honest time budget.

Its readers (:mod:`agentflow_env.paper_flow.replies`) are AgentFlow's reply patterns rewritten as forward
scans. On short text they must give exactly what the patterns give (the patterns are kept here as the
reference); on long text they must stay linear: with the patterns, 20,000 characters took seconds to
minutes. Time bounds are generous (a busy two-core CI box must not flake) and only catch hangs;
``perf/paper_step.py`` measures the real numbers. A SIGALRM guard turns a hang into a failure.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentflow_env.engines import ScriptedEngine
from agentflow_env.paper_flow import PaperFlowEnv, replies
from agentflow_env.paper_flow.toolbox import _PYTHON_BLOCK
from tests.helpers import WIKI_PLAN as PLAN
from tests.helpers import cpu_step_seconds, hang_guard, repeat_to
from tests.helpers import echo_paper_env as make_env

MAX_CHARS = 3_200_000
STEP_BOUND_S = 10.0  # per step with replies of up to MAX_CHARS characters; well under 1 s here
HANG_S = 60

# ---------------------------------------------------------------------------- the reference patterns
# The readers' first version: AgentFlow's own patterns, as regexes. Correct, but quadratic (or worse).
_REF_STEP_BLOCK = re.compile(
    r"Context:\s*(?P<context>.*?)Sub-Goal:\s*(?P<sub_goal>.*?)Tool Name:\s*(?P<tool>.*?)\s*(?:```)?\s*(?=\n\n|\Z)",
    re.DOTALL,
)
_REF_AFTER_LABEL = re.compile(r"Generated Command:.*?```python\n(?P<code>.*?)```", re.DOTALL | re.IGNORECASE)
_REF_ANY_PYTHON = re.compile(r"```python\s*\n(?P<code>.*?)```", re.DOTALL | re.IGNORECASE)
_REF_VERDICT_WORD = re.compile(r"conclusion\**:?\s*\**\s*(?P<word>\w+)", re.IGNORECASE | re.DOTALL)
_REF_BLOCK = re.compile(r".*?execution\s*=\s*tool\.execute\([^\n]*\)\s*(?:\n|$)", re.DOTALL)
_REF_TOOL_PYTHON_BLOCK = re.compile(r"```python\s*(.*?)\s*```", re.DOTALL)  # the Python tool's reader

# pieces that exercise every branch: labels, case folds, fences, whitespace of every kind, words, calls
_PIECES = (
    ["Context:", "Sub-Goal:", "Tool Name:", "Generated Command:", "generated command:", "Conclusion", "CONCLUSION"]
    + ["conclu\u017fion", "```", "``", "`", "```python", "```python\n", "```PYTHON\n", "**", "*", ":", "_", "="]
    + [" ", "  ", "\t", "\n", "\n\n", "\r", "\x0b", "\x1c", "\x85", "\u2028", "\u3000", "x", "1", "\u00e9"]
    + ["STOP", "continue", "stop", "\u212a", "Wikipedia_RAG_Search_Tool", "generalist solution_generator tool"]
    + ["execution", "execution = tool.execute(", "tool.execute(", "(query='a')", ")", "{", "}", '"', "\x00"]
)
TRICKY = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)
TOOLS = ["Generalist_Solution_Generator_Tool", "Ground_Google_Search_Tool", "Wikipedia_RAG_Search_Tool"]


def _ref_last_step(text: str) -> tuple[str, str, str] | None:
    blocks = list(_REF_STEP_BLOCK.finditer(text))
    return (blocks[-1]["context"], blocks[-1]["sub_goal"], blocks[-1]["tool"]) if blocks else None


def _ref_labelled(text: str) -> str | None:
    found = _REF_AFTER_LABEL.search(text)
    return found["code"] if found else None


def _ref_verdict_word(text: str) -> str | None:
    words = [m["word"] for m in _REF_VERDICT_WORD.finditer(text)]
    return words[-1] if words else None


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(TRICKY, st.text(max_size=200)))
def test_linear_readers_match_the_reference_patterns(text: str) -> None:
    assert replies._last_step_block(text) == _ref_last_step(text)
    assert replies._labelled_code(text) == _ref_labelled(text)
    assert replies._python_blocks(text) == _REF_ANY_PYTHON.findall(text)
    assert replies._last_verdict_word(text) == _ref_verdict_word(text)
    assert [text[a:b] for a, b in replies._block_spans(text)] == _REF_BLOCK.findall(text)
    ref_code = _REF_TOOL_PYTHON_BLOCK.search(text)
    code = _PYTHON_BLOCK.search(text)
    assert (code and code.group(1).strip()) == (ref_code and ref_code.group(1).strip())
    # and the public readers never raise
    replies.read_next_step(text, TOOLS)
    replies.read_command(text)
    replies.read_verdict(text)
    replies.split_blocks(text)


def test_whitespace_classes_agree() -> None:
    """The scans use str.strip()/str.isspace() where the patterns use \\s, and \\w is isalnum() or "_"."""
    for code in range(0x110000):
        char = chr(code)
        assert (re.match(r"\s", char) is not None) == char.isspace() == (("a" + char).rstrip() == "a"), hex(code)
        assert (re.match(r"\w", char) is not None) == (char.isalnum() or char == "_"), hex(code)


# ---------------------------------------------------------------------------- pathological replies
_RNG = random.Random(19)
_UNICODE = "".join(
    _RNG.choice("abc xyz\n\t:{}<>`*#_-/=()\x00\u00e9\u03b1\u4e2d\U0001f600\u200b\u2028\u3000\ufeff\U0010ffff\ud800")
    for _ in range(4096)
)

# The planner's reply (the action). Each of the first six took seconds to minutes at 20,000 characters.
PLANNER_SHAPES: dict[str, Callable[[int], str]] = {
    "context_then_spaces": lambda n: "Context:" + " " * n,
    "context_subgoal_pairs": lambda n: repeat_to("Context: a Sub-Goal: b ", n),
    "repeated_contexts": lambda n: repeat_to("Context: ", n),
    "whitespace_lines": lambda n: "Context: c\nSub-Goal: s\nTool Name: x\n" + repeat_to(" " * 1000 + "\n", n),
    "tool_name_words": lambda n: "Context: c\nSub-Goal: s\nTool Name: " + repeat_to("a ", n),
    "tool_name_fences": lambda n: "Context: c\nSub-Goal: s\nTool Name: " + repeat_to("``` a ", n),
    "whole_blocks": lambda n: repeat_to("Context: a\nSub-Goal: b\nTool Name: Wikipedia_RAG_Search_Tool\n\n", n),
    "bold_markers": lambda n: repeat_to("**Context:** **", n),
    "deep_json": lambda n: "[" * n,
    "unicode_and_nuls": lambda n: repeat_to(_UNICODE, n),
}
# A module's reply (executor, verifier, final output and the tools' LLM all get it).
MODULE_SHAPES: dict[str, Callable[[int], str]] = {
    "python_fence_blank_lines": lambda n: "```python" + repeat_to(" \n", n),
    "python_fence_spaces": lambda n: "```python" + " " * n + "x",
    "labels": lambda n: repeat_to("Generated Command:", n),
    "calls_on_one_line": lambda n: "```python\n" + repeat_to("execution = tool.execute(", n) + "\n```",
    "calls_on_lines": lambda n: "```python\n" + repeat_to("x\n", n),
    "conclusion_then_spaces": lambda n: "conclusion" + " " * n,
    "conclusion_stars_spaces": lambda n: "Conclusion" + "*" * (n // 2) + " " * (n // 2) + "!",
    "repeated_conclusions": lambda n: repeat_to("Conclusion: ", n),
    "unicode_and_nuls": lambda n: repeat_to(_UNICODE, n),
}


EXEC = 'Generated Command:\n```python\nexecution = tool.execute(query="Acme Corp founder")\n```'


def module_replies(verdict: str = "Conclusion: CONTINUE", executor: str = EXEC) -> Callable[[str], str]:
    """A scripted engine's reply function: each module gets an ordinary reply, told apart by its prompt."""

    def reply(prompt: str) -> str:
        if "Generated Command" in prompt:
            return executor
        if "STOP" in prompt and "CONTINUE" in prompt:
            return verdict
        return "Answer: 1871"

    return reply


def timed_step(env: PaperFlowEnv, action: str) -> tuple[float, tuple]:
    """CPU seconds of one step (scripted modules and echo tools run in this process): load does not count."""
    with hang_guard(HANG_S):
        start = time.process_time()
        out = env.step(action)
        return time.process_time() - start, out


@pytest.mark.parametrize("shape", sorted(PLANNER_SHAPES))
def test_planner_readers_take_milliseconds_on_a_megabyte(shape: str) -> None:
    reply = PLANNER_SHAPES[shape](1_000_000)
    with hang_guard(HANG_S):
        start = time.process_time()
        replies.read_next_step(reply, TOOLS)
        assert time.process_time() - start < STEP_BOUND_S


@pytest.mark.parametrize("shape", sorted(MODULE_SHAPES))
def test_module_readers_take_milliseconds_on_a_megabyte(shape: str) -> None:
    reply = MODULE_SHAPES[shape](1_000_000)
    with hang_guard(HANG_S):
        start = time.process_time()
        command = replies.read_command(reply)
        replies.split_blocks(command)
        replies.split_blocks(reply)
        replies.read_verdict(reply)
        _PYTHON_BLOCK.search(reply)
        assert time.process_time() - start < STEP_BOUND_S


# hypothesis: a reply made of a few pieces repeated to a size up to a few MB
_REPLY_PIECES = st.sampled_from(_PIECES) | st.text(max_size=40)
REPLIES = st.builds(
    lambda prefix, unit, size: prefix + repeat_to("".join(unit) or " ", size),
    st.sampled_from(["", PLAN + "\n", "Generated Command:\n```python\n", "Conclusion: ", "```python"]),
    st.lists(_REPLY_PIECES, min_size=1, max_size=6),
    st.sampled_from([MAX_CHARS, 1_000_000, 300_000, 30_000, 1_000]),
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(action=REPLIES, module_reply=st.one_of(st.just(None), REPLIES))
def test_paper_step_on_long_pathological_replies(action: str, module_reply: str | None) -> None:
    """The action and (when drawn) every module reply are pathological; all of it is read (cap raised)."""
    engine = ScriptedEngine(module_replies() if module_reply is None else (lambda prompt: module_reply))
    env = make_env(engine, max_action_chars=MAX_CHARS + 1000, max_turns=3)
    env.reset(seed=0)
    seconds, (obs, reward, terminated, truncated, info) = timed_step(env, action)
    assert seconds < STEP_BOUND_S, f"one step on {len(action):,} characters took {seconds:.1f} s"
    assert 0.0 <= reward <= 1.0 and "action_rejected" not in info
    if not (terminated or truncated):  # the episode goes on normally
        seconds, (obs, *_rest, info) = timed_step(env, PLAN)
        assert seconds < STEP_BOUND_S and info["turn"] == 2


def _step_seconds(env: PaperFlowEnv, action: str, reps: int = 3) -> float:
    times = []
    for i in range(reps):
        env.reset(seed=i)
        times.append(cpu_step_seconds(env, action))  # CPU time: a busy machine does not inflate it
    return min(times)  # the least disturbed run


@pytest.mark.parametrize("shape", sorted(PLANNER_SHAPES))
def test_step_time_grows_linearly_with_the_planner_reply(shape: str) -> None:
    """time(16N) / time(N) is 16 when linear and 256 when quadratic; allow up to 100 (caches, a busy box)."""
    env = make_env(ScriptedEngine(module_replies()), max_action_chars=MAX_CHARS + 1000)
    small, big = PLANNER_SHAPES[shape](200_000), PLANNER_SHAPES[shape](MAX_CHARS)
    t_small, t_big = _step_seconds(env, small), _step_seconds(env, big)
    assert t_big < STEP_BOUND_S
    ratio = t_big / max(t_small, 1e-3)  # below ~1 ms the fixed cost of a step and timer noise dominate
    assert ratio < 100, f"{shape}: {t_small * 1e3:.2f} ms at 200k chars, {t_big * 1e3:.2f} ms at 3.2M (x{ratio:.0f})"


@pytest.mark.parametrize("shape", sorted(MODULE_SHAPES))
def test_step_time_grows_linearly_with_module_replies(shape: str) -> None:
    def seconds(size: int) -> float:
        reply = MODULE_SHAPES[shape](size)
        env = make_env(ScriptedEngine(lambda prompt: reply), max_action_chars=MAX_CHARS + 1000)
        return _step_seconds(env, PLAN)

    t_small, t_big = seconds(200_000), seconds(MAX_CHARS)
    assert t_big < STEP_BOUND_S
    ratio = t_big / max(t_small, 1e-3)
    assert ratio < 100, f"{shape}: {t_small * 1e3:.2f} ms at 200k chars, {t_big * 1e3:.2f} ms at 3.2M (x{ratio:.0f})"


# ---------------------------------------------------------------------------- the reply cap
def test_over_long_planner_reply_is_not_read_and_says_so() -> None:
    engine = ScriptedEngine(module_replies())
    env = make_env(engine)
    env.reset(seed=0)
    calls_before = len(engine.calls)
    action = PLAN + "\n" + " " * MAX_CHARS
    seconds, (obs, reward, terminated, truncated, info) = timed_step(env, action)
    assert seconds < 1.0
    assert not terminated and not truncated and env.turn == 1  # the step is spent, the run goes on
    assert f"{len(action):,} characters" in info["action_rejected"] and "max_action_chars" in info["action_rejected"]
    step = env.action_memory.get_actions()["Action Step 1"]
    assert step["tool_name"] is None and "max_action_chars" in step["result"] and step["result"].startswith("Not read")
    assert "max_action_chars" in obs["memory"]  # the planner sees why
    modules = [c["module"] for c in info["module_calls"]]
    assert modules[-2:] == ["planner", "verifier"] and len(engine.calls) == calls_before + 1  # no executor, no tool
    planner = info["module_calls"][-2]
    assert len(planner["reply"]) <= env.max_action_chars and "chars cut" in planner["reply"] and planner["rejected"]
    assert len(env._steps[-1]["action"]) <= env.max_action_chars
    # the next step is read as usual
    _, _, _, _, info = env.step(PLAN)
    assert "action_rejected" not in info and env.action_memory.get_actions()["Action Step 2"]["result"] == [
        "echo: Acme Corp founder"
    ]


def test_over_long_module_replies_are_not_read_and_say_so() -> None:
    huge = "Conclusion: STOP\n" + "x" * 200_000 + "\nConclusion: STOP"

    def reply(prompt: str) -> str:
        return huge  # executor, verifier and final output alike

    engine = ScriptedEngine(reply)
    env = make_env(engine, max_turns=1)
    _, info = env.reset(seed=0)
    assert info["query_analysis"] == "" and info["module_calls"][0]["rejected"]
    _, reward, terminated, truncated, info = env.step(PLAN)
    # the verifier's STOP was not read (CONTINUE), so only the step budget ends the run; nothing was graded
    assert (terminated, truncated, reward) == (False, True, 0.0)
    step = env.action_memory.get_actions()["Action Step 1"]
    assert step["command"] == "No command found." and step["result"].startswith("Not run")
    assert "max_action_chars" in step["result"]
    assert env.toolbox["Wikipedia_RAG_Search_Tool"].timeouts == []  # type: ignore[attr-defined]  # the tool never ran
    calls = {c["module"]: c for c in info["module_calls"]}
    assert {"executor", "verifier", "final_output"} <= set(calls) and "tool" not in calls
    for module in ("executor", "verifier", "final_output"):
        assert f"the {module} reply is {len(huge):,} characters long" in calls[module]["rejected"]
        assert "max_action_chars" in calls[module]["rejected"]
        assert len(calls[module]["reply"]) <= env.max_action_chars
    assert info["trajectory"][0]["verifier"] == "CONTINUE"
    assert info["answer"] == "" and "max_action_chars" in info["answer_rejected"]


def test_max_action_chars_through_gym_make_in_the_paper_flow() -> None:
    engine = ScriptedEngine(module_replies())
    env = gym.make("agentflow/Gen-GameOf24-v1", flow="paper", engine=engine, max_action_chars=5000)
    assert env.unwrapped.max_action_chars == 5000
    env.close()


# ---------------------------------------------------------------------------- the time budget
MARGIN_S = 3.0  # a sleeping tool's wake-up, a parse, a module call, on a busy machine (the tool timeout is 30 s)


def test_tool_timeout_is_the_time_left_and_the_verifier_waits_for_none() -> None:
    engine = ScriptedEngine(module_replies())
    env = make_env(engine, sleep=True, time_budget_s=1.0, tool_timeout_s=30.0)
    env.reset(seed=0)
    start = time.perf_counter()
    _, _, terminated, truncated, info = env.step(PLAN)
    elapsed = time.perf_counter() - start
    tool = env.toolbox["Wikipedia_RAG_Search_Tool"]
    assert tool.timeouts and tool.timeouts[0] <= 1.0  # type: ignore[attr-defined]
    assert elapsed < 1.0 + MARGIN_S, f"the step ended {elapsed - 1.0:.2f} s past the budget"
    assert (terminated, truncated) == (False, True)
    record = info["trajectory"][-1]
    assert record["verifier"] is None and "time budget of 1 s ran out before the verifier" in record["error"]
    assert "verifier" not in [c["module"] for c in info["module_calls"]]
    assert info["module_calls"][-1]["module"] == "final_output"  # AgentFlow still writes the final output


def test_blocks_past_the_budget_do_not_run() -> None:
    command = "```python\n" + "".join(f'execution = tool.execute(query="q{i}")\n' for i in range(3)) + "```"
    engine = ScriptedEngine(module_replies(executor="Generated Command:\n" + command))
    env = make_env(engine, sleep=True, time_budget_s=0.6, tool_timeout_s=30.0)
    env.reset(seed=0)
    start = time.perf_counter()
    env.step(PLAN)
    elapsed = time.perf_counter() - start
    tool = env.toolbox["Wikipedia_RAG_Search_Tool"]
    assert len(tool.timeouts) == 1  # type: ignore[attr-defined]  # the first block used all the time
    result = env.action_memory.get_actions()["Action Step 1"]["result"]
    assert result[0] == "echo: q0" and "ran out before the last 2 block(s) could start" in result[1]
    assert elapsed < 0.6 + MARGIN_S, f"the step ended {elapsed - 0.6:.2f} s past the budget"


def test_a_step_that_starts_past_the_budget_starts_nothing() -> None:
    engine = ScriptedEngine(module_replies())
    env = make_env(engine, time_budget_s=0.05)
    env.reset(seed=0)
    calls_before = len(engine.calls)
    time.sleep(0.1)  # the agent took longer than the budget to reply
    _, _, terminated, truncated, info = env.step(PLAN)
    assert (terminated, truncated) == (False, True)
    assert "before this step's modules could start" in info["trajectory"][-1]["error"]
    assert [c["module"] for c in info["module_calls"]][-2:] == ["planner", "final_output"]
    assert len(engine.calls) == calls_before + 1  # the final output only
    assert env.action_memory.get_actions() == {}  # AgentFlow's memory: its loop never began this step
