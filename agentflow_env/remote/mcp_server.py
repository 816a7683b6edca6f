"""``agentflow-env mcp-server``: the env's tools (sandboxed Python, search, calculator, ...) served to MCP clients.

Over stdio by default (what Claude Desktop, Cursor or an ``mcp`` client launch), or streamable HTTP with
``--transport streamable-http --port P``. ``--tools calculator,python`` picks built-in tools by short name;
``--env-id agentflow/Gen-MultiHop-v2`` serves the tools of that env (its search index included). Each tool
takes one string argument, ``command``, as in the env, and answers with the text the planner would read; a
failed run comes back as an MCP tool error.

Exposure follows ``env-server``'s rules (:mod:`agentflow_env.remote.exposure`): streamable HTTP binds loopback by
default; any other address needs a token (``--token`` or ``$AGENTFLOW_MCP_SERVER_TOKEN``, 16+ characters),
and then every request must carry ``Authorization: Bearer <token>`` (else 401).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Sequence
from typing import Any

from agentflow_env.error import ConfigError, DependencyNotInstalled
from agentflow_env.remote.exposure import authorized, check_exposure, expected_header
from agentflow_env.tools.base import Tool, render_card

__all__ = ["TOKEN_ENV", "build_server", "configure", "http_app", "main"]

logger = logging.getLogger(__name__)

DEFAULT_TOOLS = ("calculator", "python")
#: the environment variable ``mcp-server`` reads its token from
TOKEN_ENV = "AGENTFLOW_MCP_SERVER_TOKEN"


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


def http_app(server: Any, host: str, token: str | None) -> Any:
    """The server's streamable-HTTP ASGI app, behind the bearer-token check when ``token`` is set."""
    app = server.streamable_http_app(host=host)
    expected = expected_header(token)
    if expected is None:
        return app
    body = json.dumps({"error": f"this server needs `Authorization: Bearer <token>` (${TOKEN_ENV})"}).encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not authorized(given, expected):
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


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
    parser.add_argument(
        "--token",
        default=None,
        help=f"streamable-http: require `Authorization: Bearer TOKEN` (default: ${TOKEN_ENV}); needed beyond loopback",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    names = [n.strip() for n in str(args.tools).split(",") if n.strip()]
    if not names and not args.env_id:
        raise ConfigError("name at least one tool (--tools calculator,python) or an env (--env-id)")
    if args.tool_timeout <= 0:
        raise ConfigError("--tool-timeout must be positive seconds")
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if args.transport != "stdio":
        check_exposure(args.host, token, TOKEN_ENV)  # before any tool starts
    tools, env = _tools(names, args.env_id)
    server = build_server(tools, args.tool_timeout)
    try:
        if args.transport == "stdio":
            server.run("stdio")
        else:
            import uvicorn

            uvicorn.run(http_app(server, args.host, token), host=args.host, port=args.port, log_level="warning")
    finally:
        if env is not None:
            env.close()
        else:
            for tool in tools:
                tool.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agentflow_env.remote.mcp_server [--tools ...] [--env-id ...] [--transport ...]``."""
    parser = argparse.ArgumentParser(description="Serve agentflow-env tools to MCP clients.")
    configure(parser)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
