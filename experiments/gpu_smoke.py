"""GPU smoke run of the training path: Flow-GRPO steps with verl-compatible settings on a multi-turn family,
rollouts from vLLM on CUDA with every weight sync verified by output equality. Prints one JSON object.

    python experiments/gpu_smoke.py                      # one CUDA GPU, at most ~10 minutes, no downloads
    python experiments/gpu_smoke.py --device cpu --tiny  # the same code path on CPU in seconds (CI)

The model has Qwen2.5-0.5B's shapes (24 layers, hidden 896, 14/2 heads, vocab 151,936) with random weights,
built locally with the project's tiny offline tokenizer (``--tiny``: a 2-layer model of the same family).
Random weights answer nothing, so the reward is ~0: this measures speed and checks the plumbing, not learning.

The JSON holds tokens/s of generation and of training, MFU (model FLOPs: 6 N per trained token plus 2 N per
generated token, N = parameters the tokens run through, over the stated dense bf16 peak; on CPU the measured
fp32 matmul rate), peak memory, the env's share of wall time, and the weight-sync checks.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perf.train_step import _PEAK_BF16, _QWEN2_05B, _cpu_matmul_rate, _flop_shape  # noqa: E402

ENV_ID = "agentflow/Gen-GameOf24-v2"
ENV_KWARGS = {"max_turns": 3}  # check -> (retry) -> answer: a multi-turn family, offline
TINY_SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "rope_theta": 1_000_000.0,
    "tie_word_embeddings": True,
}


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--tiny", action="store_true", help="a 2-layer model instead of Qwen2.5-0.5B's shapes")
    p.add_argument("--steps", type=int, default=None, help="Flow-GRPO steps (default 4 on CUDA, 2 on CPU)")
    p.add_argument("--questions", type=int, default=None, help="B (default 32 on CUDA as in AgentFlow, 2 on CPU)")
    p.add_argument("--group-size", type=int, default=None, help="G (default 8 as in AgentFlow, 2 on CPU)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="per planner turn (default 256, 16 on CPU)")
    p.add_argument("--out", default="", help="also write the JSON here")
    p.add_argument("--work", default="", help="scratch folder (default: a temporary one)")
    args = p.parse_args(argv)
    small = args.device == "cpu"
    args.steps = args.steps or (2 if small else 4)
    args.questions = args.questions or (2 if small else 32)
    args.group_size = args.group_size or (2 if small else 8)
    args.max_new_tokens = args.max_new_tokens or (16 if small else 256)
    return args


def build_model(folder: Path, tiny: bool) -> Path:
    """A randomly initialised Qwen2 model (Qwen2.5-0.5B's shapes, or tiny ones) with the tiny tokenizer."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from agents.tiny_lm import tiny_lm_path

    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_path())
    shape = {**TINY_SHAPE, "vocab_size": len(tokenizer)} if tiny else dict(_QWEN2_05B)
    config = Qwen2Config(
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **shape
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def smoke_config(args: argparse.Namespace, model: Path, out: Path) -> Any:
    """Flow-GRPO with the settings of the shipped verl config (AgentFlow's train/config.yaml)."""
    from agents.training.config import FlowGRPOConfig

    cuda = args.device == "cuda"
    return FlowGRPOConfig(
        output_dir=str(out),
        env_id=ENV_ID,
        env_kwargs=dict(ENV_KWARGS),
        init_from=str(model),
        device=args.device,
        backend="vllm" if cuda else "hf",
        dtype="bfloat16" if cuda else "float32",
        steps=args.steps,
        questions_per_step=args.questions,
        group_size=args.group_size,
        max_new_tokens=args.max_new_tokens,
        temperature=0.7,  # TRAIN_TEMPERATURE
        learning_rate=1e-6,  # actor.optim.lr
        eps_low=0.2,  # clip_ratio_low
        eps_high=0.3,  # clip_ratio_high
        beta=0.001,  # kl_loss_coef (k3, verl's low_var_kl)
        loss_aggregation="trajectory",  # the paper's 1/T_i (verl: adv_estimator=flow_grpo)
        minibatch_size=max(1, args.questions * args.group_size // 2),  # two or more updates per step
        eval_every=0,
        checkpoint_every=0,
        progress=False,
        threads=0 if cuda else 1,
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from agents.training.flow_grpo import FlowGRPOLearner

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --device cpu --tiny for the CPU path")
    work = Path(args.work or tempfile.mkdtemp(prefix="gpu-smoke-"))
    started = time.perf_counter()
    model_path = build_model(work / "model", args.tiny)
    build_s = time.perf_counter() - started
    learner = FlowGRPOLearner(smoke_config(args, model_path, work / "run"))
    body, head = _flop_shape(learner.model)
    steps: list[dict[str, float]] = []
    loop_started = time.perf_counter()
    try:
        for _ in range(args.steps):
            steps.append(learner.train_step())
        wall = time.perf_counter() - loop_started
        return _report(args, learner, steps, wall, build_s, body, head)
    finally:
        learner.close()


def _report(
    args: argparse.Namespace,
    learner: Any,
    steps: list[dict[str, float]],
    wall: float,
    build_s: float,
    body: int,
    head: int,
) -> dict[str, Any]:
    import torch

    stats = learner.rollout_stats
    generated = sum(s["rollout/response_tokens"] * s["rollout/turns"] * args.questions * args.group_size for s in steps)
    trained = sum(s["perf/tokens_per_s"] * s["perf/update_s"] for s in steps)
    flops = 6 * (body + head) * trained + 2 * (body + head) * generated
    cuda = args.device == "cuda"
    name = torch.cuda.get_device_name() if cuda else "cpu"
    peak = next((v for k, v in _PEAK_BF16.items() if k in name), None) if cuda else _cpu_matmul_rate(1)
    sync = getattr(learner.backend, "last_check", None)
    return {
        "device": name,
        "model": "tiny qwen2" if args.tiny else "Qwen2.5-0.5B shapes, random weights",
        "parameters": sum(p.numel() for p in learner.model.parameters()),
        "backend": learner.config.backend,
        "env_id": ENV_ID,
        "env_kwargs": ENV_KWARGS,
        "settings": {
            k: getattr(learner.config, k)
            for k in (
                "questions_per_step",
                "group_size",
                "max_new_tokens",
                "temperature",
                "learning_rate",
                "eps_low",
                "eps_high",
                "beta",
                "loss_aggregation",
                "minibatch_size",
                "dtype",
            )
        },
        "steps": len(steps),
        "wall_s": wall,
        "model_build_s": build_s,
        "generation_tokens_per_s": generated / max(stats.policy_seconds, 1e-9),
        "train_tokens_per_s": trained / max(sum(s["perf/update_s"] for s in steps), 1e-9),
        "mfu": flops / wall / peak if peak else None,
        "peak_flops": peak,
        "peak_flops_source": "dense bf16 datasheet" if cuda else "measured fp32 2048^2 matmul, 1 thread",
        "peak_memory_bytes": torch.cuda.max_memory_allocated() if cuda else _max_rss(),
        "env_share_of_wall": stats.env_seconds / wall,
        "policy_share_of_wall": stats.policy_seconds / wall,
        "update_share_of_wall": sum(s["perf/update_s"] for s in steps) / wall,
        "turns_per_episode": sum(s["rollout/turns"] for s in steps) / len(steps),
        "reward_mean": sum(s["rollout/reward"] for s in steps) / len(steps),
        "kl_last": steps[-1].get("losses/kl", 0.0),
        "weight_syncs": getattr(learner.backend, "syncs", None),
        "weight_sync_check": None if sync is None else {k: v for k, v in vars(sync).items() if _plain(v)},
        "weight_sync": "vLLM weights pushed and verified by greedy output equality every step"
        if sync is not None
        else "the learner's own model object (hf backend): nothing to sync",
        "load_avg": list(os.getloadavg()),
    }


def _plain(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def _max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    result = run(args)
    text = json.dumps(result, indent=2, default=str)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
