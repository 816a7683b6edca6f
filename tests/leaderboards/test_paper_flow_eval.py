"""paper-v1 is AgentFlow's protocol end to end: `agentflow-env eval --protocol paper-v1 --fast` with the planner,
the env's modules and the judge all behind one loopback OpenAI-compatible server that scripts their replies.

Checked on the wire: AgentFlow's call order per episode (query analysis once; planner -> executor -> tool ->
verifier per step; the final output; the judge once), the planner's as-coded sampling with frequency penalty
and system prompt, the questions verbatim; and in the store: the judge scorer, paper_settings, module calls.
Also: the protocol's [paper] table (hashing, errors) and the planner policies' paper settings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentflow_env.engines import ScriptedEngine
from agentflow_env.error import ConfigError
from agentflow_env.paper_flow import BuiltinPrompts, planner_system_prompt, prompt_fingerprint
from agentflow_env.paper_flow.toolbox import builtin_metadata
from leaderboards.protocol import PROTOCOL_DIR, load_protocol
from tests.helpers import LoopbackServer, chat_server

PROTOCOL_TEXT = (PROTOCOL_DIR / "paper-v1.toml").read_text(encoding="utf-8")

PLAN = (
    "Justification: one generalist call.\nContext: nothing yet\nSub-Goal: Answer the question directly.\n"
    "Tool Name: Generalist_Solution_Generator_Tool"
)
COMMAND = 'Generated Command:\n```python\nexecution = tool.execute(query="Answer the question directly.")\n```'
FINAL = "Process summary: two generalist calls agreed.\nAnswer: 42"
_BLOCK = re.compile(r"⟦BEGIN (\w+) (\w+)⟧\n(.*?)\n⟦END \1 \2⟧", re.DOTALL)


def _kind(body: dict[str, Any]) -> str:
    """Which AgentFlow call a request is: by the model name, then by the prompt (the tool samples at top_p 1)."""
    if body["model"] in ("planner", "judge"):
        return body["model"]
    user = body["messages"][-1]["content"].lstrip()
    for opening, kind in (
        ("Job: study the query", "query_analysis"),
        ("Job: write the exact command", "executor"),
        ("Job: decide whether", "verifier"),
        ("Job: write a concise final answer", "final_output"),
    ):
        if user.startswith(opening):
            return kind
    assert body["top_p"] == 1.0, body  # the generalist tool's own LLM call (AgentFlow's tool engines: top_p 1)
    return "tool"


def _reply(kind: str, body: dict[str, Any]) -> str:
    user = body["messages"][-1]["content"]
    if kind == "verifier":  # CONTINUE after the first step, STOP after the second: two full steps
        return "Conclusion: STOP" if "'Action Step 2'" in user else "More evidence is needed.\nConclusion: CONTINUE"
    if kind == "judge":  # since v2 the judge reads the answer span (issue 25): CORRECT only when it got "42" alone
        blocks = {m.group(1): m.group(3) for m in _BLOCK.finditer(user)}
        span = blocks.get("CANDIDATE", "").strip() == "│ 42"
        return "VERDICT: CORRECT" if span else "VERDICT: INCORRECT"
    return {
        "query_analysis": "The query needs one fact; the generalist tool can give it.",
        "planner": PLAN,
        "executor": COMMAND,
        "tool": "The generalist says 42.",
        "final_output": FINAL,
    }[kind]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with chat_server(lambda body: _reply(_kind(body), body)) as srv:
        yield srv


def _calls(server: LoopbackServer) -> list[tuple[str, dict[str, Any]]]:
    """The server's calls so far as (kind, body)."""
    return [(_kind(body), body) for body in server.bodies]


EPISODE = ["query_analysis", *["planner", "executor", "tool", "verifier"] * 2, "final_output", "judge"]


def test_eval_paper_v1_fast_is_agentflows_protocol_end_to_end(
    tmp_path: Path, testsets_dir: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentflow_env.cli import main

    small = tmp_path / "paper-v1.toml"  # paper-v1 itself, with two trials and one task per benchmark
    small.write_text(
        PROTOCOL_TEXT.replace("seeds = [0, 1, 2]", "seeds = [0, 2]").replace("fast_tasks = 5", "fast_tasks = 1")
    )
    out = tmp_path / "runs"
    args = [
        "eval",
        "--protocol",
        str(small),
        "--fast",
        "--policy",
        f"openai:planner@{server.url}",
        "--concurrency",
        "1",
    ]
    args += ["--engine", f"openai:qwen@{server.url}", "--judge-engine", f"openai:judge@{server.url}"]
    args += ["--data-dir", str(testsets_dir), "--output-dir", str(out), "--no-progress", "--name", "e2e"]
    assert main(args) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    fingerprint = prompt_fingerprint(BuiltinPrompts(), list(builtin_metadata()), builtin_metadata())
    assert f"paper flow: prompts builtin [{fingerprint}], toolbox as_coded" in printed and "did NOT" not in printed

    protocol = load_protocol(small)
    episodes = len(protocol.benchmarks) * 2
    kinds = [k for k, _ in _calls(server)]
    assert kinds == EPISODE * episodes  # batch size 1: episodes run one after another, call by call

    # every planner request carries AgentFlow's as-coded sampling and its planner system prompt
    for kind, body in _calls(server):
        if kind == "planner":
            assert (body["temperature"], body["top_p"], body["max_tokens"], body["frequency_penalty"]) == (
                0.7,
                0.99,
                2048,
                1.2,
            )
            assert body["messages"][0] == {"role": "system", "content": planner_system_prompt("builtin")}
        elif kind in ("query_analysis", "executor", "verifier", "final_output"):
            assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.0, 0.99, 2048)
            assert "frequency_penalty" not in body

    # the stored run: judge-scored, paper settings recorded, every module call traced in the trajectories
    run_dir = out / "paper-v1" / "e2e"
    stored = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert set(stored["scorers"].values()) == {f"judge:openai:judge@{server.url}"}
    settings = stored["paper_settings"]
    assert (settings["flow"], settings["prompts"], settings["toolbox"], settings["sampling"]) == (
        "paper",
        "builtin",
        "as_coded",
        "as_coded",
    )
    assert settings["planner_sampling"] == {
        "temperature": 0.7,
        "top_p": 0.99,
        "max_tokens": 2048,
        "frequency_penalty": 1.2,
    }
    assert settings["planner_sends"] == {"sampling": True, "extra_body": True, "system_prompt": True}
    assert stored["sampling"] == {"temperature": 0.7, "top_p": 0.99, "max_tokens": 2048, "frequency_penalty": 1.2}
    assert stored["env"]["flow"] == "paper" and stored["env"]["engine"] == f"openai:qwen@{server.url}"
    shuffled = {i for i, b in stored["benchmarks"].items() if b["questions"]["shuffle_options"]}
    assert shuffled == {"agentflow/GPQA-v1", "agentflow/MedQA-v1"}  # per-trial option order (issue 12)
    tasks = [json.loads(line) for line in (run_dir / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(tasks) == episodes and all(t["score"] == 1.0 and t["turns"] == 2 and t["terminated"] for t in tasks)
    assert all(t["answer"] == FINAL for t in tasks)  # the whole final output is the answer; the judge read its span

    planner_prompts = [b["messages"][1]["content"] for k, b in _calls(server) if k == "planner"]
    analysis_prompts = [b["messages"][-1]["content"] for k, b in _calls(server) if k == "query_analysis"]
    trajectories = [
        json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    for n, traj in enumerate(trajectories):
        calls = traj["module_calls"]
        assert [c["module"] for c in calls] == EPISODE[:-1]  # the judge is the scorer, outside the env
        assert [c["prompt"] for c in calls if c["module"] == "planner"] == planner_prompts[2 * n : 2 * n + 2]
        # the question is AgentFlow's query verbatim, and it reaches the modules as it is
        index = int(traj["key"].split("#")[1])
        bench = json.loads((testsets_dir / f"{_file(traj['env_id'])}.json").read_text(encoding="utf-8"))
        query = bench[index]["query"]
        if traj["env_id"] in shuffled:  # the same query, its option lines re-lettered for this trial's seed
            assert _option_texts(traj["question"]) == _option_texts(query)
            assert traj["question"] in analysis_prompts[n]
        else:
            assert traj["question"] == query and query in analysis_prompts[n]

    # leaderboard show displays the settings
    assert main(["leaderboard", "show", "--results", str(out)]) == 0
    assert f"- e2e: paper flow: prompts builtin [{fingerprint}], toolbox as_coded" in capsys.readouterr().out

    # resuming under other prompt wording would mix two prompt sets in one result: refused
    assert settings["prompt_fingerprint"] == fingerprint
    stored["paper_settings"]["prompt_fingerprint"] = "0123456789abcdef"
    (run_dir / "run.json").write_text(json.dumps(stored), encoding="utf-8")
    calls = len(_calls(server))
    assert main(args) != 0 and "other prompts" in capsys.readouterr().err
    assert len(_calls(server)) == calls


def _option_texts(question: str) -> list[str]:
    """The question's lines with any leading option letter removed, sorted (order-free comparison)."""
    import re

    return sorted(re.sub(r"^\(?[A-J][.):]\s*", "", line.strip()) for line in question.splitlines())


def _file(env_id: str) -> str:
    import gymnasium as gym

    from benchmarks.paper.catalog import BENCHMARKS

    return BENCHMARKS[gym.spec(env_id).kwargs["benchmark"]].file


# ------------------------------------------------------------------ the protocol's [paper] table
def test_paper_v1_names_the_paper_flow_and_its_presets() -> None:
    protocol = load_protocol("paper-v1")
    assert protocol.flow == "paper" and protocol.paper == {
        "prompts": "builtin",
        "toolbox": "as_coded",
        "sampling": "as_coded",
    }
    assert not {"executor", "verifier", "generator"} & set(protocol.env) and not protocol.sampling
    kwargs = protocol.env_kwargs("openai:m@http://127.0.0.1:1/v1")
    assert kwargs["flow"] == "paper" and kwargs["engine"] == "openai:m@http://127.0.0.1:1/v1"
    assert (kwargs["prompts"], kwargs["toolbox"], kwargs["sampling"], kwargs["max_turns"]) == (
        "builtin",
        "as_coded",
        "as_coded",
        10,
    )
    planner = protocol.planner()
    assert planner.sampling == {"temperature": 0.7, "top_p": 0.99, "max_tokens": 2048}
    assert planner.extra_body == {"frequency_penalty": 1.2} and planner.system_prompt == planner_system_prompt()


def _variant(tmp_path: Path, old: str, new: str, name: str = "v.toml") -> Path:
    assert PROTOCOL_TEXT.count(old) == 1, old
    path = tmp_path / name
    path.write_text(PROTOCOL_TEXT.replace(old, new, 1), encoding="utf-8")
    return path


def test_the_presets_are_hashed_and_stating_a_default_changes_nothing(tmp_path: Path) -> None:
    base = load_protocol("paper-v1").hash
    stated = _variant(tmp_path, '\nsampling = "as_coded"', '\nsampling = "as_stated"')
    toolbox = _variant(tmp_path, '\ntoolbox = "as_coded"', '\ntoolbox = "as_stated"', "t.toml")
    implicit = _variant(tmp_path, '\ntoolbox = "as_coded"', "\n", "i.toml")  # the default, left out
    assert len({base, load_protocol(stated).hash, load_protocol(toolbox).hash}) == 3
    assert load_protocol(implicit).hash == base
    assert load_protocol(stated).planner().sampling["temperature"] == 0.0
    assert load_protocol(stated).planner().extra_body == {}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('\nflow = "paper"', '\nflow = "paper"\nexecutor = "llm"', "do not apply"),
        ('\nflow = "paper"', '\nflow = "agentflow"', "flow="),
        ('\nflow = "paper"', "\n", r"\[paper\] applies to the paper flow only"),
        ('\nsampling = "as_coded"', '\nsampling = "greedy"', "sampling="),
        ('\ntoolbox = "as_coded"', '\ntoolbox = "mine"', "toolbox="),
        ('\nprompts = "builtin"', '\nprompts = "mine"', "prompts="),
        ('\nprompts = "builtin"', '\nprompts = "builtin"\ntemperature = 0.0', "no field temperature"),
        ("[judge]", "[sampling]\ntemperature = 0.0\n\n[judge]", "override AgentFlow's planner sampling"),
    ],
)
def test_bad_paper_settings_are_config_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_protocol(_variant(tmp_path, old, new))


def test_the_paper_flow_needs_an_engine(tmp_path: Path) -> None:
    protocol = load_protocol(_variant(tmp_path, '\nengine = "openai:Qwen', '\nunused = "openai:Qwen'))
    with pytest.raises(ConfigError, match="--engine"):
        protocol.env_kwargs()


# ------------------------------------------------------------------ planner policies in the paper flow
def test_make_policies_give_llm_planners_the_paper_planner_settings() -> None:
    from agents.policies.llm_planner import LLMPlanner
    from agents.policies.registry import make_policies

    planner = load_protocol("paper-v1").planner()
    policies = make_policies(
        "openai:planner@http://127.0.0.1:9/v1",
        ["a", "b"],
        planner.sampling,
        extra_body=planner.extra_body,
        system_prompt=planner.system_prompt,
    )
    policy = policies["a"]
    assert policies["b"] is policy and isinstance(policy, LLMPlanner)
    assert policy.engine.extra_body == {"frequency_penalty": 1.2} and policy.system_prompt == planner.system_prompt
    assert (policy.sampling.temperature, policy.sampling.top_p, policy.sampling.max_tokens) == (0.7, 0.99, 2048)
    with pytest.raises(ConfigError, match="as_stated"):  # an engine that cannot send the penalty says so at once
        make_policies("engine:vllm:some/model", ["a"], planner.sampling, extra_body=planner.extra_body)


def test_llm_planner_for_a_paper_env_and_engines_without_extra_fields() -> None:
    from agents.policies.llm_planner import LLMPlanner
    from benchmarks.specs import make_env
    from tests.helpers import FakeSearch, paper_toolbox

    engine = ScriptedEngine(["x"])
    env = make_env(
        "Gen-GameOf24", flow="paper", engine=engine, tools=paper_toolbox(engine, FakeSearch()), sampling="as_stated"
    )
    greedy = LLMPlanner.for_paper_env(ScriptedEngine(["plan"]), env)  # as_stated: nothing beyond SamplingParams
    assert greedy.sampling.temperature == 0.0 and greedy.system_prompt == env.unwrapped.planner_system_prompt
    coded = make_env("Gen-GameOf24", flow="paper", engine=engine, tools=paper_toolbox(engine, FakeSearch()))
    with pytest.raises(ConfigError, match="does not send"):
        LLMPlanner.for_paper_env(ScriptedEngine(["plan"]), coded)
    sends = LLMPlanner.for_paper_env("openai:p@http://127.0.0.1:9/v1", coded)
    assert sends.engine.extra_body == {"frequency_penalty": 1.2} and sends.sampling.temperature == 0.7
    with pytest.raises(ConfigError, match="not a paper-flow env"):
        LLMPlanner.for_paper_env(engine, make_env("Gen-GameOf24"))
