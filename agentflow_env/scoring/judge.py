"""An LLM-judge scorer: an engine reads the question, the reference answer and the prediction and says
whether they agree (the paper grades its benchmarks this way); rule scorers remain the offline default.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from agentflow_env.engines.base import Engine, SamplingParams
from agentflow_env.error import ConfigError, EngineError
from agentflow_env.scoring.choice import render_options
from agentflow_env.scoring.qa import gold_aliases
from agentflow_env.types import Task

__all__ = ["JUDGE_PROMPT", "JudgeScorer", "build_judge_prompt", "parse_verdict"]

logger = logging.getLogger(__name__)

JUDGE_PROMPT = """You are grading one answer against a reference. Decide only whether the candidate answer \
states the same final result as the reference; ignore wording, formatting, units written differently, \
and extra explanation. A candidate that hedges between several results, or gives none, is wrong. \
For numbers, the values must be equal (equivalent forms such as 1/2 and 0.5 are equal). \
For multiple choice, the chosen option must be the reference option.

Question:
{question}
{options}
Reference answer: {reference}

Candidate answer: {candidate}

Reply with one short sentence of reasoning, then a last line that is exactly "Verdict: CORRECT" \
or "Verdict: INCORRECT"."""

_VERDICT = re.compile(r"verdict\s*[:：]?\s*\**\s*(correct|incorrect|right|wrong)", re.IGNORECASE)
_BARE = re.compile(r"\b(incorrect|correct)\b", re.IGNORECASE)


def build_judge_prompt(prediction: str, task: Task) -> str:
    """The judge prompt for one prediction (options are listed for multiple-choice tasks)."""
    options = task.metadata.get("options")
    options_text = f"Options:\n{render_options(options)}\n" if options else ""
    reference = " | ".join(gold_aliases(task.answer)) or "(none)"
    if options and str(task.answer).strip().upper() in "ABCDEFGHIJ" and len(str(task.answer).strip()) == 1:
        index = ord(str(task.answer).strip().upper()) - ord("A")
        if index < len(options):
            reference = f"{str(task.answer).strip().upper()}. {options[index]}"
    return JUDGE_PROMPT.format(
        question=task.question.strip(),
        options=options_text,
        reference=reference,
        candidate=prediction.strip() or "(empty)",
    )


def parse_verdict(text: str) -> bool | None:
    """``True``/``False`` from the judge's reply, ``None`` when it gave no verdict."""
    found = _VERDICT.findall(text or "")
    if found:
        return found[-1].lower() in ("correct", "right")
    bare = _BARE.findall(text or "")
    if len(set(w.lower() for w in bare)) == 1:
        return bare[0].lower() == "correct"
    return None


class JudgeScorer:
    """1.0 when the engine judges the prediction correct, else 0.0.

    ``engine`` is an :class:`~agentflow_env.engines.base.Engine` or a spec string for ``make_engine``.
    A reply without a verdict is retried ``retries`` times, then scores 0 (``unparsed`` counts them).
    """

    def __init__(self, engine: Engine | str, max_tokens: int = 256, retries: int = 1):
        if engine is None:
            raise ConfigError("scoring='judge' needs an engine: pass judge_engine=<Engine or engine spec string>")
        if isinstance(engine, str):
            try:
                from agentflow_env.engines import make_engine  # type: ignore[attr-defined]
            except ImportError as exc:
                raise ConfigError(f"cannot build the judge engine {engine!r}: {exc}; pass an Engine object") from None
            engine = make_engine(engine)
        if not callable(getattr(engine, "generate", None)):
            raise ConfigError(f"judge engine {engine!r} has no generate(prompts, sampling) method")
        self.engine: Any = engine
        self.sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens)
        self.retries = int(retries)
        self.unparsed = 0

    def __call__(self, prediction: str, task: Task) -> float:
        if not str(prediction).strip():
            return 0.0
        prompt = build_judge_prompt(str(prediction), task)
        for _ in range(self.retries + 1):
            replies = self.engine.generate([prompt], self.sampling)
            if not replies:
                raise EngineError("the judge engine returned no completion")
            verdict = parse_verdict(replies[0])
            if verdict is not None:
                return 1.0 if verdict else 0.0
        self.unparsed += 1
        logger.warning("judge gave no verdict for task %s; scored 0", task.id)
        return 0.0

    def score_batch(self, predictions: list[str], tasks: list[Task]) -> list[float]:
        """Judge many predictions with one batched engine call (unparsed replies score 0)."""
        prompts = [build_judge_prompt(str(p), t) for p, t in zip(predictions, tasks)]
        replies = self.engine.generate(prompts, self.sampling) if prompts else []
        out = []
        for pred, reply in zip(predictions, replies):
            verdict = parse_verdict(reply) if str(pred).strip() else False
            out.append(1.0 if verdict else 0.0)
        return out

    def __repr__(self) -> str:
        return f"JudgeScorer(engine={type(self.engine).__name__})"
