"""The calculator tool: exact arithmetic in :mod:`~agentflow_env.tools.calculator.tool`, symbolic maths in helper
processes (:mod:`~agentflow_env.tools.calculator.symbolic`, size bounds in
:mod:`~agentflow_env.tools.calculator.bounds`).
"""

from agentflow_env.tools.calculator.tool import (
    CalculatorTool,
    SymbolicAnswer,
)

__all__ = ["CalculatorTool", "SymbolicAnswer"]
