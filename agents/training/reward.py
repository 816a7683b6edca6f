"""The training reward AgentFlow uses: 1 when a judge accepts the planner's final answer, else 0.

AgentFlow's trainer asks an LLM judge whether the final answer matches the gold (a binary outcome reward,
the same for every turn of the rollout). :class:`OutcomeReward` takes that judge as a scorer object
(anything with ``__call__(prediction, task) -> [0, 1]``): the project's
:class:`~agentflow_env.scoring.judge.JudgeScorer` over any engine, or AgentFlow's own judge read from the
user's AgentFlow checkout (``rules="agentflow:PATH"``). The rule scorers (exact match for search,
numeric/symbolic equality for math; :func:`rule_scorer`) are the cheaper, offline alternative: no model call,
though stricter than a judge about wording.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.scoring import make_scorer
from agentflow_env.types import Task

__all__ = ["OutcomeReward", "RuleScorer", "make_training_reward", "rule_scorer"]


class RuleScorer:
    """Each task scored by the rule its set names (``metadata["scorer"]``, else by family: math -> ``math``,
    search -> ``em``); scorers are built once per name."""

    kind = "rule"

    def __init__(self) -> None:
        self._scorers: dict[str, Any] = {}

    def __call__(self, prediction: str, task: Task) -> float:
        name = task.metadata.get("scorer") or ("math" if task.family == "math" else "em")
        if name not in self._scorers:
            self._scorers[name] = make_scorer(name)
        return float(self._scorers[name](prediction, task))


def rule_scorer() -> RuleScorer:
    return RuleScorer()


class OutcomeReward:
    """``reward(trajectory)``: 1.0 when ``scorer`` accepts the trajectory's final answer for its task, else 0.0.

    ``tasks`` are the training tasks (looked up by the trajectory's ``task_id``). A rollout with no final
    answer gets 0 without a scorer call. ``threshold``: the score that counts as accepted (a judge gives 0/1;
    a partial-credit rule scorer such as F1 is cut there).
    """

    def __init__(self, scorer: Any, tasks: Iterable[Task] | Mapping[str, Task], threshold: float = 1.0):
        if not callable(scorer):
            raise ConfigError(f"the reward's scorer {scorer!r} is not callable as scorer(prediction, task)")
        self.scorer = scorer
        self.tasks = dict(tasks) if isinstance(tasks, Mapping) else {t.id: t for t in tasks}
        self.threshold = float(threshold)
        self.calls = 0

    def __call__(self, trajectory: Any) -> float:
        task = self.tasks.get(str(trajectory.task_id))
        if task is None:
            raise ConfigError(f"trajectory of task {trajectory.task_id!r}, which is not among the reward's tasks")
        answer = trajectory.answer
        if answer is None or not str(answer).strip():
            return 0.0
        self.calls += 1
        return 1.0 if float(self.scorer(str(answer), task)) >= self.threshold else 0.0


def make_training_reward(
    tasks: Iterable[Task] | Mapping[str, Task], judge: Any = None, rules: str = "builtin", threshold: float = 1.0
) -> OutcomeReward:
    """AgentFlow's reward over ``tasks``. ``judge``: a scorer object, or an :class:`~agentflow_env.engines.base.Engine`
    or engine spec string that answers the judge's prompts: the project's (``rules="builtin"``) or AgentFlow's,
    read from its checkout (``rules="agentflow:PATH"``); ``None`` uses the rule scorers."""
    if judge is None:
        scorer: Any = RuleScorer()
    elif isinstance(judge, str) or callable(getattr(judge, "generate", None)):
        scorer = make_scorer("judge", judge_engine=judge, rules=rules)
    else:
        scorer = judge
    return OutcomeReward(scorer, tasks, threshold)
