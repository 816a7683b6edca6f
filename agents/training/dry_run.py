"""``agentflow-env train --dry-run``: what a training run will cost before it starts, at a throughput you state.

Rollouts: ``steps x questions_per_step x group_size`` for training, plus the validation rollouts
(``eval_tasks x eval_samples`` at every ``eval_every`` steps and the last step, and at step 0 with
``eval_on_start``). Turns per
rollout: ``--dry-run-turns`` (default: the env's turn budget, an upper bound). Prompt tokens per turn: the
planner prompts of a few training tasks, measured (four characters per token, as the run ledger estimates);
completion tokens per turn: ``max_new_tokens`` (an upper bound). Tokens processed: one generation pass over
prompt and completion, ``ppo_epochs`` training passes, and one reference pass when ``beta > 0``; GPU-hours are
those tokens over ``--throughput`` tokens per second per GPU.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["estimate_training", "format_training_estimate"]


def _prompt_tokens(config: Any, samples: int = 4) -> tuple[float, int]:
    """The mean estimated prompt tokens of the first ``samples`` training tasks' first turn, and the turn budget."""
    import gymnasium as gym

    import agentflow_env  # noqa: F401  (registers the env ids)
    from agentflow_env.engines.ledger import estimate_tokens

    env = gym.make(config.env_id, split=config.train_split, **config.env_kwargs)
    try:
        counts = []
        for i in range(min(samples, len(env.unwrapped.tasks))):  # type: ignore[attr-defined]
            obs, _ = env.reset(seed=i, options={"index": i})
            counts.append(estimate_tokens(obs.get("prompt", obs) if isinstance(obs, dict) else obs))
        turns = int(getattr(env.unwrapped, "max_turns", 0) or config.env_kwargs.get("max_turns", 1))
    finally:
        env.close()
    return (sum(counts) / len(counts) if counts else 0.0), turns


def estimate_training(config: Any, throughput: float, turns: int | None = None) -> dict[str, Any]:
    """Rollouts, tokens and GPU-hours of ``config`` at ``throughput`` tokens per second per GPU."""
    from agentflow_env.error import ConfigError

    if throughput <= 0:
        raise ConfigError(f"--throughput must be > 0 tokens per second, got {throughput}")
    prompt, budget = _prompt_tokens(config)
    turns = budget if turns is None else int(turns)
    if turns < 1:
        raise ConfigError(f"--dry-run-turns must be >= 1, got {turns}")
    train = config.steps * config.questions_per_step * config.group_size
    evals = bool(config.eval_on_start)  # as the learner runs them: at step 0, every eval_every, and the last step
    if config.eval_every:
        evals += config.steps // config.eval_every + bool(config.steps % config.eval_every)
    validation = evals * config.eval_tasks * config.eval_samples
    per_turn = prompt + config.max_new_tokens
    rollout_tokens = train * turns * per_turn
    passes = 1 + config.ppo_epochs + (1 if config.beta > 0 else 0)
    processed = rollout_tokens * passes + validation * turns * per_turn
    return {
        "rollouts": {"train": train, "validation": validation},
        "turns_per_rollout": turns,
        "tokens_per_turn": {"prompt": round(prompt, 1), "completion_at_most": config.max_new_tokens},
        "tokens": {
            "prompt": round((train + validation) * turns * prompt),
            "completion_at_most": (train + validation) * turns * config.max_new_tokens,
            "processed": round(processed),
        },
        "passes_per_training_token": passes,
        "throughput_tokens_per_s": throughput,
        "gpu_hours": round(processed / throughput / 3600, 3),
        "note": "upper bounds: every rollout uses its turn budget and every action its max_new_tokens",
    }


def format_training_estimate(e: dict[str, Any]) -> str:
    r, t = e["rollouts"], e["tokens"]
    return "\n".join(
        [
            f"rollouts: {r['train']} training + {r['validation']} validation, {e['turns_per_rollout']} turns each",
            f"tokens per turn: {e['tokens_per_turn']['prompt']:.0f} prompt (measured), "
            f"<= {e['tokens_per_turn']['completion_at_most']} completion",
            f"tokens: {t['prompt']} prompt, <= {t['completion_at_most']} completion; {t['processed']} processed "
            f"({e['passes_per_training_token']} passes per training token)",
            f"GPU-hours at {e['throughput_tokens_per_s']:g} tokens/s per GPU: {e['gpu_hours']:.3g} "
            f"(about {math.ceil(e['gpu_hours'] * 60)} GPU-minutes)",
            f"note: {e['note']}",
        ]
    )
