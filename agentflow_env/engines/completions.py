"""Token-level completions: what an OpenAI-compatible server needs beyond the text.

Transformers engines generate each batch of prompts in one left-padded ``generate`` (``batch_size`` rows
at a time, ``n`` rows per prompt). An engine that can report tokens implements
``complete(prompts, sampling) -> list[list[Completion]]``:
``sampling.n`` completions per prompt, each with its token ids, raw per-token log-probs, why it ended
(``"stop"`` or ``"length"``) and the prompt's token ids. A prompt may be text, a chat, or a list of token
ids (token-exact mode: nothing is re-tokenised). :func:`complete` calls it, runs transformers engines on
their own model, and falls back to ``generate`` (text only, no token counts) for any other engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


def complete(
    engine: Any,
    prompts: Sequence[TokenPrompt],
    sampling: SamplingParams,
    abandoned: Callable[[], Sequence[bool]] | None = None,
) -> list[list[Completion]]:
    """``sampling.n`` completions for each prompt, with tokens where the engine can report them.

    ``abandoned()`` (one flag per prompt) lets a transformers engine stop generating, mid-batch, the
    prompts nobody waits for any more (their completions come back cut short, to be dropped)."""
    prompts = list(prompts)
    n = int(sampling.n)
    if n < 1:
        raise ConfigError(f"n={n} must be at least 1")
    if callable(getattr(engine, "complete", None)):
        return list(engine.complete(prompts, sampling))
    if _is_transformers(engine):
        return _transformers_complete(engine, prompts, sampling, abandoned)
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


def _transformers_complete(
    engine: Any,
    prompts: list[TokenPrompt],
    sampling: SamplingParams,
    abandoned: Callable[[], Sequence[bool]] | None = None,
) -> list[list[Completion]]:
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
    n = int(sampling.n)
    rows = max(int(getattr(engine, "batch_size", 32) or 32) // n, 1)  # prompts per generate call
    out: list[list[Completion]] = []
    lock = getattr(engine, "_lock", None)  # the engine's own generate holds it too
    for start in range(0, len(encoded), rows):
        gone = None if abandoned is None else _Abandoned(abandoned, start, n)
        if lock is not None:
            with lock:
                out.extend(_transformers_batch(engine, encoded[start : start + rows], sampling, n, gone))
        else:
            out.extend(_transformers_batch(engine, encoded[start : start + rows], sampling, n, gone))
    return out


class _Abandoned:
    """Stops the rows of prompts nobody waits for (``check()[offset + row // n]``)."""

    def __init__(self, check: Callable[[], Sequence[bool]], offset: int, n: int):
        self.check, self.offset, self.n = check, offset, n

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        flags = list(self.check())
        rows = [bool(flags[self.offset + r // self.n]) for r in range(int(input_ids.shape[0]))]
        return torch.tensor(rows, dtype=torch.bool, device=input_ids.device)


def _transformers_batch(
    engine: Any, prompts: list[list[int]], sampling: SamplingParams, n: int, gone: Any = None
) -> list[list[Completion]]:
    """``n`` completions of each prompt in one ``generate``: the rows left-padded to the longest prompt."""
    import torch

    from agentflow_env.engines.transformers_engine import cut_at_stop

    tok, model = engine.tokenizer, engine.model
    device = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    width = max(len(ids) for ids in prompts)
    rows = [ids for ids in prompts for _ in range(n)]
    input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], dtype=torch.long, device=device)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long, device=device)
    kwargs: dict[str, Any] = {
        "max_new_tokens": int(sampling.max_tokens),
        "pad_token_id": pad,
        "return_dict_in_generate": True,
        "output_logits": True,
    }
    if sampling.temperature > 0:
        kwargs.update(do_sample=True, temperature=float(sampling.temperature), top_p=float(sampling.top_p), top_k=0)
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    criteria = [_StopInReply(tok, list(sampling.stop), width)] if sampling.stop else []
    if gone is not None:
        criteria.append(gone)
    if criteria:
        kwargs["stopping_criteria"] = criteria
    with torch.random.fork_rng(devices=[] if device.type == "cpu" else None, enabled=sampling.seed is not None):
        if sampling.seed is not None:
            torch.manual_seed(int(sampling.seed))
        with torch.inference_mode():
            gen = model.generate(input_ids=input_ids, attention_mask=mask, **kwargs)
    new = gen.sequences[:, width:]
    logp = torch.stack(gen.logits, dim=1).float().log_softmax(-1)  # [rows, steps, V], raw (unprocessed) logits
    eos = _eos_ids(model, tok)
    out: list[list[Completion]] = []
    for row, ids in enumerate(rows):
        tokens = new[row].tolist()
        cut = next((k for k, t in enumerate(tokens) if t in eos), None)
        tokens = tokens if cut is None else tokens[: cut + 1]
        while cut is None and tokens and tokens[-1] == pad and pad not in eos:  # a row that stopped on a string
            tokens.pop()
        lps = logp[row, torch.arange(len(tokens)), torch.tensor(tokens, dtype=torch.long)].tolist() if tokens else []
        raw = tok.decode(tokens, skip_special_tokens=True)
        text = cut_at_stop(raw, sampling.stop)
        stopped = cut is not None or text != raw or len(tokens) < int(sampling.max_tokens)
        completion = Completion(
            text=text,
            finish_reason="stop" if stopped else "length",
            token_ids=tokens,
            logprobs=[float(x) for x in lps],
            prompt_token_ids=list(ids),
            tokens=[tok.decode([t]) for t in tokens],
        )
        if row % n == 0:
            out.append([])
        out[-1].append(completion)
    return out


class _StopInReply:
    """Stops a row once a stop string appears in its reply (the generated text only: transformers'
    ``stop_strings`` also match across the prompt's end, so a prompt ending in ``:`` with the stop ``::``
    stopped after one ``:``). Only the tail that can hold a new match is decoded at each step."""

    def __init__(self, tokenizer: Any, stop: list[str], start: int):
        self.tokenizer, self.stop, self.start = tokenizer, [s for s in stop if s], start
        self.tail = max((len(s) for s in self.stop), default=1) + 2  # tokens: each spells at least one char

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        new = input_ids[:, self.start :]
        done = [
            any(s in self.tokenizer.decode(row[-self.tail :], skip_special_tokens=True) for s in self.stop)
            for row in new.tolist()
        ]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def _eos_ids(model: Any, tok: Any) -> set[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tok.eos_token_id is not None:
        ids.add(int(tok.eos_token_id))
    return ids
