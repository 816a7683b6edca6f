"""``AgentFlowEnv``: AgentFlow's turn loop as a Gymnasium env, with the planner as the agent."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from agentflow_env import clock as clock_module
from agentflow_env.base import TaskEnv
from agentflow_env.config import EnvConfig
from agentflow_env.scoring.base import Scorer
from agentflow_env.tools.base import Tool, normalize_tool_name, render_card
from agentflow_env.turn.memory import Memory, shorten
from agentflow_env.turn.modes import DirectExecutor, RuleVerifier, build_modes
from agentflow_env.turn.parsing import _CANONICAL_PLAIN_RE, ParsedAction, PlainToolAction, parse_action
from agentflow_env.turn.prompts import PlannerPrompt
from agentflow_env.turn.readable import readable_action, safe_repr
from agentflow_env.turn.tool_calls import SYSTEM_PROMPT, ToolCallAction, read_tool_action, tool_schemas
from agentflow_env.turn.turn_rewards import TurnSignals
from agentflow_env.types import Task, TaskSource, ToolResult, TurnRecord

__all__ = ["AgentFlowEnv"]

_monotonic = time.monotonic
_new_tuple = tuple.__new__  # PlainToolAction(*groups) without the keyword-taking constructor

Parse = ParsedAction | PlainToolAction  # what a turn is played from: the fast reader gives the second

logger = logging.getLogger(__name__)


def tool_failed(tool: Tool, exc: BaseException) -> ToolResult:
    """The result of a tool whose ``run`` raised ``exc`` (logged)."""
    logger.exception("tool %s raised", tool.name)
    return ToolResult(text=f"Error: the tool failed: {type(exc).__name__}: {exc}", ok=False, error=str(exc))


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
    ``headers_first`` (the ``-v7`` ids on): a JSON object after a ``Tool Name:``, ``Command:`` or ``Final Answer:``
    header belongs to that field's value; without it (ids up to ``-v6``) an object with a field key anywhere in
    the action is the action (see ``agentflow_env.turn.parsing.parse_action``).
    Native tool calls work too (see :mod:`agentflow_env.turn.tool_calls`): an OpenAI assistant message (a dict
    or its JSON) with ``tool_calls``, Hermes/Qwen ``<tool_call>`` blocks, a ``final_answer`` call, or plain
    content as the final answer (from the first turn with ``reset(options={"tool_calling": True})``, else once
    the episode has called a tool natively). ``info["tools"]`` holds the OpenAI function schemas (one object per env,
    shared by every info: do not mutate it) and ``info["messages"]`` the episode so far as an OpenAI chat.
    An action longer than ``max_action_chars`` (default 100,000) is not read: the turn is spent,
    memory says why, ``info["action_rejected"]`` gives its length and the limit, and the
    trajectory keeps its head and tail within the limit. Parsing is linear in the action's length.
    ``max_action_chars`` is the per-turn text budget too: a tool's result or error longer than it is kept
    (memory, ``info["messages"]``, the trajectory) as its head and tail with a ``…[N chars cut]…`` marker.
    ``step`` never raises on the action object: one that cannot be read (nested over 64 levels, values JSON
    cannot hold, a ``str`` or ``dict`` subclass whose methods raise) is rejected like an over-long one.

    ## Reward
    0 on every step but the last, then the scorer's value of the final answer, in [0, 1].
    ``info["turn_signals"]`` says on every step whether the turn was an invalid action, a tool error or a
    repeated call, and gives the verifier's verdict; ``turn_rewards={"invalid_action": -0.1, ...}`` (opt-in)
    adds those penalties to the step reward, capped per episode (see :mod:`agentflow_env.turn.turn_rewards`).

    ## LLM modes
    ``executor``/``verifier``/``generator`` = ``"llm"`` call ``engine`` (an Engine or a spec string
    such as ``"openai:MODEL@URL"``); ``llm_kwargs`` go to those modules, e.g.
    ``{"sampling": {"temperature": 0.0, "max_tokens": 512}}``. Their notes on unreadable replies
    appear in ``info["verifier_note"]`` / ``info["generator_note"]``.

    ## Termination
    ``terminated`` on a final answer or a verifier STOP; ``truncated`` when ``max_turns`` or
    ``time_budget_s`` runs out (with the ``llm`` generator an answer is still produced then).

    ## Time budget
    ``time_budget_s`` counts the episode's own time from ``reset`` (``self.clock``, an
    :class:`~agentflow_env.clock.EpisodeClock`: wall time when played by hand; a runner with many episodes in
    flight pauses it while the episode waits behind others). A tool runs with ``min(tool_timeout_s, time left)``;
    once no time is left, no executor, tool or verifier call starts (the turn is spent and memory
    says so), though a final answer is still accepted. So with offline modules a step ends past the
    budget by at most the parse of one capped action (milliseconds) plus a tool's own overrun of
    its timeout (tens of milliseconds for the Python tool, which is killed). An LLM executor or
    verifier call started in time, and the final answer's generation and scoring (``generator="llm"``,
    an LLM judge), run to completion: they are bounded by the engine's own request timeout, as a
    call in progress cannot be interrupted.

    ``budget_clock="tokens"`` counts the budget on a clock that does not run
    (``agentflow_env.clock.TokenClock``): each planner, executor, verifier and tool-LLM call is charged
    by its tokens and each tool call a fixed cost, at ``clock_rates``, so the budget ends an episode at the
    same point on any machine and at any concurrency; a tool then runs with ``tool_timeout_s``.
    ``info["budget_cut"]`` (at the episode's end) says whether the budget stopped anything in the episode.
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
        budget_clock: str = "wall",
        clock_rates: Any = None,
        headers_first: bool = False,
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
            budget_clock=budget_clock,
            clock_rates=clock_rates,
            headers_first=headers_first,
        )
        super().__init__(tasks, scorer, tools, config, name)
        self.headers_first = config.headers_first
        self._tools_by_name = {tool.name: tool for tool in self.tools}  # the exact name: no normalising
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
        # built once: the same list goes into every info (tools are fixed for the env's life)
        self.tool_schemas = tool_schemas(self.tools, direct=executor == "direct")
        extra = f"\n\n{instructions.strip()}" if instructions.strip() else ""
        self._system_message = {"role": "system", "content": SYSTEM_PROMPT + extra}
        self._messages: list[dict[str, Any]] = []
        self._planner_prompt = ""  # the last observation's prompt (the token clock charges the planner for it)
        self._tool_mode = False
        # True: plain text without fields is the final answer from the first turn (else only once the
        # episode has called a tool natively); reset(options={"tool_calling": True}) sets it per episode
        self.tool_calling = False
        self.memory = Memory()
        # the turns of this episode; their dicts are built only when asked for (``_trajectory``, the final info)
        # (turn, action, parsed, tool, command, result, seconds, error, verifier) per turn
        self._records: list[tuple[Any, ...]] = []
        self._record_dicts: list[dict[str, Any]] = []
        self._done = True
        self._signals = TurnSignals(turn_rewards)  # validates the spec (ConfigError on a bad one)
        self._rule_verifier = type(self._verifier) is RuleVerifier
        self._direct_executor = type(self._executor) is DirectExecutor
        # step's fast reader reads what ``_read`` would (tests/env/test_step_overhead.py), unless a subclass reads
        self._fast_reads = type(self)._read is AgentFlowEnv._read
        self._token_clock = self.clock.counts_tokens

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self.task = self._seed_and_choose(seed, options or {})  # super().reset(seed=seed), then the task
        self.memory.clear()
        self.turn = 0
        self._records = []
        self._record_dicts = []
        self._messages = [self._system_message, {"role": "user", "content": self.task.question}]
        self._tool_mode = bool((options or {}).get("tool_calling", self.tool_calling))
        self._signals.reset()
        self._done = False
        self._reset_tools()
        self._token_clock = self.clock.counts_tokens  # read once an episode: _play and _run_tool skip the wall's no-ops
        self._bind_clock()
        self._start_clock()
        return self._view()

    def step(self, action: str | dict[str, Any]) -> tuple[dict, float, bool, bool, dict]:
        if self._done or self.task is None:
            raise RuntimeError("call reset() before step(): the episode has ended or not started")
        started = _monotonic()
        # The fast reader: a canonical tool action without "{", "<" or NUL (``parsing._CANONICAL_PLAIN_RE``) reads,
        # outside tool mode and within the length limit, as ``_read`` reads it: its five fields, the text kept whole
        # (tests/env/test_step_overhead.py checks that the two readers agree).
        if (
            type(action) is str
            and self._fast_reads
            and not self._tool_mode
            and len(action) <= self.max_action_chars
            and (match := _CANONICAL_PLAIN_RE.fullmatch(action)) is not None
        ):
            return self._play(started, action, None, _new_tuple(PlainToolAction, match.groups()), None)
        return self._play(started, *self._read(action))

    def _play(
        self, started: float, kept: str, call: ToolCallAction | None, parsed: Parse, rejected: str | None
    ) -> tuple[dict, float, bool, bool, dict]:
        """The turn, once read (``kept``: the action's text within ``max_action_chars``): run its tool or take its
        answer, ask the verifier, remember the turn, and answer with ``(obs, reward, terminated, truncated, info)``."""
        self.turn = turn = self.turn + 1
        if self._token_clock or clock_module.token_clock_bound:  # (until then every context's binding is None)
            self._bind_clock()  # this thread's LLM calls charge this episode's token clock
            self._charge_planner(self._planner_prompt, kept)  # the token clock's charge (the runner's on the wall)
        verifier = verifier_note = None
        is_final = parsed.final_answer is not None and parsed.is_final  # a tool action calls no property
        if is_final:  # a final answer is accepted whatever the clock says
            answer, terminated, out_of_time = parsed.final_answer, True, False
            tool = command = result = error = None
            ended = _monotonic()
        else:
            answer = None
            terminated = False
            tool, command, result, error = self._run_tool(parsed, started)
            ended = _monotonic()  # the clock's reading after the tool, and the turn's end (with the rule verifier)
            spent, since = self.clock.state  # clock.elapsed(), written out
            out_of_time = self.time_budget_s - (spent if since is None else spent + ended - since) <= 0
            if out_of_time:
                pass  # no verifier call past the budget: the episode is truncated below
            elif self._rule_verifier:
                verifier = "CONTINUE"  # the rule verifier never stops (and takes no time)
            else:
                verifier, verifier_note = self._verify(turn)
                terminated = verifier == "STOP"
                out_of_time = self._time_left() <= 0  # the verifier's own time counts
                ended = _monotonic()
        turn_signals = self._signals
        signals = turn_signals.observe_turn(tool, command, result, error, verifier, is_final)
        truncated = False
        if not terminated:
            if turn >= self.max_turns:
                truncated = True
            elif out_of_time:
                truncated = True
                self._cut_by_budget()
                error = (error or "") + " (time budget exhausted)"
        # the turn's record; its dict (TurnRecord.to_dict) is built only when the trajectory is read
        self._records.append((turn, kept, parsed, tool, command, result, ended - started, error, verifier))
        if call is not None:
            self._add_call_messages(call, parsed, result, error)
        elif result is None:  # a final answer (a text action that was not run has a result: why)
            self._messages.append({"role": "assistant", "content": kept})
        else:  # a text action, and a user note with what it ran or why it did not
            self._messages += ({"role": "assistant", "content": kept}, {"role": "user", "content": result})
        reward = 0.0 if turn_signals.spec is None else turn_signals.shaping(signals)  # penalties are opt-in
        obs, info = self._view(signals)  # (what _finish does below leaves the observation as it is)
        if rejected:
            info["action_rejected"] = rejected
        if verifier_note:
            info["verifier_note"] = verifier_note
        if terminated or truncated:
            reward += self._finish(answer, info)
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
    def _read(self, action: Any) -> tuple[str, ToolCallAction | None, ParsedAction, str | None]:
        """The action read, whatever its type: ``(its text within max_action_chars, the tool call or None, the
        parse, why it was not read)``."""
        action, action_text, rejected = readable_action(action)  # never raises, whatever the object
        limit = self.max_action_chars
        kept = action_text if len(action_text) <= limit else shorten(action_text, limit)
        if rejected is None and isinstance(action, (str, dict)) and len(action_text) > limit:
            rejected = (
                f"the action is {len(action_text):,} characters long, over the limit of {limit:,} "
                "(max_action_chars), so it was not read"
            )
        if rejected is not None:
            return kept, None, ParsedAction(problems=[rejected]), rejected
        # a str without "{" or "<" is neither a message nor a hermes call: read_tool_action's None, without the call
        maybe_call = action_text and (self._tool_mode or type(action) is not str or "{" in action or "<" in action)
        try:
            read = (
                read_tool_action(action, self.turn + 1, self._tool_mode, self._find_tool, self.headers_first)
                if maybe_call
                else None
            )
        except Exception as exc:  # a message of an odd shape: the turn is spent, memory says why
            rejected = f"the action cannot be read as a tool call: {type(exc).__name__}: {safe_repr(str(exc))}"
            return kept, None, ParsedAction(problems=[rejected]), rejected
        if read is None:
            return kept, None, parse_action(action, self.headers_first), None
        self._tool_mode = True
        return kept, read[0], read[1], None

    def _run_tool(self, parsed: Parse, started: float) -> tuple[str | None, str | None, str, str | None]:
        """Run the action's tool call and remember it: the record's ``(tool, command, result, error)``. The time left
        for it is read as of the turn's start (``started``: the parse of a capped action is milliseconds)."""
        assert self.task is not None
        name, problems = parsed.tool_name, parsed.problems
        tool = None if problems or not name else self._tools_by_name.get(name) or self._find_tool(name)
        if tool is None:
            no_tool = (
                f"unknown tool {name[:80]!r}" if name else "the action has no 'Tool Name:' field and no 'Final Answer:'"
            )
            return self._invalid(parsed, problems[0] if problems else no_tool)
        clock = self.clock
        spent, since = clock.state  # clock.elapsed() at the turn's start, written out
        remaining = self.time_budget_s - (spent if since is None else spent + started - since)
        if remaining <= 0:
            return self._out_of_time(parsed)
        command: str | None = parsed.command
        if not self._direct_executor or not command or command.isspace():
            # the LLM executor writes the command; the direct one runs it as it is, or says what is missing
            memory = self._memory_text() if not self._direct_executor else ""
            command, problem = self._executor.command(parsed.as_parsed(), tool, self.task.question, memory)
            if problem is not None or command is None:
                return self._invalid(parsed, problem or "invalid action")
            remaining = self._time_left()
            if remaining <= 0:  # the executor used up the rest
                return self._out_of_time(parsed)
        timeout = self.tool_timeout_s  # _tool_time(remaining), written out
        if self._token_clock:
            clock.charge_tool(tool.name)  # the token clock's fixed charge (the wall clock times the call)
        elif remaining < timeout:
            timeout = remaining
        try:  # a tool must never crash the episode (nor a transport that dies mid-call: CancelledError included)
            result = tool.run(command, timeout)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            result = tool_failed(tool, exc)
        text, error, limit = result.text, result.error, self.max_action_chars  # the per-turn text budget
        if len(text) > limit:
            text = shorten(text, limit)
        if error is not None and len(error) > limit:
            error = shorten(error, limit)
        self.memory.add_step(self.turn, tool.name, parsed.sub_goal, command, text, result.ok, error)
        return tool.name, command, text, error

    def _invalid(self, parsed: Parse, problem: str, out_of_time: bool = False) -> tuple[None, None, str, str]:
        """The turn spent without running a tool; memory says why."""
        message = f"Not run: {problem}." if out_of_time else self._invalid_message(problem)
        self.memory.add_step(self.turn, None, parsed.sub_goal[:500], "", message, False, problem)
        return None, None, message, problem

    def _verify(self, turn: int) -> tuple[str, str | None]:
        """The verifier's verdict on the turn (``"STOP"`` or ``"CONTINUE"``) and its note on an unreadable reply."""
        assert self.task is not None
        verdict = self._verifier.verify(self.task.question, self._memory_text(), turn)
        return ("STOP" if verdict == "STOP" else "CONTINUE"), getattr(self._verifier, "last_note", None)

    def _find_tool(self, name: str) -> Tool | None:
        # an exact name skips normalising; tool names are short, so a long one is unknown without the name cache
        tool = self._tools_by_name.get(name)
        if tool is None and len(name) <= 200:
            tool = self._tools_by_key.get(normalize_tool_name(name))
        return tool

    def _add_call_messages(self, call: ToolCallAction, parsed: Parse, result: str | None, error: str | None) -> None:
        """A native tool call's turn as chat messages: the assistant's, then a ``tool`` reply per call (or a ``user``
        note when a message without calls was not a final answer). ``result``/``error``: the turn record's."""
        self._messages.append(call.message())
        for i, item in enumerate(call.calls):
            if i == 0:
                text = "Final answer received." if parsed.is_final else (result or error or "")
            else:
                text = "Not run: one tool call per turn; call it again in a later turn."
            self._messages.append({"role": "tool", "tool_call_id": item["id"], "content": text})
        if not call.calls and not parsed.is_final and result is not None:
            self._messages.append({"role": "user", "content": result})

    def _out_of_time(self, parsed: Parse) -> tuple[None, None, str, str]:
        self._cut_by_budget()
        problem = f"the time budget of {self.time_budget_s:g} s ran out before the tool could run"
        return self._invalid(parsed, problem, out_of_time=True)

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

    @property
    def _trajectory(self) -> list[dict[str, Any]]:
        """This episode's turns as dicts (:meth:`TurnRecord.to_dict`), each built once, on first read."""
        dicts, records = self._record_dicts, self._records
        for turn, action, parsed, tool, command, result, seconds, error, verifier in records[len(dicts) :]:
            record = TurnRecord(turn, action, parsed.to_dict(), tool, command, result, seconds, error, verifier)
            dicts.append(record.to_dict())
        return dicts

    def _memory_text(self) -> str:
        return self.memory.text(self.memory_budget)  # rendered once per added step

    def _view(self, turn_signals: dict[str, Any] | None = None) -> tuple[dict[str, str], dict[str, Any]]:
        """The step's observation and info (``turn_signals``: the turn's, none after ``reset``), in one call."""
        task, memory, turn, max_turns = self.task, self.memory, self.turn, self.max_turns
        assert task is not None
        # the question and the tool cards are shared strings; memory and prompt are built once per step
        text, prompt, question = memory.text(self.memory_budget), self._prompt, task.question
        self._planner_prompt = rendered = prompt.render(question, text, max_turns - turn)
        info = {
            "task_id": task.id,
            "turn": turn,
            "turns_left": max_turns - turn if turn < max_turns else 0,
            "tool_names": self.tool_names[:],
            "family": task.family,
            "memory_steps": memory.to_list(),
            "tools": self.tool_schemas,
            "messages": self._messages[:],
        }
        if turn_signals is not None:
            info["turn_signals"] = turn_signals
        return {"question": question, "memory": text, "tools": prompt.tools_text, "prompt": rendered}, info

    def _observation(self) -> dict[str, str]:
        return self._view()[0]

    def _info(self) -> dict[str, Any]:
        return self._view()[1]
