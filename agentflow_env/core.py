"""``AgentFlowEnv``: AgentFlow's turn loop as a Gymnasium env, with the planner as the agent."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from agentflow_env.base import TaskEnv
from agentflow_env.config import EnvConfig
from agentflow_env.memory import Memory, shorten
from agentflow_env.modes import build_modes
from agentflow_env.parsing import ParsedAction, parse_action
from agentflow_env.prompts import PlannerPrompt
from agentflow_env.scoring.base import Scorer
from agentflow_env.tools.base import Tool, normalize_tool_name, render_card
from agentflow_env.turn_rewards import TurnSignals
from agentflow_env.types import MemoryStep, Task, TaskSource, ToolResult, TurnRecord

__all__ = ["AgentFlowEnv"]

logger = logging.getLogger(__name__)


class AgentFlowEnv(TaskEnv):
    """A multi-turn tool-use task; one ``step`` is one planner turn.

    ## Description
    Each episode is one question from ``tasks``. The agent is AgentFlow's planner: every turn it
    picks a tool and a sub-goal (or gives the final answer). Inside the env the executor turns
    that into a tool command, the tool runs, the result goes into memory, and the verifier decides
    whether to stop. The generator then produces the final answer, which the scorer grades.

    ## Observation
    ``Dict`` of Unicode ``Text``: ``question``, ``memory`` (rendered within
    ``memory_budget`` characters), ``tools`` (tool cards) and ``prompt`` (the full planner prompt).

    ## Action
    One string: ``Justification:/Context:/Sub-Goal:/Tool Name:/Command:`` or ``Final Answer:``
    (or the same keys as JSON). A malformed action costs the turn and is explained in memory.
    An action longer than ``max_action_chars`` (default 100,000) is not read: the turn is spent,
    memory says why, ``info["action_rejected"]`` gives its length and the limit, and the
    trajectory keeps its head and tail within the limit. Parsing is linear in the action's length.

    ## Reward
    0 on every step but the last, then the scorer's value of the final answer, in [0, 1].
    ``info["turn_signals"]`` says on every step whether the turn was an invalid action, a tool error or a
    repeated call, and gives the verifier's verdict; ``turn_rewards={"invalid_action": -0.1, ...}`` (opt-in)
    adds those penalties to the step reward, capped per episode (see :mod:`agentflow_env.turn_rewards`).

    ## LLM modes
    ``executor``/``verifier``/``generator`` = ``"llm"`` call ``engine`` (an Engine or a spec string
    such as ``"openai:MODEL@URL"``); ``llm_kwargs`` go to those modules, e.g.
    ``{"sampling": {"temperature": 0.0, "max_tokens": 512}}``. Their notes on unreadable replies
    appear in ``info["verifier_note"]`` / ``info["generator_note"]``.

    ## Termination
    ``terminated`` on a final answer or a verifier STOP; ``truncated`` when ``max_turns`` or
    ``time_budget_s`` runs out (with the ``llm`` generator an answer is still produced then).

    ## Time budget
    ``time_budget_s`` counts from ``reset``. A tool runs with ``min(tool_timeout_s, time left)``;
    once no time is left, no executor, tool or verifier call starts (the turn is spent and memory
    says so), though a final answer is still accepted. So with offline modules a step ends past the
    budget by at most the parse of one capped action (milliseconds) plus a tool's own overrun of
    its timeout (tens of milliseconds for the Python tool, which is killed). An LLM executor or
    verifier call started in time, and the final answer's generation and scoring (``generator="llm"``,
    an LLM judge), run to completion: they are bounded by the engine's own request timeout, as a
    call in progress cannot be interrupted.
    """

    def __init__(
        self,
        tasks: TaskSource | Sequence[Task],
        scorer: Scorer,
        tools: Sequence[Tool] = (),
        *,
        executor: str = "direct",
        verifier: str = "rule",
        generator: str = "planner",
        engine: Any = None,
        llm_kwargs: dict[str, Any] | None = None,
        max_turns: int = 10,
        time_budget_s: float = 600.0,
        tool_timeout_s: float = 30.0,
        memory_budget: int = 8000,
        max_action_chars: int = 100_000,
        turn_rewards: dict[str, float] | None = None,
        instructions: str = "",
        render_mode: str | None = None,
        name: str = "AgentFlowEnv",
    ):
        config = EnvConfig(
            max_turns=max_turns,
            time_budget_s=time_budget_s,
            tool_timeout_s=tool_timeout_s,
            max_action_chars=max_action_chars,
            render_mode=render_mode,
            executor=executor,
            verifier=verifier,
            generator=generator,
            engine=engine,
            llm_kwargs=llm_kwargs,
            memory_budget=memory_budget,
            turn_rewards=turn_rewards,
        )
        super().__init__(tasks, scorer, tools, config, name)
        if isinstance(engine, str):
            from agentflow_env.engines import make_engine

            engine = make_engine(engine)
        self.engine = engine
        self.modes = (executor, verifier, generator)
        self._executor, self._verifier, self._generator = build_modes(executor, verifier, generator, engine, llm_kwargs)
        self.memory_budget = int(memory_budget)
        self.tool_names = [t.name for t in self.tools]
        examples = [str(t.examples[0]) for t in self.tools if t.examples]
        self._prompt = PlannerPrompt(
            [render_card(t) for t in self.tools],
            self.tool_names,
            examples,
            direct=executor == "direct",
            instructions=instructions,
        )
        self.memory = Memory()
        self._trajectory: list[dict[str, Any]] = []
        self._done = True
        self._memory_cache: tuple[Any, str] = (None, "")
        self._signals = TurnSignals(turn_rewards)  # validates the spec (ConfigError on a bad one)

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.task = self._choose_task(options or {})
        self.memory.clear()
        self._memory_cache = (None, "")
        self.turn = 0
        self._trajectory = []
        self._signals.reset()
        self._done = False
        self._reset_tools()
        self._start_clock()
        return self._observation(), self._info()

    def step(self, action: str) -> tuple[dict, float, bool, bool, dict]:
        if self.task is None or self._done:
            raise RuntimeError("call reset() before step(): the episode has ended or not started")
        started = time.perf_counter()
        self.turn += 1
        rejected = None
        if isinstance(action, str) and len(action) > self.max_action_chars:
            rejected = (
                f"the action is {len(action):,} characters long, over the limit of {self.max_action_chars:,} "
                "(max_action_chars), so it was not read"
            )
            parsed = ParsedAction(problems=[rejected])
        else:
            parsed = parse_action(action)
        verifier_note = None
        action_text = action if isinstance(action, str) else repr(action)
        record = TurnRecord(
            turn=self.turn,
            action=shorten(action_text, self.max_action_chars),
            parsed=parsed.to_dict(),
            tool=None,
            command=None,
            result=None,
            seconds=0.0,
        )
        terminated = truncated = False
        answer: str | None = None
        if parsed.is_final:
            answer = parsed.final_answer
            terminated = True
        else:
            self._run_tool(parsed, record)
            if self._time_left() <= 0:
                pass  # no verifier call past the budget: the episode is truncated below
            elif self._verifier.verify(self.task.question, self._memory_text(), self.turn) == "STOP":
                record.verifier = "STOP"
                terminated = True
            else:
                record.verifier = "CONTINUE"
            verifier_note = getattr(self._verifier, "last_note", None) if record.verifier else None
        signals = self._signals.observe(record, parsed.is_final)
        if not terminated:
            if self.turn >= self.max_turns:
                truncated = True
            elif self._time_left() <= 0:
                truncated = True
                record.error = (record.error or "") + " (time budget exhausted)"
        record.seconds = time.perf_counter() - started
        self._trajectory.append(record.to_dict())
        reward = self._signals.shaping(signals)  # 0.0 unless turn_rewards= asks for penalties
        info = self._info()
        info["turn_signals"] = signals
        if rejected:
            info["action_rejected"] = rejected
        if verifier_note:
            info["verifier_note"] = verifier_note
        if terminated or truncated:
            reward += self._finish(answer, info)
        obs = self._observation()
        if self.render_mode == "human":
            self.render()
        return obs, reward, terminated, truncated, info

    def render(self) -> str | None:
        text = self._memory_text()
        if self.render_mode == "human":
            logger.info("%s", text)
            return None
        return text

    # ------------------------------------------------------------------ internals
    def _run_tool(self, parsed: ParsedAction, record: TurnRecord) -> None:
        assert self.task is not None
        problem = parsed.problems[0] if parsed.problems else None
        tool = None
        if problem is None:
            if not parsed.tool_name:
                problem = "the action has no 'Tool Name:' field and no 'Final Answer:'"
            else:
                # tool names are short; a long one is unknown without going through the name cache
                name = parsed.tool_name
                tool = self._tools_by_key.get(normalize_tool_name(name)) if len(name) <= 200 else None
                if tool is None:
                    problem = f"unknown tool {parsed.tool_name[:80]!r}"
        command = None
        if problem is None and self._time_left() <= 0:
            self._out_of_time(parsed, record)
            return
        if problem is None:
            assert tool is not None
            command, problem = self._executor.command(parsed, tool, self.task.question, self._memory_text())
        if problem is not None or tool is None or command is None:
            message = self._invalid_message(problem or "invalid action")
            record.error = problem
            record.result = message
            self.memory.add(
                MemoryStep(
                    turn=self.turn,
                    tool=None,
                    sub_goal=parsed.sub_goal[:500],
                    command="",
                    result=message,
                    ok=False,
                    error=problem,
                )
            )
            return
        remaining = self._time_left()
        if remaining <= 0:  # the executor used up the rest
            self._out_of_time(parsed, record)
            return
        timeout = min(self.tool_timeout_s, remaining)
        try:
            result = tool.run(command, timeout)
        except Exception as exc:  # a tool must never crash the episode
            logger.exception("tool %s raised", tool.name)
            result = ToolResult(text=f"Error: the tool failed: {type(exc).__name__}: {exc}", ok=False, error=str(exc))
        record.tool, record.command, record.result = tool.name, command, result.text
        record.error = result.error
        self.memory.add(
            MemoryStep(
                turn=self.turn,
                tool=tool.name,
                sub_goal=parsed.sub_goal,
                command=command,
                result=result.text,
                ok=result.ok,
                error=result.error,
            )
        )

    def _out_of_time(self, parsed: ParsedAction, record: TurnRecord) -> None:
        problem = f"the time budget of {self.time_budget_s:g} s ran out before the tool could run"
        record.error = problem
        record.result = f"Not run: {problem}."
        self.memory.add(
            MemoryStep(
                turn=self.turn,
                tool=None,
                sub_goal=parsed.sub_goal[:500],
                command="",
                result=record.result,
                ok=False,
                error=problem,
            )
        )

    def _invalid_message(self, problem: str) -> str:
        tools = ", ".join(self.tool_names) if self.tool_names else "(none)"
        need = "'Tool Name:' and 'Command:'" if self._executor.needs_command else "'Tool Name:' and 'Sub-Goal:'"
        return (
            f"Invalid action: {problem}. Nothing was run. Valid tools: {tools}. "
            f"Give {need}, or 'Final Answer:' to finish."
        )

    def _finish(self, answer: str | None, info: dict[str, Any]) -> float:
        assert self.task is not None
        self._done = True
        generated = self._generator.answer(self.task.question, self._memory_text(), answer)
        final = generated if generated is not None else ""
        score = self._grade(final, info, self._trajectory)
        generator_note = getattr(self._generator, "last_note", None)
        if generator_note:
            info["generator_note"] = generator_note
        return score

    def _memory_text(self) -> str:
        # memory only grows within an episode, so its length keys the cached rendering
        key = (id(self.task), len(self.memory))
        if self._memory_cache[0] != key:
            self._memory_cache = (key, self.memory.render(self.memory_budget))
        return self._memory_cache[1]

    def _observation(self) -> dict[str, str]:
        assert self.task is not None
        memory = self._memory_text()
        turns_left = max(self.max_turns - self.turn, 0)
        return {
            "question": self.task.question,
            "memory": memory,
            "tools": self._prompt.tools_text,
            "prompt": self._prompt.render(self.task.question, memory, turns_left),
        }

    def _info(self) -> dict[str, Any]:
        assert self.task is not None
        return {
            "task_id": self.task.id,
            "turn": self.turn,
            "turns_left": max(self.max_turns - self.turn, 0),
            "tool_names": list(self.tool_names),
            "family": self.task.family,
            "memory_steps": self.memory.to_list(),
        }
