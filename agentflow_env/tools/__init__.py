"""Tool registry: the built-ins by short name, plus third-party tools from the ``agentflow_env.tools`` group."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.tools.base import BaseTool, Tool, ToolResult, normalize_tool_name, render_card

__all__ = [
    "BUILTIN_TOOLS",
    "BaseTool",
    "Tool",
    "ToolResult",
    "available_tools",
    "make_tool",
    "normalize_tool_name",
    "render_card",
]

ENTRY_POINT_GROUP = "agentflow_env.tools"

# short name -> "module:Class"; imported only when the tool is made
BUILTIN_TOOLS: dict[str, str] = {
    "calculator": "agentflow_env.tools.calculator.tool:CalculatorTool",
    "python": "agentflow_env.tools.python.tool:PythonCoderTool",
    "search": "agentflow_env.tools.search:BM25SearchTool",
    "wikipedia": "agentflow_env.tools.wikipedia:WikipediaSearchTool",
    "web_search": "agentflow_env.tools.web_search:WebSearchTool",
    "generator": "agentflow_env.tools.generator:BaseGeneratorTool",
}


def available_tools() -> dict[str, str]:
    """Short name -> import path of every tool, built-in and plugin."""
    table = dict(BUILTIN_TOOLS)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        table.setdefault(ep.name, ep.value)
    return table


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def make_tool(name: str, **kwargs: Any) -> Tool:
    """Build a tool by short name (``calculator``, ``python``, ``search``, ...)."""
    if name in BUILTIN_TOOLS:  # built-ins win over plugins anyway: no entry-point scan (tens of ms) for them
        return _load(BUILTIN_TOOLS[name])(**kwargs)
    table = available_tools()
    if name not in table:
        raise ConfigError(f"unknown tool {name!r}; available: {', '.join(sorted(table))}")
    return _load(table[name])(**kwargs)
