"""Sampling in the paper mode: what AgentFlow's code does and what the paper states.

AgentFlow's evaluation scripts pass ``--temperature 0.0``, but the planner runs on its vLLM engine
(``agentflow/engine/vllm.py``), whose text path ignores the temperature it was built with and sends
temperature 0.7, top_p 0.99 and frequency_penalty 1.2 (max_tokens 2048) on every call. The other modules
run on the fixed engine (DashScope's Qwen2.5-7B-Instruct) at temperature 0, top_p 0.99, max_tokens 2048;
the tools build their engines at temperature 0, top_p 1.0.

- ``"as_coded"``: the planner samples as the code above does (0.7 / 0.99 / penalty 1.2).
- ``"as_stated"``: the planner is greedy, as the paper and the scripts' ``--temperature 0.0`` state.

The planner is the agent, so its sampling is applied by whoever calls the planner model:
``planner_sampling(preset)`` gives the :class:`SamplingParams` and the ``extra_body`` an OpenAI-compatible
engine needs for the frequency penalty (``make_engine(spec, extra_body=...)``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agentflow_env.engines.base import SamplingParams
from agentflow_env.error import ConfigError

__all__ = [
    "MODULE_SAMPLING",
    "PLANNER_PRESETS",
    "SAMPLING_PRESETS",
    "TOOL_SAMPLING",
    "ModuleSampling",
    "planner_sampling",
]

MODULE_MAX_TOKENS = 2048  # every AgentFlow module


@dataclass(frozen=True)
class ModuleSampling:
    """One module's sampling, including the frequency penalty the Engine protocol has no field for."""

    temperature: float
    top_p: float
    max_tokens: int = MODULE_MAX_TOKENS
    frequency_penalty: float = 0.0

    def params(self) -> SamplingParams:
        return SamplingParams(temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens)

    def extra_body(self) -> dict[str, Any]:
        return {"frequency_penalty": self.frequency_penalty} if self.frequency_penalty else {}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PLANNER_PRESETS: dict[str, ModuleSampling] = {
    "as_coded": ModuleSampling(temperature=0.7, top_p=0.99, frequency_penalty=1.2),
    "as_stated": ModuleSampling(temperature=0.0, top_p=1.0),
}
SAMPLING_PRESETS = tuple(PLANNER_PRESETS)
MODULE_SAMPLING = ModuleSampling(temperature=0.0, top_p=0.99)  # query analysis, executor, verifier, final output
TOOL_SAMPLING = ModuleSampling(temperature=0.0, top_p=1.0)  # the LLM inside the generalist and Python tools


def planner_sampling(preset: str = "as_coded") -> ModuleSampling:
    """The planner's sampling under ``preset`` (``"as_coded"`` or ``"as_stated"``)."""
    if preset not in PLANNER_PRESETS:
        raise ConfigError(f"sampling={preset!r}; choose one of {', '.join(SAMPLING_PRESETS)}")
    return PLANNER_PRESETS[preset]
