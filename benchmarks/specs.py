"""One spec per benchmark (tasks, scorer, tools, turn budget) and ``make_env``, the env entry point.

Specs are looked up lazily by name from ``SPEC_TABLE`` so that building one env imports only
what that benchmark needs.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentflow_env.config import FLOWS, MODES_ONLY, EnvConfig, PaperConfig
from agentflow_env.core import AgentFlowEnv
from agentflow_env.error import ConfigError
from agentflow_env.scoring.base import Scorer
from agentflow_env.scoring.versioned import DEFAULT_GRAMMAR, grammar_version, with_grammar
from agentflow_env.tools import make_tool
from agentflow_env.tools.base import Tool
from agentflow_env.types import TaskSource

if TYPE_CHECKING:
    from agentflow_env.paper_flow import PaperFlowEnv

__all__ = ["SPEC_TABLE", "BenchmarkSpec", "get_spec", "make_env", "spec_names"]


@dataclass
class BenchmarkSpec:
    """How to build one benchmark's env.

    ``load_tasks(split=..., **kw)`` returns a task source; ``make_scorer(**kw)`` a scorer;
    ``tools`` names built-in tools (``make_tool`` short names); ``make_tools(**kw)``, when set,
    builds them instead (families whose search tool needs their own corpus).

    ``loader_options``, ``scorer_options`` and ``tool_options`` state the keyword options each of those
    takes; ``make_env`` routes a benchmark option to each builder that states it and
    refuses one that none states. Left out, they are read once from the builders' signatures; stated,
    they are checked against them.
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
    loader_options: frozenset[str] | None = None
    scorer_options: frozenset[str] | None = None
    tool_options: frozenset[str] | None = None

    def __post_init__(self) -> None:
        self.loader_options = _stated(self, "loader_options", self.load_tasks)
        self.scorer_options = _stated(self, "scorer_options", self.make_scorer)
        self.tool_options = _stated(self, "tool_options", self.make_tools) if self.make_tools else frozenset()
        unknown = set(self.env_defaults) - EnvConfig.names()
        if unknown:
            raise ConfigError(f"{self.name}: env_defaults names {', '.join(sorted(unknown))}, not env options")

    @property
    def options(self) -> frozenset[str]:
        """Every benchmark option (loader, scorer and tool factory together)."""
        assert self.loader_options is not None and self.scorer_options is not None and self.tool_options is not None
        return self.loader_options | self.scorer_options | self.tool_options

    def loader_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return _pick(kwargs, self.loader_options)

    def scorer_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return _pick(kwargs, self.scorer_options)

    def tool_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return _pick(kwargs, self.tool_options)


def _stated(spec: BenchmarkSpec, what: str, fn: Callable[..., Any]) -> frozenset[str]:
    """The options ``fn`` takes: as ``spec`` states them (checked against ``fn``), or read from its signature."""
    params = inspect.signature(fn).parameters.values()
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    stated = getattr(spec, what)
    if stated is None:
        if var_kw:
            raise ConfigError(f"{spec.name}: {fn!r} takes **kwargs, so the spec must state {what}=")
        return frozenset(named)
    stated = frozenset(stated)
    if not var_kw and not stated <= named:
        raise ConfigError(f"{spec.name}: {what} names {', '.join(sorted(stated - named))}, which {fn!r} does not take")
    return stated


def _pick(kwargs: dict[str, Any], names: frozenset[str] | None) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k in (names or ())}


# benchmark name -> "module:attribute" of its BenchmarkSpec
SPEC_TABLE: dict[str, str] = {
    # the paper's ten benchmarks
    "Bamboogle": "benchmarks.paper.specs:BAMBOOGLE",
    "TwoWiki": "benchmarks.paper.specs:TWOWIKI",
    "HotpotQA": "benchmarks.paper.specs:HOTPOTQA",
    "Musique": "benchmarks.paper.specs:MUSIQUE",
    "GAIA": "benchmarks.paper.specs:GAIA",
    "AIME24": "benchmarks.paper.specs:AIME24",
    "AMC23": "benchmarks.paper.specs:AMC23",
    "GameOf24": "benchmarks.paper.specs:GAMEOF24",
    "GPQA": "benchmarks.paper.specs:GPQA",
    "MedQA": "benchmarks.paper.specs:MEDQA",
    "Gen-GameOf24": "benchmarks.synthetic.game24:SPEC",
    "Gen-MultiHop": "benchmarks.synthetic.multihop:SPEC",
    "Gen-Math": "benchmarks.synthetic.mathgen:SPEC",
    "Gen-Science": "benchmarks.synthetic.science:SPEC",
    "Gen-Agentic": "benchmarks.synthetic.agentic:SPEC",
    "Gen-HopChain": "benchmarks.synthetic.hopchain:SPEC",
}


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
) -> AgentFlowEnv | PaperFlowEnv:
    """Build the env of ``benchmark`` (the Gymnasium entry point of every ``agentflow/*`` id).

    Env kwargs (``max_turns``, ``executor``, ...) go to :class:`AgentFlowEnv`; the rest go to the
    task loader, the scorer and the tool factory (``data_dir``, ``num_tasks``, ``seed``, ...).

    ``mcp_servers`` adds the tools of MCP servers (a ``{"mcpServers": ...}`` mapping, a JSON file of one, or a
    list of ``{"command"|"url": ...}`` entries; see :mod:`agentflow_env.tools.mcp_tools`).

    ``grammar`` is the answer grammar the scorer reads with (``agentflow_env.scoring.versioned``): 2 (the
    default, and what the ``-v0``..``-v2`` ids use) up to 7 (the ``-v7`` ids); it applies to a given ``scorer=``
    too (a protocol's judge), except AgentFlow's own judge, which reads the raw output as AgentFlow does.
    Grammar 7 also reads actions with ``headers_first=True`` unless the option is given.

    ``flow="paper"`` builds :class:`~agentflow_env.paper_flow.PaperFlowEnv` instead: AgentFlow's solver
    module by module, with AgentFlow's toolbox (options ``engine``, ``tool_engine``, ``prompts``,
    ``toolbox``, ``sampling``, ``max_turns``, ``time_budget_s``, ``tool_timeout_s``,
    ``max_action_chars``). For the paper's
    benchmarks each question is AgentFlow's ``query`` field verbatim (``verbatim_query=True``), options
    are not shuffled unless ``shuffle_options=True`` is given, and the final output is graded by the
    LLM judge on ``engine`` (the project's judge reads its answer span) unless ``scoring``/``judge_engine``
    say otherwise; ``paper_settings["questions"]``
    records how questions were built.
    """
    flow = kwargs.pop("flow", "modes")
    mcp_servers = kwargs.pop("mcp_servers", None)
    grammar = grammar_version(kwargs.pop("grammar", DEFAULT_GRAMMAR))
    retriever = kwargs.pop("retriever", None)  # a Search-R1-style URL for every search tool
    if retriever is not None and flow == "paper":
        kwargs["wikipedia"] = make_tool("wikipedia", retriever=retriever)  # the Wikipedia tools' backend
    if flow not in FLOWS:
        raise ConfigError(f"flow={flow!r}; choose 'modes' (the env's own modules) or 'paper' (AgentFlow's solver)")
    spec = get_spec(benchmark)
    if flow == "paper":
        if mcp_servers is not None:
            raise ConfigError("mcp_servers works with the env's own flow; the paper flow runs AgentFlow's toolbox")
        return _make_paper_env(spec, split, tasks, scorer, tools, kwargs, grammar)
    # grammar 7 (the -v7 ids) reads a JSON object after a field header as that field's value (parse_action)
    defaults = {"max_turns": spec.max_turns, **spec.env_defaults, "headers_first": grammar >= 7}
    config = EnvConfig.pop_from(kwargs, defaults)
    _check_options(spec.name, kwargs, spec.options)
    split = split or spec.default_split
    task_source = tasks if tasks is not None else spec.load_tasks(split=split, **spec.loader_kwargs(kwargs))
    env_scorer = with_grammar(scorer if scorer is not None else spec.make_scorer(**spec.scorer_kwargs(kwargs)), grammar)
    if tools is not None:
        env_tools = list(tools)
    elif spec.make_tools is not None:  # a family whose corpus depends on the split gets the split too
        if retriever is not None:
            raise ConfigError(f"{benchmark} searches its own generated corpus; retriever= applies to corpus searches")
        env_tools = spec.make_tools(**spec.tool_kwargs({**kwargs, "split": split}))
    else:
        env_tools = [_make_tool(name, retriever) for name in spec.tools]
    if mcp_servers is not None:  # tools of MCP servers, added to the benchmark's (see agentflow_env.tools.mcp_tools)
        from agentflow_env.tools.mcp_tools import load_mcp_tools

        env_tools = [*env_tools, *load_mcp_tools(mcp_servers)]
    if config.engine is not None:  # LLM-backed tools built without an engine use the env's
        for tool in env_tools:
            attach = getattr(tool, "attach_engine", None)
            if callable(attach):
                attach(config.engine)
    return AgentFlowEnv(
        task_source, env_scorer, env_tools, instructions=spec.instructions, name=benchmark, **config.kwargs()
    )


def _make_paper_env(
    spec: BenchmarkSpec,
    split: str | None,
    tasks: TaskSource | None,
    scorer: Scorer | None,
    tools: Sequence[Tool] | None,
    kwargs: dict[str, Any],
    grammar: int = 2,
) -> PaperFlowEnv:
    from agentflow_env.paper_flow import PaperFlowEnv

    wikipedia = kwargs.pop("wikipedia", None)
    misplaced = sorted(k for k in kwargs if k in MODES_ONLY)
    if misplaced:
        raise ConfigError(
            f"flow='paper' runs AgentFlow's own modules and budgets; {', '.join(misplaced)} do not apply "
            f"(its options: {', '.join(sorted(PaperConfig.names()))})"
        )
    if kwargs.get("engine") is None:
        raise ConfigError("flow='paper' needs engine= (an Engine or a spec such as 'openai:MODEL@URL')")
    defaults = {"max_turns": spec.max_turns, **{k: v for k, v in spec.env_defaults.items() if k == "time_budget_s"}}
    config = PaperConfig.pop_from(kwargs, defaults)
    engine = config.engine
    if isinstance(engine, str):
        from agentflow_env.engines import make_engine

        engine = make_engine(engine)
    assert spec.loader_options is not None and spec.scorer_options is not None
    if "keep_instructions" in spec.loader_options:
        kwargs.setdefault("keep_instructions", True)  # the question as AgentFlow sends it
    questions: dict[str, Any] = {"text": "the benchmark's own questions"}
    if "verbatim_query" in spec.loader_options:
        kwargs.setdefault("verbatim_query", True)  # AgentFlow's `query` field, byte for byte
        questions = {"text": "AgentFlow's query field, verbatim" if kwargs["verbatim_query"] else "rebuilt"}
    if "shuffle_options" in spec.loader_options:
        kwargs.setdefault("shuffle_options", False)  # AgentFlow shows the file's option order
        questions["shuffle_options"] = bool(kwargs["shuffle_options"])
    if "scoring" in spec.scorer_options:
        kwargs.setdefault("scoring", "judge")  # AgentFlow's judge reads the whole final output
        if kwargs["scoring"] == "judge" and "judge_engine" in spec.scorer_options:
            kwargs.setdefault("judge_engine", engine)
    _check_options(spec.name, kwargs, spec.loader_options | spec.scorer_options)
    split = split or spec.default_split
    task_source = tasks if tasks is not None else spec.load_tasks(split=split, **spec.loader_kwargs(kwargs))
    env_scorer = with_grammar(scorer if scorer is not None else spec.make_scorer(**spec.scorer_kwargs(kwargs)), grammar)
    given: Any = tools  # PaperTool objects: a dict by AgentFlow name, or a sequence named by their .name
    runnable: dict[str, Any] | None = None
    if given is not None:
        runnable = dict(given) if isinstance(given, dict) else {t.name: t for t in given}
    return PaperFlowEnv(
        task_source,
        env_scorer,
        tools=runnable,
        wikipedia=wikipedia,
        name=f"{spec.name}-paper",
        extra_settings={"questions": questions},
        command_operators="all" if grammar >= 3 else "arithmetic",  # the -v0..-v2 ids keep their evaluator
        **{**config.kwargs(), "engine": engine},
    )


def _make_tool(name: str, retriever: Any) -> Tool:
    """A built-in tool; the search tools get ``retriever`` (a retrieval server's URL) when one is given."""
    if retriever is not None and name in ("search", "wikipedia"):
        return make_tool(name, retriever=retriever)
    return make_tool(name)


def _check_options(benchmark: str, kwargs: dict[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(set(kwargs) - known)
    if unknown:
        valid = sorted((known | EnvConfig.names()) - {"split"})
        raise ConfigError(
            f"{benchmark} does not take option(s) {', '.join(unknown)}; valid options: {', '.join(valid)}"
        )
