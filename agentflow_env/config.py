"""Every env option, held once: :class:`EnvConfig` (the modes flow) and :class:`PaperConfig` (the paper flow),
and the flows themselves (``FLOWS``; ``MODES_ONLY``, the options only the modes flow takes).

The module also holds the generic dataclass <-> flags/TOML helpers every command uses (``doc_field``,
``add_dataclass_flags``, ``flag_values``, ``coerce_field``, ``load_table``).

Each option is a dataclass field with its default; building a config validates it (``ConfigError`` on a bad
value), and ``pop_from(kwargs)`` takes the options a flow owns out of a mixed bag of keyword arguments
(``make_env`` passes what is left to the task loader, the scorer and the tool factory). The envs build their
config from their own keyword arguments, so a value is checked in one place whichever way it arrives.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from agentflow_env.clock import BUDGET_CLOCKS, TokenRates
from agentflow_env.error import ConfigError

__all__ = [
    "RENDER_MODES",
    "EnvConfig",
    "FlowLimits",
    "PaperConfig",
    "add_dataclass_flags",
    "coerce_field",
    "doc_field",
    "field_types",
    "flag_values",
    "load_table",
    "parse_literal",
]

RENDER_MODES = ("ansi", "human")

_C = TypeVar("_C", bound="FlowLimits")


@dataclass(frozen=True)
class FlowLimits:
    """The options both flows share: the step, time and reply budgets and the render mode.

    ``budget_clock`` says what ``time_budget_s`` counts: ``"wall"`` (the episode's own wall time) or
    ``"tokens"`` (fixed charges per LLM call by its tokens and per tool call, at ``clock_rates``, a
    ``TokenRates`` or a table of its fields; see ``agentflow_env.clock``).
    """

    max_turns: int = 10
    time_budget_s: float = 600.0
    tool_timeout_s: float = 30.0
    max_action_chars: int = 100_000
    render_mode: str | None = None
    budget_clock: str = "wall"
    clock_rates: Any = None  # the token clock's TokenRates (a table of its fields is read into one)

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
        if self.budget_clock not in BUDGET_CLOCKS:
            raise ConfigError(f"budget_clock={self.budget_clock!r}; choose one of {', '.join(BUDGET_CLOCKS)}")
        if self.clock_rates is not None:
            if self.budget_clock != "tokens":
                raise ConfigError('clock_rates applies to budget_clock="tokens" only; remove it or set the clock')
            object.__setattr__(self, "clock_rates", TokenRates.of(self.clock_rates))

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
    headers_first: bool = False  # how a text action holding a JSON object reads (parse_action; True from -v7)

    flow: ClassVar[str] = "modes"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.memory_budget < 200:
            raise ConfigError(f"memory_budget={self.memory_budget} is too small; use at least 200 characters")
        if not isinstance(self.headers_first, bool):
            raise ConfigError(f"headers_first={self.headers_first!r}; use True or False")


@dataclass(frozen=True)
class PaperConfig(FlowLimits):
    """Options of :class:`~agentflow_env.paper_flow.PaperFlowEnv` (``flow="paper"``); see its docstring."""

    time_budget_s: float = 300.0
    tool_timeout_s: float = 120.0
    engine: Any = None
    tool_engine: Any = None
    prompts: Any = "builtin"
    toolbox: str = "as_coded"
    sampling: str = "as_coded"
    tool_backends: str = "offline"  # "online": Gemini grounding, MediaWiki + page selection, URL fetch + RAG
    reading: str = "as_coded"  # how module prompts show tool text and the verdict is read (PaperFlowEnv)

    flow: ClassVar[str] = "paper"
    TOOLBOX_PRESETS: ClassVar[tuple[str, ...]] = ("as_coded", "as_stated")
    TOOL_BACKENDS: ClassVar[tuple[str, ...]] = ("offline", "online")
    READING_PRESETS: ClassVar[tuple[str, ...]] = ("as_coded", "hardened")

    def __post_init__(self) -> None:
        if self.engine is None:
            raise ConfigError("the paper mode needs engine= (an Engine or a spec such as 'openai:MODEL@URL')")
        if self.toolbox not in self.TOOLBOX_PRESETS:
            raise ConfigError(f"toolbox={self.toolbox!r}; choose one of {', '.join(self.TOOLBOX_PRESETS)}")
        if self.tool_backends not in self.TOOL_BACKENDS:
            raise ConfigError(f"tool_backends={self.tool_backends!r}; choose one of {', '.join(self.TOOL_BACKENDS)}")
        if self.reading not in self.READING_PRESETS:
            raise ConfigError(f"reading={self.reading!r}; choose one of {', '.join(self.READING_PRESETS)}")
        super().__post_init__()


# flow name -> its options; the flows an env id can be built with (benchmarks.specs.make_env, protocols' [env])
FLOW_CONFIGS: dict[str, type[FlowLimits]] = {EnvConfig.flow: EnvConfig, PaperConfig.flow: PaperConfig}
FLOWS: tuple[str, ...] = tuple(FLOW_CONFIGS)
# the modes flow's own modules and budgets, which the paper flow replaces with AgentFlow's (and refuses)
MODES_ONLY: frozenset[str] = EnvConfig.names() - PaperConfig.names()


# ---------------------------------------------------------------------------------- dataclass <-> flags/TOML
def doc_field(
    help: str, *, flag: str | None = None, switch: bool = False, repeat: bool = False, cli: bool = True, **kw: Any
) -> Any:
    """A dataclass field whose help text (and command-line spelling) lives in its metadata.

    ``flag`` overrides the generated ``--kebab-case`` name; ``switch=True`` makes the flag take no value and set
    the opposite of the default (for a bool); ``repeat=True`` collects a repeated flag into a list;
    ``cli=False`` keeps the field off the command line (an object only code passes).
    """
    meta = {"help": help, "flag": flag, "switch": switch, "repeat": repeat, "cli": cli}
    return dataclasses.field(metadata=meta, **kw)


def field_types(cls: type) -> dict[str, Any]:
    """Field name -> resolved type annotation of dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _to_bool(value: Any) -> bool:
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(value)
    return bool(value)


def _to_int(value: Any) -> int:
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(value)
    return int(value)


def _to_str(value: Any) -> str:
    if isinstance(value, (dict, list)):
        raise ValueError(value)
    return str(value)


_SCALARS: dict[Any, Any] = {bool: _to_bool, int: _to_int, float: float, str: _to_str, Path: Path}


def parse_literal(text: str) -> Any:
    """JSON, else a Python literal (``[0.9, 0.999]``, ``{'a': 1}``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return ast.literal_eval(text)


def type_name(kind: Any) -> str:
    return getattr(kind, "__name__", str(kind))


def _convert(kind: Any, value: Any) -> Any:
    origin = kind if kind in (dict, list) else typing.get_origin(kind)
    if kind in _SCALARS:
        return _SCALARS[kind](value)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        for option in sorted((o for o in options if o is not type(None)), key=lambda o: o is str):
            try:  # str last: "3" stays a number where a number is allowed
                return _convert(option, value)
            except (TypeError, ValueError, SyntaxError):
                continue
        raise ValueError(value)
    if origin in (dict, list):
        if isinstance(value, str):
            value = parse_literal(value)
        if not isinstance(value, origin):
            raise ValueError(value)
        if origin is list:
            (item,) = typing.get_args(kind) or (Any,)
            value = [v if item is Any else _convert(item, v) for v in value]
        return value
    return value


def coerce_field(cls: type, name: str, value: Any) -> Any:
    """``value`` (possibly a command-line string) as field ``name`` of ``cls`` wants it, or a ConfigError."""
    kind = field_types(cls)[name]
    try:
        return _convert(kind, value)
    except (TypeError, ValueError, SyntaxError):
        want = type_name(kind) + (" (a JSON object)" if dict in (kind, typing.get_origin(kind)) else "")
        raise ConfigError(f"{name}={value!r} is not a valid {want}; fix the value of {name}") from None


def _metavar(kind: Any) -> str:
    """INT, FLOAT, STR, JSON (a table or list), for ``X | None`` that of X, for ``str | list[str]`` STR."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        kind = next(o for o in typing.get_args(kind) if o is not type(None))
    if kind in (dict, list) or typing.get_origin(kind) in (dict, list):
        return "JSON"
    return type_name(kind).upper()


def flag_of(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or f"--{f.name.replace('_', '-')}"


def add_dataclass_flags(
    parser: argparse.ArgumentParser | Any,
    cls: type,
    *,
    dest_prefix: str = "cfg_",
    choices: Mapping[str, Sequence[str]] | None = None,
    skip: Sequence[str] = (),
    help_extra: Mapping[str, str] | None = None,
) -> None:
    """One flag per field of dataclass ``cls`` (help from ``doc_field`` metadata, default shown); every flag
    defaults to None, so only the flags given override (read them back with :func:`flag_values`).

    A field without a default is a required flag; ``help_extra`` appends text known only at run time (the
    registered names, say) to a field's help; fields in ``skip`` or with ``cli=False`` get no flag."""
    for f in dataclasses.fields(cls):
        if f.name in skip or not f.metadata.get("cli", True):
            continue
        extra = (help_extra or {}).get(f.name)
        help_text = " ".join(t for t in (f.metadata.get("help", ""), extra) if t)
        dest = f"{dest_prefix}{f.name}"
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.metadata.get("switch"):
            parser.add_argument(
                flag_of(f), dest=dest, action="store_const", const=not f.default, default=None,
                help=help_text.replace("%", "%%"),
            )  # fmt: skip
            continue
        if not required:  # None is left unsaid: the help says what None means
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc,operator]
            shown = f"./{default}" if isinstance(default, Path) and not default.is_absolute() else repr(default)
            help_text = help_text if default is None else f"{help_text} (default: {shown})".strip()
        kind = field_types(cls)[f.name]
        options = (choices or {}).get(f.name)
        parser.add_argument(
            flag_of(f),
            dest=dest,
            default=None,
            required=required,
            choices=options,
            metavar=None if options else _metavar(kind),
            action="append" if f.metadata.get("repeat") else "store",
            help=help_text.replace("%", "%%"),
        )


def flag_values(args: argparse.Namespace, cls: type, dest_prefix: str = "cfg_") -> dict[str, Any]:
    """The fields whose flags were given, coerced to the fields' types (a repeated flag gives a list)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        value = getattr(args, f"{dest_prefix}{f.name}", None)
        if value is None:
            continue
        if isinstance(value, list) and f.metadata.get("repeat"):
            out[f.name] = value[0] if len(value) == 1 else list(value)
        else:
            out[f.name] = value if f.metadata.get("switch") else coerce_field(cls, f.name, value)
    return out


def load_table(path: str | Path) -> dict[str, Any]:
    """The top-level table of a ``.toml`` or ``.json`` config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; give the path of a .toml or .json file")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
    elif path.suffix == ".toml":
        import tomllib

        data = tomllib.loads(text)
    else:
        raise ConfigError(f"config file {path} must end in .toml or .json")
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a table / object")
    return data
