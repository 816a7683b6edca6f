"""SFT warm-start: fine-tune a causal LM (the tiny offline LM by default) on scripted-planner demonstrations.

Owns demonstration collection, the response-only loss, the training loop (checkpointed: the same command resumes a
killed run), success evaluation and the ``sft`` command.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentflow_env.config import add_dataclass_flags, doc_field, flag_values
from agentflow_env.engines.base import SamplingParams
from agentflow_env.error import ConfigError
from agents.policies.policy import Policy
from agents.training.sft_tools import ObservationRecorder, tokenize_tool_demonstrations, tool_action, well_formed

__all__ = [
    "Demonstration",
    "SFTConfig",
    "SFTResult",
    "configure",
    "evaluate_planner",
    "make_demonstrations",
    "sft_loss",
    "split_task_ids",
    "tokenize_demonstrations",
    "train_sft",
]

logger = logging.getLogger(__name__)


@dataclass
class Demonstration:
    """One planner turn to imitate: the env's prompt and the scripted planner's action."""

    prompt: str
    action: str
    task_id: str = ""
    turn: int = 1
    observation: dict[str, str] | None = None  # tool calling: the whole observation the prompt is rendered from


@dataclass
class SFTConfig:
    """Settings of one SFT run; ``agentflow-env sft`` has one flag per field (see :func:`configure`)."""

    env_id: str | list[str] = doc_field(
        "env id whose train split gives demonstrations; repeat the flag to train one model on several envs "
        "(episodes from each, mixed; evaluation covers each)",
        repeat=True,
        default="agentflow/Gen-GameOf24-v2",
    )
    env_kwargs: dict[str, Any] = doc_field(
        'gymnasium.make kwargs of the env(s) as JSON, e.g. \'{"max_turns": 1, "min_solutions": 20}\'',
        default_factory=dict,
    )
    out: str = doc_field(
        "output folder (model, sft_metrics.json, demonstrations.jsonl)", flag="--output-dir", default="runs/sft-tiny"
    )
    base: str | None = doc_field("model folder to start from (None: the tiny offline LM, hf:tiny)", default=None)
    episodes: int = doc_field("scripted demonstration episodes on the train split (of each env)", default=256)
    epochs: int = doc_field("passes over the demonstration turns", default=3)
    batch_size: int = doc_field("demonstration turns per optimizer step", default=16)
    lr: float = doc_field("AdamW peak learning rate (linear warmup, cosine decay to 10%)", default=2e-3)
    weight_decay: float = doc_field("AdamW weight decay", default=0.0)
    warmup_steps: int = doc_field("linear warmup steps", default=10)
    grad_clip: float = doc_field("gradient norm clip", default=1.0)
    max_minutes: float | None = doc_field("training time budget in minutes (whatever the epochs)", default=None)
    max_steps: int | None = doc_field("cap on optimizer steps", default=None)
    successful_only: bool = doc_field(
        "keep the demonstrations of unsolved episodes too (by default only solved episodes are kept)",
        flag="--all-demos",
        switch=True,
        default=True,
    )
    demo_policy: str = doc_field(
        "planner that plays the demonstrations: scripted (the env's scripted planner) or a policy spec such as "
        "agents.policies.baselines:ScriptedGameOf24RetryPlanner",
        default="scripted",
    )
    max_prompt_tokens: int = doc_field(
        "longer prompts keep their last tokens (the default is HFPlanner's: training sees what evaluation sees)",
        default=4096,
    )
    eval_episodes: int = doc_field("test tasks to evaluate (greedy) before and after training; 0 skips", default=0)
    eval_split: str = doc_field("split of the evaluation tasks", default="test")
    eval_max_tokens: int = doc_field("new tokens per evaluated action", default=64)
    eval_num_envs: int = doc_field("envs stepped together in evaluation", default=32)
    seed: int = doc_field("seed of the demonstrations, the data order and the initialisation", default=0)
    torch_threads: int | None = doc_field(
        "torch threads (None: torch's default; 1 is fastest on a busy CPU)", flag="--threads", default=None
    )
    checkpoint_every: int = doc_field(
        "optimizer steps between checkpoints (out/checkpoint/state.pt and the partial model in out); a killed run "
        "resumes when the same command is run again (0: never)",
        default=50,
    )
    tool_calling: bool = doc_field(
        "demonstrate native tool calls: Hermes <tool_call> actions after the tool-calling prompt that "
        "HFPlanner(tool_calling=True) renders with the model's template (docs/tool-calling.md)",
        switch=True,
        default=False,
    )
    resume: bool = doc_field(
        "start afresh even when the output folder holds a checkpoint of the same settings",
        flag="--no-resume",
        switch=True,
        default=True,
    )

    def __post_init__(self) -> None:
        if self.episodes < 1 or self.epochs < 1 or self.batch_size < 1:
            raise ConfigError("episodes, epochs and batch_size must be at least 1")
        if self.lr <= 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ConfigError(f"max_minutes must be positive, got {self.max_minutes}")
        if self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every must be >= 0 (0: never), got {self.checkpoint_every}")
        if self.eval_episodes < 0:
            raise ConfigError(f"eval_episodes must be >= 0, got {self.eval_episodes}")
        if not self.env_ids:
            raise ConfigError("env_id names no env; give at least one env id")
        if len(set(self.env_ids)) != len(self.env_ids):
            raise ConfigError(f"env_id names an env more than once: {self.env_ids}")

    @property
    def env_ids(self) -> list[str]:
        """The env ids whose demonstrations are mixed (one for a plain ``env_id``)."""
        return [self.env_id] if isinstance(self.env_id, str) else list(self.env_id)


@dataclass
class SFTResult:
    """What a run did: losses per logged step, final metrics, and evaluation before/after."""

    out: str
    steps: int = 0
    epochs_done: float = 0.0
    examples: int = 0
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)
    eval_before: dict[str, float] | None = None
    eval_after: dict[str, float] | None = None
    max_response_tokens: int = 0
    """the longest demonstrated action in tokens, EOS included: sample with at least this many new tokens"""
    eval_per_env: dict[str, dict[str, dict[str, float]]] | None = None
    """with several envs: ``{env_id: {"before": ..., "after": ...}}``; eval_before/after then pool all envs"""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------- data
def _make_env(env_id: str, split: str, tool_calling: bool = False, **kwargs: Any) -> Any:
    import gymnasium as gym

    import agentflow_env  # noqa: F401  (registers the env ids)
    from agents.policies.tool_calling import set_tool_mode

    env = gym.make(env_id, split=split, **kwargs)
    return set_tool_mode(env) if tool_calling else env


def _scripted_planner(env_id: str) -> Policy:
    try:
        from agents.policies.scripted import scripted_planner_for
    except ImportError:  # the family planners are optional; Game of 24 has its own in baselines
        from agents.policies.baselines import ScriptedGameOf24Planner

        if "GameOf24" not in env_id:
            raise ConfigError(f"no scripted planner for {env_id}; only Game of 24 is available here") from None
        return ScriptedGameOf24Planner()
    return scripted_planner_for(env_id)


def _demo_policy(spec: str, env_id: str) -> Policy:
    from agents.policies.registry import make_policy

    return make_policy(spec, env_id)


def split_task_ids(
    env_id: str, split: str, count: int | None = None, env_kwargs: dict[str, Any] | None = None
) -> list[str]:
    """The ids of the first ``count`` tasks of ``split`` (all of them when ``count`` is None)."""
    env = _make_env(env_id, split, **(env_kwargs or {}))
    try:
        tasks = env.unwrapped.tasks
        n = len(tasks) if count is None else min(int(count), len(tasks))
        return [tasks[i].id for i in range(n)]
    finally:
        env.close()


def make_demonstrations(
    env_id: str,
    num_episodes: int,
    *,
    split: str = "train",
    seed: int = 0,
    planner: Policy | None = None,
    successful_only: bool = True,
    num_envs: int = 8,
    env_kwargs: dict[str, Any] | None = None,
    tool_calling: bool = False,
) -> list[Demonstration]:
    """Play ``num_episodes`` episodes with a scripted planner; one demonstration per turn. The split's tasks
    come in a seeded order, cycled when there are fewer tasks than episodes.

    ``env_kwargs`` go to ``gymnasium.make`` (e.g. a difficulty subset or a turn limit), so the
    demonstrations are the prompts the policy will see when it is trained on that env. ``tool_calling``: the
    actions as Hermes calls, each with its whole observation (:mod:`agents.training.sft_tools`).
    """
    kwargs = dict(env_kwargs or {})
    from agents.training.rollout import collect_rollouts

    planner = recorder = ObservationRecorder(planner or _scripted_planner(env_id))
    ids = split_task_ids(env_id, split, env_kwargs=kwargs)
    random.Random(seed).shuffle(ids)
    ids = (ids * (num_episodes // max(len(ids), 1) + 1))[:num_episodes]
    fns = [lambda: _make_env(env_id, split, **kwargs) for _ in range(max(1, min(num_envs, len(ids))))]
    trajectories = collect_rollouts(fns, planner, task_ids=ids, seed=seed, record_samples=False, env_id=env_id)
    demos: list[Demonstration] = []
    for traj in trajectories:
        if successful_only and not traj.success:
            continue
        for t in traj.turns:
            action, obs = (tool_action(t.action), recorder.seen[t.prompt]) if tool_calling else (t.action, None)
            demos.append(Demonstration(t.prompt, action, traj.task_id, t.turn, obs))
    if not demos:
        raise ConfigError(
            f"the scripted planner solved none of {num_episodes} {env_id} episodes; "
            "use more episodes or successful_only=False"
        )
    return demos


def tokenize_demonstrations(
    tokenizer: Any, demos: Sequence[Demonstration], max_prompt_tokens: int = 4096
) -> list[tuple[list[int], list[int]]]:
    """``(prompt_ids, response_ids)`` per demonstration, encoded exactly as
    :class:`~agents.policies.hf_policy.HFPlanner` acts.

    The prompt goes through the chat template (``format_prompt``); the response is the action
    followed by the EOS token, so the model learns to stop. Over-long prompts keep their last tokens.
    """
    from agents.policies.hf_policy import format_prompt

    eos = tokenizer.eos_token_id
    if eos is None:
        raise ConfigError("the tokenizer has no EOS token; SFT needs one to teach the model to stop")
    out = []
    for d in demos:
        prompt_ids = list(tokenizer(format_prompt(tokenizer, d.prompt), add_special_tokens=False)["input_ids"])
        response_ids = list(tokenizer(d.action, add_special_tokens=False)["input_ids"]) + [int(eos)]
        out.append((prompt_ids[-max_prompt_tokens:], response_ids))
    return out


# ---------------------------------------------------------------------------------------------- training
def sft_loss(
    model: Any, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], pad_id: int
) -> Any:
    """Mean negative log-likelihood of the response tokens only (prompt and padding never count)."""
    import torch

    from agents.lm import sequence_logprobs

    logprobs = sequence_logprobs(model, prompt_ids, response_ids, pad_id)
    return -torch.cat(logprobs).mean()


def _lr_factor(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = min((step - warmup) / max(total - warmup, 1), 1.0)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def _load_base(base: str | None) -> tuple[Any, Any]:
    from agents.tiny_lm import load_tiny_lm, tiny_lm_path

    return load_tiny_lm(base if base else tiny_lm_path())


def evaluate_planner(
    planner: Policy,
    env_id: str,
    task_ids: Sequence[str],
    *,
    split: str = "test",
    num_envs: int = 32,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    tool_calling: bool = False,
) -> dict[str, float]:
    """Success rate, mean reward, turns and well-formed-action rate of ``planner`` on ``task_ids`` (``tool_calling``:
    the envs in tool mode, and Hermes calls or plain answers count as well formed)."""
    from agents.training.rollout import collect_rollouts

    kwargs = dict(env_kwargs or {})
    fns = [
        lambda: _make_env(env_id, split, tool_calling, **kwargs) for _ in range(max(1, min(num_envs, len(task_ids))))
    ]
    trajs = collect_rollouts(fns, planner, task_ids=list(task_ids), seed=seed, record_samples=False, env_id=env_id)
    turns = [t for traj in trajs for t in traj.turns]
    formed = sum(well_formed(t.action, tool_calling) for t in turns)
    n = max(len(trajs), 1)
    return {
        "episodes": float(len(trajs)),
        "success_rate": sum(t.success for t in trajs) / n,
        "mean_reward": sum(t.reward for t in trajs) / n,
        "mean_turns": len(turns) / n,
        "well_formed_rate": formed / max(len(turns), 1),
    }


def _evaluate_model(
    model: Any, tokenizer: Any, config: SFTConfig, task_ids: dict[str, list[str]]
) -> dict[str, dict[str, float]]:
    from agents.policies.hf_policy import HFPlanner

    planner = HFPlanner(
        model,
        tokenizer,
        sampling=SamplingParams(temperature=0.0, max_tokens=config.eval_max_tokens),
        max_prompt_tokens=config.max_prompt_tokens,
        tool_calling=config.tool_calling,
    )
    return {
        env_id: evaluate_planner(
            planner,
            env_id,
            ids,
            split=config.eval_split,
            num_envs=config.eval_num_envs,
            seed=config.seed,
            env_kwargs=config.env_kwargs,
            tool_calling=config.tool_calling,
        )
        for env_id, ids in task_ids.items()
    }


def _pooled(per_env: dict[str, dict[str, float]]) -> dict[str, float]:
    """One env's scores as they are; several envs' scores pooled over all their episodes (turn-level rates by turns)."""
    if len(per_env) == 1:
        return next(iter(per_env.values()))
    episodes = sum(s["episodes"] for s in per_env.values())
    turns = sum(s["mean_turns"] * s["episodes"] for s in per_env.values())
    pooled = {"episodes": episodes, "mean_turns": turns / max(episodes, 1)}
    for key in ("success_rate", "mean_reward"):
        pooled[key] = sum(s[key] * s["episodes"] for s in per_env.values()) / max(episodes, 1)
    pooled["well_formed_rate"] = sum(
        s["well_formed_rate"] * s["mean_turns"] * s["episodes"] for s in per_env.values()
    ) / max(turns, 1)
    return pooled


def train_sft(
    config: SFTConfig,
    *,
    demos: Sequence[Demonstration] | None = None,
    on_step: Callable[[int, float], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> SFTResult:
    """Fine-tune ``config.base`` on scripted demonstrations and save it to ``config.out``.

    Evaluation (``eval_episodes`` > 0) plays the first test tasks greedily before and after.
    A small model learns the exact wording of the env's prompts (tool cards included), so a
    checkpoint goes stale when that wording changes: ``sft_metrics.json`` records a fingerprint of
    the first demonstration prompt; retrain when ``obs["prompt"]`` of that task no longer matches.
    ``on_start(total_steps, examples)`` is called when training starts, ``on_step(step, loss)`` after each step.
    """
    import torch

    started = time.perf_counter()
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    torch.manual_seed(config.seed)
    model, tokenizer = _load_base(config.base)
    pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    if demos is None:
        demos = [
            d
            for env_id in config.env_ids
            for d in make_demonstrations(
                env_id,
                config.episodes,
                planner=None if config.demo_policy == "scripted" else _demo_policy(config.demo_policy, env_id),
                seed=config.seed,
                successful_only=config.successful_only,
                env_kwargs=config.env_kwargs,
                tool_calling=config.tool_calling,
            )
        ]
    with (out / "demonstrations.jsonl").open("w", encoding="utf-8") as fh:
        for d in demos:
            fh.write(json.dumps(asdict(d), ensure_ascii=False) + "\n")
    tokenize = tokenize_tool_demonstrations if config.tool_calling else tokenize_demonstrations
    examples = tokenize(tokenizer, demos, config.max_prompt_tokens)
    result = SFTResult(out=str(out), examples=len(examples))
    # with EOS: a sampler needs max_new_tokens >= this to reproduce every demonstrated action in full
    result.max_response_tokens = max((len(r) for _, r in examples), default=0)
    eval_ids = (
        {
            env_id: split_task_ids(env_id, config.eval_split, config.eval_episodes, config.env_kwargs)
            for env_id in config.env_ids
        }
        if config.eval_episodes
        else {}
    )
    before: dict[str, dict[str, float]] = {}
    if eval_ids:
        before = _evaluate_model(model, tokenizer, config, eval_ids)
        result.eval_before = _pooled(before)
        logger.info("before SFT: %s", result.eval_before)

    per_epoch = math.ceil(len(examples) / config.batch_size)
    total = per_epoch * config.epochs if config.max_steps is None else min(per_epoch * config.epochs, config.max_steps)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, config.warmup_steps, total))
    run = _SFTRun(config, out, model, tokenizer, optimizer, scheduler, result)
    if config.resume:
        run.load()
    if on_start is not None:
        on_start(total, len(examples))
    _train_loop(run, examples, per_epoch, total, pad_id, on_step)
    model.eval()
    complete = result.steps >= total
    run.save_model(complete=complete)
    if eval_ids:
        after = _evaluate_model(model, tokenizer, config, eval_ids)
        result.eval_after = _pooled(after)
        if len(after) > 1:
            result.eval_per_env = {e: {"before": before[e], "after": after[e]} for e in after}
        logger.info("after SFT: %s", result.eval_after)
    result.seconds = time.perf_counter() - started
    # a tiny model is only as good as its prompts: record which prompt wording it was trained on
    fingerprint = hashlib.sha1(demos[0].prompt.encode("utf-8")).hexdigest()[:12] if demos else None
    (out / "sft_metrics.json").write_text(
        json.dumps(
            {"config": asdict(config), "prompt_fingerprint": fingerprint, "complete": complete, **result.to_dict()},
            indent=2,
        )
    )
    return result


# the settings that change what a run computes: a checkpoint of other settings is not resumed
_RESUME_KEYS = (
    "env_id",
    "env_kwargs",
    "base",
    "episodes",
    "epochs",
    "batch_size",
    "lr",
    "weight_decay",
    "warmup_steps",
    "grad_clip",
    "max_steps",
    "successful_only",
    "demo_policy",
    "max_prompt_tokens",
    "seed",
)


@dataclass
class _SFTRun:
    """The state of one SFT run that a checkpoint holds, and where it is written."""

    config: SFTConfig
    out: Path
    model: Any
    tokenizer: Any
    optimizer: Any
    scheduler: Any
    result: SFTResult

    @property
    def state_file(self) -> Path:
        return self.out / "checkpoint" / "state.pt"

    def settings(self) -> dict[str, Any]:
        return json.loads(json.dumps({k: getattr(self.config, k) for k in _RESUME_KEYS}))

    def load(self) -> None:
        """Continue from the checkpoint when there is one of the same settings; refuse one of others."""
        import torch

        if not self.state_file.is_file():
            return
        state = torch.load(self.state_file, map_location="cpu", weights_only=False)
        if state["settings"] != self.settings():
            changed = sorted(k for k in _RESUME_KEYS if state["settings"].get(k) != self.settings()[k])
            raise ConfigError(
                f"{self.out} holds an SFT checkpoint of other settings ({', '.join(changed)} differ); give another "
                "--output-dir, or --no-resume to start afresh there"
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        self.result.steps = int(state["step"])
        self.result.losses = list(state["losses"])
        logger.info("sft: resumed from %s at step %d", self.state_file, self.result.steps)

    def checkpoint(self) -> None:
        """The state after this step (written to a temporary file, then renamed) and the partial model."""
        import torch

        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        torch.save(
            {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "step": self.result.steps,
                "losses": self.result.losses,
                "settings": self.settings(),
            },
            tmp,
        )
        tmp.replace(self.state_file)
        self.save_model(complete=False)

    def save_model(self, complete: bool) -> None:
        """The model in HF format in ``out``: a partial one (``complete: false``) until the run ends."""
        self.model.save_pretrained(self.out)
        self.tokenizer.save_pretrained(self.out)
        if not complete:
            record = {"complete": False, "steps": self.result.steps, "config": asdict(self.config)}
            (self.out / "sft_metrics.json").write_text(json.dumps(record, indent=2), encoding="utf-8")


def _train_loop(
    run: _SFTRun,
    examples: Sequence[tuple[list[int], list[int]]],
    per_epoch: int,
    total: int,
    pad_id: int,
    on_step: Callable[[int, float], None] | None,
) -> None:
    """Optimizer steps from the run's current step to ``total`` (or the time budget), checkpointing on the way.

    Each epoch's order is drawn from ``seed`` whatever the start, so a resumed run takes the same batches.
    """
    import torch

    config, result, model = run.config, run.result, run.model
    rng = random.Random(config.seed)
    model.train()
    started = time.perf_counter()
    for epoch in range(config.epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        for b in range(per_epoch):
            if epoch * per_epoch + b < result.steps:
                continue  # done before the resume
            if result.steps >= total:
                return
            batch = [examples[i] for i in order[b * config.batch_size : (b + 1) * config.batch_size]]
            loss = sft_loss(model, [p for p, _ in batch], [r for _, r in batch], pad_id)
            run.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            run.optimizer.step()
            run.scheduler.step()
            result.steps += 1
            result.losses.append(float(loss.detach()))
            result.epochs_done = epoch + (b + 1) / per_epoch
            if on_step is not None:
                on_step(result.steps, result.losses[-1])
            if config.checkpoint_every and result.steps % config.checkpoint_every == 0:
                run.checkpoint()
            if config.max_minutes is not None and (time.perf_counter() - started) / 60 >= config.max_minutes:
                run.checkpoint()
                return


# ---------------------------------------------------------------------------------------------- CLI
def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``agentflow-env sft``: one flag per :class:`SFTConfig` field, generated from it."""
    add_dataclass_flags(parser, SFTConfig)
    parser.add_argument(
        "--config",
        metavar="FILE|NAME",
        default=None,
        help="a train config (file or shipped name, see `agentflow-env train --list-configs`): its env_id, "
        "env_kwargs, threads and [sft] table are the defaults here, so the warm start sees the prompts training will",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=_run)


_TABLE_KEYS = {"episodes", "epochs", "batch_size", "lr", "max_steps"}


def _config_defaults(path: str | None) -> dict[str, Any]:
    """SFT settings a train config implies: its env and env kwargs, its threads, and its ``[sft]`` table."""
    if not path:
        return {}
    from agents.training.config import load_config, sft_settings

    train_config = load_config(path)
    table = sft_settings(path)
    unknown = sorted(set(table) - _TABLE_KEYS)
    if unknown:
        raise ConfigError(f"[sft] of {path} has unknown keys {unknown}; use {sorted(_TABLE_KEYS)}")
    out: dict[str, Any] = {"env_id": train_config.env_id, "env_kwargs": dict(train_config.env_kwargs), **table}
    if train_config.threads:
        out["torch_threads"] = train_config.threads
    return out


def _run(args: argparse.Namespace) -> int:
    import sys

    from tqdm.auto import tqdm

    from agentflow_env.cli import require_env_id

    given = flag_values(args, SFTConfig)
    defaults = _config_defaults(args.config)
    if "env_kwargs" in given and "env_kwargs" in defaults:  # the flag adds to the config's env kwargs
        given["env_kwargs"] = {**defaults["env_kwargs"], **given["env_kwargs"]}
    config = SFTConfig(**{**defaults, **given})
    config = dataclasses.replace(config, env_id=[require_env_id(e) for e in config.env_ids])
    if len(config.env_ids) == 1:
        config = dataclasses.replace(config, env_id=config.env_ids[0])
    show = not args.no_progress
    if show:
        tqdm.write(
            f"sft: {config.episodes} scripted episodes on each of {', '.join(config.env_ids)} -> demonstrations",
            file=sys.stderr,
        )
    bar: Any = None

    def on_start(total: int, examples: int) -> None:
        nonlocal bar
        bar = tqdm(total=total, desc=f"sft ({examples} turns)", unit="step", dynamic_ncols=True, disable=not show)

    def on_step(step: int, loss: float) -> None:
        if bar is not None:
            bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            bar.update(1)
            if bar.total is not None and bar.n >= bar.total:
                bar.close()  # before saving, so the library's own save bars do not nest under it

    try:
        result = train_sft(config, on_step=on_step, on_start=on_start)
    finally:
        if bar is not None:
            bar.close()
    summary = {k: v for k, v in result.to_dict().items() if k != "losses"}
    summary["first_loss"] = result.losses[0] if result.losses else None
    summary["final_loss"] = result.losses[-1] if result.losses else None
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return 0
    lines = [
        f"sft: {result.steps} steps on {result.examples} demonstration turns in {result.seconds:.1f} s; "
        f"loss {summary['first_loss']:.4f} -> {summary['final_loss']:.4f}"
        if result.losses
        else f"sft: no training steps ({result.examples} demonstration turns)",
    ]
    for label, scores in (("before", result.eval_before), ("after", result.eval_after)):
        if scores:
            lines.append(
                f"  {label}: success {100 * scores['success_rate']:.1f}% over {int(scores['episodes'])} test tasks, "
                f"well-formed actions {100 * scores['well_formed_rate']:.1f}%"
            )
    for env_id, scores in (result.eval_per_env or {}).items():
        lines.append(
            f"    {env_id}: success {100 * scores['before']['success_rate']:.1f}% -> "
            f"{100 * scores['after']['success_rate']:.1f}%"
        )
    lines.append(f"model in {result.out}; evaluate it: agentflow-env eval --policy hf:{result.out}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
