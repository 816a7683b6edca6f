"""Tools from any MCP server as env tools, through the official ``mcp`` package (stdio or streamable HTTP).

Configure servers the way MCP clients do: a ``{"mcpServers": {NAME: {...}}}`` mapping (or a JSON file of one),
or a list of server entries. An entry is ``{"command": "python", "args": [...], "env": {...}, "cwd": ...}``
(a subprocess over stdio) or ``{"url": "http://host:port/mcp"}`` (streamable HTTP); ``"tools": [...]`` keeps
only those tools and ``"prefix"`` renames them (``prefix + name``). Then::

    env = make_env("Gen-Math", mcp_servers={"mcpServers": {"calc": {"command": "agentflow-env",
                                                                    "args": ["mcp-server"]}}})

Each MCP tool keeps its JSON Schema: it is the tool's ``parameters``, so a tool-calling planner sees it as is
and its arguments go to the server unchanged; a text-format ``Command:`` is read as a JSON object of the
arguments, or, for a tool with one string argument, as that argument. One connection (an asyncio loop in a
thread of its own) serves all tools of a server and is closed with the env.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

from agentflow_env.error import ConfigError, DependencyNotInstalled
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import ToolResult

__all__ = ["MCPConnection", "MCPTool", "load_mcp_tools", "server_entries"]

_CONNECT_TIMEOUT_S = 60.0


def _mcp() -> Any:
    try:
        import mcp
    except ImportError as exc:
        raise DependencyNotInstalled("mcp", "mcp") from exc
    return mcp


def server_entries(config: Any) -> list[dict[str, Any]]:
    """The server entries of an MCP configuration (a path to a JSON file, a mapping or a list), each
    with its ``name``; raises ``ConfigError`` naming what is wrong."""
    if isinstance(config, (str, os.PathLike)):
        try:
            with open(config, encoding="utf-8") as fh:
                config = json.load(fh)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the MCP configuration {str(config)!r}: {exc}") from None
    if isinstance(config, Mapping) and "mcpServers" in config:
        config = config["mcpServers"]
    if isinstance(config, Mapping) and ("command" in config or "url" in config):
        config = [config]
    if isinstance(config, Mapping):
        entries = [{"name": str(name), **dict(entry)} for name, entry in config.items() if isinstance(entry, Mapping)]
        if len(entries) != len(config):
            raise ConfigError("each server in an MCP configuration must be an object with 'command' or 'url'")
    elif isinstance(config, Sequence) and not isinstance(config, str):
        entries = [dict(e) for e in config if isinstance(e, Mapping)]
        if len(entries) != len(config):
            raise ConfigError("an MCP server list must hold objects with 'command' or 'url'")
        for i, entry in enumerate(entries):
            entry.setdefault("name", f"server{i}")
    else:
        raise ConfigError("mcp_servers must be a JSON file, {'mcpServers': {...}}, one server entry or a list of them")
    for entry in entries:
        if ("command" in entry) == ("url" in entry):
            raise ConfigError(f"MCP server {entry['name']!r} needs exactly one of 'command' (stdio) or 'url' (HTTP)")
    return entries


class MCPConnection:
    """One MCP session, kept open on an event loop in a background thread; ``call`` is synchronous.

    The session is entered and left in the same task (the ``mcp`` client's task groups require it), which
    serves the calls handed to it through a queue.
    """

    def __init__(self, entry: Mapping[str, Any]):
        mcp = _mcp()
        self.name = str(entry.get("name", "mcp"))
        if "url" in entry:
            self._target: Any = str(entry["url"])
        else:
            from mcp.client.stdio import StdioServerParameters

            self._target = StdioServerParameters(
                command=str(entry["command"]),
                args=[str(a) for a in entry.get("args", [])],
                env={str(k): str(v) for k, v in (entry.get("env") or {}).items()} or None,
                cwd=entry.get("cwd"),
            )
        self._client_cls = mcp.Client
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"mcp-{self.name}", daemon=True)
        self._thread.start()
        self._queue: asyncio.Queue[Any] | None = None
        self._ready: Future[list[Any]] = Future()
        self._task = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        try:
            self.tools = self._ready.result(timeout=_CONNECT_TIMEOUT_S)
        except Exception as exc:
            self.close()
            raise ConfigError(f"cannot connect to the MCP server {self.name!r}: {type(exc).__name__}: {exc}") from exc

    async def _serve(self) -> None:
        self._queue = asyncio.Queue()
        try:
            async with self._client_cls(self._target) as client:
                listed = await client.list_tools()
                self._ready.set_result(list(listed.tools))
                while True:
                    item = await self._queue.get()
                    if item is None:
                        return
                    name, arguments, timeout, future = item
                    try:
                        result = await asyncio.wait_for(client.call_tool(name, arguments, timeout), timeout + 1)
                        future.set_result(result)
                    except BaseException as exc:  # handed to the caller, the session goes on
                        future.set_exception(exc)
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        if self._task.done() or self._queue is None:
            raise RuntimeError(f"the MCP session with {self.name!r} has ended")
        future: Future[Any] = Future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (name, arguments, timeout, future))
        # the session's task ends when the transport dies: no reply is coming then
        wait([future, self._task], timeout=timeout + 5, return_when=FIRST_COMPLETED)
        if not future.done():
            if self._task.done():
                raise RuntimeError(f"the MCP session with {self.name!r} ended during the call")
            raise TimeoutError(f"the MCP server {self.name!r} did not answer within {timeout + 5:g} s")
        try:
            return future.result()
        except (Exception, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # asyncio's CancelledError: the transport died mid-call
            raise RuntimeError(
                f"the MCP session with {self.name!r} ended during the call ({type(exc).__name__})"
            ) from None

    def close(self) -> None:
        if not self._loop.is_running():
            return
        if self._queue is not None and not self._task.done():
            self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
            try:
                self._task.result(timeout=10)
            except Exception:  # the server may already be gone; closing goes on
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


class MCPTool(BaseTool):
    """One tool of an MCP server; ``parameters`` is its JSON Schema (``close`` ends the shared session once)."""

    def __init__(self, connection: MCPConnection, spec: Any, name: str | None = None, owner: bool = False):
        self.connection = connection
        self.remote_name = str(spec.name)
        self.name = name or self.remote_name
        self.description = str(spec.description or f"the MCP tool {self.remote_name} of {connection.name}")
        schema = getattr(spec, "input_schema", None) or getattr(spec, "inputSchema", None) or {}
        self.parameters: dict[str, Any] = dict(schema) if isinstance(schema, Mapping) else {"type": "object"}
        self.parameters.setdefault("type", "object")
        props = self.parameters.get("properties") or {}
        self._single = next(iter(props)) if len(props) == 1 else None
        self.input_spec = "a JSON object of the arguments: " + json.dumps(props, ensure_ascii=False)[:500]
        self.examples = ()
        self._owner = owner

    def _arguments(self, command: str) -> dict[str, Any]:
        text = command.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if isinstance(value, dict):
                return value
        if self._single is not None:
            return {self._single: command}
        raise ValueError(f"give the arguments of {self.name} as a JSON object (its schema: {self.input_spec})")

    def _run(self, command: str, timeout: float) -> ToolResult:
        try:
            arguments = self._arguments(command)
        except ValueError as exc:
            return ToolResult(text=f"Error: {exc}", ok=False, error=str(exc))
        result = self.connection.call(self.remote_name, arguments, timeout)
        texts = [str(getattr(c, "text", "")) for c in (result.content or []) if getattr(c, "type", "") == "text"]
        text = "\n".join(texts)
        if not texts and getattr(result, "structured_content", None) is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        if getattr(result, "is_error", False):
            return ToolResult(text=f"Error: {text}", ok=False, error=text[:500] or "the MCP tool failed")
        return ToolResult(text=text)

    def close(self) -> None:
        if self._owner:
            self.connection.close()


def load_mcp_tools(config: Any) -> list[MCPTool]:
    """The tools of every server in ``config`` (see the module docstring), connected and listed."""
    tools: list[MCPTool] = []
    for entry in server_entries(config):
        connection = MCPConnection(entry)
        keep = entry.get("tools")
        specs = [t for t in connection.tools if keep is None or t.name in keep]
        if keep is not None and len(specs) != len(set(keep)):
            missing = sorted(set(keep) - {t.name for t in specs})
            connection.close()
            raise ConfigError(f"the MCP server {connection.name!r} has no tool named {', '.join(missing)}")
        if not specs:
            connection.close()
            continue
        prefix = str(entry.get("prefix", ""))
        # the last tool owns the session, so the env's close() (tool by tool) ends it once
        tools.extend(
            MCPTool(connection, spec, prefix + str(spec.name), owner=i == len(specs) - 1)
            for i, spec in enumerate(specs)
        )
    return tools
