"""``agentflow-env sft``: fine-tune the planner LM on scripted demonstrations (flags map one to one to
:class:`agents.training.sft.SFTConfig`). Rerunning a killed command resumes it from its last checkpoint.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from agentflow_env.error import ConfigError
from agents.training.sft import SFTConfig, train_sft

__all__ = ["configure"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``agentflow-env sft`` (one per :class:`SFTConfig` field)."""
    d = SFTConfig()
    parser.add_argument(
        "--env-id",
        action="append",
        default=None,
        help=f"env id whose train split gives demonstrations (default {d.env_id}); repeat it to train one model "
        "on several envs (--episodes from each, mixed)",
    )
    parser.add_argument(
        "--env-kwargs",
        type=_json_object,
        default={},
        help='gymnasium.make kwargs of the env as JSON, e.g. \'{"max_turns": 1, "min_solutions": 20}\'',
    )
    parser.add_argument(
        "--output-dir",
        default=d.out,
        help=f"output folder (model, sft_metrics.json, demonstrations.jsonl); default ./{d.out}",
    )
    parser.add_argument(
        "--base", default=None, help="model folder to start from (default: the tiny offline LM, hf:tiny)"
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help=f"scripted demonstration episodes (tasks cycle; default {d.episodes})",
    )
    parser.add_argument("--epochs", type=int, default=None, help=f"passes over the demonstrations (default {d.epochs})")
    parser.add_argument("--batch-size", type=int, default=None, help=f"default {d.batch_size}")
    parser.add_argument("--lr", type=float, default=None, help=f"AdamW peak learning rate (default {d.lr})")
    parser.add_argument("--max-minutes", type=float, default=None, help="training time budget in minutes")
    parser.add_argument("--max-steps", type=int, default=None, help="cap on optimizer steps")
    parser.add_argument("--all-demos", action="store_true", help="keep demonstrations of unsolved episodes too")
    parser.add_argument(
        "--demo-policy",
        default=d.demo_policy,
        help="planner that plays the demonstrations: scripted (default) or a policy spec such as "
        "agents.policies.baselines:ScriptedGameOf24RetryPlanner",
    )
    parser.add_argument(
        "--eval-episodes",
        type=int,
        default=d.eval_episodes,
        help="test tasks to evaluate (greedy) before and after training; 0 skips",
    )
    parser.add_argument("--eval-max-tokens", type=int, default=d.eval_max_tokens)
    parser.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=d.max_prompt_tokens,
        help="longer prompts keep their last tokens (default: as hf: policies act)",
    )
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (1 is fastest on a busy CPU)")
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=d.checkpoint_every,
        help="optimizer steps between checkpoints; a killed run resumes when the same command is run again (0: never)",
    )
    parser.add_argument(
        "--no-resume", action="store_true", help="start afresh even when the output folder holds a checkpoint"
    )
    parser.add_argument(
        "--config",
        metavar="FILE|NAME",
        default=None,
        help="a train config (file or shipped name, see `agentflow-env train --list-configs`): its env_id, "
        "env_kwargs and threads become the defaults here, so the warm start sees the prompts training will",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=_run)


_TABLE_KEYS = {"episodes", "epochs", "batch_size", "lr", "max_steps"}


def _pick(flag: Any, table: dict[str, Any], key: str) -> Any:
    """A flag given on the command line, else the config's [sft] value, else SFTConfig's default."""
    if flag is not None:
        return flag
    return table.get(key, getattr(SFTConfig(), key))


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}); give an object like '{{\"max_turns\": 1}}'") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object; give one like '{{\"max_turns\": 1}}'")
    return value


def _run(args: argparse.Namespace) -> int:
    import sys

    from tqdm.auto import tqdm

    from agentflow_env.cli import require_env_id

    env_kwargs = dict(args.env_kwargs)
    threads = args.threads
    default_env = [SFTConfig().env_id]
    table: dict[str, Any] = {}
    if args.config:
        from agents.training.config import load_config, sft_settings

        train_config = load_config(args.config)
        table = sft_settings(args.config)
        unknown = sorted(set(table) - _TABLE_KEYS)
        if unknown:
            raise ConfigError(f"[sft] of {args.config} has unknown keys {unknown}; use {sorted(_TABLE_KEYS)}")
        default_env = [train_config.env_id]
        env_kwargs = {**train_config.env_kwargs, **env_kwargs}
        threads = threads or train_config.threads or None
    env_ids = [require_env_id(e) for e in (args.env_id or default_env)]
    config = SFTConfig(
        env_id=env_ids[0] if len(env_ids) == 1 else env_ids,
        env_kwargs=env_kwargs,
        out=args.output_dir,
        base=args.base,
        episodes=_pick(args.episodes, table, "episodes"),
        epochs=_pick(args.epochs, table, "epochs"),
        batch_size=_pick(args.batch_size, table, "batch_size"),
        lr=_pick(args.lr, table, "lr"),
        max_minutes=args.max_minutes,
        max_steps=_pick(args.max_steps, table, "max_steps"),
        successful_only=not args.all_demos,
        demo_policy=args.demo_policy,
        eval_episodes=args.eval_episodes,
        eval_max_tokens=args.eval_max_tokens,
        max_prompt_tokens=args.max_prompt_tokens,
        seed=args.seed,
        torch_threads=threads,
        checkpoint_every=args.checkpoint_every,
        resume=not args.no_resume,
    )
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
