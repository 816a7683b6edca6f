"""Step time of the paper flow (``PaperFlowEnv``) against reply length, as JSON.

For each shape of pathological reply, the seconds of one ``env.step`` (least of ``--reps``) at each size,
and the growth exponent ``k`` of ``time ~ length**k`` between the two largest sizes (1 is linear, 2
quadratic). ``planner`` shapes are the action; ``module`` shapes are every module reply (executor,
verifier, final output), with an ordinary action. Tools are echo stand-ins and the engine is scripted,
so the time is the env's own: reading replies, building prompts and memory. The reply cap is raised
above the largest size so every reply is read. A measurement over ``--limit-s`` is stopped (SIGALRM)
and reported as null, and the shape's larger sizes are skipped.

Run against an older checkout for before/after numbers (its ``PaperFlowEnv`` may lack
``max_action_chars``): ``PYTHONPATH=/path/to/old/src python perf/paper_step.py --sizes 5000,10000,20000``.

Usage: ``python perf/paper_step.py [--sizes 1000,10000,100000,1000000] [--reps 3] [--limit-s 60]``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import signal
import time
from collections.abc import Callable
from typing import Any

import agentflow_env
from agentflow_env.engines import ScriptedEngine
from agentflow_env.paper_flow import PaperFlowEnv
from agentflow_env.paper_flow.toolbox import STATED_TOOLS, PaperTool
from agentflow_env.types import Task


def repeat_to(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


PLANNER: dict[str, Callable[[int], str]] = {
    "context_then_spaces": lambda n: "Context:" + " " * n,
    "context_subgoal_pairs": lambda n: repeat_to("Context: a Sub-Goal: b ", n),
    "whitespace_lines": lambda n: "Context: c\nSub-Goal: s\nTool Name: x\n" + repeat_to(" " * 1000 + "\n", n),
    "tool_name_words": lambda n: "Context: c\nSub-Goal: s\nTool Name: " + repeat_to("a ", n),
    "ordinary_long_sub_goal": lambda n: "Context: c\nSub-Goal: " + repeat_to("find it ", n) + "\nTool Name: Echo",
}
MODULE: dict[str, Callable[[int], str]] = {
    "python_fence_blank_lines": lambda n: "```python" + repeat_to(" \n", n),
    "calls_on_one_line": lambda n: "```python\n" + repeat_to("execution = tool.execute(", n) + "\n```",
    "calls_on_lines": lambda n: "```python\n" + repeat_to("x\n", n),
    "conclusion_then_spaces": lambda n: "conclusion" + " " * n,
    "labels": lambda n: repeat_to("Generated Command:", n),
}
PLAN = "Context: none\nSub-Goal: Find the founder.\nTool Name: Wikipedia_RAG_Search_Tool"
EXEC = 'Generated Command:\n```python\nexecution = tool.execute(query="Acme Corp founder")\n```'


class EchoTool(PaperTool):
    def _call(self, **kwargs: Any) -> Any:
        return f"echo: {str(kwargs.get('query'))[:200]}"


def ordinary(prompt: str) -> str:
    if "Generated Command" in prompt:
        return EXEC
    return "Conclusion: CONTINUE" if "STOP" in prompt and "CONTINUE" in prompt else "Answer: 42"


def make_env(reply: Callable[[str], str], cap: int) -> PaperFlowEnv:
    kwargs: dict[str, Any] = {"toolbox": "as_stated", "max_turns": 50}
    if "max_action_chars" in inspect.signature(PaperFlowEnv).parameters:
        kwargs["max_action_chars"] = cap
    tools = {name: EchoTool(name, ("query",)) for name in STATED_TOOLS}
    task = Task(id="t", question="Who founded Acme Corp?", answer="42")
    return PaperFlowEnv([task], lambda p, t: 0.0, engine=ScriptedEngine(reply), tools=tools, **kwargs)


class Overrun(BaseException):  # not an Exception: the env's own handlers must not catch it
    pass


def _alarm(signum: int, frame: object) -> None:
    raise Overrun


def step_seconds(env: PaperFlowEnv, action: str, reps: int, limit_s: float) -> float | None:
    best = math.inf
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(reps):
            env.reset(seed=i)
            signal.setitimer(signal.ITIMER_REAL, limit_s)
            start = time.perf_counter()
            try:
                env.step(action)
            except Overrun:
                return None
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            best = min(best, time.perf_counter() - start)
    finally:
        signal.signal(signal.SIGALRM, previous)
    return best


def exponent(points: list[tuple[int, float]]) -> float | None:
    """``k`` in ``time ~ length**k`` between the two largest sizes measured (where it matters for hangs;
    at small sizes the fixed cost of a step, ~0.1 ms, hides the growth)."""
    if len(points) < 2:
        return None
    (n1, t1), (n2, t2) = points[-2:]
    return round(math.log(t2 / t1) / math.log(n2 / n1), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--limit-s", type=float, default=60.0)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    cap = max(sizes) + 10_000
    out: dict[str, Any] = {"agentflow_env": agentflow_env.__file__, "sizes": sizes, "planner": {}, "module": {}}
    for kind, shapes in (("planner", PLANNER), ("module", MODULE)):
        for name, shape in shapes.items():
            seconds: dict[str, float | None] = {}
            points = []
            for size in sizes:
                text = shape(size)
                if kind == "planner":
                    env, action = make_env(ordinary, cap), text
                else:
                    env, action = make_env(lambda prompt, text=text: text, cap), PLAN
                t = step_seconds(env, action, args.reps, args.limit_s)
                seconds[str(size)] = None if t is None else round(t, 5)
                if t is None:
                    break  # larger sizes would take longer still
                points.append((size, t))
            out[kind][name] = {"seconds": seconds, "exponent": exponent(points)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
