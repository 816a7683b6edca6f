"""Flow-GRPO: on-policy training of the planner inside the live multi-turn loop.

:class:`FlowGRPOLearner` has one method per phase, in reading order: ``collect_step`` -> ``score`` ->
``advantages`` -> ``update`` -> ``evaluate`` -> ``save_checkpoint``; ``train`` at the bottom is the loop over
them. The maths live in :mod:`agents.training.objectives`, the token layout in :mod:`agents.training.packing`.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import logging
import math
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agentflow_env.engines.base import SamplingParams
from agentflow_env.scoring.intervals import wilson_interval
from agents.policies.tool_calling import set_tool_mode
from agents.training.backends import make_backend
from agents.training.config import FlowGRPOConfig, load_callable
from agents.training.data_parallel import DataParallel, even_bounds, minibatch_count
from agents.training.objectives import (
    broadcast_to_turns,
    flow_grpo_loss,
    group_advantages,
    masked_mean,
    returns_to_go_advantages,
    rft_loss,
    turn_weights,
)
from agents.training.packing import TurnSample, pack_samples, pad_values, token_logprobs
from agents.training.rollout import Rollouts, RolloutStats, to_rollouts
from agents.training.rollout_correction import MismatchStats, tis_enabled, truncated_importance_weights
from agents.training.runtime import load_policy_model, resolve_device, rng_state, set_rng_state, set_seed

if TYPE_CHECKING:
    import torch

__all__ = ["FlowGRPOLearner", "Rollouts", "train"]

logger = logging.getLogger(__name__)


class FlowGRPOLearner:
    """Holds the policy, its reference, the optimizer, the envs and the logs of one training run."""

    def __init__(self, config: FlowGRPOConfig):
        import torch

        self.config = config
        if config.threads:
            torch.set_num_threads(config.threads)
        self.device = resolve_device(config)
        self.dp = DataParallel.from_env(self.device)  # torchrun / accelerate launch: one rank per process
        if config.questions_per_step < self.dp.world_size:
            from agentflow_env.error import ConfigError

            raise ConfigError(
                f"questions_per_step={config.questions_per_step} is less than the {self.dp.world_size} data-parallel "
                "ranks; every rank needs at least one question per step"
            )
        self.out = Path(config.output_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        set_seed(config.seed)
        model, self.tokenizer, self.model_path = load_policy_model(config)
        self.pad_id = int(self.tokenizer.pad_token_id)
        cuda = self.device == "cuda"
        self.autocast_dtype = None
        if config.dtype == "bfloat16" or (config.dtype == "auto" and cuda):
            self.autocast_dtype = torch.bfloat16
        model.to(self.device)
        self.dp.broadcast_parameters(model)  # every rank starts from rank 0's weights
        self.reference = None
        if config.reference == "copy" and config.beta > 0 and config.algorithm == "flow_grpo":
            self.reference = copy.deepcopy(model).eval()
            for p in self.reference.parameters():
                p.requires_grad_(False)
        if config.lora:
            model = self._wrap_lora(model)
            self.dp.broadcast_parameters(model)
        checkpointing = config.gradient_checkpointing == "on" or (config.gradient_checkpointing == "auto" and cuda)
        if checkpointing:
            model.config.use_cache = False
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if config.lora:
                model.enable_input_require_grads()
        self.model = model
        # the shared-prompt forward needs a key/value cache, which gradient checkpointing turns off
        self._share_prompts = config.share_prompts and not checkpointing
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params,
            lr=config.learning_rate,
            weight_decay=config.weight_decay,
            betas=(config.adam_betas[0], config.adam_betas[1]),
        )
        self.step = 0
        self.sampling = SamplingParams(
            temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_new_tokens
        )
        self.backend = make_backend(
            config.backend,
            self.model,
            self.tokenizer,
            self.sampling,
            model_path=self.model_path,
            seed=config.seed,
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            autocast_dtype=self.autocast_dtype,
            sync_tolerance=config.vllm_sync_tolerance or None,
            tool_calling=config.tool_calling,
        )
        self._tis = tis_enabled(config)
        self._mismatch = MismatchStats()
        self._reward_fn = load_callable(config.reward_fn) if config.reward_fn else None
        self._tasks: dict[str, Any] = {}
        self._runners: dict[tuple[str, int], Any] = {}
        self.rollout_stats = RolloutStats()  # env vs policy seconds of every collect, summed over the run
        self._metrics_file = self.out / "metrics.jsonl"
        self._tb: Any = None

    def _wrap_lora(self, model: Any) -> Any:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as exc:
            from agentflow_env.error import DependencyNotInstalled

            raise DependencyNotInstalled("peft", "train") from exc
        targets = self.config.lora_target_modules
        target: Any = targets[0] if targets == ["all-linear"] else list(targets)
        lora = LoraConfig(
            r=self.config.lora_r,
            lora_alpha=self.config.lora_alpha,
            lora_dropout=self.config.lora_dropout,
            target_modules=target,
            task_type="CAUSAL_LM",
        )
        return get_peft_model(model, lora)

    # ------------------------------------------------------------------ one step: the phases in order
    def train_step(self) -> dict[str, float]:
        """collect (and score) -> advantages -> update, for one batch of B questions x G rollouts."""
        import torch

        started = time.perf_counter()
        torch.manual_seed(_step_seed(self.config.seed, self.step) + self.dp.rank)  # sampling: (seed, step, rank)
        rollouts = self.collect_step()
        rollout_s = time.perf_counter() - started
        samples, zero_groups = self.advantages(rollouts)
        update_started = time.perf_counter()
        stats = self.update(samples)
        update_s = time.perf_counter() - update_started
        self.step += 1
        timings = {"started": started, "rollout_s": rollout_s, "update_s": update_s}
        return self._step_metrics(rollouts, samples, zero_groups, stats, timings)

    # ------------------------------------------------------------------ phase 1: collect
    def collect_step(self) -> Rollouts:
        """Phase 1, collect: this step's B questions x G rollouts with the current policy, scored."""
        cfg = self.config
        self.backend.sync_weights(self.model)
        task_rng = np.random.default_rng([cfg.seed, self.step])
        n_tasks = len(self.tasks(cfg.train_split))
        questions = task_rng.choice(n_tasks, size=cfg.questions_per_step, replace=n_tasks < cfg.questions_per_step)
        first, stop = self.dp.shard(len(questions))  # data-parallel: this rank's share (whole groups)
        return self.collect(
            cfg.train_split,
            [int(q) for q in questions[first:stop]],
            cfg.group_size,
            seed=_step_seed(cfg.seed, self.step) + first * cfg.group_size,  # each episode's env seed as in one process
        )

    def collect(
        self, split: str, task_indices: Sequence[int], group_size: int, seed: int, temperature: float | None = None
    ) -> Rollouts:
        """Play every task ``group_size`` times (group order, one batched generation per turn; ``temperature``, 0
        greedy, replaces the rollouts') and score it."""
        from agents.training.rollout import collect_group_rollouts

        tasks = self.tasks(split)
        task_ids = [tasks[i].id for i in task_indices]
        count = len(task_ids) * group_size
        runner = self.runner(split, min(count, self.config.concurrency) if self.config.concurrency > 0 else count)
        saved = self.backend.sampling
        if temperature == 0:
            self.backend.sampling = SamplingParams(temperature=0.0, max_tokens=saved.max_tokens)
        elif temperature is not None:
            self.backend.sampling = dataclasses.replace(saved, temperature=float(temperature))
        try:
            groups = collect_group_rollouts(
                runner,
                self.backend,
                task_ids,
                group_size=group_size,
                seed=seed,
                env_id=self.config.env_id,
                stats=self.rollout_stats,
            )
        finally:
            self.backend.sampling = saved
        return self.score([t for group in groups for t in group])

    def tasks(self, split: str) -> Any:
        """The task source of ``split``, loaded once and shared by every env of that split."""
        if split not in self._tasks:
            env = self._make_env(split)
            self._tasks[split] = env.unwrapped.tasks
            env.close()
        return self._tasks[split]

    def runner(self, split: str, count: int) -> Any:
        """A vector env of ``count`` envs of ``split`` (built once per size, reused every step)."""
        from agentflow_env.vector.threaded import ThreadedVectorEnv

        key = (split, count)
        if key not in self._runners:
            tasks = self.tasks(split)
            self._runners[key] = ThreadedVectorEnv(
                [lambda: self._make_env(split, tasks)] * count, autoreset_mode="disabled"
            )
        return self._runners[key]

    def _make_env(self, split: str, tasks: Any = None) -> Any:
        import gymnasium as gym

        import agentflow_env  # noqa: F401  (registers the ids)

        extra = {"tasks": tasks} if tasks is not None else {}
        env = gym.make(self.config.env_id, split=split, **self.config.env_kwargs, **extra)
        if self.config.tool_calling:
            set_tool_mode(env)
        return env

    # ------------------------------------------------------------------ phase 2: score
    def score(self, trajectories: Sequence[Any]) -> Rollouts:
        """Phase 2, score: each trajectory's reward (the env's, or ``config.reward_fn``'s) and its turn samples."""
        return to_rollouts(trajectories, self._reward_fn)

    # ------------------------------------------------------------------ phase 3: advantages
    def advantages(self, rollouts: Rollouts) -> tuple[list[TurnSample], int]:
        """Phase 3, advantages: the turn samples to train on, each with its advantage and loss weight, and the
        number of groups whose advantages are all zero.

        The advantage is the group-normalised outcome broadcast to every turn of each rollout (or each turn's
        group-normalised discounted return from there on, ``advantage=returns_to_go``).
        """
        import torch

        cfg = self.config
        rewards = torch.tensor(rollouts.rewards, dtype=torch.float32)
        scale_std = cfg.scale_rewards == "group"
        if cfg.advantage == "returns_to_go":
            per_turn = returns_to_go_advantages(
                rollouts.turn_rewards, cfg.group_size, cfg.gamma, scale_std, cfg.adv_eps
            )
            turn_adv = torch.tensor([a for adv in per_turn for a in adv], dtype=torch.float32)
        else:
            advantages = group_advantages(rewards, cfg.group_size, scale_std=scale_std, eps=cfg.adv_eps)
            turn_adv = broadcast_to_turns(advantages, [len(t) for t in rollouts.turns])
        rollout_adv = torch.stack([a.abs().sum() for a in turn_adv.split([len(t) for t in rollouts.turns])])
        zero_groups = int((rollout_adv.reshape(-1, cfg.group_size).sum(1) == 0).sum())
        samples = [s for turns in rollouts.turns for s in turns]
        for s, a in zip(samples, turn_adv.tolist()):
            s.advantage = a
        kept = [
            [s for s in turns if s.response_ids]
            for r, turns in zip(rollouts.rewards, rollouts.turns)
            # rft, the baseline: imitate the turns of successful rollouts, drop the rest
            if cfg.algorithm != "rft" or r >= cfg.rft_threshold
        ]
        samples = [s for turns in kept for s in turns]
        for s, w in zip(samples, turn_weights([len(t) for t in kept], cfg.loss_aggregation)):
            s.weight = w
        return samples, zero_groups

    # ------------------------------------------------------------------ phase 4: loss and update
    def update(self, samples: list[TurnSample]) -> dict[str, float]:
        """Phase 4, loss and update: PPO epochs over shuffled minibatches of the turn samples."""
        n_global = int(self.dp.sum([len(samples)])[0])  # every rank's turn samples
        return self._update(samples, n_global) if n_global else {}

    def _update(self, samples: list[TurnSample], n_global: int) -> dict[str, float]:
        """PPO epochs over shuffled minibatches of this rank's turns (``n_global``: all ranks' turns)."""
        import torch

        cfg = self.config
        # one pass over one minibatch: the policy has not moved yet, so old log-probs are the current
        # ones detached (saves a forward); otherwise they are frozen before the first update
        if cfg.algorithm == "flow_grpo" and (cfg.ppo_epochs > 1 or n_global > cfg.minibatch_size):
            self._fill_old_and_ref_logprobs(samples)
        gen = torch.Generator().manual_seed(_step_seed(cfg.seed, self.step) + 1)
        # data-parallel: all ranks cut as many minibatches (same optimizer steps); minibatch j = all j-th slices
        slices = minibatch_count(n_global, max(self.dp.gather(len(samples))), cfg.minibatch_size)
        totals: dict[str, float] = {}
        updates = 0
        self.model.train()
        for _epoch in range(cfg.ppo_epochs):
            order = torch.randperm(len(samples), generator=gen).tolist()
            if self.dp.enabled:
                parts = [order[a:b] for a, b in even_bounds(len(order), slices)]
            else:
                parts = [
                    order[start : start + cfg.minibatch_size] for start in range(0, len(order), cfg.minibatch_size)
                ]
            for part in parts:
                for k, v in self._minibatch_update([samples[i] for i in part]).items():
                    totals[k] = totals.get(k, 0.0) + v
                updates += 1
        stats = {k: v / max(updates, 1) for k, v in totals.items()}
        if self.dp.enabled:  # each rank's sums are its share of the minibatch means: add them up
            ranks = self.dp.gather(stats)
            stats = {k: sum(r.get(k, 0.0) for r in ranks) for k in sorted(set().union(*ranks))}
            stats["losses/grad_norm"] = ranks[0]["losses/grad_norm"]  # the same all-reduced gradient everywhere
        return {**stats, **self._mismatch.flush()}

    def _minibatch_update(self, minibatch: list[TurnSample]) -> dict[str, float]:
        import torch

        cfg = self.config
        self.optimizer.zero_grad(set_to_none=True)
        micro = max(math.ceil(len(minibatch) / cfg.grad_accum_steps), 1)
        # the loss is the weighted mean over the turns of the whole minibatch, every rank's included: each
        # rank divides by the total weight, so the all-reduced sum of gradients is the gradient of that mean
        total_weight = self.dp.sum([sum(s.weight for s in minibatch)])[0]
        sums: dict[str, float] = {}
        for start in range(0, len(minibatch), micro):
            chunk = minibatch[start : start + micro]
            weight = sum(s.weight for s in chunk) / total_weight  # micro-batch means add up to the minibatch mean
            batch = pack_samples(chunk, self.pad_id, self.device, self._share_prompts)
            with self._autocast():
                logp, entropy = token_logprobs(self.model, batch, cfg.temperature, with_entropy=True)
            loss, parts = self._chunk_loss(chunk, batch, logp)
            (loss * weight).backward()
            assert entropy is not None
            parts["losses/loss"] = float(loss.detach())
            parts["losses/entropy"] = float(masked_mean(entropy.detach(), batch["mask"]).mean())
            for k, v in parts.items():
                sums[k] = sums.get(k, 0.0) + v * weight
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.dp.all_reduce_grads(params)
        norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf"))
        sums["losses/grad_norm"] = float(norm)
        self.optimizer.step()
        return sums

    def _chunk_loss(
        self, chunk: list[TurnSample], batch: dict[str, torch.Tensor], logp: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The objective of ``config.algorithm`` on one micro-batch, and its parts for the logs."""
        import torch

        cfg = self.config
        weights = torch.tensor([s.weight for s in chunk], dtype=torch.float32, device=logp.device)
        if cfg.algorithm == "rft":  # no importance ratio, no clipping, no KL
            nll = rft_loss(logp, batch["mask"], weights)
            return nll, {"losses/policy_loss": float(nll.detach()), "losses/kl": 0.0, "losses/clip_fraction": 0.0}
        if chunk[0].old_logprobs:
            old = pad_values([s.old_logprobs for s in chunk], batch["mask"])
        else:
            old = logp.detach()
        ref = None
        if self._use_kl and chunk[0].ref_logprobs:
            ref = pad_values([s.ref_logprobs for s in chunk], batch["mask"])
        elif self._use_kl:
            with torch.no_grad(), self._autocast():
                ref = self._reference_logprobs(batch).float()
        adv = torch.tensor([s.advantage for s in chunk], dtype=torch.float32, device=logp.device)
        tis = None
        if self._tis and all(len(s.rollout_logprobs) == len(s.response_ids) for s in chunk):
            rollout = pad_values([s.rollout_logprobs for s in chunk], batch["mask"])
            tis, mismatch = truncated_importance_weights(old, rollout, batch["mask"], cfg.tis_imp_ratio_cap)
            self._mismatch.add(mismatch)
        out = flow_grpo_loss(
            logp,
            old,
            adv,
            batch["mask"],
            ref,
            eps_low=cfg.eps_low,
            eps_high=cfg.eps_high,
            beta=cfg.beta if self._use_kl else 0.0,
            token_weights=tis,
            weights=weights,
        )
        return out.loss, {
            "losses/policy_loss": out.policy_loss,
            "losses/kl": out.kl,
            "losses/clip_fraction": out.clip_fraction,
            "losses/ratio": out.ratio_mean,
        }

    @property
    def _use_kl(self) -> bool:
        cfg = self.config
        return cfg.algorithm == "flow_grpo" and cfg.beta > 0 and cfg.reference != "none"

    def _fill_old_and_ref_logprobs(self, samples: list[TurnSample]) -> None:
        """Log-probs of the rollout policy (recomputed with the training forward, so the first ratio is
        exactly 1) and of the frozen reference, in no-grad batches."""
        import torch

        self.model.eval()
        size = self.config.minibatch_size
        with torch.no_grad():
            for start in range(0, len(samples), size):
                chunk = samples[start : start + size]
                batch = pack_samples(chunk, self.pad_id, self.device, self._share_prompts)
                with self._autocast():
                    old, _ = token_logprobs(self.model, batch, self.config.temperature)
                    ref = self._reference_logprobs(batch) if self._use_kl else None
                for i, s in enumerate(chunk):
                    n = len(s.response_ids)
                    s.old_logprobs = old[i, :n].float().tolist()
                    if ref is not None:
                        s.ref_logprobs = ref[i, :n].float().tolist()

    def _reference_logprobs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.config.reference == "lora_disabled":
            with self.model.disable_adapter():
                return token_logprobs(self.model, batch, self.config.temperature)[0]
        assert self.reference is not None
        return token_logprobs(self.reference, batch, self.config.temperature)[0]

    def _autocast(self) -> Any:
        import contextlib

        import torch

        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device, dtype=self.autocast_dtype)

    # ------------------------------------------------------------------ the step's log line
    def _step_metrics(
        self,
        rollouts: Rollouts,
        samples: list[TurnSample],
        zero_groups: int,
        stats: dict[str, float],
        timings: dict[str, float],
    ) -> dict[str, float]:
        """The step's log line: the counts of every rank (data-parallel) or of this process."""
        import torch

        cfg = self.config
        local = [
            float(torch.tensor(rollouts.rewards, dtype=torch.float32).sum()),
            float(sum(score >= 1.0 for score in rollouts.scores)),
            float(len(rollouts.rewards)),
            float(rollouts.num_turns),
            float(rollouts.tool_errors),
            float(rollouts.generated_tokens),
            float(len(samples)),
            float(zero_groups),
            float(sum(len(s.prompt_ids) + len(s.response_ids) for s in samples) * cfg.ppo_epochs),
        ]
        reward, successes, n_traj, n_turns, tool_errors, gen_tokens, trained, zero_groups_all, trained_tokens = (
            self.dp.sum(local)
        )
        rollout_s, update_s = timings["rollout_s"], timings["update_s"]
        return {
            "rollout/reward": reward / max(n_traj, 1),
            "rollout/success_rate": successes / max(n_traj, 1),
            "rollout/turns": n_turns / max(n_traj, 1),
            "rollout/tool_error_rate": tool_errors / max(n_turns, 1),
            "rollout/response_tokens": gen_tokens / max(n_turns, 1),
            "rollout/trained_turns": trained,
            "rollout/zero_advantage_groups": zero_groups_all * cfg.group_size / max(n_traj, 1),
            **stats,
            "perf/rollout_s": rollout_s,
            "perf/update_s": update_s,
            "perf/step_s": time.perf_counter() - timings["started"],
            "perf/tokens_per_s": trained_tokens / max(update_s, 1e-9),
            "perf/rollout_tokens_per_s": gen_tokens / max(rollout_s, 1e-9),
        }

    # ------------------------------------------------------------------ phase 5: evaluation
    def evaluate(self, split: str | None = None, num_tasks: int | None = None) -> dict[str, float]:
        """Success (Wilson 95% interval over episodes), mean score: ``eval_samples`` a task at ``eval_temperature``."""
        import torch

        cfg = self.config
        split = split or cfg.eval_split
        n = min(num_tasks or cfg.eval_tasks, len(self.tasks(split)))
        self.backend.sync_weights(self.model)
        first, stop = self.dp.shard(n)  # data-parallel: each rank plays its share, the counts are summed
        scores: list[float] = []
        turns = 0
        if stop > first:  # the same random numbers at every evaluation: two differ only by the policy
            with torch.random.fork_rng():  # the training's random stream is left as it was
                torch.manual_seed(_step_seed(cfg.seed, -1) + first)
                k, indices = cfg.eval_samples, list(range(first, stop))
                rollouts = self.collect(split, indices, k, cfg.seed + first * k, cfg.eval_temperature)
            scores, turns = rollouts.scores, rollouts.num_turns
        successes, total, turns_sum, count = self.dp.sum(
            [sum(s >= 1.0 for s in scores), sum(scores), turns, len(scores)]
        )
        low, high = wilson_interval(successes, int(count))
        env_id = cfg.env_id.split("/", 1)[-1]
        return {
            f"eval/{env_id}/success": successes / max(count, 1),
            f"eval/{env_id}/success_ci95_low": low,
            f"eval/{env_id}/success_ci95_high": high,
            f"eval/{env_id}/episodes": float(count),
            f"eval/{env_id}/score": total / max(count, 1),
            f"eval/{env_id}/turns": turns_sum / max(count, 1),
        }

    # ------------------------------------------------------------------ phase 6: logs and checkpoints
    def log(self, metrics: dict[str, float]) -> None:
        if not self.dp.is_main:  # one log per run: rank 0's (its metrics are already summed over ranks)
            return
        record = {"step": self.step, **{k: float(v) for k, v in metrics.items()}}
        with self._metrics_file.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.config.tensorboard:
            if self._tb is None:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.out / "tensorboard"))
            for k, v in metrics.items():
                self._tb.add_scalar(k, float(v), self.step)
            self._tb.flush()

    def save_checkpoint(self) -> Path:
        """The state of this step (rank 0 writes it: the ranks hold the same weights); every rank waits for it."""
        folder = self.out / "checkpoints" / f"step-{self.step:06d}"
        if self.dp.is_main:
            self._write_checkpoint(folder)
        self.dp.barrier()
        return folder

    def _write_checkpoint(self, folder: Path) -> None:
        import torch

        tmp = folder.with_name(folder.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        trainable = {k: v for k, v in self.model.state_dict().items()}
        torch.save(
            {
                "model": trainable,
                "optimizer": self.optimizer.state_dict(),
                "rng": rng_state(),
                "step": self.step,
                "config": self.config.to_dict(),
            },
            tmp / "state.pt",
        )
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
        self._prune_checkpoints()

    def _prune_checkpoints(self) -> None:
        keep = self.config.keep_checkpoints
        if keep <= 0:
            return
        folders = sorted(p for p in (self.out / "checkpoints").glob("step-*") if not p.name.endswith(".tmp"))
        for old in folders[:-keep]:
            shutil.rmtree(old, ignore_errors=True)

    def latest_checkpoint(self) -> Path | None:
        folders = sorted(
            p
            for p in (self.out / "checkpoints").glob("step-*")
            if not p.name.endswith(".tmp") and (p / "state.pt").is_file()
        )
        return folders[-1] if folders else None

    def load_checkpoint(self, folder: Path) -> None:
        import torch

        state = torch.load(folder / "state.pt", map_location=self.device, weights_only=False)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        self.step = int(state["step"])
        if self.dp.is_main:
            self._truncate_metrics(self.step)
        logger.info("resumed from %s at step %d", folder, self.step)

    def _truncate_metrics(self, step: int) -> None:
        """A killed run may have logged steps after its last checkpoint: drop them, they are redone."""
        if not self._metrics_file.is_file():
            return
        kept = []
        for ln in self._metrics_file.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(ln)
            except json.JSONDecodeError:  # a line torn by the kill
                continue
            if isinstance(record, dict) and record.get("step", 0) <= step:
                kept.append(ln)
        self._metrics_file.write_text("".join(ln + "\n" for ln in kept), encoding="utf-8")

    def save_model(self, folder: Path | None = None) -> Path:
        """The policy in HF format (LoRA merged into a plain model copy), with its tokenizer."""
        folder = folder or self.out / "final"
        if not self.dp.is_main:
            return folder
        model = self.model
        if hasattr(model, "merge_and_unload"):
            model = copy.deepcopy(model).merge_and_unload()
        model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        return folder

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        for runner in self._runners.values():
            runner.close()
        self._runners.clear()
        self.dp.close()


def _step_seed(seed: int, step: int) -> int:
    return (int(seed) * 1_000_003 + int(step) * 7919) % (2**31 - 1)


# =============================================================================================
# The main loop
# =============================================================================================


def train(config: FlowGRPOConfig, stop_after: int | None = None) -> FlowGRPOLearner:
    """Run Flow-GRPO for ``config.steps`` steps (resuming from the latest checkpoint when asked).

    ``stop_after`` ends this call after that many steps, as if the process were killed there;
    ``config.max_minutes`` ends it after the step that crosses the time budget (checkpoint and model saved).
    """
    learner = FlowGRPOLearner(config)
    main = learner.dp.is_main  # data-parallel: rank 0 keeps the log, the config and the model
    if config.resume and (ckpt := learner.latest_checkpoint()) is not None:
        learner.load_checkpoint(ckpt)
    elif main and learner._metrics_file.is_file():  # a fresh run never appends to an older run's log
        stamp = time.strftime("%Y%m%d-%H%M%S")
        names = (f"metrics-before-{stamp}{suffix}.jsonl" for suffix in itertools.chain([""], itertools.count(1)))
        kept = next(p for p in map(learner.out.joinpath, names) if not p.exists())  # never overwrite an old log
        learner._metrics_file.rename(kept)
        logger.warning("starting afresh in %s: the previous metrics.jsonl is now %s", learner.out, kept.name)
    if main:
        (learner.out / "config.json").write_text(json.dumps(config.to_dict(), indent=2), encoding="utf-8")
    learner.dp.barrier()  # every rank has chosen its checkpoint before rank 0 writes a new one
    started = time.perf_counter()
    if config.eval_on_start and learner.step == 0:
        learner.log({**learner.evaluate(), "time/elapsed_s": time.perf_counter() - started})
    bar = _progress(config, learner.step) if main else None
    done_here = 0
    out_of_time = evaluated = False
    try:
        while learner.step < config.steps:
            if stop_after is not None and done_here >= stop_after:
                break
            metrics = learner.train_step()  # collect -> score -> advantages -> update
            evaluated = bool(config.eval_every and learner.step % config.eval_every == 0)
            if evaluated:
                metrics.update(learner.evaluate())
            metrics["time/elapsed_s"] = time.perf_counter() - started  # wall time of this call
            learner.log(metrics)
            if config.checkpoint_every and learner.step % config.checkpoint_every == 0:
                learner.save_checkpoint()
            done_here += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(reward=f"{metrics['rollout/reward']:.3f}", kl=f"{metrics.get('losses/kl', 0.0):.4f}")
            if config.max_minutes and learner.dp.any(time.perf_counter() - started >= 60 * config.max_minutes):
                out_of_time = learner.step < config.steps
                logger.info("max_minutes=%s reached at step %d", config.max_minutes, learner.step)
                break
        if learner.step >= config.steps or out_of_time:
            if config.eval_every and done_here and not evaluated:  # the curve ends at the final policy
                learner.log({**learner.evaluate(), "time/elapsed_s": time.perf_counter() - started})
            if not config.checkpoint_every or learner.step % config.checkpoint_every:
                learner.save_checkpoint()
            learner.save_model()
            # no rank tears the process group down while rank 0 still writes (a rank leaving early aborted once
            # at exit under load: "terminate called without an active exception"); never in `finally`, where a
            # rank that failed would leave the others waiting
            learner.dp.barrier()
    finally:
        if bar is not None:
            bar.close()
        learner.close()
    return learner


def _progress(config: FlowGRPOConfig, start: int) -> Any:
    if not config.progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=config.steps, initial=start, desc="flow-grpo", unit="step", dynamic_ncols=True)
