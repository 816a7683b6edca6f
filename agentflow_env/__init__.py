"""agentflow-env: Gymnasium environments for AgentFlow-style multi-turn tool use.

Importing the package registers the ``agentflow/*`` env ids; it never imports torch.
"""

from agentflow_env.core import AgentFlowEnv
from agentflow_env.registration import register_envs, registered_ids
from agentflow_env.types import MemoryStep, Task, ToolResult, TurnRecord

__version__ = "0.1.0"

__all__ = ["AgentFlowEnv", "MemoryStep", "Task", "ToolResult", "TurnRecord", "__version__", "registered_ids"]

register_envs()
