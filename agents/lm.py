"""The token maths policies and training share: padding, teacher-forced log-probs, and the key/value cache.

- :func:`pad_left` / :func:`pad_right`: ``(input_ids, attention_mask)`` for generation / teacher forcing;
- :func:`sequence_logprobs`: per-token log-probs of responses given prompts, batched (the learner and SFT);
- :func:`teacher_forced`: the same for one response, with the best log-prob at each step (checking a
  rollout engine's log-probs against the learner's model);
- :func:`cache_kwarg` / :func:`output_cache`: the key/value cache across transformers versions.

Log-prob convention: *raw* next-token distributions (``log_softmax(logits)`` at temperature 1, no top-p
cut) unless ``temperature`` says otherwise; see :mod:`agents.policies.hf_policy`.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from typing import Any

from agentflow_env.error import DependencyNotInstalled

__all__ = [
    "cache_kwarg",
    "forward_last",
    "model_device",
    "output_cache",
    "pad_left",
    "pad_right",
    "sequence_logprobs",
    "teacher_forced",
]


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise DependencyNotInstalled("torch", "train") from exc
    return torch


# ---------------------------------------------------------------------------------------------- padding
def _pad(rows: Sequence[Sequence[int]], pad_id: int, *, left: bool) -> tuple[Any, Any]:
    torch = _torch()
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            cols = slice(width - len(r), width) if left else slice(0, len(r))
            ids[i, cols] = torch.tensor(list(r), dtype=torch.long)
            mask[i, cols] = 1
    return ids, mask


def pad_left(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any]:
    """``(input_ids, attention_mask)`` long tensors, padded on the left (for generation)."""
    return _pad(rows, pad_id, left=True)


def pad_right(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any]:
    """``(input_ids, attention_mask)`` long tensors, padded on the right (for teacher forcing)."""
    return _pad(rows, pad_id, left=False)


# ---------------------------------------------------------------------------------------------- forward
def model_device(model: Any) -> Any:
    device = getattr(model, "device", None)
    if device is not None:
        return device
    return next(model.parameters()).device


def forward_last(model: Any, ids: Any, mask: Any, positions: Any, keep: int) -> Any:
    """Logits of the last ``keep`` columns; models without ``logits_to_keep`` compute all and slice."""
    try:
        return model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep).logits
    except TypeError:
        return model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -keep:]


def _response_log_softmax(
    model: Any,
    prompt_ids_list: Sequence[Sequence[int]],
    response_ids_list: Sequence[Sequence[int]],
    pad_id: int,
    temperature: float,
    batch_size: int | None,
) -> Iterator[tuple[int, Any, Any]]:
    """``(row, log_softmax over the vocabulary at each response position, response token ids)`` for every
    non-empty response, by teacher forcing (see :func:`sequence_logprobs` for the layout)."""
    torch = _torch()
    if len(prompt_ids_list) != len(response_ids_list):
        raise ValueError(f"{len(prompt_ids_list)} prompts but {len(response_ids_list)} responses")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive for log-probs, got {temperature}")
    device = model_device(model)
    todo = [i for i in range(len(prompt_ids_list)) if len(response_ids_list[i]) > 0]
    if any(len(prompt_ids_list[i]) == 0 for i in todo):
        raise ValueError("a prompt is empty: a response needs at least one prompt token to condition on")
    step = batch_size or max(len(todo), 1)
    for start in range(0, len(todo), step):
        chunk = todo[start : start + step]
        width_p = max(len(prompt_ids_list[i]) for i in chunk)
        width_r = max(len(response_ids_list[i]) for i in chunk)
        ids = torch.full((len(chunk), width_p + width_r), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for k, i in enumerate(chunk):
            p, r = list(prompt_ids_list[i]), list(response_ids_list[i])
            ids[k, width_p - len(p) : width_p + len(r)] = torch.tensor(p + r, dtype=torch.long)
            mask[k, width_p - len(p) : width_p + len(r)] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        # the logits of columns width_p-1 .. width_p+width_r-1 predict the response tokens
        logits = forward_last(model, ids.to(device), mask.to(device), positions.to(device), width_r + 1)
        for k, i in enumerate(chunk):
            n = len(response_ids_list[i])
            row_logits = logits[k, :n].float()
            if temperature != 1.0:
                row_logits = row_logits / temperature
            yield i, torch.log_softmax(row_logits, dim=-1), ids[k, width_p : width_p + n].to(device)


def sequence_logprobs(
    model: Any,
    prompt_ids_list: Sequence[Sequence[int]],
    response_ids_list: Sequence[Sequence[int]],
    pad_id: int,
    *,
    temperature: float = 1.0,
    batch_size: int | None = None,
) -> list[Any]:
    """Per-token log-probs of each response given its prompt, by teacher forcing.

    Each batch row is ``[pad... prompt][response ...pad]``: prompts are padded on the left and
    responses on the right, so every response starts in the same column. Padding is masked and
    positions come from the mask, so padding never counts and a row scores the same alone or in
    a batch (and the same as during left-padded generation). Only the response columns go through
    the LM head (``logits_to_keep``), which saves the vocabulary projection of every prompt token.

    Row ``i`` of the result is a 1-D float32 tensor of length ``len(response_ids_list[i])`` (empty
    responses give empty tensors). Gradients flow when called under grad mode (the learner's use);
    wrap in ``torch.no_grad()`` for old/reference log-probs. ``temperature`` divides the logits
    first (1.0 = the raw distribution, the convention of :class:`~agents.policies.hf_policy.PolicySample`).
    """
    torch = _torch()
    device = model_device(model)
    out: list[Any] = [torch.zeros(0, dtype=torch.float32, device=device) for _ in prompt_ids_list]
    rows = _response_log_softmax(model, prompt_ids_list, response_ids_list, pad_id, temperature, batch_size)
    for i, logp, targets in rows:
        out[i] = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return out


def teacher_forced(model: Any, prompt_ids: Sequence[int], tokens: Sequence[int]) -> tuple[list[float], list[float]]:
    """Raw log-probs of ``tokens`` after ``prompt_ids`` under ``model``, and the best log-prob at each step.

    Runs in eval mode without gradients (the model's training mode is restored after).
    """
    torch = _torch()
    if not tokens:
        return [], []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            ((_, logp, targets),) = _response_log_softmax(model, [prompt_ids], [tokens], 0, 1.0, None)
    finally:
        if was_training:
            model.train()
    picked = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked.tolist(), logp.max(-1).values.tolist()


# ---------------------------------------------------------------------------------------------- key/value cache
_CACHE_KWARG: dict[type, str] = {}


def cache_kwarg(model: Any) -> str:
    """The forward() keyword of the key/value cache: ``cache`` in recent transformers, else ``past_key_values``."""
    cls = type(model.get_base_model() if hasattr(model, "get_base_model") else model)
    if cls not in _CACHE_KWARG:
        _CACHE_KWARG[cls] = "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"
    return _CACHE_KWARG[cls]


def output_cache(out: Any) -> Any:
    """The key/value cache a forward returned."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values
