"""Envs and the Python sandbox in other processes: :mod:`~agentflow_env.remote.server` (``agentflow-env
env-server``) and :mod:`~agentflow_env.remote.client` (:class:`RemoteEnv`); :mod:`~agentflow_env.remote.sandbox_server`
(``agentflow-env sandbox-server``, SandboxFusion's ``/run_code``); the HTTP serving they share,
:mod:`~agentflow_env.remote.http_serving`.
"""

from agentflow_env.remote.client import (
    RemoteEnv,
    RemoteEnvBatch,
    RemoteEnvError,
)

__all__ = ["RemoteEnv", "RemoteEnvBatch", "RemoteEnvError"]
