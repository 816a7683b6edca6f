"""Sphinx directives that generate the docs' tables from the code, so they cannot drift from it.

- ``benchmark-table``: one row per registered ``agentflow/*`` id of the latest version, read from the env
  registry and each benchmark's :class:`~benchmarks.specs.BenchmarkSpec` (family, turn budget, the tool names
  actions use, where the tasks come from). Nothing is loaded or generated: sizes are left to ``agentflow-env list``.
- ``config-reference``: one row per field of a config dataclass (``FlowGRPOConfig``, ``SFTConfig``,
  ``EvalConfig``): its command-line flag, type, default and help text, read from the field's metadata (the same
  text ``--help`` shows). Options: ``:flags:`` (``yes``/``no``, default ``yes``).
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive, directives

__all__ = ["BenchmarkTable", "ConfigReference", "setup"]


def _cell(content: str | nodes.Node, code: bool = False) -> nodes.entry:
    entry = nodes.entry()
    if isinstance(content, nodes.Node):
        entry += content
    elif content:
        entry += nodes.paragraph("", "", nodes.literal(content, content) if code else nodes.Text(content))
    return entry


def _table(headers: list[str], rows: list[list[nodes.entry]], widths: list[int]) -> nodes.table:
    table = nodes.table(classes=["generated-table"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    head += nodes.row("", *(_cell(h) for h in headers))
    group += head
    body = nodes.tbody()
    for row in rows:
        body += nodes.row("", *row)
    group += body
    return table


class BenchmarkTable(Directive):
    """The registered ids of the latest version, from the registry and the benchmark specs."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        import gymnasium as gym

        from agentflow_env.registration import registered_ids
        from benchmarks.cli import tool_display_names
        from benchmarks.specs import get_spec

        rows = []
        for env_id in registered_ids(latest_only=True):
            bench = (gym.spec(env_id).kwargs or {}).get("benchmark")
            if bench is None:  # a third-party env: not this project's to describe
                continue
            spec = get_spec(bench)
            tools = ", ".join(tool_display_names(list(spec.tools)))
            rows.append(
                [_cell(env_id, code=True), _cell(spec.family), _cell(str(spec.max_turns)), _cell(tools),
                 _cell(spec.source)]
            )  # fmt: skip
        if not rows:
            raise self.error("benchmark-table: the registry holds no agentflow/* id")
        return [_table(["id", "family", "turns", "tools (names actions use)", "tasks"], rows, [22, 8, 5, 30, 35])]


def _type_text(kind: Any) -> str:
    text = kind.__name__ if isinstance(kind, type) else str(kind)
    return text.replace("typing.", "").replace("NoneType", "None").replace("pathlib.", "")


def _default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return repr(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return repr(f.default_factory())
    return "required"


class ConfigReference(Directive):
    """A config dataclass's fields: flag, type, default and the help text of the field's metadata."""

    required_arguments = 1  # module:Class
    option_spec = {"flags": lambda arg: directives.choice(arg, ("yes", "no"))}
    has_content = False

    def run(self) -> list[nodes.Node]:
        from agentflow_env.config import flag_of

        module, _, name = self.arguments[0].partition(":")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise self.error(f"config-reference: cannot import {self.arguments[0]}: {exc}") from exc
        if not dataclasses.is_dataclass(cls):
            raise self.error(f"config-reference: {self.arguments[0]} is not a dataclass")
        with_flags = self.options.get("flags", "yes") == "yes"
        hints = typing.get_type_hints(cls)
        rows = []
        for f in dataclasses.fields(cls):
            help_text = str(f.metadata.get("help", "")).strip()
            if not f.metadata.get("cli", True) or not help_text:
                continue  # fields only code passes (objects, test hooks) are not settings
            row = [_cell(f.name, code=True)]
            if with_flags:
                row.append(_cell(flag_of(f), code=True))
            row += [_cell(_type_text(hints[f.name]), code=True), _cell(_default_text(f), code=True), _cell(help_text)]
            rows.append(row)
        if not rows:
            raise self.error(f"config-reference: {self.arguments[0]} has no field with help text")
        headers = ["field", *(["flag"] if with_flags else []), "type", "default", "what it sets"]
        widths = [14, *([14] if with_flags else []), 10, 10, 52]
        return [_table(headers, rows, widths)]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("benchmark-table", BenchmarkTable)
    app.add_directive("config-reference", ConfigReference)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
