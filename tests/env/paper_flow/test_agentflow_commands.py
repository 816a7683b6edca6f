"""The executor's commands: the paper flow evaluates each block (no exec of model code in-process) and must
store what AgentFlow's ``exec()`` would. The oracle here is AgentFlow's loop run with ``exec`` in this test
process only: its block pattern (read from the checkout's executor.py), a fresh ``{"tool": tool}`` per block,
``execution``'s final value, its "no result" text for ``None`` and its error text for the first exception.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from agentflow_env.paper_flow import PaperFlowEnv
from agentflow_env.paper_flow.agentflow_source import AgentFlowPrompts
from agentflow_env.paper_flow.commands import CommandError, run_block
from agentflow_env.paper_flow.templates import BuiltinPrompts
from agentflow_env.paper_flow.toolbox import PaperTool, builtin_metadata
from agentflow_env.types import Task

SRC = Path(os.environ.get("AGENTFLOW_SRC") or Path(__file__).resolve().parents[4] / "shared" / "data" / "agentflow-src")
EXECUTOR = SRC / "agentflow" / "agentflow" / "models" / "executor.py"
needs_src = pytest.mark.skipif(not EXECUTOR.is_file(), reason="AgentFlow sources not present")


class FakeTool(PaperTool):
    """Returns its arguments; ``None`` for the query "nothing"; raises for "boom"."""

    def __init__(self, name: str):
        super().__init__(name, ("query", "add_citations", "url"))
        self.calls: list[dict[str, Any]] = []

    def _call(self, **kwargs: Any) -> Any:
        self.calls.append(dict(kwargs))
        if kwargs.get("query") == "nothing":
            return None
        if kwargs.get("query") == "boom":
            raise RuntimeError("the search backend failed for 'boom'")
        return {"answer_to": kwargs}


# commands as AgentFlow's executor prompt elicits them (its examples and what models write after them)
CORPUS = [
    'execution = tool.execute(query="Who founded Acme Corp?")',
    'query = "Given the list [1, 2, 3], sum the squares"\nexecution = tool.execute(query=query)',
    'base = "Population of "\ncountry = "France"\nexecution = tool.execute(query=base + country + " in 2020")',
    'country = "France"\nyear = 2020\nexecution = tool.execute(query=f"Capital of {country} in {year}")',
    'n = 3\nx = 2.5\ncountry = "France"\nexecution = tool.execute(query=f"{n:02d} items at {x:.2f}, {country!r}")',
    'n = 3\nexecution = tool.execute(query=f"{n} items in {country}")',  # NameError inside an f-string
    'execution = tool.execute(query="Acme founder")\nexecution = tool.execute(query="Acme founding year")',
    'execution = tool.execute(query="a"); execution = tool.execute(query="b")',
    'execution = tool.execute(query=["Methanol", "function of hyperbola", "Fermat\'s Last Theorem"])',
    'q = "Ada Stone"\nexecution = tool.execute(query=q)\nexecution = tool.execute(query=q + " birth year")',
    '# look the founder up first\nexecution = tool.execute(query="Acme Corp founder", add_citations=True)',
    'print("searching")\nexecution = tool.execute(query="Capital of {}".format("France"))',
    'execution = tool.execute(query="nothing")',
    'execution = tool.execute(query="first")\nexecution = tool.execute(query="boom")',
    'terms = ["a", "b"]\nexecution = tool.execute(query=", ".join(terms))',
    'execution = tool.execute("positional query")',
    'execution = tool.execute(query="Ada Stone", url="https://en.wikipedia.org/wiki/Ada_Stone")',
    "topic = 'Ada'\ntopic += ' Stone'\nexecution = tool.execute(query=topic)",
    'a, b = "x", "y"\nexecution = tool.execute(query=a + b)',
    'execution = tool.execute(query="x" * 3)',
    'parts = ("Acme", 1901)\nexecution = tool.execute(query=f"{parts[0]} {parts[1]}")',
    "execution = tool.execute(query='''multi\nline''')",
    "execution = tool.execute(\n    query='not on one line'\n)",  # no block matches: nothing runs, as in AgentFlow
    "execution = tool.execute(query=undefined_name)",  # NameError, with Python's message
    'execution = tool.execute(query="x", colour="red")',  # the tool's own TypeError
    "No command found.",
    'execution = tool.execute(query="ok")\nextra = "trailing"',
    'execution = tool.execute(query="unclosed)',  # SyntaxError, exec's message
]


def _agentflow_pattern() -> str:
    (pattern,) = re.findall(r"pattern = r'(.*?)'\n", EXECUTOR.read_text(encoding="utf-8"))
    return pattern


def agentflow_exec(command: str, tool: PaperTool, texts: Any) -> Any:
    """AgentFlow's execute_tool_command loop, exec and all (the oracle: tests only)."""
    blocks = [b.strip() for b in re.findall(_agentflow_pattern(), command, re.DOTALL) if b.strip()]
    executions: list[Any] = []
    try:
        for block in blocks:
            local: dict[str, Any] = {"tool": tool}
            exec(block, {}, local)
            result = local.get("execution")
            executions.append(result if result is not None else texts.no_result(block))
        return executions
    except Exception as exc:
        return texts.command_error(exc)


def _env(prompts: Any, tool_name: str) -> tuple[PaperFlowEnv, dict[str, FakeTool]]:
    tools = {name: FakeTool(name) for name in builtin_metadata()}
    task = Task(id="t", question="Who founded Acme Corp?", answer="Ada Stone")
    env = PaperFlowEnv([task], lambda a, t: 0.0, engine=_NoEngine(), prompts=prompts, tools=tools, max_turns=10)
    env.reset(seed=0)
    return env, tools


class _NoEngine:
    def generate(self, prompts: Any, sampling: Any = None) -> list[str]:
        return ["Concise Summary: none"] * len(prompts)


@needs_src
@pytest.mark.parametrize("command", CORPUS)
def test_results_equal_agentflows_exec(command: str) -> None:
    reader = AgentFlowPrompts(SRC)
    name = "Wikipedia_RAG_Search_Tool"
    env, tools = _env(reader, name)
    ours = env._run_command(1, name, command)
    oracle_tool = FakeTool(name)
    expected = agentflow_exec(command, oracle_tool, reader)
    assert ours == expected
    assert tools[name].calls == oracle_tool.calls


@needs_src
def test_the_texts_are_agentflows_own() -> None:
    text = EXECUTOR.read_text(encoding="utf-8")
    reader = AgentFlowPrompts(SRC)
    no_result, error = reader.no_result("{block}"), reader.command_error(RuntimeError("{str(e)}"))
    assert f'executions.append(f"{no_result}")' in text
    assert f'return f"{error}"' in text


def test_builtin_texts_state_this_projects_wording() -> None:
    env, _ = _env("builtin", "Wikipedia_RAG_Search_Tool")
    assert env._run_command(1, "Wikipedia_RAG_Search_Tool", 'execution = tool.execute(query="nothing")') == [
        BuiltinPrompts.no_result('execution = tool.execute(query="nothing")')
    ]
    result = env._run_command(1, "Wikipedia_RAG_Search_Tool", "execution = tool.execute(query=x)")
    assert result == "Error while running the command: NameError: name 'x' is not defined"


@pytest.mark.parametrize(
    "block",
    [
        "import os\nexecution = tool.execute(query=os.name)",
        "execution = tool.execute(query=open('/etc/passwd').read())",
        "execution = tool.execute(query=__import__('os').name)",
        "for q in ['a']:\n    execution = tool.execute(query=q)",
        "execution = tool.execute(query=().__class__.__base__.__subclasses__())",
        "execution = tool.execute(query='x' * 10**9)",
        "execution = tool.execute(query='x' * 2_000_000)",
        "execution = tool.execute(query=['x'] * 2_000_000)",
        "t = tool\nexecution = t.execute(query='a')",
        "execution = tool.run('a')",
        "execution = tool.execute(query=eval('1+1'))",
    ],
)
def test_code_beyond_the_command_forms_is_refused_not_run(block: str) -> None:
    calls: list[Any] = []
    with pytest.raises(CommandError):
        run_block(block, lambda *a, **k: calls.append((a, k)))
    assert not calls
