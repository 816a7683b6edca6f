"""Rollout generation backends of the Flow-GRPO learner behind one interface: HF ``generate`` (CPU/GPU)
and in-process vLLM (GPU) whose weights are synced from the learner each step with ``load_weights``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from agentflow_env.engines.base import SamplingParams
from agentflow_env.error import ConfigError, DependencyNotInstalled
from agents.hf_policy import HFPlanner, PolicySample
from agents.policy import Observation

__all__ = ["HFGenerateBackend", "HFSamplerBackend", "RolloutBackend", "VLLMBackend", "make_backend"]

logger = logging.getLogger(__name__)


@runtime_checkable
class RolloutBackend(Protocol):
    """A trainable planner for rollouts: actions with token ids and log-probs, plus a hook that makes
    the sampler use the learner's current weights (called before every rollout)."""

    sampling: SamplingParams

    def act(self, observations: Sequence[Observation]) -> list[str]: ...

    def act_with_samples(self, observations: Sequence[Observation]) -> list[PolicySample]: ...

    def sync_weights(self, model: Any) -> None: ...


class HFGenerateBackend(HFPlanner):
    """``transformers`` ``generate`` on the learner's own model object, so syncing is a pointer swap."""

    def sync_weights(self, model: Any) -> None:
        self.model = model


class HFSamplerBackend:
    """Batched sampling on the learner's HF model with its own decode loop (the CPU default).

    Each distinct prompt is prefilled once and its key/value cache is copied to the G rollouts that
    share it (a group's first turns); sampling is Gumbel-max on the tempered, top-p-filtered logits.
    Samples follow the HF planner's conventions (prompt encoding, EOS kept, raw log-probs).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        sampling: SamplingParams,
        max_prompt_tokens: int = 4096,
        autocast_dtype: Any = None,
    ):
        self.model = model
        self.autocast_dtype = autocast_dtype
        self.tokenizer = tokenizer
        self.sampling = sampling
        self._encoder = HFPlanner(_NoModel(), tokenizer, sampling=sampling, max_prompt_tokens=max_prompt_tokens)
        eos = model.generation_config.eos_token_id if getattr(model, "generation_config", None) else None
        self.eos_ids = sorted({*([eos] if isinstance(eos, int) else list(eos or [])), tokenizer.eos_token_id} - {None})
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)

    def sync_weights(self, model: Any) -> None:
        self.model = model

    def act(self, observations: Sequence[Observation]) -> list[str]:
        return [s.text for s in self.act_with_samples(observations)]

    def act_with_samples(self, observations: Sequence[Observation]) -> list[PolicySample]:
        import torch

        if not observations:
            return []
        encoded = [self._encoder.encode_prompt(obs) for obs in observations]
        was_training = self.model.training
        self.model.eval()
        try:
            device = next(self.model.parameters()).device
            autocast = (
                torch.autocast(device_type=device.type, dtype=self.autocast_dtype)
                if self.autocast_dtype is not None
                else contextlib.nullcontext()
            )
            with torch.no_grad(), autocast:
                tokens, logprobs = self._decode([ids for ids, _ in encoded])
        finally:
            if was_training:
                self.model.train()
        samples = []
        eos = set(self.eos_ids)
        for (ids, truncated), row, lps in zip(encoded, tokens, logprobs):
            cut = next((k for k, t in enumerate(row) if t in eos), None)
            resp = row if cut is None else row[: cut + 1]
            samples.append(
                PolicySample(
                    prompt_ids=ids,
                    response_ids=resp,
                    logprobs=lps[: len(resp)],
                    text=self.tokenizer.decode(resp, skip_special_tokens=True),
                    finished=cut is not None,
                    prompt_truncated=truncated,
                    temperature=float(self.sampling.temperature),
                )
            )
        return samples

    def _decode(self, prompts: list[list[int]]) -> tuple[list[list[int]], list[list[float]]]:
        import torch

        from agents.flow_grpo import cache_kwarg, output_cache

        device = next(self.model.parameters()).device
        index: dict[tuple[int, ...], int] = {}
        rows = torch.tensor([index.setdefault(tuple(p), len(index)) for p in prompts], device=device)
        unique = list(index)
        width = max(len(p) for p in unique)
        ids = torch.full((len(unique), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, p in enumerate(unique):
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attn[i, width - len(p) :] = 1
        ids, attn = ids.to(device), attn.to(device)
        out = self.model(
            input_ids=ids,
            attention_mask=attn,
            position_ids=(attn.cumsum(-1) - 1).clamp(min=0),
            use_cache=True,
            logits_to_keep=1,
        )
        cache = output_cache(out)
        cache.reorder_cache(rows)
        logits = out.logits[:, -1].float()[rows]
        attn = attn[rows]
        positions = attn.sum(-1)
        eos = torch.tensor(self.eos_ids, device=device)
        done = torch.zeros(len(prompts), dtype=torch.bool, device=device)
        steps_tok, steps_lp = [], []
        key = cache_kwarg(self.model)
        for _ in range(int(self.sampling.max_tokens)):
            token = self._pick(logits)
            token = torch.where(done, torch.full_like(token, self.pad_id), token)
            steps_tok.append(token)
            steps_lp.append(logits.log_softmax(-1).gather(-1, token.unsqueeze(-1)).squeeze(-1))
            done = done | torch.isin(token, eos)
            if bool(done.all()):
                break
            attn = torch.cat([attn, (~done | torch.isin(token, eos)).long().unsqueeze(-1)], dim=1)
            out = self.model(
                input_ids=token.unsqueeze(-1),
                attention_mask=attn,
                position_ids=positions.unsqueeze(-1),
                use_cache=True,
                **{key: cache},
            )
            cache = output_cache(out)
            positions = positions + 1
            logits = out.logits[:, -1].float()
        tokens = torch.stack(steps_tok, 1).tolist()
        lps = torch.stack(steps_lp, 1).tolist()
        return tokens, lps

    def _pick(self, logits: Any) -> Any:
        """Greedy at temperature 0; otherwise Gumbel-max over tempered logits restricted to the top-p nucleus."""
        import torch

        s = self.sampling
        if s.temperature == 0:
            return logits.argmax(-1)
        scaled = logits / s.temperature
        if s.top_p < 1.0:
            sorted_logits, order = scaled.sort(-1, descending=True)
            cum = sorted_logits.softmax(-1).cumsum(-1)
            drop = cum - sorted_logits.softmax(-1) >= s.top_p  # keep the smallest prefix reaching top_p
            scaled = scaled.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
        gumbel = -torch.log(-torch.log(torch.rand_like(scaled).clamp_(1e-20, 1.0)))
        return (scaled + gumbel).argmax(-1)


class VLLMBackend:
    """In-process vLLM colocated with the learner on one GPU.

    Prompts are encoded exactly as the HF planner encodes them (chat template, memory shortening);
    ``sync_weights`` streams the learner's parameters into the engine with ``load_weights`` (LoRA
    adapters merged for the read) and clears the prefix cache, so each step samples the current policy.
    """

    def __init__(
        self,
        model_path: str,
        tokenizer: Any,
        sampling: SamplingParams,
        *,
        gpu_memory_utilization: float = 0.3,
        dtype: str = "bfloat16",
        seed: int = 0,
        max_prompt_tokens: int = 4096,
    ):
        try:
            import vllm
        except ImportError as exc:
            raise DependencyNotInstalled("vllm", "vllm") from exc
        # keep the engine core in this process so its model object is reachable for load_weights
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.sampling = sampling
        self.tokenizer = tokenizer
        self._encoder = HFPlanner(_NoModel(), tokenizer, sampling=sampling, max_prompt_tokens=max_prompt_tokens)
        self.llm = vllm.LLM(
            model=model_path,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype=dtype,
            seed=seed,
            enable_prefix_caching=True,
            logprobs_mode="raw_logprobs",
        )
        self._vllm = vllm

    def _engine_model(self) -> Any:
        executor = getattr(self.llm.llm_engine, "model_executor", None)
        worker = getattr(executor, "driver_worker", None)
        runner = getattr(worker, "model_runner", None) or getattr(getattr(worker, "worker", None), "model_runner", None)
        if runner is None:
            raise ConfigError(
                "this vLLM version hides its model runner; run with VLLM_ENABLE_V1_MULTIPROCESSING=0 "
                "or set backend='hf'"
            )
        return runner.model

    def sync_weights(self, model: Any) -> None:
        target = self._engine_model()
        for name, tensor in _named_weights_for_inference(model):
            target.load_weights([(name, tensor)])
        self.llm.reset_prefix_cache()

    def act(self, observations: Sequence[Observation]) -> list[str]:
        return [s.text for s in self.act_with_samples(observations)]

    def act_with_samples(self, observations: Sequence[Observation]) -> list[PolicySample]:
        from vllm.inputs import TokensPrompt

        if not observations:
            return []
        s = self.sampling
        encoded = [self._encoder.encode_prompt(obs) for obs in observations]
        greedy = s.temperature == 0
        params = self._vllm.SamplingParams(
            temperature=s.temperature,
            top_p=1.0 if greedy else s.top_p,
            top_k=-1,
            max_tokens=s.max_tokens,
            logprobs=0,
            stop=list(s.stop) or None,
        )
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids, _ in encoded], params, use_tqdm=False)
        samples = []
        for (ids, truncated), out in zip(encoded, outs):
            choice = out.outputs[0]
            resp = list(choice.token_ids)
            lps = [float(step[t].logprob) for step, t in zip(choice.logprobs or [], resp)]
            samples.append(
                PolicySample(
                    prompt_ids=ids,
                    response_ids=resp,
                    logprobs=lps,
                    text=choice.text,
                    finished=choice.finish_reason == "stop",
                    prompt_truncated=truncated,
                    temperature=float(s.temperature),
                )
            )
        return samples


class _NoModel:
    """Stands in for the HF model when only the planner's prompt encoding is used."""

    generation_config = None

    def to(self, *_: Any) -> _NoModel:
        return self


def _named_weights_for_inference(model: Any) -> Iterator[tuple[str, Any]]:
    """Plain-model parameter names and tensors; a peft model is merged for the read and unmerged after."""
    if callable(getattr(model, "merge_adapter", None)):
        model.merge_adapter()
        try:
            for name, tensor in model.get_base_model().state_dict().items():
                if "lora_" not in name:
                    yield name.replace(".base_layer", ""), tensor.data
        finally:
            model.unmerge_adapter()
    else:
        for name, tensor in model.state_dict().items():
            yield name, tensor.data


def make_backend(
    kind: str,
    model: Any,
    tokenizer: Any,
    sampling: SamplingParams,
    *,
    model_path: str = "",
    seed: int = 0,
    gpu_memory_utilization: float = 0.3,
    dtype: str = "bfloat16",
    batch_size: int | None = None,
    autocast_dtype: Any = None,
) -> RolloutBackend:
    """The backend a config names: ``hf`` (own decode loop) and ``hf-generate`` (``model.generate``) share the
    learner's model; ``vllm`` loads ``model_path`` then syncs."""
    if kind == "hf":
        return HFSamplerBackend(model, tokenizer, sampling, autocast_dtype=autocast_dtype)
    if kind == "hf-generate":
        return HFGenerateBackend(model, tokenizer, sampling=sampling, batch_size=batch_size)
    if kind == "vllm":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("backend='vllm' needs a CUDA GPU; set backend='hf' on this machine")
        backend = VLLMBackend(
            model_path, tokenizer, sampling, gpu_memory_utilization=gpu_memory_utilization, dtype=dtype, seed=seed
        )
        backend.sync_weights(model)
        return backend
    raise ConfigError(f"backend={kind!r}; set backend to 'hf', 'hf-generate' or 'vllm'")
