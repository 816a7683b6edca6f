"""Step time of ``AgentFlowEnv`` with a no-op tool, as JSON: throughput, and how it grows.

Four measurements, on one core:

- ``throughput``: planner turns per second (parse + execute + memory + render + prompt + verify), one
  env and a ``SyncVectorEnv`` of several envs.
- ``action_length``: seconds per ``env.step`` against the action's length (1 KB to 1 MB) for ordinary
  and pathological actions (a long command, whitespace lines, repeated ``<answer>`` tags, repeated
  json fences, repeated headers, random unicode), with the fitted growth exponent ``k`` of
  ``time ~ length**k`` (1 is linear). The env's action cap is raised above 1 MB so the parser really
  reads every action; ``rejected_over_cap`` times an action just over the default cap.
- ``episode_length``: the median step time over the last turns of episodes of 10 to 5,000 turns,
  and its exponent (0 is flat).

- ``paired_tool_turn``: a no-op tool turn of this env, of a 20-line env doing the same job (parse the
  action, call the tool, append to memory, join the prompt) and of GEM's tool env (``gem-llm``; install it
  with ``pip install --no-deps gem-llm``, the column is left out without it), in interleaved rounds, CPU time.

Usage: ``python perf/env_step.py [--quick] [--paired-only] [--max-chars 1000000] [--turns 20000] [--num-envs 8]``;
``--smoke`` (CI) prints three tiny paired comparisons in the shape of ``perf/results/env_step_paired.json``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import random
import re
import statistics
import time
from collections.abc import Callable

import gymnasium as gym

from agentflow_env import AgentFlowEnv, Task
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import ToolResult


class NoOpTool(BaseTool):
    name = "NoOp_Tool"
    description = "Does nothing and says so."
    input_spec = "anything"
    examples = ("ping",)

    def __init__(self, result: str = "ok"):
        self.result = result

    def _run(self, command: str, timeout: float) -> ToolResult:
        return ToolResult(text=self.result)


ACTION = (
    "Justification: The memory has no result yet.\nContext: none\nSub-Goal: Ping the tool.\n"
    "Tool Name: NoOp_Tool\nCommand: ping"
)
FINAL = "Final Answer: 42"


def make_env(max_turns: int, result: str = "ok", **kwargs: object) -> AgentFlowEnv:
    tasks = [Task(id=f"q{i}", question=f"What is the answer to question {i}?", answer="42") for i in range(64)]
    if "max_action_chars" in kwargs and "max_action_chars" not in inspect.signature(AgentFlowEnv).parameters:
        kwargs.pop("max_action_chars")  # an env from before the cap existed (for before/after numbers)
    return AgentFlowEnv(tasks, lambda p, t: float(p == t.answer), [NoOpTool(result)], max_turns=max_turns, **kwargs)


# ---------------------------------------------------------------------------------------------- throughput
def bench_single(turns: int, max_turns: int) -> float:
    env = make_env(max_turns)
    env.reset(seed=0)
    done_turns = 0
    start = time.perf_counter()
    while done_turns < turns:
        t = env.turn
        _, _, term, trunc, _ = env.step(FINAL if t == max_turns - 1 else ACTION)
        done_turns += 1
        if term or trunc:
            env.reset()
    return done_turns / (time.perf_counter() - start)


def bench_vector(turns: int, num_envs: int, max_turns: int) -> float:
    envs = gym.vector.SyncVectorEnv([lambda: make_env(max_turns)] * num_envs)
    envs.reset(seed=0)
    actions = tuple([ACTION] * num_envs)
    done_turns = 0
    start = time.perf_counter()
    while done_turns < turns:
        envs.step(actions)  # truncation at max_turns autoresets
        done_turns += num_envs
    elapsed = time.perf_counter() - start
    envs.close()
    return done_turns / elapsed


# ---------------------------------------------------------------------------------------------- paired
# A no-op tool turn, three ways, interleaved in one run (a busy machine slows all of them alike):
# - "agentflow": AgentFlowEnv with NoOpTool (parse the action, run the tool, memory, observation, info);
# - "minimal": the same job in 20 lines (below);
# - "gem": GEM's ToolEnvWrapper + ObservationWrapper (history concatenated as text) around a one-question
#   env, with a no-op tool that parses its action with GEM's own PythonCodeTool parser.
_MIN_HEADER = re.compile(r"^(Justification|Context|Sub-Goal|Tool Name|Command|Final Answer):[ \t]*(.*)$", re.M)


class MinimalEnv:
    """The same job as a tool turn of AgentFlowEnv, and nothing more: parse, call, remember, prompt."""

    def __init__(self, tools: dict[str, Callable[[str], str]], head: str, tail: str, max_turns: int = 10):
        self.tools, self.head, self.tail, self.max_turns = tools, head, tail, max_turns

    def reset(self, seed: int | None = None) -> tuple[dict[str, str], dict]:
        self.question, self.memory, self.turn = "What is the answer to question 1?", [], 0
        return {"question": self.question, "prompt": f"{self.head}{self.question}{self.tail}"}, {"turn": 0}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict]:
        self.turn += 1
        fields = {key: value.strip() for key, value in _MIN_HEADER.findall(action)}
        if "Final Answer" in fields:
            return {"question": self.question, "prompt": ""}, float(fields["Final Answer"] == "42"), True, False, {}
        tool = self.tools.get(fields.get("Tool Name", ""))
        result = tool(fields.get("Command", "")) if tool else "Invalid action"
        sub_goal, command, name = fields.get("Sub-Goal", ""), fields.get("Command", ""), fields.get("Tool Name")
        self.memory.append(
            f"Step {self.turn}: {name}\n  Sub-goal: {sub_goal}\n  Command: {command}\n  Result: {result}"
        )
        memory, left = "\n".join(self.memory), self.max_turns - self.turn
        prompt = f"{self.head}{self.question}\n\nMemory:\n{memory}{self.tail}\n\nTurns left: {left}."
        obs = {"question": self.question, "memory": memory, "prompt": prompt}
        return obs, 0.0, False, self.turn >= self.max_turns, {"turn": self.turn}


def _gem_env() -> tuple[object | None, str]:
    """GEM's tool env with a no-op tool, or None and why not."""
    import logging
    import sys
    import types

    try:
        if "reasoning_gym" not in sys.modules:
            try:
                import reasoning_gym  # noqa: F401
            except ImportError:  # gem/envs/__init__ registers reasoning-gym tasks at import; none are used here
                stub = types.ModuleType("reasoning_gym")
                stub.factory = types.SimpleNamespace(DATASETS={})  # type: ignore[attr-defined]
                sys.modules["reasoning_gym"] = stub
        level = logging.getLogger().level
        from gem.core import Env as GemEnv
        from gem.tools.base_tool import BaseTool as GemBaseTool
        from gem.tools.python_code_tool import PythonCodeTool
        from gem.tools.tool_env_wrapper import ToolEnvWrapper
        from gem.wrappers.observation_wrapper import ObservationWrapper

        logging.getLogger().setLevel(level)  # gem configures the root logger at import
    except Exception as exc:
        return None, f"gem-llm not importable: {type(exc).__name__}: {exc}"
    from importlib.metadata import version

    class OneQuestion(GemEnv):
        def reset(self, seed=None):
            super().reset(seed)
            return "What is the answer to question 1?", {}

        def step(self, action):
            return "", 0.0, True, False, {}

    class GemNoOpTool(GemBaseTool):
        tool_type = "noop"
        _parse_action = PythonCodeTool._parse_action  # GEM's own action parser for its code tool

        def instruction_string(self):
            return "Wrap the tool input in <python>...</python>."

        def execute_action(self, action):
            code, parsed, valid = self._parse_action(action)
            if not valid:
                return False, True, "", parsed
            return True, False, "Code execution result: ok\n", parsed

    inner = ToolEnvWrapper(OneQuestion(), [GemNoOpTool()], max_tool_uses=None)
    env = ObservationWrapper(inner, include_action=True, include_chat_template=False)
    return env, f"gem-llm {version('gem-llm')}: ObservationWrapper(ToolEnvWrapper(one-question env, [no-op tool]))"


GEM_ACTION = "The memory has no result yet, so ping the tool.\n<python>ping</python>"


def _rate(env: object, action: str, episodes: int, turns: int) -> float:
    """Tool turns per CPU second over ``episodes`` episodes of ``turns`` tool turns (resets included)."""
    start = time.process_time()
    for _ in range(episodes):
        env.reset(seed=0)  # type: ignore[attr-defined]
        for _ in range(turns):
            env.step(action)  # type: ignore[attr-defined]
    return episodes * turns / (time.process_time() - start)


def bench_paired(rounds: int, episodes: int, turns: int = 9) -> dict[str, object]:
    ours = make_env(max_turns=turns + 1)
    prompt = ours._prompt
    minimal = MinimalEnv({"NoOp_Tool": lambda command: "ok"}, f"{prompt._head}Question:\n", f"\n\n{prompt.format_text}")
    envs: dict[str, tuple[object, str]] = {"agentflow": (ours, ACTION), "minimal": (minimal, ACTION)}
    gem, gem_note = _gem_env()
    if gem is not None:
        envs["gem"] = (gem, GEM_ACTION)
    for env, action in envs.values():
        _rate(env, action, max(episodes // 5, 1), turns)  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in envs}
    order = list(envs)
    for r in range(rounds):
        random.Random(r).shuffle(order)
        for name in order:
            rates[name].append(_rate(*envs[name], episodes, turns))
    out: dict[str, object] = {
        "what": f"tool turns per CPU second, a no-op tool, episodes of {turns} tool turns (resets included); "
        f"{rounds} interleaved rounds of {episodes} episodes each; medians",
        "gem": gem_note,
        "turns_per_cpu_s": {name: round(statistics.median(xs)) for name, xs in rates.items()},
    }
    ratios = {}
    for other in ("minimal", "gem"):
        if other in rates:
            paired = [a / b for a, b in zip(rates["agentflow"], rates[other])]
            ratios[f"agentflow_over_{other}"] = round(statistics.median(paired), 3)
    out["paired_ratio_median"] = ratios
    out["goal"] = "agentflow_over_gem >= 2; agentflow_over_minimal >= 0.5"
    return out


# ---------------------------------------------------------------------------------------------- growth
def _repeat(piece: str, n: int) -> str:
    return (piece * (n // len(piece) + 1))[:n]


def _random_unicode(n: int) -> str:
    rng = random.Random(n)
    alphabet = "abc xyz\n\t:{}<>`*#_-/\x00" + "".join(chr(c) for c in (0xE9, 0x3B1, 0x4E2D, 0x1F600, 0x200B, 0x2028))
    return "".join(rng.choice(alphabet) for _ in range(n))


SHAPES: dict[str, Callable[[int], str]] = {
    "long_command": lambda n: "Tool Name: NoOp_Tool\nCommand: " + _repeat("x = 1; ", n),
    "whitespace_line": lambda n: "Tool Name: NoOp_Tool\nCommand: ping\n" + _repeat(" \t", n),
    "answer_tags": lambda n: _repeat("<answer>", n),
    "json_fences": lambda n: _repeat("```json\n{", n),
    "repeated_headers": lambda n: _repeat("**Tool Name:** ", n),
    "random_unicode": _random_unicode,
}


def fit_exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-9)) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den if den else 0.0


def time_step(env: AgentFlowEnv, action: str, reps: int) -> float:
    """Least seconds of one ``env.step(action)`` over ``reps`` (each on a fresh episode).

    The least run is the one a busy machine disturbed least: at a megabyte, page faults from fresh
    allocations alone vary ten-fold between runs.
    """
    times = []
    for i in range(reps):
        env.reset(seed=i)
        start = time.perf_counter()
        env.step(action)
        times.append(time.perf_counter() - start)
    return min(times)


def bench_action_length(sizes: list[int], reps: int) -> dict[str, object]:
    env = make_env(max_turns=5, max_action_chars=max(sizes) + 1_000)
    out: dict[str, object] = {}
    for shape, build in SHAPES.items():
        seconds = [time_step(env, build(n), reps) for n in sizes]
        big = [(n, s) for n, s in zip(sizes, seconds) if n >= 16_000]
        big = big if len(big) >= 2 else list(zip(sizes, seconds))  # fit where fixed costs no longer dominate
        out[shape] = {
            "ms_per_step": {str(n): round(s * 1e3, 3) for n, s in zip(sizes, seconds)},
            "us_per_kchar_at_max": round(seconds[-1] / (sizes[-1] / 1000) * 1e6, 2),
            "growth_exponent": round(fit_exponent([n for n, _ in big], [s for _, s in big]), 3),
            "growth_exponent_last_two_sizes": round(fit_exponent(sizes[-2:], seconds[-2:]), 3),
        }
    default = make_env(max_turns=5)
    cap = getattr(default, "max_action_chars", None)
    if cap:
        out["rejected_over_cap"] = {
            "default_max_action_chars": cap,
            "ms_per_step_at_2x_cap": round(time_step(default, SHAPES["whitespace_line"](2 * cap), reps) * 1e3, 3),
        }
    return out


def bench_episode_length(lengths: list[int], window: int) -> dict[str, object]:
    ms = []
    for turns in lengths:
        env = make_env(max_turns=turns + 1, result="ok " * 40)
        env.reset(seed=0)
        tail = min(window, turns)
        for _ in range(turns - tail):
            env.step(ACTION)
        times = []
        for _ in range(tail):
            start = time.perf_counter()
            env.step(ACTION)
            times.append(time.perf_counter() - start)
        ms.append(statistics.median(times) * 1e3)  # the median: robust to GC pauses and a busy machine
    fit = [(n, m) for n, m in zip(lengths, ms) if n >= 100]
    fit = fit if len(fit) >= 2 else list(zip(lengths, ms))
    return {
        "ms_per_step_at_turn": {str(n): round(m, 4) for n, m in zip(lengths, ms)},
        "window": window,
        "growth_exponent": round(fit_exponent([n for n, _ in fit], [m for _, m in fit]), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=10)
    parser.add_argument("--max-chars", type=int, default=1_000_000, help="the longest action timed")
    parser.add_argument("--max-episode", type=int, default=5_000, help="the longest episode timed")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and turns")
    parser.add_argument("--paired-only", action="store_true", help="only the paired tool-turn comparison")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="three tiny paired comparisons in the shape of perf/results/env_step_paired.json (its runs)",
    )
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    if args.smoke:
        from smoke_runs import smoke_envelope

        runs = [bench_paired(rounds=2, episodes=40) for _ in range(3)]  # in-process: nothing in it outlives a run
        print(json.dumps(smoke_envelope("env_step_paired", "python perf/env_step.py --smoke", runs), indent=2))
        return
    turns = 2_000 if args.quick else args.turns
    reps = 3 if args.quick else 7
    paired = bench_paired(rounds=3 if args.quick else 9, episodes=300 if args.quick else 1000)
    if args.paired_only:
        print(json.dumps({"benchmark": "env_step", "paired_tool_turn": paired}, indent=2))
        return
    bench_single(500, args.max_turns)  # warm-up
    single = bench_single(turns, args.max_turns)
    vector = bench_vector(turns, args.num_envs, args.max_turns)
    sizes = [n for n in (1_000, 4_000, 16_000, 64_000, 256_000, 1_000_000) if n <= args.max_chars]
    lengths = [n for n in (10, 100, 1_000, 5_000) if n <= args.max_episode]
    result = {
        "benchmark": "env_step",
        "what": "AgentFlowEnv.step, no-op tool, one core: throughput, growth with action and episode length",
        "paired_tool_turn": paired,
        "throughput": {
            "turns": turns,
            "max_turns": args.max_turns,
            "single_env_turns_per_s": round(single),
            f"sync_vector_{args.num_envs}_turns_per_s": round(vector),
            "goal_turns_per_s": 20_000,
        },
        "action_length": bench_action_length(sizes, reps),
        "episode_length": bench_episode_length(lengths, window=50 if args.quick else 200),
        "goal": "action growth_exponent near 1 (linear); episode growth_exponent near 0 (flat)",
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
