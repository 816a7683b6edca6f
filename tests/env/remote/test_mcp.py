"""MCP both ways, with the official ``mcp`` client and server on loopback: ``agentflow-env mcp-server`` serves the
env's tools to an MCP client over stdio (and streamable HTTP); an MCP server's tools become env tools by
configuration, callable in the text format and as native tool calls."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("mcp")

import agentflow_env  # noqa: F401
from agentflow_env.error import ConfigError
from agentflow_env.tools.mcp_tools import server_entries
from tests.helpers import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[3]
ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))}
OUR_SERVER = {"command": sys.executable, "args": ["-m", "agentflow_env.cli", "mcp-server"], "env": ENV}

DEMO = textwrap.dedent(
    '''
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("demo")


    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)


    @server.tool()
    def shout(text: str) -> str:
        """The text in capitals."""
        return text.upper()


    server.run("stdio")
    '''
)


async def _client_round_trip(target):
    from mcp import Client

    async with Client(target) as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        calc = await client.call_tool("Calculator_Tool", {"command": "6*7"})
        py = await client.call_tool("Python_Coder_Tool", {"command": "print(sum(range(10)))"})
        bad = await client.call_tool("Python_Coder_Tool", {"command": "raise ValueError('boom')"})
    text = lambda r: "\n".join(c.text for c in r.content if c.type == "text")  # noqa: E731
    return names, text(calc), calc.is_error, text(py), bad.is_error, text(bad)


def test_mcp_server_serves_the_env_tools_over_stdio():
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=OUR_SERVER["command"], args=OUR_SERVER["args"], env=ENV)
    names, calc, calc_error, py, bad_error, bad = asyncio.run(asyncio.wait_for(_client_round_trip(params), 120))
    assert names == ["Calculator_Tool", "Python_Coder_Tool"]
    assert "42" in calc and not calc_error
    assert "45" in py
    assert bad_error and "boom" in bad


def test_mcp_server_over_streamable_http_feeds_an_env():
    port = free_port()
    proc = subprocess.Popen(
        [*[OUR_SERVER["command"]], *OUR_SERVER["args"], "--transport", "streamable-http", "--port", str(port)],
        env={**os.environ, **ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        url = f"http://127.0.0.1:{port}/mcp"
        env = gym.make(
            "agentflow/Gen-Math-v1",
            split="test",
            mcp_servers=[{"url": url, "tools": ["Calculator_Tool"], "prefix": "remote_"}],
        ).unwrapped
        try:
            env.reset(options={"index": 0})
            _, _, _, _, info = env.step("Tool Name: remote_Calculator_Tool\nCommand: 2**10")
            assert "1024" in info["memory_steps"][-1]["result"], info["memory_steps"][-1]
        finally:
            env.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def demo_config(tmp_path):
    script = tmp_path / "demo_server.py"
    script.write_text(DEMO)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": [str(script)]}}}))
    return config


def test_an_mcp_servers_tools_become_env_tools(demo_config):
    env = gym.make("agentflow/Gen-Math-v1", split="test", mcp_servers=str(demo_config)).unwrapped
    try:
        obs, info = env.reset(options={"index": 0})
        schemas = {t["function"]["name"]: t["function"] for t in info["tools"]}
        assert {"add", "shout", "Calculator_Tool", "final_answer"} <= set(schemas)
        assert schemas["add"]["parameters"]["properties"].keys() == {"a", "b"}  # the server's own JSON Schema
        assert "add" in obs["tools"] and "shout" in obs["prompt"]
        call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 40}'}}
        _, _, _, _, info = env.step({"role": "assistant", "content": None, "tool_calls": [call]})
        assert info["memory_steps"][-1]["result"] == "42" and info["messages"][-1]["content"] == "42"
        _, _, _, _, info = env.step("Tool Name: shout\nCommand: hello")  # one string argument: the command
        assert info["memory_steps"][-1]["result"] == "HELLO"
        _, _, _, _, info = env.step("Tool Name: add\nCommand: 2 and 3")
        step = info["memory_steps"][-1]
        assert not step["ok"] and "JSON object" in step["result"]
        _, _, _, _, info = env.step('Tool Name: add\nCommand: {"a": "x", "b": 1}')
        assert not info["memory_steps"][-1]["ok"]  # the server's validation error, as a failed tool run
        connection = env.tools[-1].connection
    finally:
        env.close()
    assert not connection._thread.is_alive()  # the session and its subprocess end with the env


def test_our_mcp_server_as_an_envs_tools_round_trip():
    config = {"mcpServers": {"ours": {**OUR_SERVER, "tools": ["Python_Coder_Tool"], "prefix": "mcp_"}}}
    env = gym.make("agentflow/Gen-Math-v1", split="test", mcp_servers=config).unwrapped
    try:
        env.reset(options={"index": 0})
        hermes = '<tool_call>{"name": "mcp_Python_Coder_Tool", "arguments": {"command": "print(7*6)"}}</tool_call>'
        _, _, _, _, info = env.step(hermes)
        assert "42" in info["memory_steps"][-1]["result"]
    finally:
        env.close()


@pytest.mark.parametrize(
    "config, message",
    [
        ({"mcpServers": {"x": {"command": "a", "url": "b"}}}, "exactly one"),
        (42, "mcp_servers must be"),
        ("/no/such/mcp.json", "cannot read"),
    ],
)
def test_bad_mcp_configurations_say_what_is_wrong(config, message):
    with pytest.raises(ConfigError, match=message):
        server_entries(config)


def test_an_unreachable_mcp_server_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot connect"):
        gym.make("agentflow/Gen-Math-v1", mcp_servers=[{"command": sys.executable, "args": ["-c", "pass"]}])
