"""The template reader refuses, naming file and line, any statement it cannot evaluate that could change a
prompt: mutated copies of AgentFlow's checkout (in tmp) must fail loudly, never yield a wrong prompt."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agentflow_env.paper_flow.agentflow_source import AgentFlowPrompts, AgentFlowSourceError

SRC = Path(os.environ.get("AGENTFLOW_SRC") or Path(__file__).resolve().parents[4] / "shared" / "data" / "agentflow-src")
pytestmark = pytest.mark.skipif(
    not (SRC / "agentflow" / "agentflow" / "models" / "planner.py").is_file(), reason="AgentFlow sources not present"
)


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "agentflow-src"
    shutil.copytree(SRC / "agentflow", root / "agentflow")
    shutil.copytree(SRC / "test", root / "test", ignore=shutil.ignore_patterns("data", "*.json"))
    return root


def _insert_before(path: Path, anchor: str, line: str) -> int:
    """Insert ``line`` (indented like the anchor line) before the first line containing ``anchor``; its number."""
    lines = path.read_text(encoding="utf-8").split("\n")
    at = next(i for i, text in enumerate(lines) if anchor in text)
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines.insert(at, indent + line)
    path.write_text("\n".join(lines), encoding="utf-8")
    return at + 1


def test_the_unmodified_checkout_reads(tmp_path: Path) -> None:
    AgentFlowPrompts(_copy(tmp_path))  # the reader itself is not what fails below


@pytest.mark.parametrize(
    ("file", "anchor", "line", "changed"),
    [
        (  # rewriting the finished prompt
            "models/planner.py",
            "next_step = self.llm_engine(prompt_generate_next_step",
            'prompt_generate_next_step = prompt_generate_next_step.replace("Query", "Q")',
            "prompt_generate_next_step",
        ),
        (  # appending to it
            "models/executor.py",
            "tool_command = self.llm_generate_tool_command(",
            'prompt_generate_tool_command += "\\nBe brief."',
            "prompt_generate_tool_command",
        ),
        (  # changing an input before the prompt is built
            "models/verifier.py",
            "image_info = self.get_image_info(image)",
            "question = question.upper()",
            "question",
        ),
        (  # a loop that rebinds an input
            "models/executor.py",
            'prompt_generate_tool_command = f"""',
            "for sub_goal in [sub_goal.lower()]: pass",
            "sub_goal",
        ),
    ],
)
def test_a_statement_that_may_change_a_prompt_is_an_error_naming_file_and_line(
    tmp_path: Path, file: str, anchor: str, line: str, changed: str
) -> None:
    root = _copy(tmp_path)
    path = root / "agentflow" / "agentflow" / file
    lineno = _insert_before(path, anchor, line)
    with pytest.raises(AgentFlowSourceError) as err:
        AgentFlowPrompts(root)
    assert f"{path}:{lineno}:" in str(err.value) and changed in str(err.value)


def test_a_statement_that_changes_nothing_the_prompt_reads_is_fine(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    path = root / "agentflow" / "agentflow" / "models" / "planner.py"
    _insert_before(path, "next_step = self.llm_engine(prompt_generate_next_step", 'debug_note = "x".replace("x", "y")')
    AgentFlowPrompts(root)
