"""The vLLM in-process engine (optional extra ``agentflow-env[vllm]``, imported only when built).

Chat prompts go through ``LLM.chat`` (the model's chat template), plain strings through ``LLM.generate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentflow_env.engines.base import Prompt, SamplingParams
from agentflow_env.error import ConfigError, DependencyNotInstalled

__all__ = ["VLLMEngine"]


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise DependencyNotInstalled("vllm", "vllm") from exc
    return vllm


class VLLMEngine:
    """``vllm.LLM(model, **llm_kwargs)`` behind the engine protocol; one ``generate`` call per batch.

    ``llm_kwargs`` go to ``vllm.LLM`` (``dtype``, ``gpu_memory_utilization``, ``max_model_len``,
    ``tensor_parallel_size``, ...). ``llm`` may be an already built ``vllm.LLM``.
    """

    def __init__(self, model: str, llm: Any = None, **llm_kwargs: Any):
        self.vllm = _import_vllm()
        self.model = model
        self.llm = llm if llm is not None else self.vllm.LLM(model=model, **llm_kwargs)

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

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingParams | None = None) -> list[str]:
        params = self.sampling_params(sampling or SamplingParams())
        prompts = list(prompts)
        out: list[str] = [""] * len(prompts)
        chats = [i for i, p in enumerate(prompts) if not isinstance(p, str)]
        texts = [i for i, p in enumerate(prompts) if isinstance(p, str)]
        if chats:
            results = self.llm.chat([list(prompts[i]) for i in chats], params, use_tqdm=False)
            for i, r in zip(chats, results, strict=True):
                out[i] = r.outputs[0].text
        if texts:
            results = self.llm.generate([prompts[i] for i in texts], params, use_tqdm=False)
            for i, r in zip(texts, results, strict=True):
                out[i] = r.outputs[0].text
        return out
