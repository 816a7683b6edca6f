"""One spec per benchmark (tasks, scorer, tools, turn budget) and ``make_env``, the env entry point.

Specs are looked up lazily by name from ``SPEC_TABLE`` so that building one env imports only
what that benchmark needs.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentflow_env.core import AgentFlowEnv
from agentflow_env.error import ConfigError
from agentflow_env.scoring.base import Scorer
from agentflow_env.tools import make_tool
from agentflow_env.tools.base import Tool
from agentflow_env.types import TaskSource

__all__ = ["SPEC_TABLE", "BenchmarkSpec", "get_spec", "make_env", "spec_names"]


@dataclass
class BenchmarkSpec:
    """How to build one benchmark's env.

    ``load_tasks(split=..., **kw)`` returns a task source; ``make_scorer(**kw)`` a scorer;
    ``tools`` names built-in tools (``make_tool`` short names); ``make_tools(**kw)``, when set,
    builds them instead (families whose search tool needs their own corpus).
    """

    name: str
    family: str
    load_tasks: Callable[..., TaskSource]
    make_scorer: Callable[..., Scorer]
    tools: Sequence[str] = ("calculator",)
    max_turns: int = 10
    source: str = "generated"
    description: str = ""
    default_split: str = "test"
    make_tools: Callable[..., list[Tool]] | None = None
    instructions: str = ""
    size: Callable[[], int | None] | None = None
    env_defaults: dict[str, Any] = field(default_factory=dict)


# benchmark name -> "module:attribute" of its BenchmarkSpec
SPEC_TABLE: dict[str, str] = {
    # the paper's ten benchmarks
    "Bamboogle": "benchmarks.paper:BAMBOOGLE",
    "TwoWiki": "benchmarks.paper:TWOWIKI",
    "HotpotQA": "benchmarks.paper:HOTPOTQA",
    "Musique": "benchmarks.paper:MUSIQUE",
    "GAIA": "benchmarks.paper:GAIA",
    "AIME24": "benchmarks.paper:AIME24",
    "AMC23": "benchmarks.paper:AMC23",
    "GameOf24": "benchmarks.paper:GAMEOF24",
    "GPQA": "benchmarks.paper:GPQA",
    "MedQA": "benchmarks.paper:MEDQA",
    "Gen-GameOf24": "benchmarks.generated.game24:SPEC",
    "Gen-MultiHop": "benchmarks.generated.multihop:SPEC",
    "Gen-Math": "benchmarks.generated.mathgen:SPEC",
    "Gen-Science": "benchmarks.generated.science:SPEC",
    "Gen-Agentic": "benchmarks.generated.agentic:SPEC",
}

_ENV_KWARGS = {
    "executor",
    "verifier",
    "generator",
    "engine",
    "max_turns",
    "time_budget_s",
    "tool_timeout_s",
    "memory_budget",
    "max_action_chars",
    "llm_kwargs",
    "render_mode",
    "turn_rewards",
}
# options of the paper flow (flow="paper"): AgentFlow's solver module by module
_PAPER_KWARGS = {
    "engine",
    "tool_engine",
    "prompts",
    "toolbox",
    "sampling",
    "max_turns",
    "time_budget_s",
    "tool_timeout_s",
    "max_action_chars",
    "render_mode",
}
FLOWS = ("modes", "paper")


def spec_names() -> list[str]:
    return list(SPEC_TABLE)


def get_spec(name: str) -> BenchmarkSpec:
    if name not in SPEC_TABLE:
        raise ConfigError(f"unknown benchmark {name!r}; known: {', '.join(SPEC_TABLE)}")
    module, _, attr = SPEC_TABLE[name].partition(":")
    spec = getattr(importlib.import_module(module), attr)
    if not isinstance(spec, BenchmarkSpec):
        raise ConfigError(f"{SPEC_TABLE[name]} is not a BenchmarkSpec")
    return spec


def make_env(
    benchmark: str,
    split: str | None = None,
    tasks: TaskSource | None = None,
    scorer: Scorer | None = None,
    tools: Sequence[Tool] | None = None,
    **kwargs: Any,
) -> AgentFlowEnv:
    """Build the env of ``benchmark`` (the Gymnasium entry point of every ``agentflow/*`` id).

    Env kwargs (``max_turns``, ``executor``, ...) go to :class:`AgentFlowEnv`; the rest go to the
    task loader, the scorer and the tool factory (``data_dir``, ``num_tasks``, ``seed``, ...).

    ``mcp_servers`` adds the tools of MCP servers (a ``{"mcpServers": ...}`` mapping, a JSON file of one, or a
    list of ``{"command"|"url": ...}`` entries; see :mod:`agentflow_env.tools.mcp_tools`).

    ``flow="paper"`` builds :class:`~agentflow_env.paper_mode.PaperFlowEnv` instead: AgentFlow's solver
    module by module, with AgentFlow's toolbox (options ``engine``, ``tool_engine``, ``prompts``,
    ``toolbox``, ``sampling``, ``max_turns``, ``time_budget_s``, ``tool_timeout_s``,
    ``max_action_chars``). For the paper's
    benchmarks each question is AgentFlow's ``query`` field verbatim (``verbatim_query=True``), options
    are not shuffled unless ``shuffle_options=True`` is given, and the full final output is graded by the
    LLM judge on ``engine`` unless ``scoring``/``judge_engine`` say otherwise; ``paper_settings["questions"]``
    records how questions were built.
    """
    flow = kwargs.pop("flow", "modes")
    mcp_servers = kwargs.pop("mcp_servers", None)
    if flow not in FLOWS:
        raise ConfigError(f"flow={flow!r}; choose 'modes' (the env's own modules) or 'paper' (AgentFlow's solver)")
    spec = get_spec(benchmark)
    if flow == "paper":
        if mcp_servers is not None:
            raise ConfigError("mcp_servers works with the env's own flow; the paper flow runs AgentFlow's toolbox")
        return _make_paper_env(spec, split, tasks, scorer, tools, kwargs)
    env_kwargs = {**spec.env_defaults, **{k: kwargs.pop(k) for k in list(kwargs) if k in _ENV_KWARGS}}
    env_kwargs.setdefault("max_turns", spec.max_turns)
    builders = [spec.load_tasks, spec.make_scorer] + ([spec.make_tools] if spec.make_tools else [])
    _check_options(benchmark, kwargs, builders)
    task_source = (
        tasks
        if tasks is not None
        else spec.load_tasks(split=split or spec.default_split, **_accepted(spec.load_tasks, kwargs))
    )
    env_scorer = scorer if scorer is not None else spec.make_scorer(**_accepted(spec.make_scorer, kwargs))
    if tools is not None:
        env_tools = list(tools)
    elif spec.make_tools is not None:  # a family whose corpus depends on the split gets the split too
        tool_kwargs = {**kwargs, "split": split or spec.default_split}
        env_tools = spec.make_tools(**_accepted(spec.make_tools, tool_kwargs))
    else:
        env_tools = [make_tool(name) for name in spec.tools]
    if mcp_servers is not None:  # tools of MCP servers, added to the benchmark's (see agentflow_env.tools.mcp_tools)
        from agentflow_env.tools.mcp_tools import load_mcp_tools

        env_tools = [*env_tools, *load_mcp_tools(mcp_servers)]
    if env_kwargs.get("engine") is not None:  # LLM-backed tools built without an engine use the env's
        for tool in env_tools:
            attach = getattr(tool, "attach_engine", None)
            if callable(attach):
                attach(env_kwargs["engine"])
    return AgentFlowEnv(
        task_source, env_scorer, env_tools, instructions=spec.instructions, name=benchmark, **env_kwargs
    )


def _make_paper_env(
    spec: BenchmarkSpec,
    split: str | None,
    tasks: TaskSource | None,
    scorer: Scorer | None,
    tools: Sequence[Tool] | None,
    kwargs: dict[str, Any],
) -> AgentFlowEnv:
    from agentflow_env.paper_mode import PaperFlowEnv

    misplaced = sorted(k for k in kwargs if k in _ENV_KWARGS and k not in _PAPER_KWARGS)
    if misplaced:
        raise ConfigError(
            f"flow='paper' runs AgentFlow's own modules and budgets; {', '.join(misplaced)} do not apply "
            f"(its options: {', '.join(sorted(_PAPER_KWARGS))})"
        )
    env_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _PAPER_KWARGS}
    env_kwargs.setdefault("max_turns", spec.max_turns)
    if "time_budget_s" in spec.env_defaults:
        env_kwargs.setdefault("time_budget_s", spec.env_defaults["time_budget_s"])
    if env_kwargs.get("engine") is None:
        raise ConfigError("flow='paper' needs engine= (an Engine or a spec such as 'openai:MODEL@URL')")
    if isinstance(env_kwargs["engine"], str):
        from agentflow_env.engines import make_engine

        env_kwargs["engine"] = make_engine(env_kwargs["engine"])
    loader_names, loader_var_kw = _params(spec.load_tasks)
    if "keep_instructions" in loader_names or loader_var_kw:
        kwargs.setdefault("keep_instructions", True)  # the question as AgentFlow sends it
    questions: dict[str, Any] = {"text": "the benchmark's own questions"}
    if "verbatim_query" in loader_names:
        kwargs.setdefault("verbatim_query", True)  # AgentFlow's `query` field, byte for byte
        questions = {"text": "AgentFlow's query field, verbatim" if kwargs["verbatim_query"] else "rebuilt"}
    if "shuffle_options" in loader_names:
        kwargs.setdefault("shuffle_options", False)  # AgentFlow shows the file's option order
        questions["shuffle_options"] = bool(kwargs["shuffle_options"])
    scorer_names, _ = _params(spec.make_scorer)
    if "scoring" in scorer_names:
        kwargs.setdefault("scoring", "judge")  # AgentFlow's judge reads the whole final output
        if kwargs["scoring"] == "judge" and "judge_engine" in scorer_names:
            kwargs.setdefault("judge_engine", env_kwargs["engine"])
    _check_options(spec.name, kwargs, [spec.load_tasks, spec.make_scorer])
    task_source = (
        tasks
        if tasks is not None
        else spec.load_tasks(split=split or spec.default_split, **_accepted(spec.load_tasks, kwargs))
    )
    env_scorer = scorer if scorer is not None else spec.make_scorer(**_accepted(spec.make_scorer, kwargs))
    given: Any = tools  # PaperTool objects: a dict by AgentFlow name, or a sequence named by their .name
    runnable: dict[str, Any] | None = None
    if given is not None:
        runnable = dict(given) if isinstance(given, dict) else {t.name: t for t in given}
    return PaperFlowEnv(
        task_source,
        env_scorer,
        tools=runnable,
        name=f"{spec.name}-paper",
        extra_settings={"questions": questions},
        **env_kwargs,
    )


def _params(fn: Callable[..., Any]) -> tuple[set[str], bool]:
    sig = inspect.signature(fn)
    names = {p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return names, any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())


def _accepted(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    names, var_kw = _params(fn)
    return dict(kwargs) if var_kw else {k: v for k, v in kwargs.items() if k in names}


def _check_options(benchmark: str, kwargs: dict[str, Any], builders: list[Callable[..., Any]]) -> None:
    known: set[str] = set(_ENV_KWARGS)
    for fn in builders:
        names, var_kw = _params(fn)
        if var_kw:
            return
        known |= names
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise ConfigError(
            f"{benchmark} does not take option(s) {', '.join(unknown)}; "
            f"valid options: {', '.join(sorted(known - {'split'}))}"
        )
