"""Data-parallel Flow-GRPO under ``torchrun`` / ``accelerate launch``: one process per rank, one policy copy each.

The launcher sets ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` (and ``MASTER_ADDR``/``MASTER_PORT``);
:meth:`DataParallel.from_env` joins the process group (gloo on CPU, nccl on CUDA). Each step every rank
draws the same B questions and plays its contiguous share of them (whole groups, so group advantages
stay local); the gradients are summed over ranks with one all-reduce, after each rank has divided its
loss by the weight of the WHOLE minibatch (every rank's turns), so the summed gradient is exactly the
single-process gradient of the same samples. Ranks take the same optimizer steps and stay identical;
only rank 0 writes logs, checkpoints and the final model. Evaluation is sharded the same way and its
counts summed; the logged rollout metrics are sums over ranks too.

Minibatches: with one minibatch per epoch (``minibatch_size`` >= all ranks' turns) a step is the
single-process step on the same samples, up to float summation order (tested). With several, every rank
cuts its own shuffled turns into the same number K = min(ceil(all turns / minibatch_size), most turns
on one rank) of slices and minibatch j is the union of the ranks' j-th slices: a random minibatch of the
same kind, though not the one a single process would draw. ``backend="vllm"`` starts one engine per rank
(one GPU per rank); that combination is untested.

Without a launcher (``WORLD_SIZE`` unset or 1) nothing here talks to ``torch.distributed``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentflow_env.error import ConfigError

__all__ = ["DataParallel"]


@dataclass
class DataParallel:
    """This process's place in the data-parallel group (``world_size == 1``: a plain single process)."""

    world_size: int = 1
    rank: int = 0
    local_rank: int = 0
    device: str = "cpu"  # where collective tensors live (nccl needs CUDA tensors)
    owns_group: bool = False

    @classmethod
    def from_env(cls, device: str) -> DataParallel:
        """Join the group a launcher described in the environment (gloo for ``cpu``, nccl for ``cuda``)."""
        world = _env_int("WORLD_SIZE", 1)
        if world <= 1:
            return cls()
        rank, local = _env_int("RANK", -1), _env_int("LOCAL_RANK", 0)
        if not 0 <= rank < world:
            raise ConfigError(f"WORLD_SIZE={world} but RANK={os.environ.get('RANK')!r}; start the run with torchrun")
        import torch
        import torch.distributed as dist

        owns = False
        if device == "cuda":
            torch.cuda.set_device(local)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device == "cuda" else "gloo")
            owns = True
        return cls(world_size=world, rank=rank, local_rank=local, device=device, owns_group=owns)

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, count: int) -> tuple[int, int]:
        """``[start, stop)`` of this rank's contiguous share of ``count`` items (the first ranks take one more)."""
        base, extra = divmod(count, self.world_size)
        start = self.rank * base + min(self.rank, extra)
        return start, start + base + (self.rank < extra)

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sum over ranks (float64), the same list on every rank."""
        if not self.enabled:
            return [float(v) for v in values]
        import torch
        import torch.distributed as dist

        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on one (so all ranks take the same branch)."""
        return self.sum([float(flag)])[0] > 0 if self.enabled else flag

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def all_reduce_grads(self, params: Sequence[Any]) -> None:
        """Sum every parameter's gradient over ranks, in one flat buffer.

        A rank without a gradient for a parameter contributes zeros; a parameter no rank has a gradient
        for keeps ``grad = None`` (so the optimizer skips it, as a single process would).
        """
        if not self.enabled:
            return
        import torch
        import torch.distributed as dist

        has = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=self.device)
        dist.all_reduce(has)
        used = [p for p, h in zip(params, has.tolist()) if h > 0]
        if not used:
            return
        for p in used:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1).to(torch.float32) for p in used])
        flat = flat.to(self.device)
        dist.all_reduce(flat)
        offset = 0
        for p in used:
            n = p.grad.numel()
            p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
            offset += n

    def broadcast_parameters(self, model: Any) -> None:
        """Rank 0's weights on every rank (the start policy must be the same everywhere)."""
        if not self.enabled:
            return
        import torch.distributed as dist

        for t in [*model.parameters(), *model.buffers()]:
            dist.broadcast(t.data, src=0)

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        if self.owns_group:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            self.owns_group = False


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not an integer; it is set by torchrun / accelerate launch") from None


def minibatch_count(n_global: int, n_most: int, size: int) -> int:
    """Minibatches per epoch when data-parallel: ceil(all turns / size), but never more than the largest
    rank's turns (so no minibatch is empty on every rank)."""
    return max(1, min(math.ceil(n_global / size), n_most))


def even_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``[start, stop)`` ranges covering ``count`` items, sizes differing by at most 1."""
    base, extra = divmod(count, parts)
    bounds, start = [], 0
    for i in range(parts):
        stop = start + base + (i < extra)
        bounds.append((start, stop))
        start = stop
    return bounds
