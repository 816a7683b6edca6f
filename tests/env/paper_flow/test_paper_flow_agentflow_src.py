"""``prompts="agentflow:PATH"`` against AgentFlow's own code in ../shared/data/agentflow-src (skipped when absent).

AgentFlow's Initializer, Planner, Verifier, Executor and Memory are imported from those files, inside this
test only, with their LLM engines replaced by recorders (and third-party packages missing here stubbed).
A paper-mode episode is played with the reader's prompts; then AgentFlow's own code is run on the same
task, replies and memory, and every prompt it builds must equal, character for character, the prompt the
env sent. Its reply readers must agree with the env's too.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agentflow_env.engines import ScriptedEngine
from agentflow_env.engines.base import SamplingParams
from agentflow_env.paper_flow import PaperFlowEnv
from agentflow_env.paper_flow.agentflow_source import AGENTFLOW_ENABLED_TOOLS, AgentFlowPrompts
from agentflow_env.paper_flow.replies import read_command, read_next_step, read_verdict
from agentflow_env.paper_flow.toolbox import (
    GENERALIST,
    GOOGLE_SEARCH,
    PYTHON_CODER,
    WEB_RAG,
    WIKIPEDIA,
    GeneralistTool,
    PaperTool,
    SearchStandIn,
    WebPageStandIn,
)
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import Task, ToolResult

SRC = Path(os.environ.get("AGENTFLOW_SRC") or Path(__file__).resolve().parents[4] / "shared" / "data" / "agentflow-src")
pytestmark = pytest.mark.skipif(
    not (SRC / "agentflow" / "agentflow" / "models" / "planner.py").is_file(), reason="AgentFlow sources not present"
)


class Recorder:
    """Stands in for an AgentFlow LLM engine: records each prompt and returns ``reply``."""

    def __init__(self, model_string: Any = None, **_: Any):
        self.model_string = model_string
        self.prompts: list[Any] = []
        self.reply: Any = ""

    def __call__(self, prompt: Any, **_: Any) -> Any:
        self.prompts.append(prompt)
        return self.reply

    generate = __call__


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


@pytest.fixture
def agentflow(monkeypatch: pytest.MonkeyPatch) -> Any:
    """AgentFlow's classes, loaded from the source folder; sys.modules and sys.path are restored afterwards."""
    modules_before, path_before = set(sys.modules), list(sys.path)
    stubs = {
        "agentflow.engine.factory": _module("agentflow.engine.factory", create_llm_engine=Recorder),
        "agentflow.engine.openai": _module("agentflow.engine.openai", ChatOpenAI=Recorder),
    }
    genai_types = _module("google.genai.types", Tool=object, GoogleSearch=object, GenerateContentConfig=object)
    third_party = {
        "bs4": _module("bs4", BeautifulSoup=object),
        "dotenv": _module("dotenv", load_dotenv=lambda *a, **k: None),
        "wikipedia": _module("wikipedia", search=lambda *a, **k: [], page=lambda *a, **k: None),
        "google.genai": _module("google.genai", Client=lambda **k: object(), types=genai_types),
        "google.genai.types": genai_types,
    }
    for name, module in third_party.items():
        try:
            __import__(name)
        except ImportError:
            stubs[name] = module
    for name, module in stubs.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.syspath_prepend(str(SRC / "agentflow"))
    try:
        from agentflow.models.executor import Executor  # type: ignore[import-not-found]
        from agentflow.models.initializer import Initializer  # type: ignore[import-not-found]
        from agentflow.models.memory import Memory  # type: ignore[import-not-found]
        from agentflow.models.planner import Planner  # type: ignore[import-not-found]
        from agentflow.models.verifier import Verifier  # type: ignore[import-not-found]

        yield types.SimpleNamespace(
            Executor=Executor, Initializer=Initializer, Memory=Memory, Planner=Planner, Verifier=Verifier
        )
    finally:
        for name in set(sys.modules) - modules_before:
            if name.split(".")[0] in ("agentflow", "tools"):
                del sys.modules[name]
        sys.path[:] = path_before


class FakeSearch(BaseTool):
    name = "fake_search"

    def _run(self, command: str, timeout: float) -> ToolResult:
        return ToolResult(text=f"Passage for {command!r}: Acme Corp was founded in 1901 by Ada Stone (born 1871).")


def _tools(engine: Any) -> dict[str, PaperTool]:
    search = FakeSearch()
    return {
        GENERALIST: GeneralistTool(engine, SamplingParams(), "sys"),
        GOOGLE_SEARCH: SearchStandIn(GOOGLE_SEARCH, search, ("query", "add_citations")),
        PYTHON_CODER: SearchStandIn(PYTHON_CODER, search, ("query",)),
        WEB_RAG: WebPageStandIn(search),
        WIKIPEDIA: SearchStandIn(WIKIPEDIA, search, ("query",)),
    }


TASK = Task(
    id="t",
    question="Who founded Acme Corp, and in which year was the founder born?When ready, output the final answer "
    "enclosed in <answer> and </answer> tags.",
    answer="1871",
)
PLANNER_REPLIES = [
    "1. **Justification:** search first.\n2. **Context:** none\n3. **Sub-Goal:** Find Acme Corp's founder.\n"
    "4. **Tool Name:** Wikipedia_RAG_Search_Tool",
    "I think we are done. Final Answer: 1871",
    "Justification: check\nContext: founder Ada Stone\nSub-Goal: Web page on Ada Stone\nTool Name: Web RAG Search Tool",
    '{"justification": "j", "context": "Ada Stone, founder", "sub_goal": "Her birth year", '
    '"tool_name": "Generalist_Solution_Generator_Tool"}',
]
ENGINE_REPLIES = [
    "\nConcise Summary: a two-hop question.\n\nRelevant Tools: Wikipedia_RAG_Search_Tool\n",  # analysis
    'Generated Command:\n```python\nexecution = tool.execute(query="Acme Corp founder")\n```',
    "The birth year is missing.\n**Conclusion**: CONTINUE",
    "Conclusion: CONTINUE",
    'Generated Command:\n```python\nexecution = tool.execute(query="Ada Stone", '
    'url="https://en.wikipedia.org/wiki/Ada_Stone")\n```',
    "We should continue, the page result is thin. Conclusion: continue",
    '{"analysis": "one call", "explanation": "x", "command": "execution = tool.execute(query=\'Ada Stone birth\')"}',
    "Ada Stone was born in 1871.",  # the generalist tool's engine
    '{"analysis": "complete", "stop_signal": true}',
    "**Process Summary:** ...\n**Answer:** Ada Stone, born 1871. <answer>1871</answer>",
]


def test_reader_reproduces_agentflow_prompts_module_by_module(agentflow: Any) -> None:
    init = agentflow.Initializer(
        enabled_tools=list(AGENTFLOW_ENABLED_TOOLS),
        tool_engine=["gpt-4o-mini", "dashscope-qwen2.5-coder-7b-instruct", "Default", "Default"],
        model_string="vllm-AgentFlow/agentflow-planner-7b",
        parallel_loading=False,
    )
    reader = AgentFlowPrompts(SRC)
    # the toolbox exactly as AgentFlow's loader builds it (including the tool the Wikipedia module imports)
    assert reader.tool_metadata() == init.toolbox_metadata
    assert list(reader.tool_metadata()) == init.available_tools
    assert WEB_RAG in init.available_tools and len(init.available_tools) == 5

    engine = ScriptedEngine(ENGINE_REPLIES)
    env = PaperFlowEnv([TASK], lambda a, t: 0.0, engine=engine, prompts=reader, tools=_tools(engine), max_turns=10)
    obs, info = env.reset(seed=0)
    assert info["paper_mode"]["prompts"] == f"agentflow:{SRC}"
    for reply in PLANNER_REPLIES:
        obs, reward, terminated, truncated, info = env.step(reply)
    assert terminated and not truncated
    calls = iter(info["module_calls"])
    steps = info["trajectory"]

    planner = agentflow.Planner(
        "vllm-AgentFlow/agentflow-planner-7b",
        "dashscope",
        toolbox_metadata=init.toolbox_metadata,
        available_tools=init.available_tools,
    )
    verifier = agentflow.Verifier(
        "vllm-AgentFlow/agentflow-planner-7b",
        "dashscope",
        toolbox_metadata=init.toolbox_metadata,
        available_tools=init.available_tools,
    )
    executor = agentflow.Executor("dashscope")
    memory = agentflow.Memory()
    question = TASK.question

    call = next(calls)
    assert call["module"] == "query_analysis"
    planner.llm_engine_fixed.reply = call["reply"]
    analysis = planner.analyze_query(question, None)
    assert planner.llm_engine_fixed.prompts[-1] == [call["prompt"]]
    assert analysis == env.query_analysis

    for step, record in enumerate(steps, start=1):
        call = next(calls)
        assert call["module"] == "planner"
        planner.generate_next_step(question, None, analysis, memory, step, 10)
        assert planner.llm_engine.prompts[-1] == call["prompt"], f"planner prompt of step {step}"
        context, sub_goal, tool_name = planner.extract_context_subgoal_and_tool(call["reply"])
        assert record["parsed"] == {"context": context, "sub_goal": sub_goal, "tool_name": tool_name}
        if tool_name in init.available_tools:
            call = next(calls)
            assert call["module"] == "executor"
            executor.llm_generate_tool_command.reply = call["reply"]
            executor.generate_tool_command(
                question, None, context, sub_goal, tool_name, init.toolbox_metadata[tool_name]
            )
            assert executor.llm_generate_tool_command.prompts[-1] == call["prompt"], f"executor prompt of step {step}"
            command = executor.extract_explanation_and_command(call["reply"])[2]
            assert command == record["command"]
            assert next(calls)["module"] == "tool"
        else:
            assert (record["command"], record["result"]) == (reader.missing_tool_command, reader.missing_tool_result)
        memory.add_action(step, tool_name, sub_goal, record["command"], record["result"])
        call = next(calls)
        assert call["module"] == "verifier"
        verifier.llm_engine_fixed.reply = call["reply"]
        verifier.verificate_context(question, None, analysis, memory, step)
        assert verifier.llm_engine_fixed.prompts[-1] == [call["prompt"]], f"verifier prompt of step {step}"
        assert verifier.extract_conclusion(call["reply"])[1] == record["verifier"]

    call = next(calls)
    assert call["module"] == "final_output"
    planner.generate_direct_output(question, None, memory)
    assert planner.llm_engine_fixed.prompts[-1] == [call["prompt"]]
    assert info["answer"] == ENGINE_REPLIES[-1]
    assert next(calls, None) is None

    # the Python tool's own code-writing prompt
    coder = init.tool_instances_cache["Python_Code_Generator_Tool"]
    coder.llm_engine.reply = "no code here"
    coder.execute(query="Add 2 and 3")
    assert coder.llm_engine.prompts[-1] == reader.code_request("Add 2 and 3")


REPLIES = [
    "Context: a\nSub-Goal: b\nTool Name: Wikipedia_RAG_Search_Tool\n\nMore text\nContext: c\nSub-Goal: d\n"
    "Tool Name: Ground Google Search Tool",
    "Context: a Sub-Goal: b Tool Name: generalist_solution_generator_tool```",
    "**Context:** x\n**Sub-Goal:** y\n**Tool Name:** Nope_Tool\n",
    '{"justification": "j", "context": 3, "sub_goal": "s", "tool_name": "t"}',
    "Sub-Goal: only\nTool Name: Web_RAG_Search_Tool",
    "",
]
COMMANDS = [
    "Generated Command:\n```python\nexecution = tool.execute(query='a')\n```",
    "```python\nx = 1\n```\ntext\n```python\nexecution = tool.execute(query='the longer block')\n```",
    "GENERATED COMMAND: here\n```python\nexecution = tool.execute(query='b')```",
    '{"analysis": "a", "explanation": "e", "command": "```python\\nexecution = tool.execute(query=1)\\n```"}',
    "plain text",
]
VERDICTS = [
    "Conclusion: STOP",
    "conclusion - maybe. Conclusion: **CONTINUE**",
    "Conclusion: unclear, so stop here",
    "we continue",
    "Conclusion: STOP\nConclusion: Continue",
    '{"analysis": "x", "stop_signal": "yes"}',
    '{"analysis": "x", "stop_signal": 2}',
    "nothing",
]


def test_reply_readers_agree_with_agentflow(agentflow: Any) -> None:
    tools = ["Generalist_Solution_Generator_Tool", "Ground_Google_Search_Tool", "Web_RAG_Search_Tool", WIKIPEDIA]
    planner = agentflow.Planner("x", "y", toolbox_metadata={}, available_tools=tools)
    for reply in REPLIES:
        assert read_next_step(reply, tools) == planner.extract_context_subgoal_and_tool(reply), reply
    executor = agentflow.Executor("x")
    for reply in COMMANDS:
        assert read_command(reply) == executor.extract_explanation_and_command(reply)[2], reply
    verifier = agentflow.Verifier("x", "y")
    for reply in VERDICTS:
        assert read_verdict(reply) == verifier.extract_conclusion(reply)[1], reply
