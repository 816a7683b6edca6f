"""``LLMPlanner``: any engine as the planner policy, one batched generate call per ``act``.

Each observation's ``prompt`` becomes a chat (optional system message + user prompt); the engine
applies the model's chat template, and the planner's sampling settings go with every call. In the paper
flow, :meth:`LLMPlanner.for_paper_env` sends what AgentFlow's planner sends: its sampling preset (the
frequency penalty as an extra request field) and its system prompt.

With ``tool_calling=True`` the planner calls tools natively: it sends the question and memory with the
env's tools as OpenAI function schemas (``tools=``; by default rebuilt from the observation's tool cards)
and returns the assistant message (JSON, with ``tool_calls``), which the env reads as an action. An engine
with ``chat_with_tools`` (``openai:``, e.g. ``agentflow-env serve`` or ``vllm serve --enable-auto-tool-choice
--tool-call-parser hermes``) gets ``tools=`` in the request; any other engine gets the Hermes-style prompt
of :func:`agentflow_env.engines.openai_wire.fallback_chat` and its reply's ``<tool_call>`` blocks are read
by the env.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from agentflow_env.engines.base import Engine, Message, SamplingParams
from agentflow_env.error import ConfigError
from agentflow_env.turn.tool_calls import SYSTEM_PROMPT, schemas_from_cards
from agents.policies.policy import Observation, as_obs_list

__all__ = ["LLMPlanner", "card_schemas", "tool_system_prompt", "tool_user_content"]

_CARD_SCHEMAS: dict[str, list[dict[str, Any]]] = {}  # tool cards text -> schemas (a handful of tool sets per run)
_CARD_LOCK = threading.Lock()


def card_schemas(obs: Observation) -> list[dict[str, Any]]:
    """The env's tools as OpenAI function schemas, rebuilt from the observation's tool cards (cached)."""
    cards = str(obs.get("tools", ""))
    direct = "\nCommand: " in str(obs.get("prompt", ""))  # the direct executor's format asks for commands
    key = f"{direct}\n{cards}"
    with _CARD_LOCK:
        if key not in _CARD_SCHEMAS:
            _CARD_SCHEMAS[key] = schemas_from_cards(cards, direct=direct)
        return _CARD_SCHEMAS[key]


def tool_system_prompt(system_prompt: str | None = None) -> str:
    """The system message of a tool-calling chat (``system_prompt`` first, when given)."""
    return SYSTEM_PROMPT if not system_prompt else f"{system_prompt}\n\n{SYSTEM_PROMPT}"


def tool_user_content(obs: Observation) -> str:
    """The user message of a tool-calling chat: the question, the memory so far and the turns left."""
    prompt = str(obs.get("prompt", ""))
    turns = prompt.rstrip().rsplit("\n", 1)[-1] if prompt else ""
    memory = str(obs.get("memory", "")) or "(empty)"
    return f"Question:\n{obs.get('question', '')}\n\nResults so far:\n{memory}\n\n{turns}".rstrip()


class LLMPlanner:
    """The planner as an LLM behind any :class:`~agentflow_env.engines.base.Engine` (or a spec string).

    ``sampling`` is used as given on every call (temperature 0 means greedy). With a
    ``sampling.seed``, call ``k`` uses ``seed + k`` so repeated calls explore while a run stays
    reproducible. ``max_prompt_chars`` keeps the head and tail of overlong prompts. ``extra_body``: request
    fields beyond :class:`SamplingParams` (the paper flow's ``frequency_penalty``); the engine must send them
    (an ``openai:`` spec, or an engine built with them), else a :class:`ConfigError` says so.
    """

    def __init__(
        self,
        engine: Engine | str,
        sampling: SamplingParams | None = None,
        system_prompt: str | None = None,
        max_prompt_chars: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        tool_calling: bool = False,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ):
        extra = dict(extra_body or {})
        if isinstance(engine, str):
            engine = _engine_sending(engine, extra)
        elif extra and not _sends(engine, extra):
            raise ConfigError(
                f"{type(engine).__name__} does not send {extra} with its requests; build it with "
                f"make_engine(spec, extra_body={extra!r}) (an openai: engine) or pass a spec string"
            )
        if not hasattr(engine, "generate"):
            raise ConfigError(f"LLMPlanner needs an engine with generate(); got {type(engine).__name__}")
        self.engine = engine
        self.sampling = sampling if sampling is not None else SamplingParams(temperature=0.0, max_tokens=512)
        self.system_prompt = system_prompt
        self.max_prompt_chars = max_prompt_chars
        self.extra_body = extra
        self.tool_calling = bool(tool_calling or tools)
        self.tools = [dict(t) for t in tools] if tools else None
        self.calls = 0
        # last_messages and last_usage are per calling thread: a runner may have several act calls in flight
        self._local = threading.local()
        self.last_messages = []

    @property
    def concurrent_act(self) -> bool:
        """Whether a runner may have several ``act`` calls in flight: when the engine says it is thread-safe
        (an HTTP engine); a local model gets one batch at a time."""
        return bool(getattr(self.engine, "thread_safe", False))

    @property
    def last_messages(self) -> list[list[Message]]:
        return getattr(self._local, "messages", [])

    @last_messages.setter
    def last_messages(self, value: list[list[Message]]) -> None:
        self._local.messages = value

    @property
    def last_usage(self) -> list[dict[str, int] | None] | None:
        """Per prompt of this thread's last act: ``{"prompt_tokens", "completion_tokens"}`` as the engine reported
        them (or None); evals record them per episode (leaderboards.runner.normalize_actions)."""
        return getattr(self._local, "usage", None)

    @last_usage.setter
    def last_usage(self, value: list[dict[str, int] | None] | None) -> None:
        self._local.usage = value

    @classmethod
    def for_paper_env(cls, engine: Engine | str, env: Any, **kwargs: Any) -> LLMPlanner:
        """A planner that sends what AgentFlow's planner sends in the paper-flow ``env`` (``flow="paper"``):
        the env's planner sampling preset (``frequency_penalty`` included) and planner system prompt."""
        base = getattr(env, "unwrapped", env)
        preset = getattr(base, "planner_sampling", None)
        if preset is None:
            raise ConfigError(f"{type(base).__name__} is not a paper-flow env (make it with flow='paper')")
        return cls(
            engine,
            preset.params(),
            system_prompt=base.planner_system_prompt,
            extra_body=preset.extra_body(),
            **kwargs,
        )

    def __repr__(self) -> str:
        return f"LLMPlanner(engine={self.engine!r}, sampling={self.sampling!r})"

    def tool_schemas(self, obs: Observation) -> list[dict[str, Any]]:
        """The ``tools=`` sent with ``obs``: the planner's own, else rebuilt from the observation's tool cards."""
        if self.tools is not None:
            return self.tools
        return card_schemas(obs)

    def messages(self, obs: Observation) -> list[Message]:
        """The chat sent for one observation."""
        if self.tool_calling:
            return self._tool_messages(obs)
        prompt = str(obs.get("prompt", ""))
        if self.max_prompt_chars is not None:
            from agentflow_env.turn.memory import shorten

            prompt = shorten(prompt, self.max_prompt_chars)
        chat: list[Message] = [{"role": "user", "content": prompt}]
        if self.system_prompt:
            chat.insert(0, {"role": "system", "content": self.system_prompt})
        return chat

    def _tool_messages(self, obs: Observation) -> list[Message]:
        """Tool-calling chat: the system prompt, then the question, the memory so far and the turns left."""
        user = tool_user_content(obs)
        if self.max_prompt_chars is not None:
            from agentflow_env.turn.memory import shorten

            user = shorten(user, self.max_prompt_chars)
        system = tool_system_prompt(self.system_prompt)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _call_sampling(self) -> SamplingParams:
        if self.sampling.seed is None:
            return self.sampling
        return dataclasses.replace(self.sampling, seed=self.sampling.seed + self.calls)

    def act(self, observations: Sequence[Observation] | Any) -> list[str]:
        """One action per observation (a list of dicts or a vector env's dict of arrays)."""
        obs_list = as_obs_list(observations)
        if not obs_list:
            return []
        chats = [self.messages(o) for o in obs_list]
        self.last_messages = chats
        self.last_usage = None
        if self.tool_calling:
            replies = self._tool_replies(obs_list, chats)
        else:
            replies = self.engine.generate(chats, self._call_sampling())
        self.calls += 1
        usage = getattr(self.engine, "last_usage", None)  # OpenAIEngine: the server's usage per prompt
        if isinstance(usage, list) and len(usage) == len(chats):
            self.last_usage = list(usage)
        if len(replies) != len(chats):
            raise RuntimeError(f"{self.engine!r} returned {len(replies)} completions for {len(chats)} prompts")
        return [r if isinstance(r, str) else str(r) for r in replies]

    def _tool_replies(self, obs_list: list[dict[str, str]], chats: list[list[Message]]) -> list[str]:
        """Assistant messages as JSON (an engine that takes ``tools=``), else Hermes text from a plain engine."""
        tools = [self.tool_schemas(o) for o in obs_list]
        chat_with_tools = getattr(self.engine, "chat_with_tools", None)
        if not callable(chat_with_tools):
            from agentflow_env.engines.openai_wire import fallback_chat

            rendered = [fallback_chat(c, t) for c, t in zip(chats, tools)]
            return self.engine.generate(rendered, self._call_sampling())
        # one call per distinct tool set (the sub-envs of a vector env usually share one)
        groups: dict[str, list[int]] = {}
        for i, t in enumerate(tools):
            groups.setdefault(json.dumps(t, sort_keys=True), []).append(i)
        replies: list[str] = [""] * len(chats)
        usage: list[Any] = [None] * len(chats)
        for idx in groups.values():
            got = chat_with_tools([chats[i] for i in idx], tools[idx[0]], self._call_sampling())
            last = getattr(self.engine, "last_usage", None)
            for k, i in enumerate(idx):
                replies[i] = json.dumps(got[k], ensure_ascii=False)
                usage[i] = last[k] if isinstance(last, list) and len(last) == len(idx) else None
        self.engine.last_usage = usage  # type: ignore[attr-defined]  # read by act, as after generate
        return replies


def _sends(engine: Any, extra: Mapping[str, Any]) -> bool:
    body = getattr(engine, "extra_body", None)
    return isinstance(body, dict) and all(k in body and body[k] == v for k, v in extra.items())


def _engine_sending(spec: str, extra: dict[str, Any]) -> Engine:
    """The engine of ``spec``, sending ``extra`` with every request (only OpenAI-compatible engines can)."""
    from agentflow_env.engines import make_engine, parse_spec

    if not extra:
        return make_engine(spec)
    backend = parse_spec(spec)[0]
    if backend != "openai":
        raise ConfigError(
            f"engine {spec!r} cannot send {extra} (AgentFlow's planner sampling); serve the model with an "
            "OpenAI-compatible server that takes it (vLLM: `vllm serve MODEL`) and use openai:MODEL@URL, "
            'or run a protocol whose [paper] sampling = "as_stated"'
        )
    engine = make_engine(spec)
    engine.extra_body = {**getattr(engine, "extra_body", {}), **extra}  # type: ignore[attr-defined]
    return engine
