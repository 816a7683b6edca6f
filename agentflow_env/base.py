"""``TaskEnv``: what both flows share, the task set, the scorer, the tools, the clock and the grading.

:class:`~agentflow_env.core.AgentFlowEnv` (the env's own modules) and
:class:`~agentflow_env.paper_flow.PaperFlowEnv` (AgentFlow's solver, module by module) extend it as siblings;
each owns its turn loop (``reset``/``step``), its observation and its memory. A final answer is graded
here, in :meth:`TaskEnv._grade`, for both.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from agentflow_env import clock as clock_module
from agentflow_env.clock import bind_clock, make_clock
from agentflow_env.config import RENDER_MODES, FlowLimits
from agentflow_env.error import ConfigError
from agentflow_env.scoring.base import Scorer
from agentflow_env.spaces import observation_space, text_space
from agentflow_env.tools.base import BaseTool, Tool, normalize_tool_name
from agentflow_env.types import ListTaskSource, Task, TaskSource, find_task_index

__all__ = ["TaskEnv"]

_monotonic = time.monotonic

logger = logging.getLogger(__name__)


class TaskEnv(gym.Env[dict, str]):
    """A multi-turn episode over one task of ``tasks``, graded by ``scorer`` at the end.

    Builds and checks what every flow needs (a non-empty task source, tools with distinct names, the budgets
    of ``limits``), chooses the task ``reset`` plays, keeps the time budget's clock, runs the tools'
    ``reset``/``close`` and grades the final answer. Subclasses write ``reset``, ``step``, ``render``,
    ``_observation`` and ``_info``.
    """

    metadata = {"render_modes": list(RENDER_MODES)}
    _rng: Any = None  # the generator behind gymnasium's ``_np_random`` (see there)
    _rng_state: Any = None  # a state it takes before it is next read

    @property  # type: ignore[override]
    def _np_random(self) -> Any:
        """gymnasium's generator attribute (``np_random`` and the env checker read it), with a state that a
        repeated seed left pending applied on first read: an episode that never reads it skips the restore."""
        state = self._rng_state
        if state is not None:
            self._rng_state = None
            self._rng.bit_generator.state = state
        return self._rng

    @_np_random.setter
    def _np_random(self, generator: Any) -> None:
        self._rng_state = None
        self._rng = generator

    def __init__(
        self,
        tasks: TaskSource | Sequence[Task],
        scorer: Scorer,
        tools: Sequence[Tool],
        limits: FlowLimits,
        name: str,
    ):
        self.config = limits
        self.tasks: TaskSource = tasks if isinstance(tasks, TaskSource) else ListTaskSource(list(tasks))
        if len(self.tasks) == 0:
            raise ConfigError("the task source is empty; give at least one task")
        self.scorer = scorer
        self.tools: list[Tool] = list(tools)
        self._tools_by_key: dict[str, Tool] = {}
        for tool in self.tools:
            key = normalize_tool_name(tool.name)
            if key in self._tools_by_key:
                raise ConfigError(f"two tools are both named {tool.name!r}; tool names must differ")
            self._tools_by_key[key] = tool
        self.max_turns = int(limits.max_turns)
        self.time_budget_s = float(limits.time_budget_s)
        self.tool_timeout_s = float(limits.tool_timeout_s)
        self.max_action_chars = int(limits.max_action_chars)
        self.render_mode = limits.render_mode
        self.name = name
        self.observation_space = observation_space()
        self.action_space = text_space()
        self.task: Task | None = None
        self.turn = 0
        # the episode's own time (a runner pauses it while the episode waits), or its token charges
        self.budget_clock = limits.budget_clock
        self.clock = make_clock(limits.budget_clock, limits.clock_rates)
        self.budget_cut = False  # the time budget stopped something in this episode (see ``_cut_by_budget``)
        self._seeded: tuple[int, Any, Any, int | None] | None = None  # see ``reset``
        self._drawn: tuple[int, Any, int, int, Any, int | None] | None = None  # see ``_seed_and_choose``
        # the tools' own ``reset`` methods (BaseTool's does nothing: it is not called)
        self._tool_resets = [
            reset
            for tool in self.tools
            if callable(reset := getattr(tool, "reset", None))
            and getattr(reset, "__func__", None) is not BaseTool.reset
        ]

    # ------------------------------------------------------------------ seeding
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """``gym.Env.reset``'s seeding, without rebuilding the generator when the seed repeats.

        Seeding builds a new numpy generator (a ``SeedSequence`` hash, tens of microseconds, more than a
        whole tool turn). When ``seed`` is the last integer seed and ``np_random`` is still the generator
        it gave, that generator is put back into the state it had right after seeding instead: the same
        draws follow, for a fraction of the cost. Subclasses call ``super().reset(seed=seed)`` first.
        """
        if seed is None:
            return None
        seeded = self._seeded
        if seeded is not None and type(seed) is int and seed == seeded[0] and self._rng is seeded[1]:
            self._rng_state = seeded[2]  # the state right after seeding, taken when the generator is next read
            self._np_random_seed = seeded[3]
            return None
        super().reset(seed=seed)
        generator = self._rng
        if type(seed) is int and generator is not None:
            self._seeded = (seed, generator, generator.bit_generator.state, self._np_random_seed)
        return None

    # ------------------------------------------------------------------ task choice
    def _choose_task(self, options: dict[str, Any]) -> Task:
        """The task ``reset`` plays: ``options["task_id"]``, ``options["index"]``, or one drawn by the seed."""
        if "task_id" in options:
            index = find_task_index(self.tasks, str(options["task_id"]))
        elif "index" in options:
            index = int(options["index"])
            if not 0 <= index < len(self.tasks):
                raise IndexError(f"options['index']={index} is out of range; the source has {len(self.tasks)} tasks")
        else:
            index = int(self.np_random.integers(len(self.tasks)))
        return self.tasks[index]

    def _seed_and_choose(self, seed: int | None, options: dict[str, Any]) -> Task:
        """``reset(seed=seed)`` then ``_choose_task(options)``, with the first draw after a repeated seed cached.

        A task drawn by the seed is the generator's first draw after seeding. When ``seed`` is the one whose first
        draw is cached and ``np_random`` is still the generator that drew it, the generator is to take the state
        it had after that draw (when it is next read) and the same task is chosen: what seeding, restoring and
        drawing again would give, without them (together they cost a third of a short episode's turns).
        """
        if seed is None or "task_id" in options or "index" in options or type(self)._choose_task is not _BASE_CHOOSE:
            TaskEnv.reset(self, seed=seed)  # (a subclass's own task choice is always asked)
            return self._choose_task(options)
        n = len(self.tasks)
        drawn = self._drawn
        if drawn is not None and seed == drawn[0] and type(seed) is int and drawn[1] is self._rng and n == drawn[2]:
            self._rng_state = drawn[4]
            self._np_random_seed = drawn[5]
            return self.tasks[drawn[3]]
        TaskEnv.reset(self, seed=seed)
        generator = self.np_random
        index = int(generator.integers(n))
        if type(seed) is int:
            self._drawn = (seed, generator, n, index, generator.bit_generator.state, self._np_random_seed)
        return self.tasks[index]

    def _reset_tools(self) -> None:
        for reset in self._tool_resets:
            reset()

    # ------------------------------------------------------------------ clock
    def _start_clock(self) -> None:
        self.clock.start()
        self.budget_cut = False

    def _bind_clock(self) -> None:
        """Let this thread's LLM calls charge this episode's token clock (``reset`` and ``step`` call it)."""
        clock = self.clock
        if clock.counts_tokens or clock_module.token_clock_bound:  # (until then every context's binding is None)
            bind_clock(clock)

    def _time_left(self) -> float:
        spent, since = self.clock.state  # clock.elapsed(), written out: read before every tool and module call
        return self.time_budget_s - (spent if since is None else spent + _monotonic() - since)

    def _cut_by_budget(self) -> None:
        """The time budget stopped a module, a tool or the episode: the episode's result says so."""
        self.budget_cut = True

    def _tool_time(self, remaining: float) -> float:
        """A tool call's timeout: ``min(tool_timeout_s, time left)`` on the wall clock; on the token clock,
        where a tool call costs a fixed charge, ``tool_timeout_s`` (a safety net, not the budget)."""
        if self.clock.counts_tokens or self.tool_timeout_s < remaining:
            return self.tool_timeout_s
        return remaining

    def _charge_planner(self, prompt: Any, reply: Any) -> None:
        """On the token clock, the planner's call that gave ``reply`` to ``prompt``, by their estimated tokens
        (the env does not see the policy's usage; the wall clock was charged the call by the runner)."""
        if self.clock.counts_tokens:
            from agentflow_env.engines.ledger import estimate_tokens

            self.clock.charge_call(estimate_tokens(prompt), estimate_tokens(reply))

    # ------------------------------------------------------------------ grading
    def _gradable(self, answer: str) -> bool:
        """Whether ``answer`` goes to the scorer (an ungraded answer scores 0)."""
        return bool(answer)

    def _grade(self, answer: str, info: dict[str, Any], trajectory: list[dict[str, Any]], **extra: Any) -> float:
        """Score ``answer`` on the current task in [0, 1] and write the episode's end into ``info``.

        A scorer that raises gives 0 and ``info["score_error"]``: a scorer bug never loses the episode.
        ``extra`` entries (the paper flow's ``module_calls``) follow the standard ones.
        """
        assert self.task is not None
        score_error = None
        try:
            score = float(self.scorer(answer, self.task)) if self._gradable(answer) else 0.0
        except Exception as exc:  # a scorer bug gives 0 and says why, it does not lose the episode
            logger.exception("scorer failed on task %s", self.task.id)
            score, score_error = 0.0, f"{type(exc).__name__}: {exc}"
        score = min(max(score, 0.0), 1.0)
        info.update(
            answer=answer,
            score=score,
            gold=self.task.answer,
            trajectory=list(trajectory),
            task=self.task.to_dict(),
            budget_cut=self.budget_cut,
            **extra,
        )
        if score_error:
            info["score_error"] = score_error
        return score

    # ------------------------------------------------------------------ gym API
    def close(self) -> None:
        for tool in self.tools:
            try:
                tool.close()
            except Exception:  # closing must not hide the caller's own exception
                logger.exception("closing tool %s failed", getattr(tool, "name", tool))


_BASE_CHOOSE = TaskEnv._choose_task
