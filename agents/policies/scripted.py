"""Scripted reference planners for the generated families: they read only the observation and act through tools.

Each parses its family's question text, looks facts up or computes with the env's tools, and answers from
what the memory shows; ``ScriptedPlanner`` dispatches per observation, ``scripted_planner_for`` per env id.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agents.policies.baselines import (
    ScriptedGameOf24Planner,
    final_answer,
    memory_results,
    numbers_in_question,
    tool_call,
)
from agents.policies.policy import Observation, Policy

if TYPE_CHECKING:
    from benchmarks.synthetic.multihop import Lookup

__all__ = [
    "ScriptedAgenticPlanner",
    "ScriptedMathPlanner",
    "ScriptedMultiHopPlanner",
    "ScriptedPlanner",
    "ScriptedSciencePlanner",
    "scripted_planner_for",
]

# keywords added to a repeated search when the first query did not bring the subject's passage up
_FACT_WORDS = {
    "born": "born",
    "birthplace": "was born in",
    "employer": "joined",
    "mentor": "studied under",
    "founder": "founded by",
    "home_city": "headquartered in",
    "country": "is a city in",
    "mayor": "mayor of",
    "capital": "capital of",
    "founded": "founded in",
    "population": "population",
}
_CALC_RESULT = re.compile(r"=\s*(-?\d+(?:/\d+)?)(?:\s*\(≈[^)]*\))?\s*$")


def _tool_names(obs: Observation) -> list[str]:
    return re.findall(r"^- ([A-Za-z0-9_]+):", obs.get("tools", ""), re.MULTILINE)


def _find_tool(obs: Observation, kind: str) -> str | None:
    """The env's tool whose name contains ``kind`` (``search``, ``calculator``, ``python``), if any."""
    for name in _tool_names(obs):
        if kind in name.lower():
            return name
    return None


def _last_turn(obs: Observation) -> bool:
    return "last turn" in obs.get("prompt", "")


def _tool_output(obs: Observation, command: str) -> str | None:
    """The newest result of a step that ran exactly ``command``."""
    for _tool, cmd, result in reversed(memory_results(obs.get("memory", ""))):
        if cmd.strip() == command.strip():
            return result
    return None


def _computed_value(obs: Observation, command: str) -> str | None:
    """The number a calculator or Python step printed for ``command`` (``7/2`` style), or ``None``."""
    from benchmarks.synthetic.mathgen import format_number, parse_number

    result = _tool_output(obs, command)
    if result is None or "error" in result.lower():
        return None
    lines = [ln.strip() for ln in result.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    m = _CALC_RESULT.search(lines[-1])
    if m:
        return m.group(1)
    value = parse_number(lines[-1])
    return format_number(value) if value is not None else None


def _compute(obs: Observation, expression: str | None, program: str | None, goal: str, prefer_python: bool) -> str:
    """Run ``expression`` on the calculator or ``program`` on the Python tool (whichever the env has and
    the problem suits), then answer with the printed value."""
    calculator, python = _find_tool(obs, "calculator"), _find_tool(obs, "python")
    plans = []
    if python and program and prefer_python:
        plans.append((python, program))
    if calculator and expression:
        plans.append((calculator, expression))
    if python and program and not prefer_python:
        plans.append((python, program))
    for _tool, command in plans:
        value = _computed_value(obs, command)
        if value is not None:
            return final_answer(value)
    for tool, command in plans:
        if _tool_output(obs, command) is None and not _last_turn(obs):
            return tool_call(tool, command, sub_goal=goal, justification="The numbers are known; compute exactly.")
    return final_answer(_own_arithmetic(expression, program))


def _own_arithmetic(expression: str | None, program: str | None) -> str:
    """Last resort when no tool could compute (e.g. no Python tool for a modular power): exact arithmetic here."""
    from agentflow_env.scoring.arith import ArithmeticError_, evaluate
    from benchmarks.synthetic.mathgen import format_number

    if expression:
        try:
            return format_number(evaluate(expression))
        except ArithmeticError_:
            pass
    m = re.fullmatch(r"print\(pow\((\d+), (\d+), (\d+)\)\)", (program or "").strip())
    if m:
        return str(pow(int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return "unknown"


# ---------------------------------------------------------------- world lookups (Gen-MultiHop, Gen-Agentic)
def _resolve(text: str, lookup: Lookup) -> tuple[str | None, int | None, tuple[str, str] | None]:
    """Follow ``lookup`` through the facts in ``text``: ``(final entity, value, missing (subject, fact))``."""
    from benchmarks.synthetic.world import find_attribute, find_relation

    current = lookup.start
    for rel in lookup.relations:
        nxt = find_relation(text, current, rel)
        if nxt is None:
            return None, None, (current, rel)
        current = nxt
    if lookup.attribute is None:
        return current, None, None
    value = find_attribute(text, current, lookup.attribute)
    if value is None:
        return current, None, (current, lookup.attribute)
    return current, value, None


def _search_for(obs: Observation, subject: str, fact: str) -> str | None:
    """The next search action for ``subject`` (a plain name first, then with the fact's words), or ``None``."""
    search = _find_tool(obs, "search")
    if search is None or _last_turn(obs):
        return None
    queries = [subject, f"{subject} {_FACT_WORDS.get(fact, '')}".strip(), f"{subject} {subject} {fact}"]
    done = {cmd.strip() for _tool, cmd, _res in memory_results(obs.get("memory", ""))}
    for query in queries:
        if query not in done:
            return tool_call(
                search,
                query,
                sub_goal=f"Find the {fact.replace('_', ' ')} fact about {subject}.",
                justification=f"The question needs this fact about {subject}, which only the encyclopedia holds.",
            )
    return None


def _facts_text(obs: Observation) -> str:
    return "\n".join(result for _tool, _cmd, result in memory_results(obs.get("memory", "")))


class ScriptedMultiHopPlanner:
    """Parses the hop chain from the question, searches one entity per turn and reads each hop's answer
    from the retrieved passages; comparisons resolve both sides, then compare."""

    def act(self, observations: Sequence[Observation]) -> list[str]:
        return [self.one(obs) for obs in observations]

    def one(self, obs: Observation) -> str:
        from benchmarks.synthetic.multihop import parse_question

        question = parse_question(obs["question"])
        if question is None:
            return final_answer("unknown")
        text = _facts_text(obs)
        resolved = []
        for lookup in question.lookups:
            entity, value, missing = _resolve(text, lookup)
            if missing is not None:
                action = _search_for(obs, *missing)
                return action if action is not None else final_answer(entity or "unknown")
            resolved.append((entity, value))
        if question.kind == "bridge":
            entity, value = resolved[0]
            return final_answer(str(value) if value is not None else str(entity))
        (ea, va), (eb, vb) = resolved
        first = va < vb if question.compare == "earlier" else va > vb  # type: ignore[operator]
        return final_answer(str(ea if first else eb))


class ScriptedAgenticPlanner:
    """Looks every operand up in the encyclopedia (as the multi-hop planner does), then computes the
    template's arithmetic with the calculator and answers its result."""

    def act(self, observations: Sequence[Observation]) -> list[str]:
        return [self.one(obs) for obs in observations]

    def one(self, obs: Observation) -> str:
        from benchmarks.synthetic.agentic import parse_agentic_question

        parsed = parse_agentic_question(obs["question"])
        if parsed is None:
            return final_answer("unknown")
        template, lookups, consts = parsed
        text = _facts_text(obs)
        values = []
        for lookup in lookups:
            _entity, value, missing = _resolve(text, lookup)
            if missing is not None:
                action = _search_for(obs, *missing)
                return action if action is not None else final_answer("unknown")
            values.append(int(value or 0))  # an attribute lookup with nothing missing has its value
        expression = template.expression(values, consts)
        return _compute(obs, expression, f"print({expression})", "Combine the retrieved numbers.", False)


class ScriptedMathPlanner:
    """Recognises the word-problem template, writes the computation for the calculator (or a program for
    the Python tool when the problem needs one) and answers the tool's result."""

    def act(self, observations: Sequence[Observation]) -> list[str]:
        return [self.one(obs) for obs in observations]

    def one(self, obs: Observation) -> str:
        from benchmarks.synthetic.mathgen import parse_math_question

        parsed = parse_math_question(obs["question"])
        if parsed is None:
            return final_answer("unknown")
        template, params = parsed
        return _compute(
            obs,
            template.calculator(params),
            template.python(params),
            "Compute the answer exactly.",
            template.needs_python,
        )


class ScriptedSciencePlanner:
    """Recognises the formula, evaluates it with the calculator (units converted) and picks the option
    closest to the result."""

    def act(self, observations: Sequence[Observation]) -> list[str]:
        return [self.one(obs) for obs in observations]

    def one(self, obs: Observation) -> str:
        from benchmarks.synthetic.mathgen import parse_number
        from benchmarks.synthetic.science import parse_options, parse_quantity, parse_science_question

        parsed = parse_science_question(obs["question"])
        options = parse_options(obs["question"])
        if parsed is None or not options:
            return final_answer("A")
        template, params = parsed
        expression = template.expression(params)
        action = _compute(obs, expression, f"print({expression})", "Evaluate the formula in SI units.", False)
        if not action.startswith("Final Answer:"):
            return action
        value = parse_number(action.split(":", 1)[1])
        if value is None or value <= 0:
            return final_answer(options[0][0])
        target = math.log(float(value))

        def distance(option: tuple[str, str]) -> float:
            shown = parse_quantity(option[1])
            return abs(math.log(shown) - target) if shown and shown > 0 else math.inf

        return final_answer(min(options, key=distance)[0])


# ---------------------------------------------------------------- dispatch
class ScriptedPlanner:
    """Recognises each observation's generated family from its question and acts with that family's planner."""

    def __init__(self) -> None:
        self.game24 = ScriptedGameOf24Planner()
        self.multihop = ScriptedMultiHopPlanner()
        self.agentic = ScriptedAgenticPlanner()
        self.math = ScriptedMathPlanner()
        self.science = ScriptedSciencePlanner()

    def act(self, observations: Sequence[Observation]) -> list[str]:
        return [self.one(obs) for obs in observations]

    def one(self, obs: Observation) -> str:
        from benchmarks.synthetic.agentic import parse_agentic_question
        from benchmarks.synthetic.mathgen import parse_math_question
        from benchmarks.synthetic.multihop import parse_question
        from benchmarks.synthetic.science import parse_science_question

        question = obs["question"]
        if numbers_in_question(question) and "write an arithmetic expression that equals" in question:
            return self.game24.act([obs])[0]
        if parse_science_question(question) is not None:
            return self.science.one(obs)
        if parse_math_question(question) is not None:
            return self.math.one(obs)
        if parse_agentic_question(question) is not None:
            return self.agentic.one(obs)
        if parse_question(question) is not None:
            return self.multihop.one(obs)
        return final_answer("unknown")


def _hopchain_planner() -> Policy:
    from agents.policies.hopchain import ScriptedHopChainPlanner

    return ScriptedHopChainPlanner()


_BY_FAMILY: dict[str, Callable[[], Policy]] = {
    "Gen-GameOf24": ScriptedGameOf24Planner,
    "Gen-MultiHop": ScriptedMultiHopPlanner,
    "Gen-Agentic": ScriptedAgenticPlanner,
    "Gen-Math": ScriptedMathPlanner,
    "Gen-Science": ScriptedSciencePlanner,
    "Gen-HopChain": _hopchain_planner,
}


def scripted_planner_for(name: str) -> Policy:
    """The scripted planner of a generated family, by env id (``agentflow/Gen-Math-v2``) or benchmark name."""
    bench = re.sub(r"-v\d+$", "", name.split("/")[-1])
    if bench not in _BY_FAMILY:
        from agentflow_env.error import ConfigError

        raise ConfigError(f"no scripted planner for {name!r}; generated families: {', '.join(_BY_FAMILY)}")
    return _BY_FAMILY[bench]()
