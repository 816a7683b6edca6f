"""The transformers in-process engine: batched, left-padded generation with the model's chat template.

Honours every ``SamplingParams`` field: temperature 0 is greedy, top_p, max_tokens, stop strings, seed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from agentflow_env.engines.base import Prompt, SamplingParams, as_chat
from agentflow_env.error import ConfigError, DependencyNotInstalled

__all__ = ["TransformersEngine", "cut_at_stop", "stop_criteria"]

logger = logging.getLogger(__name__)


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first stop string (which is dropped, as OpenAI-compatible servers do)."""
    cut = len(text)
    for s in stop:
        if s:
            at = text.find(s)
            if 0 <= at < cut:
                cut = at
    return text[:cut]


def stop_criteria(tokenizer: Any, stop: Sequence[str], prompt_len: int) -> Any:
    """Stopping criteria that end a row when one of ``stop`` appears in its *generated* text.

    ``generate(stop_strings=...)`` also matches a stop string that starts inside the prompt (prompt "Answer:",
    stop "::", first token ":"), which stops a row whose completion holds no stop string at all. OpenAI-style
    servers match within the completion only; so does this. Only the last tokens are decoded at each step.
    """
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    stops = [s for s in stop if s]
    window = 8 * max((len(s) for s in stops), default=1) + 16  # tokens: a stop string spans fewer than this

    class _StopInCompletion(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            new = input_ids[:, prompt_len:]
            texts = tokenizer.batch_decode(new[:, -window:], skip_special_tokens=True) if new.shape[1] else []
            hits = [any(s in t for s in stops) for t in texts] or [False] * input_ids.shape[0]
            return torch.tensor(hits, dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([_StopInCompletion()])


class TransformersEngine:
    """A causal LM from ``transformers``, run in this process.

    ``model``/``tokenizer`` are paths, hub ids or loaded objects. Chat prompts go through the
    tokenizer's chat template (with the generation prompt); plain strings are used as they are.
    Prompts are generated ``batch_size`` at a time with left padding; a prompt longer than the
    context minus ``max_tokens`` keeps its last tokens. ``device``: ``"cpu"``,
    ``"cuda"``, ... (default: CUDA when available). ``dtype``: e.g. ``"bfloat16"`` (default: the
    checkpoint's). Calls are serialised by a lock, so one engine can serve several threads.
    ``threads`` sets torch's CPU thread count (process-wide); 1 is fastest for tiny models on
    a busy machine, where threads mostly wait on each other.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 32,
        trust_remote_code: bool = False,
        use_chat_template: bool | None = None,
        threads: int | None = None,
    ):
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise DependencyNotInstalled(exc.name or "transformers", "train") from exc
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
        if threads is not None:
            torch.set_num_threads(int(threads))
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.name = model if isinstance(model, str) else type(model).__name__
        if isinstance(model, str):
            kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
            if dtype is not None:
                kwargs["dtype"] = getattr(torch, dtype) if isinstance(dtype, str) else dtype
            source = tokenizer if isinstance(tokenizer, str) else model
            tokenizer = (
                tokenizer
                if tokenizer is not None and not isinstance(tokenizer, str)
                else (AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code))
            )
            model = AutoModelForCausalLM.from_pretrained(model, **kwargs)
        elif tokenizer is None:
            raise ConfigError("a loaded model needs its tokenizer: TransformersEngine(model, tokenizer)")
        elif isinstance(tokenizer, str):
            tokenizer = AutoTokenizer.from_pretrained(tokenizer, trust_remote_code=trust_remote_code)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.batch_size = int(batch_size)
        has_template = getattr(self.tokenizer, "chat_template", None) is not None
        self.use_chat_template = has_template if use_chat_template is None else use_chat_template
        self._lock = threading.Lock()

    @classmethod
    def from_spec(cls, target: str, **options: Any) -> TransformersEngine:
        return cls(target, **options)

    def __repr__(self) -> str:
        return f"TransformersEngine(model={self.name!r}, device={self.device!r}, batch_size={self.batch_size})"

    # ------------------------------------------------------------------ Engine protocol
    def render(self, prompt: Prompt) -> str:
        """The exact text the model sees: a string as given (no special tokens added), a chat through
        the chat template (or as ``role: content`` blocks when the tokenizer has none)."""
        if isinstance(prompt, str):
            return prompt
        if not self.use_chat_template:
            from agentflow_env.engines.base import prompt_text

            return prompt_text(prompt)
        return self.tokenizer.apply_chat_template(as_chat(prompt), tokenize=False, add_generation_prompt=True)

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingParams | None = None) -> list[str]:
        sampling = sampling or SamplingParams()
        if sampling.n != 1:
            raise ConfigError("engines return one completion per prompt; repeat the prompt instead of n > 1")
        texts = [self.render(p) for p in prompts]
        out: list[str] = []
        with self._lock:
            for start in range(0, len(texts), self.batch_size):
                out.extend(self._batch(texts[start : start + self.batch_size], sampling, start))
        return out

    def _batch(self, texts: list[str], sampling: SamplingParams, offset: int) -> list[str]:
        import torch

        tok = self.tokenizer
        sides = tok.padding_side, tok.truncation_side
        # generation appends on the right, so pad on the left; an overlong prompt loses its oldest
        # tokens rather than the end the model must continue
        tok.padding_side = tok.truncation_side = "left"
        limit = getattr(self.model.config, "max_position_embeddings", None)
        fit = {"truncation": True, "max_length": max(int(limit) - int(sampling.max_tokens), 1)} if limit else {}
        try:
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False, **fit).to(self.device)
        finally:
            tok.padding_side, tok.truncation_side = sides
        kwargs: dict[str, Any] = {"max_new_tokens": int(sampling.max_tokens), "pad_token_id": tok.pad_token_id}
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=float(sampling.temperature), top_p=float(sampling.top_p), top_k=0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if any(sampling.stop):
            kwargs.update(stopping_criteria=stop_criteria(tok, sampling.stop, enc["input_ids"].shape[1]))
        with torch.random.fork_rng(devices=[] if self.device == "cpu" else None, enabled=sampling.seed is not None):
            if sampling.seed is not None:
                # the global RNG is restored afterwards; batches after the first get shifted seeds
                torch.manual_seed(int(sampling.seed) + offset)
            with torch.inference_mode():
                ids = self.model.generate(**enc, **kwargs)
        new = ids[:, enc["input_ids"].shape[1] :]
        decoded = tok.batch_decode(new, skip_special_tokens=True)
        return [cut_at_stop(t, sampling.stop) for t in decoded]
