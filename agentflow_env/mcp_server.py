"""``agentflow-env mcp-server``: the env's tools (sandboxed Python, search, calculator, ...) served to MCP clients.

Over stdio by default (what Claude Desktop, Cursor or an ``mcp`` client launch), or streamable HTTP with
``--transport streamable-http --port P``. ``--tools calculator,python`` picks built-in tools by short name;
``--env-id agentflow/Gen-MultiHop-v1`` serves the tools of that env (its search index included). Each tool
takes one string argument, ``command``, as in the env, and answers with the text the planner would read; a
failed run comes back as an MCP tool error.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from agentflow_env.error import ConfigError, DependencyNotInstalled
from agentflow_env.tools.base import Tool, render_card

__all__ = ["build_server", "configure", "main"]

logger = logging.getLogger(__name__)

DEFAULT_TOOLS = ("calculator", "python")


def _tools(names: Sequence[str], env_id: str | None) -> tuple[list[Tool], Any]:
    if env_id:
        import gymnasium as gym

        import agentflow_env  # noqa: F401  (registers the env ids)

        env: Any = gym.make(env_id).unwrapped
        return list(env.tools), env
    from agentflow_env.tools import make_tool

    return [make_tool(name) for name in names], None


def build_server(tools: Sequence[Tool], timeout_s: float = 30.0, name: str = "agentflow-env") -> Any:
    """An ``mcp`` ``MCPServer`` with one MCP tool per env tool (``command: str`` in, the tool's text out)."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:
        raise DependencyNotInstalled("mcp", "mcp") from exc
    server = MCPServer(name)

    def runner(tool: Tool) -> Any:
        def run(command: str) -> str:
            result = tool.run(command, timeout_s)
            if not result.ok:
                raise ToolError(result.text)
            return result.text

        return run

    for tool in tools:
        server.add_tool(runner(tool), name=tool.name, description=render_card(tool), structured_output=False)
    return server


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``agentflow-env mcp-server``."""
    parser.add_argument(
        "--tools",
        default=",".join(DEFAULT_TOOLS),
        help=f"built-in tools by short name, comma-separated (default: {','.join(DEFAULT_TOOLS)})",
    )
    parser.add_argument("--env-id", default=None, help="serve the tools of this env instead (e.g. its search index)")
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http only (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="streamable-http only (default: 8765)")
    parser.add_argument("--tool-timeout", type=float, default=30.0, help="seconds per tool call (default: 30)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    names = [n.strip() for n in str(args.tools).split(",") if n.strip()]
    if not names and not args.env_id:
        raise ConfigError("name at least one tool (--tools calculator,python) or an env (--env-id)")
    if args.tool_timeout <= 0:
        raise ConfigError("--tool-timeout must be positive seconds")
    tools, env = _tools(names, args.env_id)
    server = build_server(tools, args.tool_timeout)
    try:
        if args.transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=args.host, port=args.port)
    finally:
        if env is not None:
            env.close()
        else:
            for tool in tools:
                tool.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agentflow_env.mcp_server [--tools ...] [--env-id ...] [--transport ...]``."""
    parser = argparse.ArgumentParser(description="Serve agentflow-env tools to MCP clients.")
    configure(parser)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
