"""The Python coder tool (:mod:`~agentflow_env.tools.python.tool`) and its sandbox
(:mod:`~agentflow_env.tools.python.sandbox`).
"""

from agentflow_env.tools.python.tool import (
    PythonCoderTool,
    strip_code_fences,
)

__all__ = ["PythonCoderTool", "strip_code_fences"]
