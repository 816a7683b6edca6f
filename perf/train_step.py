"""One Flow-GRPO training step side by side with TRL's ``GRPOTrainer``: same model, same B x G batch, same
completion length, single-turn Game of 24 (where Flow-GRPO reduces to GRPO). Prints JSON.

CPU:  python perf/train_step.py                       (tiny LM; goal: Flow-GRPO >= 1.5x TRL steps/s)
GPU:  python perf/train_step.py --device cuda --model-size 0.5b   (random Qwen2-shaped ~0.5B; tokens/s, MFU)
CPU 0.5B: python perf/train_step.py --model-size 0.5b --steps 1 --rounds 1   (slow; MFU vs measured matmul rate)
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENV_ID = "agentflow/Gen-GameOf24-v2"

# dense bf16 peak FLOP/s per GPU, by a substring of torch.cuda.get_device_name()
_PEAK_BF16 = {
    "H200": 989e12,
    "H100": 989e12,
    "H800": 989e12,
    "A100": 312e12,
    "A800": 312e12,
    "L40S": 362e12,
    "L40": 181e12,
    "L4": 121e12,
    "A10G": 70e12,
    "A10": 125e12,
    "RTX 4090": 165e12,
    "RTX 3090": 71e12,
    "V100": 125e12,
    "T4": 65e12,
}

# Qwen2.5-0.5B's shape (randomly initialised here: only the speed matters)
_QWEN2_05B = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 4096,
    "rope_theta": 1_000_000.0,
    "tie_word_embeddings": True,
}


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--model-size", choices=("tiny", "0.5b"), default="tiny")
    p.add_argument("--questions", type=int, default=4, help="B: prompts per step")
    p.add_argument("--group-size", type=int, default=4, help="G: completions per prompt")
    p.add_argument("--completion-length", type=int, default=32, help="max new tokens of each completion")
    p.add_argument("--steps", type=int, default=3, help="timed steps per method and round")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first (per method and round)")
    p.add_argument("--rounds", type=int, default=2, help="alternate the two methods this many times")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads for both")
    p.add_argument("--work", default="", help="scratch folder (default: a temporary one)")
    return p.parse_args()


def _model_path(args: argparse.Namespace, work: Path) -> Path:
    from agents.tiny_lm import tiny_lm_path

    tiny = tiny_lm_path()
    if args.model_size == "tiny":
        return tiny
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    out = work / "qwen2-0.5b-random"
    config = Qwen2Config(
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **_QWEN2_05B
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _game24_reward(completions: list[Any], numbers: list[list[int]], **_: Any) -> list[float]:
    """The env's own verification of a single-turn answer (TRL side)."""
    from agentflow_env.scoring.game24 import Game24Scorer
    from agentflow_env.turn.parsing import parse_action
    from agentflow_env.types import Task

    scorer = Game24Scorer()
    out = []
    for completion, nums in zip(completions, numbers):
        text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
        parsed = parse_action(text)
        answer = parsed.final_answer if parsed.is_final else ""
        task = Task(id="x", question="", answer=None, metadata={"numbers": list(nums), "target": 24})
        out.append(float(scorer(answer, task)) if answer else 0.0)
    return out


class _StepTimer:
    """A TrainerCallback recording the wall time of each optimizer step (generation included)."""

    def __init__(self) -> None:
        from transformers import TrainerCallback

        timer = self

        class Callback(TrainerCallback):
            def on_step_begin(self, *a: Any, **k: Any) -> None:
                timer.started = time.perf_counter()

            def on_step_end(self, *a: Any, **k: Any) -> None:
                timer.times.append(time.perf_counter() - timer.started)

        self.callback = Callback()
        self.times: list[float] = []
        self.started = 0.0


def _trl_round(
    args: argparse.Namespace, model_path: Path, work: Path, prompts: list[dict[str, Any]], round_index: int
) -> tuple[list[float], dict[str, float]]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    cuda = args.device == "cuda"
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    total = args.warmup + args.steps
    rows = prompts[: args.questions * total]
    data = Dataset.from_list(rows)
    config = GRPOConfig(
        output_dir=str(work / f"trl-{round_index}"),
        per_device_train_batch_size=args.questions * args.group_size,
        num_generations=args.group_size,
        max_completion_length=args.completion_length,
        max_steps=total,
        learning_rate=1e-5,
        beta=0.001,
        epsilon=0.2,
        epsilon_high=0.3,
        loss_type="grpo",
        scale_rewards="group",
        num_iterations=1,
        gradient_accumulation_steps=1,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=not cuda,
        bf16=cuda,
        disable_tqdm=True,
        seed=round_index,
        dataloader_num_workers=0,
        shuffle_dataset=False,
        max_grad_norm=1.0,
        **({"gradient_checkpointing": True} if cuda else {}),
    )
    timer = _StepTimer()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=_game24_reward,
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        callbacks=[timer.callback],
    )
    trainer.train()
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    info = {"mean_completion_tokens": statistics.fmean(lengths[args.warmup :] or lengths)}
    del trainer, model
    return timer.times[args.warmup :], info


def _ours_config(args: argparse.Namespace, model_path: Path, work: Path) -> Any:
    from agents.training.config import FlowGRPOConfig

    return FlowGRPOConfig(
        output_dir=str(work / "flow-grpo"),
        init_from=str(model_path),
        resume=False,
        steps=10_000,
        env_kwargs={"max_turns": 1},
        questions_per_step=args.questions,
        group_size=args.group_size,
        max_new_tokens=args.completion_length,
        temperature=1.0,
        minibatch_size=args.questions * args.group_size,
        ppo_epochs=1,
        learning_rate=1e-5,
        beta=0.001,
        eps_low=0.2,
        eps_high=0.3,
        device=args.device,
        threads=args.threads,
        tensorboard=False,
        progress=False,
        checkpoint_every=0,
        eval_every=0,
    )


def _ours_round(learner: Any, args: argparse.Namespace) -> tuple[list[float], dict[str, float]]:
    times, lengths, tokens = [], [], []
    for k in range(args.warmup + args.steps):
        started = time.perf_counter()
        metrics = learner.train_step()
        if args.device == "cuda":
            import torch

            torch.cuda.synchronize()
        if k >= args.warmup:
            times.append(time.perf_counter() - started)
            lengths.append(metrics["rollout/response_tokens"])
            tokens.append(metrics["perf/tokens_per_s"] * metrics["perf/update_s"])
    return times, {"mean_completion_tokens": statistics.fmean(lengths), "tokens_per_step": statistics.fmean(tokens)}


def _prompts(learner: Any, count: int) -> list[dict[str, Any]]:
    """The same single-turn planner prompts Flow-GRPO's env shows, as a conversational TRL dataset."""
    tasks = learner.tasks("train")
    env = learner._make_env("train", tasks)
    rows = []
    for i in range(min(count, len(tasks))):
        obs, _ = env.reset(options={"index": i})
        rows.append(
            {"prompt": [{"role": "user", "content": obs["prompt"]}], "numbers": list(tasks[i].metadata["numbers"])}
        )
    env.close()
    return rows


def _flop_shape(model: Any) -> tuple[int, int]:
    """``(body, head)`` parameter counts: the transformer body every token runs through, and the LM head
    that only positions whose logits are computed pay for (embedding lookups cost no FLOPs)."""
    params = sum(p.numel() for p in model.parameters())
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    tied = head is embed
    return params - embed.numel() - (0 if tied else head.numel()), head.numel()


def _flops(body: int, head: int, prompt: float, completion: float, seqs: int, prompt_rows: int) -> float:
    """FLOPs one step executes (2 per weight per token for a forward pass; attention scores left out).

    Prompt tokens run through the body only (logits are kept for the last position), completion tokens
    through body and head. A step runs that forward five times: generation (prefill + decode), the
    policy's forward and backward (3x) and the reference's forward. ``prompt_rows`` is how many prompt
    copies are processed: B when a group's prompt is run once and shared (Flow-GRPO), B*G otherwise (TRL).
    """
    forward = 2 * body * prompt_rows * prompt + 2 * (body + head) * seqs * completion
    return 5 * forward


def _cpu_matmul_rate(threads: int, n: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of the best of a few fp32 n x n matmuls: the denominator of MFU on a CPU."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm up
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> int:
    args = _args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.stderr.write(
            "perf/train_step.py: --device cuda needs a CUDA GPU and a CUDA build of torch; "
            f"this torch ({torch.__version__}) sees none. Run on a GPU machine or use --device cpu.\n"
        )
        return 2
    if args.device == "cpu" and args.model_size != "tiny":
        sys.stderr.write(
            "perf/train_step.py: --model-size 0.5b on CPU takes minutes per step and ~12 GB of memory "
            "(fp32 policy, reference and AdamW states; one side at a time); MFU is taken against this CPU's measured "
            "fp32 matmul rate\n"
        )
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        model_path = _model_path(args, work)
        from agents.training.flow_grpo import FlowGRPOLearner

        learner: Any = FlowGRPOLearner(_ours_config(args, model_path, work))
        n_params = sum(p.numel() for p in learner.model.parameters())
        body, head = _flop_shape(learner.model)
        shared_prompts = learner._share_prompts
        total = args.warmup + args.steps
        prompts = _prompts(learner, args.questions * total)
        from agents.policies.hf_policy import format_prompt

        tok = learner.tokenizer
        prompt_tokens = statistics.fmean(
            len(tok(format_prompt(tok, r["prompt"][0]["content"]), add_special_tokens=False)["input_ids"])
            for r in prompts
        )
        ours_times: list[float] = []
        trl_times: list[float] = []
        ours_info: dict[str, float] = {}
        trl_info: dict[str, float] = {}
        for r in range(args.rounds):
            order = ("ours", "trl") if r % 2 == 0 else ("trl", "ours")
            for who in order:
                if who == "ours":
                    t, ours_info = _ours_round(learner, args)
                    ours_times += t
                    if r == args.rounds - 1:  # its last round: free its memory before TRL's model loads
                        learner.close()
                        learner = None
                        gc.collect()
                else:
                    t, trl_info = _trl_round(args, model_path, work, prompts, r)
                    trl_times += t
        if learner is not None:
            learner.close()
    ours_s, trl_s = statistics.median(ours_times), statistics.median(trl_times)
    seqs = args.questions * args.group_size
    result: dict[str, Any] = {
        "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(0),
        "model": args.model_size,
        "parameters": n_params,
        "questions": args.questions,
        "group_size": args.group_size,
        "completion_length": args.completion_length,
        "mean_prompt_tokens": prompt_tokens,
        "threads": args.threads,
        "timed_steps_each": len(ours_times),
        "load_avg": os.getloadavg(),
        "flow_grpo": {"step_s_median": ours_s, "steps_per_s": 1 / ours_s, **ours_info},
        "trl_grpo": {"step_s_median": trl_s, "steps_per_s": 1 / trl_s, **trl_info},
        "speedup_vs_trl": trl_s / ours_s,
    }
    if args.device == "cuda":
        name = torch.cuda.get_device_name(0)
        peak = next((v for k, v in _PEAK_BF16.items() if k in name), None)
        result["peak_flops"] = {"value": peak, "source": f"dense bf16 datasheet figure for {name}"}
    else:
        peak = _cpu_matmul_rate(args.threads)
        result["peak_flops"] = {"value": peak, "source": f"measured fp32 2048x2048 matmul, {args.threads} threads"}
    for key, step_s, info in (("flow_grpo", ours_s, ours_info), ("trl_grpo", trl_s, trl_info)):
        comp = info.get("mean_completion_tokens", args.completion_length)
        result[key]["tokens_per_s"] = seqs * (prompt_tokens + comp) / step_s
        rows = args.questions if key == "flow_grpo" and shared_prompts else seqs
        result[key]["executed_flops_per_s"] = _flops(body, head, prompt_tokens, comp, seqs, rows) / step_s
        if peak:
            result[key]["mfu"] = result[key]["executed_flops_per_s"] / peak
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
