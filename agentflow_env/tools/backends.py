"""What answers an env's search tools: online services, a local or remote retriever (with its fingerprint), or
nothing at all. A run records this beside its scores, and a protocol can refuse to start without backends.

:func:`describe_backend` reads one tool (a search tool, a web search tool, one of the paper flow's stand-ins or
online tools); :func:`env_search_backends` reads every search tool of an env (the modes flow's ``tools`` or the
paper flow's ``toolbox``). Tools that search nothing (calculator, Python, generalist) are left out.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BACKEND_KINDS", "describe_backend", "env_search_backends"]

#: the backend kinds a search tool can have
BACKEND_KINDS = ("online", "local", "remote", "missing")


def describe_backend(tool: Any) -> dict[str, Any] | None:
    """``{"backend": "online"|"local"|"remote"|"missing", ...}`` of a search tool; ``None`` for other tools."""
    from agentflow_env.tools.search import BM25SearchTool
    from agentflow_env.tools.web_search import WebSearchTool

    if isinstance(tool, BM25SearchTool):
        return tool.backend()
    if isinstance(tool, WebSearchTool):
        resolved = tool.resolve()
        if isinstance(resolved, str):
            return {"backend": "missing", "error": resolved, "fingerprint": None}
        provider = resolved[0]
        return {"backend": "online", "service": getattr(provider, "name", type(provider).__name__), "fingerprint": None}
    service = getattr(tool, "online_backend", None)
    if service:
        return {"backend": "online", "service": str(service), "fingerprint": None}
    inner = getattr(tool, "backend", None)  # the paper flow's stand-ins run one of this project's tools
    if _is_tool(inner):
        return describe_backend(inner)
    return None


def _is_tool(value: Any) -> bool:
    return value is not None and hasattr(value, "run") and hasattr(value, "name")


def env_search_backends(env: Any) -> dict[str, dict[str, Any]]:
    """Tool name -> :func:`describe_backend` for every search tool of ``env`` (the unwrapped env)."""
    tools = getattr(env, "toolbox", None)
    items = list(tools.items()) if isinstance(tools, dict) else [(t.name, t) for t in getattr(env, "tools", [])]
    out = {}
    for name, tool in items:
        info = describe_backend(tool)
        if info is not None:
            out[str(name)] = info
    return out
