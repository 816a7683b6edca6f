"""One Flow-GRPO step on fixed rollouts; run by test_data_parallel.py in one process and under torchrun.

``python tests/dp_worker.py CONFIG.json BANK.pt OUT_DIR`` (under torchrun: one process per rank) plays no
episode: ``collect`` returns the rollouts of the bank (real tiny-LM rollouts, per question), so a single
process and the ranks of a data-parallel group train on exactly the same samples. Each rank saves its
gradients before and after the all-reduce, and its weights after the step, to ``OUT_DIR/rank{r}.pt``.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import torch

# run as a script, its folder (tests/) comes first on the path, and tests/agents/ would shadow the agents package
sys.path[0] = str(Path(__file__).resolve().parents[1])

from agents.training.config import FlowGRPOConfig  # noqa: E402
from agents.training.flow_grpo import FlowGRPOLearner  # noqa: E402
from agents.training.rollout import Rollouts  # noqa: E402


def split_by_question(rollouts: Rollouts, group_size: int) -> list[Rollouts]:
    """The rollouts of one collect call over several questions, one :class:`Rollouts` per question."""
    out = []
    for start in range(0, len(rollouts.rewards), group_size):
        part = slice(start, start + group_size)
        turns = rollouts.turns[part]
        out.append(
            Rollouts(
                rewards=rollouts.rewards[part],
                turns=turns,
                turn_rewards=rollouts.turn_rewards[part],
                scores=rollouts.scores[part],
                num_turns=sum(len(t) for t in turns),
            )
        )
    return out


def merge(parts: list[Rollouts]) -> Rollouts:
    return Rollouts(
        rewards=[r for p in parts for r in p.rewards],
        turns=[t for p in parts for t in p.turns],
        turn_rewards=[r for p in parts for r in p.turn_rewards],
        scores=[s for p in parts for s in p.scores],
        num_turns=sum(p.num_turns for p in parts),
    )


def one_step(config: FlowGRPOConfig, bank: list[Rollouts]) -> dict[str, Any]:
    """Train one step whose ``collect`` serves the bank; the gradients and weights it ends with."""
    learner = FlowGRPOLearner(config)
    learner.collect = lambda split, indices, group_size, seed, greedy=False: merge(  # type: ignore[method-assign]
        [copy.deepcopy(bank[i]) for i in indices]
    )
    local: dict[str, torch.Tensor] = {}
    reduce = learner.dp.all_reduce_grads

    def capture_then_reduce(params: Any) -> None:
        named = {id(p): n for n, p in learner.model.named_parameters()}
        for p in params:
            if p.grad is not None:
                local[named[id(p)]] = p.grad.detach().clone()
        reduce(params)

    learner.dp.all_reduce_grads = capture_then_reduce  # type: ignore[method-assign]
    metrics = learner.train_step()
    result = {
        "rank": learner.dp.rank,
        "world_size": learner.dp.world_size,
        "local_grads": local,
        "grads": {n: p.grad.detach().clone() for n, p in learner.model.named_parameters() if p.grad is not None},
        "params": {n: p.detach().clone() for n, p in learner.model.named_parameters()},
        "metrics": metrics,
    }
    learner.close()
    return result


def main(config_path: str, bank_path: str, out_dir: str) -> None:
    config = FlowGRPOConfig.from_dict(json.loads(Path(config_path).read_text(encoding="utf-8")))
    bank = torch.load(bank_path, weights_only=False)
    result = one_step(config, bank)
    torch.save(result, Path(out_dir) / f"rank{result['rank']}.pt")


if __name__ == "__main__":
    main(*sys.argv[1:4])
