"""The policy protocol: batched ``act`` over a list of observations; helpers for vector obs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

Observation = Mapping[str, str]


@runtime_checkable
class Policy(Protocol):
    """Anything with ``act(observations) -> actions`` plugs into the envs (one action per obs)."""

    def act(self, observations: Sequence[Observation]) -> list[str]: ...


def as_obs_list(obs: Any) -> list[dict[str, str]]:
    """A single observation, a list of them, or a vector env's dict of tuples -> a list of dicts."""
    if isinstance(obs, Mapping):
        values = list(obs.values())
        if values and isinstance(values[0], str):
            return [dict(obs)]
        keys = list(obs)
        n = len(obs[keys[0]]) if keys else 0
        return [{k: obs[k][i] for k in keys} for i in range(n)]
    return [dict(o) for o in obs]
