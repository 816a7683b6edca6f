"""A judge's fingerprint: which engine, which model and which prompt graded a run, as results record it.

Two judged runs compare only when their fingerprints agree: the engine spec (the endpoint and its options),
the model the engine names, and a hash of the judge's instructions and settings (for AgentFlow's judge, the
fingerprint of the grading text read from its checkout).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["judge_fingerprint"]


def _model(engine: Any, spec: str | None) -> str | None:
    model = getattr(engine, "model", None)
    if isinstance(model, str):
        return model
    if spec:
        from agentflow_env.engines import parse_spec

        try:
            return parse_spec(spec)[1].split("@http", 1)[0]
        except Exception:  # a spec this process cannot parse: the spec still says it
            return None
    return None


def judge_fingerprint(scorer: Any) -> dict[str, Any] | None:
    """``{"engine", "model", "prompt_hash", "rules"}`` of an LLM-judge scorer (``None`` for a rule scorer)."""
    from agentflow_env.scoring import scorer_kind

    if scorer is None or scorer_kind(scorer) != "judge":
        return None
    engine = getattr(scorer, "engine", None)
    spec = getattr(scorer, "spec", None) or getattr(engine, "spec", None)
    agentflow = getattr(scorer, "scoring", None)
    if agentflow is not None and hasattr(agentflow, "fingerprint"):
        prompt_hash, rules = str(agentflow.fingerprint), "agentflow"
    else:
        from agentflow_env.scoring import judge as builtin

        text = json.dumps(
            [
                builtin.JUDGE_INSTRUCTIONS,
                builtin._GAME24_RULE,
                getattr(getattr(scorer, "sampling", None), "max_tokens", None),
                getattr(scorer, "retries", None),
                getattr(scorer, "max_candidate_chars", None),
            ],
            default=str,
        )
        prompt_hash, rules = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], "builtin"
    return {
        "engine": spec if isinstance(spec, str) else type(engine).__name__,
        "model": _model(engine, spec if isinstance(spec, str) else None),
        "prompt_hash": prompt_hash,
        "rules": rules,
    }
