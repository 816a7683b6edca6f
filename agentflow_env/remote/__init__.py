"""Envs in other processes: :mod:`~agentflow_env.remote.server` (``agentflow-env env-server``) and
:mod:`~agentflow_env.remote.client` (:class:`RemoteEnv`).
"""

from agentflow_env.remote.client import (
    RemoteEnv,
    RemoteEnvBatch,
    RemoteEnvError,
)

__all__ = ["RemoteEnv", "RemoteEnvBatch", "RemoteEnvError"]
