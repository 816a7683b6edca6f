"""Vector envs: :mod:`~agentflow_env.vector.threaded` (one process, a thread per env) and
:mod:`~agentflow_env.vector.ray` (envs as Ray actors; imports ray only when used); ``scheduler.py`` (episodes in
flight, planner calls batched) and ``env_pool.py`` (``EnvPool``: envs borrowed and given back by id and kwargs).
"""

from agentflow_env.vector.env_pool import EnvPool
from agentflow_env.vector.threaded import (
    AUTORESET_MODES,
    ThreadedVectorEnv,
    VectorRunner,
    make_vector_env,
)

__all__ = ["AUTORESET_MODES", "EnvPool", "ThreadedVectorEnv", "VectorRunner", "make_vector_env"]
