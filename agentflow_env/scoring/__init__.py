"""Scorers: (prediction, task) -> [0, 1].

``make_scorer(name, ...)`` builds one by name, for protocols and configs that name their scorer:

- ``"judge"``: the LLM judge (:class:`~agentflow_env.scoring.judge.JudgeScorer`), needs ``judge_engine``;
- ``"em"``, ``"f1"``, ``"cover"``, ``"gaia"``: QA rules; ``"math"``: numeric/symbolic equality;
  ``"choice"``: multiple-choice letter; ``"game24"``: the exact Game-of-24 checker.

Scorer modules import only when named (the math scorer pulls in sympy).
"""

from __future__ import annotations

from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.scoring.base import Scorer

__all__ = ["SCORER_NAMES", "Scorer", "make_scorer", "scorer_kind"]

SCORER_NAMES = ("judge", "em", "f1", "cover", "gaia", "math", "choice", "game24")
# AgentFlow's own judge lives in paper_flow, which builds on scoring; the registry names it by a string entry
# point (as registration names benchmarks.specs:make_env) so scoring never imports the layer above it
AGENTFLOW_JUDGE = "agentflow_env.paper_flow.agentflow_judge:AgentFlowJudge"


def _load(entry_point: str) -> Any:
    from importlib import import_module

    module, _, attr = entry_point.partition(":")
    return getattr(import_module(module), attr)


def make_scorer(name: str, *, judge_engine: Any = None, **options: Any) -> Scorer:
    """The scorer called ``name`` (see the module doc); ``options`` go to its constructor."""
    if name == "judge":
        from agentflow_env.scoring.judge import JudgeScorer

        if judge_engine is None:
            raise ConfigError(
                'scorer "judge" needs a judge engine: set [judge] engine = "..." in the protocol, '
                "pass --judge-engine SPEC, or judge_engine=<Engine or spec string>"
            )
        rules = options.pop("rules", "builtin")
        if isinstance(rules, str) and rules.startswith("agentflow:"):  # AgentFlow's grading, from its checkout
            judge_class = _load(AGENTFLOW_JUDGE)  # paper_flow is a layer above scoring: named, not imported
            return judge_class(judge_engine, rules[len("agentflow:") :], **options)
        if rules != "builtin":
            raise ConfigError(f'judge rules={rules!r}; use "builtin" (this project\'s judge) or "agentflow:PATH"')
        return JudgeScorer(judge_engine, **options)
    if name in ("em", "f1", "cover", "gaia"):
        from agentflow_env.scoring.qa import QAScorer

        return QAScorer(name, **options)
    if name == "math":
        from agentflow_env.scoring.math import MathScorer

        return MathScorer(**options)
    if name == "choice":
        from agentflow_env.scoring.choice import ChoiceScorer

        return ChoiceScorer(**options)
    if name == "game24":
        from agentflow_env.scoring.game24 import Game24Scorer

        return Game24Scorer(**options)
    raise ConfigError(f"unknown scorer {name!r}; choose one of {', '.join(SCORER_NAMES)} (or 'default' in a protocol)")


def scorer_kind(scorer: Any) -> str:
    """``"judge"`` for an LLM judge, else ``"rule"`` (exact match, numeric equality, checkers)."""
    return "judge" if getattr(scorer, "kind", None) == "judge" else "rule"
