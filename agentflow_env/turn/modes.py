"""The env's inner modules: executor (``direct|llm``), verifier (``rule|llm``), generator (``planner|llm``).

The ``direct``/``rule``/``planner`` modes are offline; the ``llm`` modes call an engine with
prompts in :mod:`agentflow_env.turn.llm_modes`. In these modes the planner may end a run with
``Final Answer:``. AgentFlow's own solver (query analysis, no planner exit, the verifier or the budget
ends a run, the full final output graded) is the paper flow: ``make_env(..., flow="paper")``, see
:mod:`agentflow_env.paper_flow`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agentflow_env.error import ConfigError
from agentflow_env.turn.parsing import ParsedAction

if TYPE_CHECKING:
    from agentflow_env.engines.base import Engine
    from agentflow_env.tools.base import Tool

EXECUTOR_MODES = ("direct", "llm")
VERIFIER_MODES = ("rule", "llm")
GENERATOR_MODES = ("planner", "llm")


class Executor(Protocol):
    """Turns a parsed planner action into the tool command (``None``: say why in the error)."""

    needs_command: bool

    def command(
        self, action: ParsedAction, tool: Tool, question: str, memory: str
    ) -> tuple[str | None, str | None]: ...


class Verifier(Protocol):
    """After a tool step: ``"STOP"`` or ``"CONTINUE"``."""

    def verify(self, question: str, memory: str, turn: int) -> str: ...


class Generator(Protocol):
    """Produces the final answer at the end of an episode (``None``: the planner's own answer)."""

    def answer(self, question: str, memory: str, planner_answer: str | None) -> str | None: ...


class DirectExecutor:
    """The action carries the command."""

    needs_command = True

    def command(self, action: ParsedAction, tool: Tool, question: str, memory: str) -> tuple[str | None, str | None]:
        if not action.command.strip():
            return None, "the action has no 'Command:' field; the direct executor needs the exact tool input"
        return action.command, None


class RuleVerifier:
    """Never stops on its own: the episode ends on a final answer or at the budget."""

    def verify(self, question: str, memory: str, turn: int) -> str:
        return "CONTINUE"


class PlannerGenerator:
    """The final answer is the planner's."""

    def answer(self, question: str, memory: str, planner_answer: str | None) -> str | None:
        return planner_answer


def build_modes(
    executor: str, verifier: str, generator: str, engine: Engine | None, engine_kwargs: dict[str, Any] | None = None
) -> tuple[Executor, Verifier, Generator]:
    """Validate the mode names and build the three modules (LLM modes need ``engine``)."""
    for value, allowed, name in (
        (executor, EXECUTOR_MODES, "executor"),
        (verifier, VERIFIER_MODES, "verifier"),
        (generator, GENERATOR_MODES, "generator"),
    ):
        if value not in allowed:
            raise ConfigError(f"{name}={value!r} is not a mode; choose one of {', '.join(allowed)}")
    if verifier == "llm" and generator == "planner":
        raise ConfigError(
            "verifier='llm' can stop an episode before the planner answers; "
            "use generator='llm' with it so an answer is always produced"
        )
    uses_llm = "llm" in (executor, verifier, generator)
    if uses_llm and engine is None:
        raise ConfigError("an 'llm' mode needs an engine: pass engine='openai:MODEL@URL' (or an Engine object)")
    ex: Executor = DirectExecutor()
    ve: Verifier = RuleVerifier()
    ge: Generator = PlannerGenerator()
    if uses_llm:
        from agentflow_env.turn import llm_modes

        assert engine is not None
        kw = dict(engine_kwargs or {})
        if isinstance(kw.get("sampling"), dict):
            from agentflow_env.engines.base import SamplingParams

            try:
                kw["sampling"] = SamplingParams(**kw["sampling"])
            except TypeError as exc:
                raise ConfigError(f"llm_kwargs['sampling'] is not valid SamplingParams: {exc}") from None
        if executor == "llm":
            ex = llm_modes.LLMExecutor(engine, **kw)
        if verifier == "llm":
            ve = llm_modes.LLMVerifier(engine, **kw)
        if generator == "llm":
            ge = llm_modes.LLMGenerator(engine, **kw)
    return ex, ve, ge
