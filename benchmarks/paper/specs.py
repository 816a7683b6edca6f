"""Each benchmark's scorer and its :class:`~benchmarks.specs.BenchmarkSpec` (the env registry reads these)."""

from __future__ import annotations

from functools import partial
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.scoring.base import Scorer
from agentflow_env.scoring.choice import ChoiceScorer
from agentflow_env.scoring.game24 import Game24Scorer
from agentflow_env.scoring.qa import QAScorer
from benchmarks.paper.catalog import _INSTRUCTIONS, BENCHMARKS, PAPER_MAX_TURNS, PAPER_TIME_BUDGET_S, PaperBenchmark
from benchmarks.paper.loading import load_paper_tasks, paper_size
from benchmarks.specs import BenchmarkSpec

__all__ = [
    "AIME24",
    "AMC23",
    "BAMBOOGLE",
    "GAIA",
    "GAMEOF24",
    "GPQA",
    "HOTPOTQA",
    "MEDQA",
    "MUSIQUE",
    "TWOWIKI",
    "make_paper_scorer",
]

_SCORERS = ("rule", "judge")


def make_paper_scorer(
    bench: PaperBenchmark,
    scoring: str = "rule",
    metric: str | None = None,
    judge_engine: Any = None,
    math_timeout_s: float = 5.0,
) -> Scorer:
    """The rule scorer of ``bench`` (default) or an LLM judge (``scoring='judge'``, ``judge_engine=``).

    (The env option is ``scoring``: ``make_env``'s own ``scorer=`` takes a ready scorer object.)
    """
    if scoring not in _SCORERS:
        raise ConfigError(f"scoring={scoring!r}; choose one of {', '.join(_SCORERS)}")
    if metric is not None and bench.kind not in ("qa", "gaia"):
        raise ConfigError(f"{bench.name} has no metric= option (only the QA benchmarks do: em, f1, cover, gaia)")
    if scoring == "judge":
        from agentflow_env.scoring.judge import JudgeScorer

        return JudgeScorer(judge_engine)
    if bench.kind in ("qa", "gaia"):
        return QAScorer(metric or ("gaia" if bench.kind == "gaia" else "em"))
    if bench.kind == "math":
        from agentflow_env.scoring.math import MathScorer

        return MathScorer(timeout_s=math_timeout_s)
    if bench.kind == "game24":
        return Game24Scorer()
    return ChoiceScorer()


# ------------------------------------------------------------------ specs
class _ScorerFactory:
    def __init__(self, bench: PaperBenchmark):
        self.bench = bench

    def __call__(
        self, scoring: str = "rule", metric: str | None = None, judge_engine: Any = None, math_timeout_s: float = 5.0
    ) -> Scorer:
        return make_paper_scorer(self.bench, scoring, metric, judge_engine, math_timeout_s)


def _spec(bench: PaperBenchmark) -> BenchmarkSpec:
    hub = bench.hub.describe() + (f", {bench.hub.note}" if bench.hub.note else "")
    return BenchmarkSpec(
        name=bench.name,
        family=bench.family,
        load_tasks=partial(load_paper_tasks, bench),  # make_env reads its keyword options
        make_scorer=_ScorerFactory(bench),
        tools=bench.tools,
        max_turns=PAPER_MAX_TURNS,
        source=f"AgentFlow file {bench.file}.json (data_dir= or $AGENTFLOW_DATA_DIR) | {hub}",
        description=f"{bench.about}. The paper evaluates the first {bench.paper_size} of {bench.known_size}.",
        instructions=_INSTRUCTIONS[bench.kind],
        size=lambda: paper_size(bench),
        env_defaults={"time_budget_s": PAPER_TIME_BUDGET_S},
    )


BAMBOOGLE = _spec(BENCHMARKS["Bamboogle"])
TWOWIKI = _spec(BENCHMARKS["TwoWiki"])
HOTPOTQA = _spec(BENCHMARKS["HotpotQA"])
MUSIQUE = _spec(BENCHMARKS["Musique"])
GAIA = _spec(BENCHMARKS["GAIA"])
AIME24 = _spec(BENCHMARKS["AIME24"])
AMC23 = _spec(BENCHMARKS["AMC23"])
GAMEOF24 = _spec(BENCHMARKS["GameOf24"])
GPQA = _spec(BENCHMARKS["GPQA"])
MEDQA = _spec(BENCHMARKS["MedQA"])
