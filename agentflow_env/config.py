"""Every env option, held once: :class:`EnvConfig` (the modes flow) and :class:`PaperConfig` (the paper flow).

Each option is a dataclass field with its default; building a config validates it (``ConfigError`` on a bad
value), and ``pop_from(kwargs)`` takes the options a flow owns out of a mixed bag of keyword arguments
(``make_env`` passes what is left to the task loader, the scorer and the tool factory). The envs build their
config from their own keyword arguments, so a value is checked in one place whichever way it arrives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from agentflow_env.error import ConfigError

__all__ = ["RENDER_MODES", "EnvConfig", "FlowLimits", "PaperConfig"]

RENDER_MODES = ("ansi", "human")

_C = TypeVar("_C", bound="FlowLimits")


@dataclass(frozen=True)
class FlowLimits:
    """The options both flows share: the step, time and reply budgets and the render mode."""

    max_turns: int = 10
    time_budget_s: float = 600.0
    tool_timeout_s: float = 30.0
    max_action_chars: int = 100_000
    render_mode: str | None = None

    flow: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ConfigError(f"max_turns must be at least 1, got {self.max_turns}")
        if self.time_budget_s <= 0 or self.tool_timeout_s <= 0:
            raise ConfigError("time_budget_s and tool_timeout_s must be positive seconds")
        if self.max_action_chars < 1000:
            raise ConfigError(f"max_action_chars={self.max_action_chars} is too small; use at least 1000 characters")
        if self.render_mode not in (None, *RENDER_MODES):
            raise ConfigError(f"render_mode={self.render_mode!r}; choose one of {list(RENDER_MODES)} or None")

    @classmethod
    def names(cls) -> frozenset[str]:
        """The option names this config holds."""
        return frozenset(f.name for f in dataclasses.fields(cls))

    @classmethod
    def pop_from(cls: type[_C], kwargs: dict[str, Any], defaults: Mapping[str, Any] | None = None) -> _C:
        """Take this config's options out of ``kwargs`` (in place) and build it; ``defaults`` fill the rest
        (a benchmark's own budgets), before the config's own defaults."""
        names = cls.names()
        given = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
        return cls(**{**{k: v for k, v in (defaults or {}).items() if k in names}, **given})

    def kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments of the flow's env (values as given, not copied)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class EnvConfig(FlowLimits):
    """Options of :class:`~agentflow_env.core.AgentFlowEnv` (``flow="modes"``); see its docstring."""

    executor: str = "direct"
    verifier: str = "rule"
    generator: str = "planner"
    engine: Any = None
    llm_kwargs: dict[str, Any] | None = None
    memory_budget: int = 8000
    turn_rewards: dict[str, float] | None = None

    flow: ClassVar[str] = "modes"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.memory_budget < 200:
            raise ConfigError(f"memory_budget={self.memory_budget} is too small; use at least 200 characters")


@dataclass(frozen=True)
class PaperConfig(FlowLimits):
    """Options of :class:`~agentflow_env.paper_mode.PaperFlowEnv` (``flow="paper"``); see its docstring."""

    time_budget_s: float = 300.0
    tool_timeout_s: float = 120.0
    engine: Any = None
    tool_engine: Any = None
    prompts: Any = "builtin"
    toolbox: str = "as_coded"
    sampling: str = "as_coded"
    reading: str = "as_coded"  # how module prompts show tool text and the verdict is read (PaperFlowEnv)

    flow: ClassVar[str] = "paper"
    TOOLBOX_PRESETS: ClassVar[tuple[str, ...]] = ("as_coded", "as_stated")
    READING_PRESETS: ClassVar[tuple[str, ...]] = ("as_coded", "hardened")

    def __post_init__(self) -> None:
        if self.engine is None:
            raise ConfigError("the paper mode needs engine= (an Engine or a spec such as 'openai:MODEL@URL')")
        if self.toolbox not in self.TOOLBOX_PRESETS:
            raise ConfigError(f"toolbox={self.toolbox!r}; choose one of {', '.join(self.TOOLBOX_PRESETS)}")
        if self.reading not in self.READING_PRESETS:
            raise ConfigError(f"reading={self.reading!r}; choose one of {', '.join(self.READING_PRESETS)}")
        super().__post_init__()
