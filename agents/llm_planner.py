"""``LLMPlanner``: any engine as the planner policy, one batched generate call per ``act``.

Each observation's ``prompt`` becomes a chat (optional system message + user prompt); the engine
applies the model's chat template, and the planner's sampling settings go with every call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from agentflow_env.engines.base import Engine, Message, SamplingParams
from agentflow_env.error import ConfigError
from agents.policy import Observation, as_obs_list

__all__ = ["LLMPlanner"]


class LLMPlanner:
    """The planner as an LLM behind any :class:`~agentflow_env.engines.base.Engine` (or a spec string).

    ``sampling`` is used as given on every call (temperature 0 means greedy). With a
    ``sampling.seed``, call ``k`` uses ``seed + k`` so repeated calls explore while a run stays
    reproducible. ``max_prompt_chars`` keeps the head and tail of overlong prompts.
    """

    def __init__(
        self,
        engine: Engine | str,
        sampling: SamplingParams | None = None,
        system_prompt: str | None = None,
        max_prompt_chars: int | None = None,
    ):
        if isinstance(engine, str):
            from agentflow_env.engines import make_engine

            engine = make_engine(engine)
        if not hasattr(engine, "generate"):
            raise ConfigError(f"LLMPlanner needs an engine with generate(); got {type(engine).__name__}")
        self.engine = engine
        self.sampling = sampling if sampling is not None else SamplingParams(temperature=0.0, max_tokens=512)
        self.system_prompt = system_prompt
        self.max_prompt_chars = max_prompt_chars
        self.calls = 0
        self.last_messages: list[list[Message]] = []

    def __repr__(self) -> str:
        return f"LLMPlanner(engine={self.engine!r}, sampling={self.sampling!r})"

    def messages(self, obs: Observation) -> list[Message]:
        """The chat sent for one observation."""
        prompt = str(obs.get("prompt", ""))
        if self.max_prompt_chars is not None:
            from agentflow_env.memory import shorten

            prompt = shorten(prompt, self.max_prompt_chars)
        chat: list[Message] = [{"role": "user", "content": prompt}]
        if self.system_prompt:
            chat.insert(0, {"role": "system", "content": self.system_prompt})
        return chat

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
        replies = self.engine.generate(chats, self._call_sampling())
        self.calls += 1
        if len(replies) != len(chats):
            raise RuntimeError(f"{self.engine!r} returned {len(replies)} completions for {len(chats)} prompts")
        return [r if isinstance(r, str) else str(r) for r in replies]
