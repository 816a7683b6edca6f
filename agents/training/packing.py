"""Turn samples and their token layout: packing a batch of (prompt, response) turns into padded tensors
(one row per turn, or each distinct prompt once with a shared key/value cache) and their token log-probs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.lm import cache_kwarg, output_cache

if TYPE_CHECKING:
    import torch

__all__ = ["TurnSample", "pack_samples", "pad_values", "token_logprobs"]


@dataclass
class TurnSample:
    """One training sample: a planner turn (prompt = its observation, response = its action)."""

    prompt_ids: list[int]
    response_ids: list[int]
    advantage: float
    weight: float = 1.0  # the turn's weight in the loss (see turn_weights)
    rollout_logprobs: list[float] = field(default_factory=list)
    old_logprobs: list[float] = field(default_factory=list)
    ref_logprobs: list[float] = field(default_factory=list)


def _pack(samples: Sequence[TurnSample], pad_id: int, device: Any) -> dict[str, torch.Tensor]:
    """Left-pad prompts and right-pad responses, so every response starts at the same column."""
    import torch

    p_width = max(len(s.prompt_ids) for s in samples)
    t_width = max(max(len(s.response_ids) for s in samples), 1)
    n = len(samples)
    ids = torch.full((n, p_width + t_width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    mask = torch.zeros((n, t_width), dtype=torch.float32)
    for i, s in enumerate(samples):
        p, r = s.prompt_ids, s.response_ids
        ids[i, p_width - len(p) : p_width] = torch.tensor(p, dtype=torch.long)
        attn[i, p_width - len(p) : p_width] = 1
        if r:
            ids[i, p_width : p_width + len(r)] = torch.tensor(r, dtype=torch.long)
            attn[i, p_width : p_width + len(r)] = 1
            mask[i, : len(r)] = 1.0
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    return {
        "targets": ids[:, p_width:].to(device),
        "input_ids": ids.to(device),
        "attention_mask": attn.to(device),
        "position_ids": positions.to(device),
        "mask": mask.to(device),
        "t_width": torch.tensor(t_width),
    }


def token_logprobs(
    model: Any, batch: dict[str, torch.Tensor], temperature: float = 1.0, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs ``[N, T]`` of the response tokens under ``model`` (and their entropy when asked).

    ``batch`` comes from :func:`_pack` (one row per sample) or :func:`_pack_shared` (each distinct
    prompt runs once and its key/value cache is shared by every response to it, gradients included).
    """
    if "prompt_ids" in batch:
        logits = _shared_prefix_logits(model, batch)
    else:
        t_width = int(batch["t_width"])
        out = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            position_ids=batch["position_ids"],
            logits_to_keep=t_width + 1,
            use_cache=False,
        )
        logits = out.logits[:, :-1, :]
    logits = logits.float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    logp_all = logits.log_softmax(-1)
    logp = logp_all.gather(-1, batch["targets"].unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def _pack_shared(samples: Sequence[TurnSample], pad_id: int, device: Any) -> dict[str, torch.Tensor]:
    """Distinct prompts once (left-padded) and responses (right-padded) with each one's prompt index.

    A group's G first turns share their prompt, so the prompt's forward (and backward) runs once
    instead of G times; responses attend to a copy of its key/value cache.
    """
    import torch

    index: dict[tuple[int, ...], int] = {}
    rows = [index.setdefault(tuple(s.prompt_ids), len(index)) for s in samples]
    prompts = list(index)
    p_width = max(len(p) for p in prompts)
    t_width = max(max(len(s.response_ids) for s in samples), 1)
    p_ids = torch.full((len(prompts), p_width), pad_id, dtype=torch.long)
    p_attn = torch.zeros_like(p_ids)
    for i, p in enumerate(prompts):
        p_ids[i, p_width - len(p) :] = torch.tensor(p, dtype=torch.long)
        p_attn[i, p_width - len(p) :] = 1
    targets = torch.full((len(samples), t_width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(samples), t_width), dtype=torch.float32)
    for i, s in enumerate(samples):
        if s.response_ids:
            targets[i, : len(s.response_ids)] = torch.tensor(s.response_ids, dtype=torch.long)
            mask[i, : len(s.response_ids)] = 1.0
    row_index = torch.tensor(rows, dtype=torch.long)
    p_len = p_attn.sum(-1)
    r_positions = p_len[row_index].unsqueeze(-1) + torch.arange(t_width).unsqueeze(0)
    full_attn = torch.cat([p_attn[row_index], mask.long()], dim=1)
    return {
        "prompt_ids": p_ids.to(device),
        "prompt_attention": p_attn.to(device),
        "prompt_positions": (p_attn.cumsum(-1) - 1).clamp(min=0).to(device),
        "row_index": row_index.to(device),
        "targets": targets.to(device),
        "response_positions": r_positions.to(device),
        "full_attention": full_attn.to(device),
        "mask": mask.to(device),
        "t_width": torch.tensor(t_width),
    }


def _shared_prefix_logits(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``[N, T, V]`` next-token logits of each response, with each distinct prompt run once."""
    import torch

    t_width = int(batch["t_width"])
    out = model(
        input_ids=batch["prompt_ids"],
        attention_mask=batch["prompt_attention"],
        position_ids=batch["prompt_positions"],
        use_cache=True,
        logits_to_keep=1,
    )
    rows = batch["row_index"]
    first = out.logits[:, -1][rows].unsqueeze(1)  # predicts response token 0
    if t_width == 1:
        return first
    cache = output_cache(out)
    cache.reorder_cache(rows)  # one cache row per response (index_select keeps the autograd graph)
    rest = model(
        input_ids=batch["targets"][:, :-1],
        attention_mask=batch["full_attention"][:, :-1],
        position_ids=batch["response_positions"][:, :-1],
        use_cache=True,
        **{cache_kwarg(model): cache},
    ).logits
    return torch.cat([first, rest], dim=1)


def pack_samples(samples: Sequence[TurnSample], pad_id: int, device: Any, share_prompts: bool = True) -> dict:
    """The cheaper layout for these samples: shared prompts when some repeat, one row per sample otherwise."""
    if share_prompts and len({tuple(s.prompt_ids) for s in samples}) <= 0.75 * len(samples):
        return _pack_shared(samples, pad_id, device)
    return _pack(samples, pad_id, device)


def pad_values(rows: Sequence[Sequence[float]], mask: torch.Tensor) -> torch.Tensor:
    """``rows`` of per-token values right-padded with 0 to the shape of ``mask``."""
    import torch

    out = torch.zeros_like(mask, dtype=torch.float32)
    for i, row in enumerate(rows):
        if row:
            out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out.to(mask.device)
