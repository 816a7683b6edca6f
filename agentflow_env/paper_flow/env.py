"""``PaperFlowEnv``: AgentFlow's solver loop, module by module, with the planner as the agent.

Per task (``reset``): one query-analysis call. Per step: the agent's reply is the planner's next step
(``Context/Sub-Goal/Tool Name``); the executor LLM writes ``execution = tool.execute(...)``; the tool runs;
the result goes into the action-step memory; the verifier LLM says STOP or CONTINUE. Only the verifier's
STOP (``terminated``) or the step/time budget (``truncated``) ends a run; the planner has no exit. Then
the final-output LLM writes the answer, which is graded in full. ``info["module_calls"]`` traces every
call (module, prompt, reply, tokens).

Long replies: a planner reply (the action) longer than ``max_action_chars`` (default 100,000) is not
read: the step is spent, its memory entry says why, ``info["action_rejected"]`` gives the length and the
limit, and the trace keeps its head and tail within the limit. A module reply (query analysis, executor,
verifier, final output) over the same limit is not read either and counts as an empty reply: the tool
does not run (the memory says why), the verdict is CONTINUE, the final output is not graded (score 0,
``info["answer_rejected"]``); its trace entry says why under ``"rejected"``. Every reader is linear in
the reply's length.

Time budget: ``time_budget_s`` (on the default wall clock; ``budget_clock="tokens"`` charges each module, planner
and tool call a fixed cost instead, see ``agentflow_env.clock``, and a tool then runs with ``tool_timeout_s``)
counts from the end of the query analysis, as AgentFlow's clock does; it counts
the episode's own time (``self.clock``; a runner with many episodes in flight pauses it while the episode
waits behind others and charges it the planner's call time, so concurrency does not change the budget).
Once it is spent nothing new starts: a step that begins past it runs no module and ends the run
(``truncated``); within a step the tool and the verifier start only while time is left, and each tool
call runs with ``min(tool_timeout_s, time left)``. So a step ends past the budget by at most an executor
or verifier call started in time (bounded by the engine's own request timeout: a call in progress
cannot be interrupted) plus a tool's overrun of its timeout. As in AgentFlow, the final output is still
written when the budget ends a run, after it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from agentflow_env.base import TaskEnv
from agentflow_env.config import PaperConfig
from agentflow_env.engines.base import Engine
from agentflow_env.engines.ledger import generate_as
from agentflow_env.error import ConfigError
from agentflow_env.paper_flow.commands import OPERATORS, run_block
from agentflow_env.paper_flow.memory import RESULT_LIMIT, ActionMemory, cut_result
from agentflow_env.paper_flow.replies import (
    read_command,
    read_next_step,
    read_verdict,
    read_verdict_hardened,
    split_blocks,
)
from agentflow_env.paper_flow.sampling import MODULE_SAMPLING, TOOL_SAMPLING, ModuleSampling, planner_sampling
from agentflow_env.paper_flow.templates import BuiltinPrompts, PromptSource
from agentflow_env.paper_flow.toolbox import STAND_INS, STATED_TOOLS, PaperTool, build_toolbox
from agentflow_env.scoring.base import Scorer
from agentflow_env.tools.base import Tool
from agentflow_env.turn.memory import shorten
from agentflow_env.turn.readable import safe_repr
from agentflow_env.types import Task, TaskSource

__all__ = [
    "READING_PRESETS",
    "TOOLBOX_PRESETS",
    "PaperFlowEnv",
    "planner_system_prompt",
    "prompt_fingerprint",
    "resolve_prompts",
]

logger = logging.getLogger(__name__)

TOOLBOX_PRESETS = PaperConfig.TOOLBOX_PRESETS
READING_PRESETS = PaperConfig.READING_PRESETS


class _DataBlock:
    """Text that an f-string (AgentFlow's templates) or ``str()`` shows as is: a fenced data block."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return self.text


class _FencedMemory:
    """The action memory as ``reading="hardened"`` shows it to the modules: its dict text, fenced as data."""

    def __init__(self, memory: ActionMemory, nonce: str):
        from agentflow_env.scoring.judge import fence

        self.block = _DataBlock(fence("MEMORY", memory.text(), nonce))

    def get_actions(self) -> _DataBlock:
        return self.block


def resolve_prompts(prompts: str | PromptSource) -> PromptSource:
    """``"builtin"``, ``"agentflow:PATH"`` (a local AgentFlow checkout) or a PromptSource object."""
    if not isinstance(prompts, str):
        return prompts
    if prompts == "builtin":
        return BuiltinPrompts()
    if prompts.startswith("agentflow:") and prompts[len("agentflow:") :].strip():
        from agentflow_env.paper_flow.agentflow_source import AgentFlowPrompts

        return AgentFlowPrompts.cached(prompts[len("agentflow:") :].strip())  # read once per run
    raise ConfigError(f"prompts={prompts!r}; use 'builtin' or 'agentflow:PATH' (a local AgentFlow checkout)")


def planner_system_prompt(prompts: str | PromptSource = "builtin") -> str:
    """The system prompt AgentFlow's planner runs with under ``prompts`` (an agent sends it before each prompt)."""
    source = resolve_prompts(prompts)
    return str(getattr(source, "planner_system_prompt", source.system_prompt))


def prompt_fingerprint(source: PromptSource, tools: list[str], metadata: Mapping[str, Any]) -> str:
    """sha256 (16 hex digits) of every prompt ``source`` builds for a fixed probe task and memory, its system
    prompts and tool metadata: equal fingerprints mean the modules see the same wording (whatever the path
    of an ``agentflow:PATH`` checkout or the code version)."""
    memory = ActionMemory()
    tool = tools[0] if tools else "Probe_Tool"
    memory.add_action(1, tool, "probe sub-goal", "execution = tool.execute(query='probe')", ["probe result"])
    question, analysis = "Probe question: what is 6 times 7?", "Probe analysis."
    parts = [
        source.system_prompt,
        planner_system_prompt(source),
        json.dumps(metadata, sort_keys=True, default=str),
        source.query_analysis(question, tools, dict(metadata)),
        source.next_step(question, analysis, tools, dict(metadata), memory, 2, 10),
        source.tool_command(question, "probe context", "probe sub-goal", tool, dict(metadata.get(tool, {}))),
        source.verification(question, tools, dict(metadata), analysis, memory),
        source.final_output(question, analysis, memory),
        source.code_request("probe query"),
        source.missing_tool_command,
        source.missing_tool_result,
    ]
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:16]


_FINGERPRINTS: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], str]] = weakref.WeakKeyDictionary()


def _shared_fingerprint(source: PromptSource, tools: list[str], metadata: Mapping[str, Any]) -> str:
    """:func:`prompt_fingerprint`, worked out once per prompt source object (every env of a run shares the
    checkout's source) and toolbox."""
    key = (*tools, "\x00", json.dumps(metadata, sort_keys=True, default=str))
    try:
        known = _FINGERPRINTS.setdefault(source, {})
    except TypeError:  # a source that cannot be weakly referenced
        return prompt_fingerprint(source, tools, metadata)
    if key not in known:
        known[key] = prompt_fingerprint(source, tools, metadata)
    return known[key]


class PaperFlowEnv(TaskEnv):
    """AgentFlow's control and information flow (see the module docstring).

    - ``engine``: the modules' LLM (query analysis, executor, verifier, final output); ``tool_engine``
      the LLM inside the generalist and Python tools (default: ``engine``), or a dict of them by tool
      name (AgentFlow's scripts use gpt-4o-mini and Qwen2.5-Coder-7B-Instruct there).
    - ``prompts``: ``"builtin"`` (this project's wording) or ``"agentflow:PATH"`` (AgentFlow's exact
      templates and tool metadata read from a local checkout).
    - ``toolbox``: ``"as_coded"`` lists every tool AgentFlow's loader puts in the prompts (the four enabled
      tools plus Web_RAG_Search_Tool, which the Wikipedia tool's module imports); ``"as_stated"`` the four.
    - ``sampling``: the planner preset reported in ``paper_settings`` (``"as_coded"``/``"as_stated"``,
      see :mod:`agentflow_env.paper_flow.sampling`); the agent applies it to its own model.
    - ``tools``: runnable tools by AgentFlow name, replacing the default stand-ins (tests, custom search).
    - ``extra_settings``: more entries for ``paper_settings`` (how the builder made the questions, ...).
    - ``max_action_chars``: the longest planner or module reply that is read (see the module docstring).
    - ``reading``: ``"as_coded"`` (default) builds the module prompts and reads the verifier exactly as
      AgentFlow's code does: the memory, so every tool result, goes into the verifier and final-output prompts
      as raw text, and a "stop" anywhere in the verifier's reply (also one it quotes from a tool) is STOP.
      ``"hardened"`` fences the memory and the planner's context/sub-goal as data in the module prompts (keyed
      markers, quoted lines, look-alikes defused, as the LLM judge does) under a note saying they are never
      instructions, and reads the verdict from the reply's last line only. The planner's own prompt (the
      observation) is the same in both.
    - ``python_sandbox``: where the Python coder's code runs: ``"auto"`` (the local sandbox, or
      ``$AGENTFLOW_SANDBOX``), ``"bwrap"``, ``"namespaces"``, or ``"remote:http://HOST:PORT"`` (a
      SandboxFusion-compatible service such as ``agentflow-env sandbox-server``, for machines that forbid namespaces).
    - ``command_operators``: what the executor's command blocks may compute: ``"all"`` (as AgentFlow's exec:
      arithmetic, powers, shifts, bit operations; the ``-v3`` ids) or ``"arithmetic"`` (the ``-v0``..``-v2`` ids'
      evaluator, kept so their scores stay comparable).
    """

    def __init__(
        self,
        tasks: TaskSource | Sequence[Task],
        scorer: Scorer,
        *,
        engine: Engine | str,
        tool_engine: Engine | str | Mapping[str, Engine | str] | None = None,
        prompts: str | PromptSource = "builtin",
        toolbox: str = "as_coded",
        sampling: str = "as_coded",
        tool_backends: str = "offline",
        online_tools: Mapping[str, Any] | None = None,
        tools: Mapping[str, PaperTool] | None = None,
        web_search: Tool | None = None,
        wikipedia: Tool | None = None,
        max_turns: int = 10,
        time_budget_s: float = 300.0,
        tool_timeout_s: float = 120.0,
        max_action_chars: int = 100_000,
        render_mode: str | None = None,
        name: str = "AgentFlowEnv-paper",
        extra_settings: Mapping[str, Any] | None = None,
        reading: str = "as_coded",
        python_sandbox: str = "auto",
        command_operators: str = "all",
        budget_clock: str = "wall",
        clock_rates: Any = None,
    ):
        if command_operators not in OPERATORS:
            raise ConfigError(f"command_operators={command_operators!r}; choose one of {', '.join(OPERATORS)}")
        self.command_operators = command_operators  # "arithmetic": the -v0..-v2 ids' evaluator (comparability)
        config = PaperConfig(
            max_turns=max_turns,
            time_budget_s=time_budget_s,
            tool_timeout_s=tool_timeout_s,
            max_action_chars=max_action_chars,
            render_mode=render_mode,
            engine=engine,
            tool_engine=tool_engine,
            prompts=prompts,
            toolbox=toolbox,
            sampling=sampling,
            reading=reading,
            tool_backends=tool_backends,
            budget_clock=budget_clock,
            clock_rates=clock_rates,
        )
        self.reading = reading
        self.tool_backends = tool_backends
        self.planner_sampling: ModuleSampling = planner_sampling(sampling)
        self.sampling_preset = sampling
        self.toolbox_preset = toolbox
        self.extra_settings = dict(extra_settings or {})
        self.prompt_source = resolve_prompts(prompts)
        metadata = self.prompt_source.tool_metadata()
        if toolbox == "as_stated":
            metadata = {k: v for k, v in metadata.items() if k in STATED_TOOLS}
        self.toolbox_metadata: dict[str, Any] = metadata
        self.available_tools: list[str] = list(metadata)
        self.prompt_fingerprint = _shared_fingerprint(self.prompt_source, self.available_tools, metadata)
        if isinstance(engine, str):
            from agentflow_env.engines import make_engine

            engine = make_engine(engine)
        per_tool: dict[str, Any] = dict(tool_engine) if isinstance(tool_engine, Mapping) else {}
        unknown = sorted(set(per_tool) - set(self.available_tools))
        if unknown:
            raise ConfigError(f"tool_engine names {', '.join(unknown)}, not in the toolbox {self.available_tools}")
        runnable = dict(tools) if tools is not None else None
        if runnable is None:
            try:
                runnable = build_toolbox(
                    self.available_tools,
                    engine=engine if tool_engine is None or isinstance(tool_engine, Mapping) else tool_engine,
                    engines=per_tool,
                    sampling=TOOL_SAMPLING.params(),
                    system_prompt=self.prompt_source.system_prompt,
                    code_request=self.prompt_source.code_request,
                    web_search=web_search,
                    wikipedia=wikipedia,
                    python_sandbox=python_sandbox,
                )
            except KeyError as exc:
                raise ConfigError(f"no runnable stand-in for AgentFlow tool {exc.args[0]!r}") from None
            if tool_backends == "online":  # the real search tools replace their stand-ins
                from agentflow_env.paper_flow.online_tools import BUILTIN_TEXTS, online_toolbox

                texts = (
                    self.prompt_source.online_texts() if hasattr(self.prompt_source, "online_texts") else BUILTIN_TEXTS
                )
                tool_llm = engine if tool_engine is None or isinstance(tool_engine, Mapping) else tool_engine
                if isinstance(tool_llm, str):
                    from agentflow_env.engines import make_engine

                    tool_llm = make_engine(tool_llm)
                runnable.update(online_toolbox(self.available_tools, tool_llm, texts, **dict(online_tools or {})))
        missing = [n for n in self.available_tools if n not in runnable]
        if missing:
            raise ConfigError(f"tools= lacks {', '.join(missing)}; the toolbox lists {', '.join(self.available_tools)}")
        self.toolbox: dict[str, PaperTool] = {n: runnable[n] for n in self.available_tools}
        super().__init__(tasks, scorer, list(self.toolbox.values()), config, name)
        self.engine = engine
        self.module_sampling = MODULE_SAMPLING
        self.action_memory = ActionMemory()
        self.module_calls: list[dict[str, Any]] = []
        self.query_analysis = ""
        self._raw_analysis: Any = ""
        self._planner_prompt = ""
        self._steps: list[dict[str, Any]] = []
        self._finished = True

    # ------------------------------------------------------------------ what a protocol records
    @property
    def paper_settings(self) -> dict[str, Any]:
        """Prompt source, tool set and sampling of this env (for results and the board)."""
        return {
            "flow": "paper",
            "prompts": self.prompt_source.label,
            "prompt_fingerprint": self.prompt_fingerprint,
            "toolbox": self.toolbox_preset,
            "tools": {
                name: getattr(tool, "online_backend", None) or STAND_INS.get(name, type(tool).__name__)
                for name, tool in self.toolbox.items()
            },
            "tool_backends": self.tool_backends,
            "sampling": self.sampling_preset,
            "reading": self.reading,
            "planner_sampling": self.planner_sampling.to_dict(),
            "module_sampling": self.module_sampling.to_dict(),
            "tool_sampling": TOOL_SAMPLING.to_dict(),
            "planner_system_prompt": planner_system_prompt(self.prompt_source),
            "memory": f"dict of action steps; result strings cut at {RESULT_LIMIT} characters",
            "max_steps": self.max_turns,
            "max_time_s": self.time_budget_s,
            **self._clock_settings(),
            **self.extra_settings,
        }

    def _clock_settings(self) -> dict[str, Any]:
        """The budget's clock, for ``paper_settings`` (nothing on the wall clock, as before it could be chosen)."""
        if not self.clock.counts_tokens:
            return {}
        return {"budget_clock": self.budget_clock, "clock_rates": self.clock.rates.to_dict()}  # type: ignore[attr-defined]

    @property
    def planner_system_prompt(self) -> str:
        return str(self.paper_settings["planner_system_prompt"])

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.task = self._choose_task(options or {})
        self.turn = 0
        self.action_memory = ActionMemory()
        self.module_calls = []
        self._steps = []
        self._reset_tools()
        self._bind_clock()
        prompt = self.prompt_source.query_analysis(self.task.question, self.available_tools, self.toolbox_metadata)
        self._raw_analysis = self._call("query_analysis", 0, prompt)
        self.query_analysis = str(self._raw_analysis).strip()
        self._finished = False
        self._start_clock()  # AgentFlow's step clock starts after the analysis
        info = self._info()
        info["paper_mode"] = self.paper_settings
        return self._observation(), info

    def step(self, action: str) -> tuple[dict, float, bool, bool, dict]:
        if self.task is None or self._finished:
            raise RuntimeError("call reset() before step(): the episode has ended or not started")
        started = time.perf_counter()
        self.turn += 1
        step = self.turn
        reply = _reply_text(action)  # never raises, whatever the object
        self._bind_clock()
        self._charge_planner(self._planner_prompt, reply)  # the token clock's charge (the runner's on the wall)
        rejected = self._too_long("the planner's reply", reply)
        self._record("planner", step, self._planner_prompt, self._kept(reply), None, 0.0, rejected=rejected)
        context, sub_goal, tool_name = (None, None, None) if rejected else read_next_step(reply, self.available_tools)
        record: dict[str, Any] = {
            "turn": step,
            "action": self._kept(reply),
            "parsed": {"context": context, "sub_goal": sub_goal, "tool_name": tool_name},
            "tool": None,
            "command": None,
            "result": None,
            "error": rejected,
            "verifier": None,
        }
        terminated = False
        if self._time_left() <= 0:  # AgentFlow checks its clock before a step: none of it starts
            self._add_error(record, self._no_time("this step's modules"))
        else:
            self._act(step, context, sub_goal, tool_name, record)
            if self._time_left() <= 0:
                self._add_error(record, self._no_time("the verifier"))
            else:
                memory, note = self._module_memory()
                prompt = note + self.prompt_source.verification(
                    self.task.question,
                    self.available_tools,
                    self.toolbox_metadata,
                    self.query_analysis,
                    memory,  # type: ignore[arg-type]
                )
                reader = read_verdict_hardened if self.reading == "hardened" else read_verdict
                record["verifier"] = reader(self._call("verifier", step, prompt))
                terminated = record["verifier"] == "STOP"
        out_of_time = not terminated and self.turn < self.max_turns and self._time_left() <= 0
        if out_of_time:
            self._cut_by_budget()
        truncated = not terminated and (self.turn >= self.max_turns or out_of_time)
        record["seconds"] = time.perf_counter() - started
        self._steps.append(record)
        reward = 0.0
        info = self._info()
        if rejected:
            info["action_rejected"] = rejected
        if terminated or truncated:
            reward = self._final_answer(info)
        return self._observation(), reward, terminated, truncated, info

    def _act(
        self, step: int, context: str | None, sub_goal: str | None, tool_name: str | None, record: dict[str, Any]
    ) -> None:
        """The executor and the tool for the planner's step; the step goes into the action memory."""
        assert self.task is not None
        if record["error"]:  # the reply was not read
            command, result = "", f"Not read: {record['error']}."
        elif tool_name is None or tool_name not in self.toolbox:
            # AgentFlow stores this step too, with fixed texts for its command and result
            command, result = self.prompt_source.missing_tool_command, self.prompt_source.missing_tool_result
            record["error"] = "no Context/Sub-Goal/Tool Name block in the reply" if tool_name is None else tool_name
        else:
            context, sub_goal, note = self._module_step(context or "", sub_goal or "")
            prompt = note + self.prompt_source.tool_command(
                self.task.question, context, sub_goal, tool_name, self.toolbox_metadata[tool_name]
            )
            command = read_command(self._call("executor", step, prompt))
            unread = self.module_calls[-1].get("rejected")
            if unread:  # no command was read, so the tool does not run
                result = f"Not run: {unread}."
                self._add_error(record, unread)
            else:
                result = cut_result(self._run_command(step, tool_name, command))
            record.update(tool=tool_name)
        record.update(command=command, result=result)
        self.action_memory.add_action(step, tool_name, sub_goal, command, result)

    def render(self) -> str | None:
        text = self.action_memory.text()
        if self.render_mode == "human":
            logger.info("%s", text)
            return None
        return text

    # ------------------------------------------------------------------ internals
    def _call(self, module: str, step: int, prompt: str) -> str:
        """One module call on the engine; an engine failure or a reply over ``max_action_chars`` gives an empty
        reply (the trace says why)."""
        messages = [
            {"role": "system", "content": self.prompt_source.system_prompt},
            {"role": "user", "content": prompt},
        ]
        sampling = self.module_sampling.params()
        started = time.perf_counter()
        error = None
        try:
            replies = generate_as(self.engine, [messages], sampling, role="modules", name=module)
            if len(replies) != 1:
                raise RuntimeError(f"the engine returned {len(replies)} completions for one prompt")
            reply = replies[0] if isinstance(replies[0], str) else str(replies[0])
        except Exception as exc:  # the run goes on, as AgentFlow's engines return an error instead of raising
            logger.warning("%s call failed: %s: %s", module, type(exc).__name__, exc)
            error = f"{type(exc).__name__}: {shorten(str(exc), 300)}"
            reply = ""
        seconds = time.perf_counter() - started
        rejected = self._too_long(f"the {module} reply", reply)
        self._record(module, step, prompt, self._kept(reply), sampling.max_tokens, seconds, error, rejected)
        return "" if rejected else reply

    def _record(
        self,
        module: str,
        step: int,
        prompt: str,
        reply: Any,
        max_tokens: int | None,
        seconds: float,
        error: str | None = None,
        rejected: str | None = None,
    ) -> None:
        usage = getattr(self.engine, "last_usage", None) if max_tokens is not None else None
        entry: dict[str, Any] = {
            "module": module,
            "step": step,
            "prompt": prompt,
            "reply": reply,
            "tokens": {"max_tokens": max_tokens, "usage": usage if isinstance(usage, dict) else None},
            "seconds": round(seconds, 4),
        }
        if error:
            entry["error"] = error
        if rejected:
            entry["rejected"] = rejected
        self.module_calls.append(entry)

    def _run_command(self, step: int, tool_name: str, command: str) -> Any:
        """Run every ``execution = tool.execute(...)`` block; a list of results, or one error string."""
        tool = self.toolbox[tool_name]
        started = time.perf_counter()
        executions: list[Any] = []
        result: Any
        try:
            blocks = split_blocks(command)
            for index, block in enumerate(blocks):
                remaining = self._time_left()
                if remaining <= 0:
                    executions.append(f"Not run: {self._no_time(f'the last {len(blocks) - index} block(s)')}.")
                    break
                tool.timeout = self._tool_time(remaining)
                self.clock.charge_tool(tool_name)  # the token clock's fixed charge (the wall clock times it)
                # AgentFlow exec()s the block; this evaluates it
                out = run_block(block, tool.execute, operators=self.command_operators)
                executions.append(out if out is not None else self.prompt_source.no_result(block))
            result = executions
        except Exception as exc:  # a bad command costs the step, as in AgentFlow
            result = self.prompt_source.command_error(exc)
        kept = cut_result(result, self.max_action_chars)  # the trace's copy, within the per-turn text budget
        self._record("tool", step, command, kept, None, time.perf_counter() - started)
        self.module_calls[-1]["tool"] = tool_name
        return result

    def _final_answer(self, info: dict[str, Any]) -> float:
        assert self.task is not None
        self._finished = True
        memory, note = self._module_memory()
        prompt = note + self.prompt_source.final_output(self.task.question, self._raw_analysis, memory)  # type: ignore[arg-type]
        answer = str(self._call("final_output", self.turn, prompt))
        answer_rejected = self.module_calls[-1].get("rejected")
        score = self._grade(answer, info, self._steps, module_calls=list(self.module_calls))
        if answer_rejected:
            info["answer_rejected"] = answer_rejected
        return score

    def _gradable(self, answer: str) -> bool:
        return bool(answer.strip())  # a blank final output is not graded, as in AgentFlow

    # ------------------------------------------------------------------ reading="hardened"
    def _module_memory(self) -> tuple[ActionMemory | _FencedMemory, str]:
        """The memory for a module prompt, and a note to put before the prompt (both as coded: as is, none)."""
        if self.reading != "hardened":
            return self.action_memory, ""
        from agentflow_env.turn.llm_modes import DATA_NOTE

        nonce = hashlib.sha256(self.action_memory.text().encode("utf-8", "replace")).hexdigest()[:16]
        return _FencedMemory(self.action_memory, nonce), DATA_NOTE.format(nonce=nonce) + "\n\n"

    def _module_step(self, context: str, sub_goal: str) -> tuple[str, str, str]:
        """The planner's context and sub-goal for the executor's prompt, and a note to put before it."""
        if self.reading != "hardened":
            return context, sub_goal, ""
        from agentflow_env.turn.llm_modes import fenced

        data, note = fenced(context=context, sub_goal=sub_goal)
        return "\n" + data["context"], "\n" + data["sub_goal"], note + "\n\n"

    def _no_time(self, what: str) -> str:
        self._cut_by_budget()
        return f"the time budget of {self.time_budget_s:g} s ran out before {what} could start"

    @staticmethod
    def _add_error(record: dict[str, Any], problem: str) -> None:
        record["error"] = f"{record['error']}; {problem}" if record["error"] else problem

    def _too_long(self, what: str, reply: str) -> str | None:
        """Why ``reply`` is not read, when it is longer than ``max_action_chars``; else None."""
        if len(reply) <= self.max_action_chars:
            return None
        return (
            f"{what} is {len(reply):,} characters long, over the limit of {self.max_action_chars:,} "
            "(max_action_chars), so it was not read"
        )

    def _kept(self, reply: str) -> str:
        """What the trace keeps of a reply: all of it, or its head and tail within ``max_action_chars``."""
        return shorten(reply, self.max_action_chars)

    def _observation(self) -> dict[str, str]:
        assert self.task is not None
        self._planner_prompt = self.prompt_source.next_step(
            self.task.question,
            self.query_analysis,
            self.available_tools,
            self.toolbox_metadata,
            self.action_memory,
            self.turn + 1,
            self.max_turns,
        )
        return {
            "question": self.task.question,
            "memory": self.action_memory.text(),
            "tools": str(self.available_tools),
            "prompt": self._planner_prompt,
        }

    def _info(self) -> dict[str, Any]:
        assert self.task is not None
        return {
            "task_id": self.task.id,
            "turn": self.turn,
            "turns_left": max(self.max_turns - self.turn, 0),
            "tool_names": list(self.available_tools),
            "family": self.task.family,
            "memory_steps": [
                {"turn": int(k.rsplit(" ", 1)[-1]), **v} for k, v in self.action_memory.get_actions().items()
            ],
            "query_analysis": self.query_analysis,
            "module_calls": list(self.module_calls),
        }


def _reply_text(action: Any) -> str:
    """The planner's reply as text: a ``str`` (a subclass copied without its own methods), else its ``repr``
    (a placeholder when that raises, e.g. nested thousands deep)."""
    if isinstance(action, str):
        return str.__str__(action)
    try:
        text = repr(action)
        return text if isinstance(text, str) else safe_repr(action)
    except Exception:
        return safe_repr(action)
