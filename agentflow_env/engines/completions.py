"""Token-level completions: what an OpenAI-compatible server needs beyond the text.

An engine that can report tokens implements ``complete(prompts, sampling) -> list[list[Completion]]``:
``sampling.n`` completions per prompt, each with its token ids, raw per-token log-probs, why it ended
(``"stop"`` or ``"length"``) and the prompt's token ids. A prompt may be text, a chat, or a list of token
ids (token-exact mode: nothing is re-tokenised). :func:`complete` calls it, runs transformers engines on
their own model, and falls back to ``generate`` (text only, no token counts) for any other engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

from agentflow_env.engines.base import Prompt, SamplingParams
from agentflow_env.error import ConfigError

__all__ = ["Completion", "TokenPrompt", "complete", "reports_tokens"]

# a prompt as text, a chat, or token ids
TokenPrompt = Union[Prompt, list[int]]


@dataclass
class Completion:
    """One completion; the token fields are ``None`` when the engine does not report tokens."""

    text: str
    finish_reason: str = "stop"
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
    tokens: list[str] | None = None  # each token as text (for log-prob entries and streamed pieces)

    @property
    def prompt_tokens(self) -> int | None:
        return None if self.prompt_token_ids is None else len(self.prompt_token_ids)

    @property
    def completion_tokens(self) -> int | None:
        return None if self.token_ids is None else len(self.token_ids)


def is_token_prompt(prompt: Any) -> bool:
    return isinstance(prompt, list) and bool(prompt) and all(isinstance(t, int) for t in prompt)


def reports_tokens(engine: Any) -> bool:
    """Whether ``engine`` gives token ids, log-probs and finish reasons (and so can take token-id prompts)."""
    return callable(getattr(engine, "complete", None)) or _is_transformers(engine)


def complete(engine: Any, prompts: Sequence[TokenPrompt], sampling: SamplingParams) -> list[list[Completion]]:
    """``sampling.n`` completions for each prompt, with tokens where the engine can report them."""
    prompts = list(prompts)
    n = int(sampling.n)
    if n < 1:
        raise ConfigError(f"n={n} must be at least 1")
    if callable(getattr(engine, "complete", None)):
        return list(engine.complete(prompts, sampling))
    if _is_transformers(engine):
        return _transformers_complete(engine, prompts, sampling)
    if any(is_token_prompt(p) for p in prompts):
        raise ConfigError(f"{type(engine).__name__} takes text prompts only (it reports no tokens)")
    one = _single(sampling)
    texts = engine.generate([p for p in prompts for _ in range(n)], one)  # type: ignore[misc]
    if len(texts) != len(prompts) * n:
        raise RuntimeError(f"the engine returned {len(texts)} completions for {len(prompts) * n} prompts")
    return [[Completion(text=t) for t in texts[i * n : (i + 1) * n]] for i in range(len(prompts))]


def _single(sampling: SamplingParams) -> SamplingParams:
    from dataclasses import replace

    return replace(sampling, n=1)


def _is_transformers(engine: Any) -> bool:
    return all(hasattr(engine, a) for a in ("model", "tokenizer", "render")) and hasattr(engine.model, "generate")


def _transformers_complete(engine: Any, prompts: list[TokenPrompt], sampling: SamplingParams) -> list[list[Completion]]:
    """Completions from a transformers engine's own model: ``generate`` with its raw logits kept."""
    tok = engine.tokenizer
    encoded: list[list[int]] = []
    for p in prompts:
        ids: list[int]
        if is_token_prompt(p):
            ids = [int(t) for t in p]  # type: ignore[arg-type,union-attr]
        else:
            ids = [int(t) for t in tok(engine.render(p), add_special_tokens=False)["input_ids"]]
        limit = getattr(engine.model.config, "max_position_embeddings", None)
        if limit:
            ids = ids[-max(int(limit) - int(sampling.max_tokens), 1) :]
        vocab = int(getattr(engine.model.config, "vocab_size", 0) or 0)
        if not ids or (vocab and not all(0 <= t < vocab for t in ids)):
            raise ConfigError(f"prompt token ids must be a non-empty list of ints in [0, {vocab})")
        encoded.append(ids)
    out: list[list[Completion]] = []
    n = int(sampling.n)
    for ids in encoded:
        out.append(_transformers_one(engine, ids, sampling, n))
    return out


def _transformers_one(engine: Any, ids: list[int], sampling: SamplingParams, n: int) -> list[Completion]:
    import torch

    from agentflow_env.engines.transformers_engine import cut_at_stop, stop_criteria

    tok, model = engine.tokenizer, engine.model
    device = next(model.parameters()).device
    input_ids = torch.tensor([ids] * n, dtype=torch.long, device=device)
    kwargs: dict[str, Any] = {
        "max_new_tokens": int(sampling.max_tokens),
        "pad_token_id": tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        "return_dict_in_generate": True,
        "output_logits": True,
    }
    if sampling.temperature > 0:
        kwargs.update(do_sample=True, temperature=float(sampling.temperature), top_p=float(sampling.top_p), top_k=0)
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    if any(sampling.stop):
        kwargs.update(stopping_criteria=stop_criteria(tok, sampling.stop, len(ids)))
    with torch.random.fork_rng(devices=[] if device.type == "cpu" else None, enabled=sampling.seed is not None):
        if sampling.seed is not None:
            torch.manual_seed(int(sampling.seed))
        with torch.inference_mode():
            gen = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), **kwargs)
    new = gen.sequences[:, len(ids) :]
    logp = torch.stack(gen.logits, dim=1).float().log_softmax(-1)  # [n, steps, V], raw (unprocessed) logits
    eos = _eos_ids(model, tok)
    completions = []
    for row in range(n):
        tokens = new[row].tolist()
        cut = next((k for k, t in enumerate(tokens) if t in eos), None)
        tokens = tokens if cut is None else tokens[: cut + 1]
        pad = kwargs["pad_token_id"]
        while cut is None and tokens and tokens[-1] == pad and pad not in eos:  # a row that stopped on a string
            tokens.pop()
        lps = logp[row, torch.arange(len(tokens)), torch.tensor(tokens, dtype=torch.long)].tolist() if tokens else []
        raw = tok.decode(tokens, skip_special_tokens=True)
        text = cut_at_stop(raw, sampling.stop)
        stopped = cut is not None or text != raw or len(tokens) < int(sampling.max_tokens)
        completions.append(
            Completion(
                text=text,
                finish_reason="stop" if stopped else "length",
                token_ids=tokens,
                logprobs=[float(x) for x in lps],
                prompt_token_ids=list(ids),
                tokens=[tok.decode([t]) for t in tokens],
            )
        )
    return completions


def _eos_ids(model: Any, tok: Any) -> set[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tok.eos_token_id is not None:
        ids.add(int(tok.eos_token_id))
    return ids
