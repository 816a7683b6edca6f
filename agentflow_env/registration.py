"""Env ids ``agentflow/<Name>-v<N>``, registered from a table of string entry points.

Registering imports nothing heavy: ``benchmarks.specs:make_env`` is only imported by ``make``.
Third-party packages add envs through the entry-point group ``agentflow_env.envs`` (a callable
that calls :func:`register`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

logger = logging.getLogger(__name__)

NAMESPACE = "agentflow"
ENTRY_POINT_GROUP = "agentflow_env.envs"
_ENTRY = "benchmarks.specs:make_env"


@dataclass(frozen=True)
class EnvEntry:
    """One row of the registry table."""

    name: str
    version: int = 0
    entry_point: str = _ENTRY
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def env_id(self) -> str:
        return f"{NAMESPACE}/{self.name}-v{self.version}"


# The built-in table: the paper's ten benchmarks and the offline generated families.
BUILTIN: tuple[EnvEntry, ...] = (
    # the paper's ten benchmarks
    EnvEntry("Bamboogle", kwargs={"benchmark": "Bamboogle"}),
    EnvEntry("TwoWiki", kwargs={"benchmark": "TwoWiki"}),
    EnvEntry("HotpotQA", kwargs={"benchmark": "HotpotQA"}),
    EnvEntry("Musique", kwargs={"benchmark": "Musique"}),
    EnvEntry("GAIA", kwargs={"benchmark": "GAIA"}),
    EnvEntry("AIME24", kwargs={"benchmark": "AIME24"}),
    EnvEntry("AMC23", kwargs={"benchmark": "AMC23"}),
    EnvEntry("GameOf24", kwargs={"benchmark": "GameOf24"}),
    EnvEntry("GPQA", kwargs={"benchmark": "GPQA"}),
    EnvEntry("MedQA", kwargs={"benchmark": "MedQA"}),
    EnvEntry("Gen-GameOf24", kwargs={"benchmark": "Gen-GameOf24"}),
    EnvEntry("Gen-MultiHop", kwargs={"benchmark": "Gen-MultiHop"}),
    EnvEntry("Gen-Math", kwargs={"benchmark": "Gen-Math"}),
    EnvEntry("Gen-Science", kwargs={"benchmark": "Gen-Science"}),
    EnvEntry("Gen-Agentic", kwargs={"benchmark": "Gen-Agentic"}),
)


def register(entry: EnvEntry) -> None:
    """Register one entry (idempotent)."""
    if entry.env_id in gym.registry:
        return
    kwargs = dict(entry.kwargs)
    gym.register(id=entry.env_id, entry_point=entry.entry_point, kwargs=kwargs)


def register_envs() -> None:
    """Register the built-in table, then every plugin in the ``agentflow_env.envs`` group."""
    for entry in BUILTIN:
        register(entry)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()()
        except Exception:  # a broken plugin must not break the built-ins
            logger.exception("env plugin %s failed to register", ep.name)


def registered_ids() -> list[str]:
    """All agentflow env ids currently in Gymnasium's registry, sorted."""
    return sorted(k for k in gym.registry if k.startswith(f"{NAMESPACE}/"))
