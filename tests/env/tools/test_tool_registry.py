"""Tests of the tool registry: built-ins by short name, every tool card, and third-party tools via entry points.

The plugin test installs a throwaway distribution (a dist-info folder and a module) on ``sys.path``.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from agentflow_env.error import ConfigError
from agentflow_env.tools import BUILTIN_TOOLS, ENTRY_POINT_GROUP, Tool, available_tools, make_tool, render_card
from agentflow_env.tools.base import normalize_tool_name

EXPECTED_NAMES = {
    "calculator": "Calculator_Tool",
    "python": "Python_Coder_Tool",
    "search": "Local_Search_Tool",
    "wikipedia": "Wikipedia_Search_Tool",
    "web_search": "Web_Search_Tool",
    "generator": "Base_Generator_Tool",
}
# built-ins whose no-argument construction is cheap (the Python tool starts a sandbox, so only its class is used)
CHEAP = ("calculator", "search", "wikipedia", "web_search", "generator")


def tool_class(short: str) -> type:
    module, _, attr = BUILTIN_TOOLS[short].partition(":")
    return getattr(importlib.import_module(module), attr)


def test_builtin_table_is_complete() -> None:
    assert set(BUILTIN_TOOLS) == set(EXPECTED_NAMES)
    assert set(BUILTIN_TOOLS) <= set(available_tools())


@pytest.mark.parametrize("short", sorted(EXPECTED_NAMES))
def test_every_builtin_card_renders(short: str) -> None:
    cls = tool_class(short)
    assert cls.name == EXPECTED_NAMES[short]
    card = render_card(cls)
    lines = card.splitlines()
    assert lines[0].startswith(f"- {cls.name}: ") and len(lines[0]) > len(cls.name) + 20
    assert lines[1].startswith("  Input: ") and len(lines[1]) > len("  Input: ")
    assert cls.examples, f"{cls.name} has no example commands"
    for example in cls.examples:
        assert f"  Example command: {example}" in lines


@pytest.mark.parametrize("short", CHEAP)
def test_cheap_builtins_build_with_no_arguments(short: str) -> None:
    tool = make_tool(short)
    try:
        assert isinstance(tool, Tool)
        assert tool.name == EXPECTED_NAMES[short]
        assert tool.card() == render_card(tool)
    finally:
        tool.close()


def test_tool_names_stay_distinct_when_normalized() -> None:
    keys = {normalize_tool_name(name) for name in EXPECTED_NAMES.values()}
    assert len(keys) == len(EXPECTED_NAMES)
    assert normalize_tool_name("web search tool") == normalize_tool_name("Web_Search_Tool")


def test_unknown_tool_lists_the_available_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown tool 'nope'; available: .*calculator"):
        make_tool("nope")


PLUGIN_MODULE = '''
"""A third-party tool used by the registry test."""
from agentflow_env.tools import BaseTool, ToolResult


class ShoutTool(BaseTool):
    name = "Shout_Tool"
    description = "Repeats the command in capital letters."
    input_spec = "any text"
    examples = ("hello",)

    def __init__(self, suffix: str = "!"):
        self.suffix = suffix

    def _run(self, command, timeout):
        return ToolResult(text=command.upper() + self.suffix)


class FakeCalculator(ShoutTool):
    name = "Fake_Calculator"
'''


@pytest.fixture()
def plugin(tmp_path, monkeypatch):
    dist = tmp_path / "shout_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shout-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(f"""
        [{ENTRY_POINT_GROUP}]
        shout = shout_plugin_mod:ShoutTool
        calculator = shout_plugin_mod:FakeCalculator
        """)
    )
    (tmp_path / "shout_plugin_mod.py").write_text(PLUGIN_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield
    sys.modules.pop("shout_plugin_mod", None)


def test_third_party_tool_registers_through_the_entry_point_group(plugin) -> None:
    table = available_tools()
    assert table["shout"] == "shout_plugin_mod:ShoutTool"
    tool = make_tool("shout", suffix="?!")
    assert tool.name == "Shout_Tool"
    assert tool.run("hi there").text == "HI THERE?!"
    assert render_card(tool).startswith("- Shout_Tool: Repeats the command")


def test_plugins_cannot_shadow_builtins(plugin) -> None:
    assert available_tools()["calculator"] == BUILTIN_TOOLS["calculator"]
    assert make_tool("calculator").name == "Calculator_Tool"


def test_without_the_plugin_it_is_unknown() -> None:
    assert "shout" not in available_tools()
