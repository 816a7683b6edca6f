"""Vector envs: :mod:`~agentflow_env.vector.threaded` (one process, a thread per env) and
:mod:`~agentflow_env.vector.ray` (envs as Ray actors; imports ray only when used).
"""

from agentflow_env.vector.threaded import (
    AUTORESET_MODES,
    ThreadedVectorEnv,
    VectorRunner,
    make_vector_env,
)

__all__ = ["AUTORESET_MODES", "ThreadedVectorEnv", "VectorRunner", "make_vector_env"]
