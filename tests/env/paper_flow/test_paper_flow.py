"""The paper mode (flow="paper"): AgentFlow's call order and inputs, module by module, on a scripted engine;
its budgets, memory format, toolbox, sampling presets and make_env wiring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentflow_env.engines import ScriptedEngine
from agentflow_env.error import ConfigError
from agentflow_env.paper_flow import PaperFlowEnv, planner_sampling
from agentflow_env.paper_flow.commands import CommandError, run_block
from agentflow_env.paper_flow.memory import ActionMemory, cut_result
from agentflow_env.paper_flow.replies import read_command, read_next_step, read_verdict, split_blocks
from agentflow_env.paper_flow.toolbox import (
    GENERALIST,
    GOOGLE_SEARCH,
    PYTHON_CODER,
    STATED_TOOLS,
    WEB_RAG,
    WIKIPEDIA,
    PythonCodeGeneratorTool,
    WebPageStandIn,
    builtin_metadata,
)
from agentflow_env.types import Task
from tests.helpers import FakeSearch, chat_server, paper_toolbox

TESTSETS = Path(__file__).resolve().parents[4] / "shared" / "data" / "agentflow-testsets"


class Scorer:
    """Remembers what it graded; 1.0 when the gold answer appears in the text."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, prediction: str, task: Task) -> float:
        self.seen.append(prediction)
        return 1.0 if str(task.answer) in prediction else 0.0


TASK = Task(id="t1", question="In which year was the founder of Acme Corp born?", answer="1871", family="search")


PLAN_WIKI = (
    "Justification: the founder's name is needed first.\n"
    "Context: none yet\n"
    "Sub-Goal: Find who founded Acme Corp.\n"
    "Tool Name: wikipedia rag search tool"
)
PLAN_EXIT = "Final Answer: 1871"  # the planner has no exit in paper mode
PLAN_GENERALIST = (
    "**Justification:** ask for the year.\n**Context:** the founder is Ada Stone\n"
    "**Sub-Goal:** Give Ada Stone's birth year.\n**Tool Name:** Generalist_Solution_Generator_Tool"
)
EXEC_WIKI = 'Generated Command:\n```python\nexecution = tool.execute(query="Acme Corp founder")\n```'
EXEC_GENERALIST = (
    "Analysis: one call.\nGenerated Command:\n```python\n"
    'query = "In which year was Ada Stone born?"\nexecution = tool.execute(query=query)\n```'
)
FINAL = "Process summary: the search named Ada Stone; the generalist gave 1871.\nAnswer: Ada Stone was born in 1871."


def _episode_engine() -> ScriptedEngine:
    return ScriptedEngine(
        [
            "Summary: two hops. Tools: Wikipedia_RAG_Search_Tool.  ",  # query analysis (trailing blanks kept raw)
            EXEC_WIKI,  # step 1 executor
            "The founder is known but not the year.\nConclusion: CONTINUE",  # step 1 verifier
            "**Conclusion:** CONTINUE",  # step 2 verifier (the planner tried to exit)
            EXEC_GENERALIST,  # step 3 executor
            "Ada Stone was born in 1871.",  # the generalist tool's own engine call
            "Everything is there.\nConclusion: STOP",  # step 3 verifier
            FINAL,  # final output
        ]
    )


def test_paper_episode_follows_agentflow_call_order_and_inputs() -> None:
    engine = _episode_engine()
    search = FakeSearch({"Acme": "Acme Corp was founded by Ada Stone."})
    scorer = Scorer()
    env = PaperFlowEnv([TASK], scorer, engine=engine, tools=paper_toolbox(engine, search), max_turns=10)
    obs, info = env.reset(seed=0)
    analysis = "Summary: two hops. Tools: Wikipedia_RAG_Search_Tool."
    assert [c["module"] for c in info["module_calls"]] == ["query_analysis"]
    assert info["query_analysis"] == analysis and info["paper_mode"]["prompts"] == "builtin"
    tools = env.available_tools
    assert tools == sorted(tools) and set(tools) == {*STATED_TOOLS, WEB_RAG}
    first = info["module_calls"][0]["prompt"]
    assert TASK.question in first and str(tools) in first and str(env.toolbox_metadata) in first
    # the planner's prompt: query, analysis, tools, metadata and the (empty) memory dict
    for part in (TASK.question, analysis, str(tools), str(env.toolbox_metadata), "{}"):
        assert part in obs["prompt"]

    obs, reward, terminated, truncated, info = env.step(PLAN_WIKI)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert search.queries == ["Acme Corp founder"]
    calls = info["module_calls"]
    assert [c["module"] for c in calls] == ["query_analysis", "planner", "executor", "tool", "verifier"]
    assert calls[1]["reply"] == PLAN_WIKI
    executor_prompt = calls[2]["prompt"]
    for part in (
        TASK.question,
        "Find who founded Acme Corp.",
        WIKIPEDIA,
        str(env.toolbox_metadata[WIKIPEDIA]),
        "none yet",
    ):
        assert part in executor_prompt
    assert str(env.toolbox_metadata[GENERALIST]) not in executor_prompt  # only the chosen tool's metadata
    assert calls[3]["tool"] == WIKIPEDIA and calls[3]["prompt"] == 'execution = tool.execute(query="Acme Corp founder")'
    step1 = {
        "tool_name": WIKIPEDIA,
        "sub_goal": "Find who founded Acme Corp.",
        "command": 'execution = tool.execute(query="Acme Corp founder")',
        "result": ["Acme Corp was founded by Ada Stone."],
    }
    assert env.action_memory.get_actions() == {"Action Step 1": step1}
    verifier_prompt = calls[4]["prompt"]
    for part in (TASK.question, str(tools), str(env.toolbox_metadata), analysis, str({"Action Step 1": step1})):
        assert part in verifier_prompt
    assert obs["memory"] == str({"Action Step 1": step1}) and obs["memory"] in obs["prompt"]

    # "Final Answer:" is not an exit: the step is recorded as a missing tool and the verifier still decides
    obs, reward, terminated, truncated, info = env.step(PLAN_EXIT)
    assert (terminated, truncated) == (False, False) and "answer" not in info
    assert [c["module"] for c in info["module_calls"][5:]] == ["planner", "verifier"]
    step2 = env.action_memory.get_actions()["Action Step 2"]
    assert step2["tool_name"] is None and step2["sub_goal"] is None

    obs, reward, terminated, truncated, info = env.step(PLAN_GENERALIST)
    assert (terminated, truncated) == (True, False)
    modules = [c["module"] for c in info["module_calls"]]
    assert modules == [
        "query_analysis",
        *("planner", "executor", "tool", "verifier"),
        *("planner", "verifier"),
        *("planner", "executor", "tool", "verifier"),
        "final_output",
    ]
    assert modules.count("query_analysis") == 1
    step3 = env.action_memory.get_actions()["Action Step 3"]
    assert step3["tool_name"] == GENERALIST and step3["sub_goal"] == "Give Ada Stone's birth year."
    assert step3["result"] == ["Ada Stone was born in 1871."]
    # the final output sees the query, the raw analysis and the whole memory, and is graded in full
    final_prompt = info["module_calls"][-1]["prompt"]
    raw = "Summary: two hops. Tools: Wikipedia_RAG_Search_Tool.  "
    assert raw in final_prompt and str(env.action_memory.get_actions()) in final_prompt
    assert info["answer"] == FINAL and scorer.seen == [FINAL] and reward == 1.0
    assert [t["verifier"] for t in info["trajectory"]] == ["CONTINUE", "CONTINUE", "STOP"]
    # every module call: same system prompt, AgentFlow's 2048-token budget, the fixed engine's sampling
    module_engine_calls = [c for c in engine.calls if "Ada Stone born?" not in str(c.prompt[-1]["content"])]
    assert all(c.sampling.max_tokens == 2048 and c.sampling.temperature == 0.0 for c in module_engine_calls)
    assert all(c.prompt[0]["content"] == env.prompt_source.system_prompt for c in module_engine_calls)
    assert all(
        c["tokens"]["max_tokens"] == 2048
        for c in info["module_calls"]
        if c["module"] != "tool" and c["module"] != "planner"
    )
    with pytest.raises(RuntimeError):
        env.step(PLAN_WIKI)


def test_only_the_budget_or_the_verifier_ends_a_run() -> None:
    engine = ScriptedEngine(["analysis", "Conclusion: CONTINUE", "Conclusion: CONTINUE", "Answer: 1871"])
    env = PaperFlowEnv([TASK], Scorer(), engine=engine, tools=paper_toolbox(engine, FakeSearch()), max_turns=2)
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step("Final Answer: 1871")
    assert not terminated and not truncated
    _, reward, terminated, truncated, info = env.step("Final Answer: 1871")
    assert (terminated, truncated) == (False, True)
    assert [c["module"] for c in info["module_calls"]][-1] == "final_output" and info["answer"] == "Answer: 1871"
    assert reward == 1.0


def test_engine_failures_do_not_end_the_run() -> None:
    engine = ScriptedEngine([RuntimeError("down")])
    env = PaperFlowEnv([TASK], Scorer(), engine=engine, tools=paper_toolbox(engine, FakeSearch()), max_turns=1)
    _, info = env.reset(seed=0)
    assert info["query_analysis"] == "" and "down" in info["module_calls"][0]["error"]
    _, reward, terminated, truncated, info = env.step(PLAN_WIKI)
    assert truncated and reward == 0.0 and info["answer"] == ""
    step = env.action_memory.get_actions()["Action Step 1"]
    assert step["command"] == "No command found." and step["result"] == []


def test_commands_run_without_running_model_code() -> None:
    engine = ScriptedEngine(
        [
            "a",
            "Generated Command:\n```python\nimport os\nexecution = tool.execute(query=os.name)\n```",
            "Conclusion: CONTINUE",
            "x",
        ]
    )
    search = FakeSearch()
    env = PaperFlowEnv([TASK], Scorer(), engine=engine, tools=paper_toolbox(engine, search), max_turns=1)
    env.reset(seed=0)
    env.step(PLAN_WIKI)
    result = env.action_memory.get_actions()["Action Step 1"]["result"]
    assert isinstance(result, str) and result.startswith("Error") and search.queries == []


# ---------------------------------------------------------------- reply readers
@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (PLAN_WIKI, ("none yet", "Find who founded Acme Corp.", WIKIPEDIA)),
        (PLAN_GENERALIST, ("the founder is Ada Stone", "Give Ada Stone's birth year.", GENERALIST)),
        ("Tool Name: X", (None, None, None)),
        (
            '{"justification": "j", "context": " c ", "sub_goal": "s", "tool_name": "Ground Google Search Tool"}',
            ("c", "s", GOOGLE_SEARCH),
        ),
        ("Context: a\nSub-Goal: b\nTool Name: Calculator_Tool", ("a", "b", "No matched tool given: Calculator_Tool")),
    ],
)
def test_read_next_step(reply: str, expected: tuple) -> None:
    assert read_next_step(reply, sorted([*STATED_TOOLS, WEB_RAG])) == expected


def test_read_command_and_verdict() -> None:
    assert read_command(EXEC_WIKI) == 'execution = tool.execute(query="Acme Corp founder")'
    assert read_command("```python\nx=1\n```\n```python\nexecution = tool.execute(query='longer one')\n```").startswith(
        "execution"
    )
    assert read_command("nothing here") == "No command found."
    assert read_verdict("Conclusion: **STOP**") == "STOP"
    assert read_verdict("Conclusion: STOP.\nOn reflection... Conclusion: CONTINUE") == "CONTINUE"
    assert read_verdict("no verdict word; we should stop now") == "STOP"  # AgentFlow's fallback
    assert read_verdict('{"analysis": "ok", "stop_signal": true}') == "STOP"
    assert read_verdict("") == "CONTINUE"
    blocks = split_blocks('q = "a"\nexecution = tool.execute(query=q)\nexecution = tool.execute(query="b")')
    assert len(blocks) == 2 and run_block(blocks[0], lambda **k: k) == {"query": "a"}
    assert run_block("x = 1", lambda **k: k) is None  # no execution: AgentFlow's "no result" text follows
    for bad in ("execution = tool.execute(query=open('x').read())", "del x\nexecution = tool.execute()"):
        with pytest.raises(CommandError):
            run_block(bad, lambda **k: k)


def test_memory_format_and_result_cut() -> None:
    memory = ActionMemory()
    memory.add_action(1, "T", "g", "c", cut_result(["x" * 100_005, {"k": 3}]))
    result = memory.get_actions()["Action Step 1"]["result"]
    assert len(result[0]) == 100_000 and result[0].endswith("...") and result[1] == {"k": 3}
    assert memory.text().startswith("{'Action Step 1': {'tool_name': 'T', 'sub_goal': 'g', 'command': 'c'")


def test_builtin_metadata_has_agentflow_fields() -> None:
    metadata = builtin_metadata()
    assert list(metadata) == sorted(metadata)
    for name, entry in metadata.items():
        assert list(entry) == [
            "tool_name",
            "tool_description",
            "tool_version",
            "input_types",
            "output_type",
            "demo_commands",
            "user_metadata",
            "require_llm_engine",
        ]
        assert entry["tool_name"] == name and entry["demo_commands"]


def test_sampling_presets() -> None:
    coded, stated = planner_sampling("as_coded"), planner_sampling("as_stated")
    assert (coded.temperature, coded.top_p, coded.frequency_penalty, coded.max_tokens) == (0.7, 0.99, 1.2, 2048)
    assert coded.extra_body() == {"frequency_penalty": 1.2} and stated.temperature == 0.0
    assert stated.extra_body() == {}
    with pytest.raises(ConfigError):
        planner_sampling("hot")


def test_python_coder_stand_in_writes_then_runs_code() -> None:
    from agentflow_env.engines.base import SamplingParams
    from agentflow_env.paper_flow.templates import BuiltinPrompts

    engine = ScriptedEngine(["Here:\n```python\ntotal = sum(i * i for i in range(1, 11))\nprint('sum:', total)\n```"])
    tool = PythonCodeGeneratorTool(engine, SamplingParams(), "sys", BuiltinPrompts().code_request)
    try:
        tool.timeout = 30.0
        out = tool.execute(query="sum of squares 1..10")
        assert out.get("printed_output") == "sum: 385", out
        assert out["printed_output"] == "sum: 385" and "sum(i * i" in out["execution_code"]
        assert "sum of squares 1..10" in engine.calls[0].prompt[-1]["content"]
        assert PythonCodeGeneratorTool(ScriptedEngine(["no code"]), SamplingParams(), "s", str).execute("q") == {
            "error": "No Python code block found in the response"
        }
    finally:
        tool.close()


def test_web_rag_stand_in_reads_wikipedia_addresses_only() -> None:
    search = FakeSearch({"Nile": "The Nile is 6650 km long."})
    tool = WebPageStandIn(search)
    assert tool.execute(query="length", url="https://en.wikipedia.org/wiki/Nile") == "The Nile is 6650 km long."
    assert search.queries == ["Nile length"]
    assert tool.execute(query="q", url="https://example.com/x").startswith("Error")
    with pytest.raises(TypeError):
        tool.execute(query="q")


# ---------------------------------------------------------------- make_env wiring
def test_make_env_paper_flow_options_and_errors() -> None:
    from benchmarks.specs import make_env

    engine = ScriptedEngine(["x"])
    with pytest.raises(ConfigError, match="do not apply"):
        make_env("Gen-GameOf24", flow="paper", engine=engine, executor="llm")
    with pytest.raises(ConfigError, match="engine"):
        make_env("Gen-GameOf24", flow="paper")
    with pytest.raises(ConfigError, match="flow"):
        make_env("Gen-GameOf24", flow="agentflow")
    with pytest.raises(ConfigError, match="AgentFlow checkout"):
        make_env("Gen-GameOf24", flow="paper", engine=engine, prompts="agentflow:/nonexistent/agentflow")
    with pytest.raises(ConfigError, match="toolbox"):
        make_env("Gen-GameOf24", flow="paper", engine=engine, toolbox="mine")
    env = make_env(
        "Gen-GameOf24", flow="paper", engine=engine, toolbox="as_stated", tools=paper_toolbox(engine, FakeSearch())
    )
    assert isinstance(env, PaperFlowEnv) and env.available_tools == sorted(STATED_TOOLS)
    assert env.paper_settings["toolbox"] == "as_stated" and env.paper_settings["sampling"] == "as_coded"


@pytest.mark.skipif(not TESTSETS.is_dir(), reason="AgentFlow test sets not present")
def test_paper_flow_keeps_agentflow_question_text_and_judges_in_full() -> None:
    import json

    from agentflow_env.scoring.judge import JudgeScorer
    from benchmarks.specs import make_env

    engine = ScriptedEngine(["x"])
    env = make_env(
        "Bamboogle",
        flow="paper",
        engine=engine,
        data_dir=str(TESTSETS),
        num_tasks=2,
        tools=paper_toolbox(engine, FakeSearch()),
    )
    rows = json.loads((TESTSETS / "bamboogle.json").read_text())
    assert env.tasks[0].question == rows[0]["query"]
    assert isinstance(env.scorer, JudgeScorer)


@pytest.mark.skipif(not TESTSETS.is_dir(), reason="AgentFlow test sets not present")
def test_llm_modes_give_the_generator_tool_the_env_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentflow_env.tools.generator import GENERATOR_ENV_VAR, BaseGeneratorTool
    from benchmarks.specs import make_env

    monkeypatch.delenv(GENERATOR_ENV_VAR, raising=False)
    engine = ScriptedEngine(["4"])
    env = make_env(
        "AIME24", data_dir=str(TESTSETS), num_tasks=1, executor="llm", verifier="llm", generator="llm", engine=engine
    )
    tool = next(t for t in env.tools if isinstance(t, BaseGeneratorTool))
    assert tool.engine is engine and tool.run("2+2?").text == "4"
    env.close()


def test_gym_make_builds_the_paper_flow_on_any_registered_id() -> None:
    import gymnasium as gym

    import agentflow_env  # noqa: F401  (registers the ids)

    engine = ScriptedEngine(["analysis", "Conclusion: STOP", "Answer: (8-4)*(7-1) = 24"])
    env = gym.make("agentflow/Gen-GameOf24-v1", flow="paper", engine=engine, tools=paper_toolbox(engine, FakeSearch()))
    try:
        obs, info = env.reset(seed=3)
        assert env.observation_space.contains(obs) and info["paper_mode"]["flow"] == "paper"
        obs, reward, terminated, truncated, info = env.step("no plan at all")
        assert terminated and info["answer"] == "Answer: (8-4)*(7-1) = 24"
        assert [c["module"] for c in info["module_calls"]] == [
            "query_analysis",
            "planner",
            "verifier",
            "final_output",
        ]
    finally:
        env.close()


def test_tool_engines_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTFLOW_GENERATOR_ENGINE", raising=False)
    module_engine, tool_engine = ScriptedEngine(["module"]), ScriptedEngine(["from the tool engine"])
    env = PaperFlowEnv(
        [TASK],
        Scorer(),
        engine=module_engine,
        tool_engine={GENERALIST: tool_engine},
        wikipedia=FakeSearch(),
        web_search=FakeSearch(),
    )
    try:
        assert env.toolbox[GENERALIST].execute(query="q") == "from the tool engine"
        assert isinstance(env.toolbox[PYTHON_CODER], PythonCodeGeneratorTool)
        assert env.toolbox[PYTHON_CODER].writer.generator.engine is module_engine
        assert set(env.paper_settings["tools"]) == set(env.available_tools)
    finally:
        env.close()
    with pytest.raises(ConfigError, match="tool_engine"):
        PaperFlowEnv([TASK], Scorer(), engine=module_engine, tool_engine={"Calculator_Tool": tool_engine})


def test_llm_planner_and_modules_over_http_with_the_as_coded_sampling() -> None:
    """A whole paper episode over a loopback OpenAI-compatible server: the planner (LLMPlanner on an
    OpenAIEngine) sends AgentFlow's as-coded sampling, frequency penalty included; the modules send theirs."""
    from agentflow_env.engines import make_engine
    from agents.policies.llm_planner import LLMPlanner

    def reply_for(body: dict[str, Any]) -> str:
        user = body["messages"][-1]["content"]
        if "frequency_penalty" in body:
            return PLAN_WIKI
        if user.lstrip().startswith("Job: study the query"):
            return "analysis: one lookup"
        if user.lstrip().startswith("Job: write the exact command"):
            return EXEC_WIKI
        if user.lstrip().startswith("Job: decide whether"):
            return "Conclusion: STOP"
        return "Answer: 1871"

    with chat_server(reply_for) as server:
        url = server.url
        modules = make_engine(f"openai:qwen@{url}", timeout=20, max_retries=0)
        search = FakeSearch({"Acme": "Acme Corp was founded by Ada Stone (born 1871)."})
        env = PaperFlowEnv([TASK], Scorer(), engine=modules, tools=paper_toolbox(modules, search), sampling="as_coded")
        coded = env.planner_sampling
        planner = LLMPlanner(
            make_engine(f"openai:planner@{url}", timeout=20, max_retries=0, extra_body=coded.extra_body()),
            sampling=coded.params(),
            system_prompt=env.planner_system_prompt,
        )
        obs, info = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(planner.act([obs])[0])
        assert terminated and info["answer"] == "Answer: 1871" and reward == 1.0
    bodies = server.bodies
    planner_calls = [b for b in bodies if b["model"] == "planner"]
    module_calls = [b for b in bodies if b["model"] == "qwen"]
    assert len(planner_calls) == 1 and len(module_calls) == 4  # analysis, executor, verifier, final output
    sent = planner_calls[0]
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"], sent["frequency_penalty"]) == (0.7, 0.99, 2048, 1.2)
    assert sent["messages"][0] == {"role": "system", "content": env.planner_system_prompt}
    assert sent["messages"][1]["content"] == info["module_calls"][1]["prompt"]
    for body in module_calls:
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.0, 0.99, 2048)
        assert "frequency_penalty" not in body
