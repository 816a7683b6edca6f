"""``judge="agentflow:PATH"`` against AgentFlow's own ``test/calculate_score_unified.py``.

AgentFlow's ``ResultScorer`` is imported from the shared checkout inside this test only (its OpenAI engine and
``utils`` stubbed), its LLM replaced by a scripted function of the prompt; our AgentFlowJudge gets the same
function through a ScriptedEngine. On every benchmark's records (loaded by our paper-mode loaders) and a set
of responses (tagged, re-tagged, untagged, letters, numbers, empty), both must send the same prompts and
reach the same verdicts, including the malformed-reply fallbacks of the two-stage path.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agentflow_env.engines import ScriptedEngine
from agentflow_env.error import EngineError
from agentflow_env.paper_flow.agentflow_judge import AgentFlowJudge, AgentFlowScoring, most_similar_option
from agentflow_env.paper_flow.agentflow_source import AgentFlowSourceError
from agentflow_env.types import Task
from benchmarks.paper.catalog import BENCHMARKS
from benchmarks.paper.loading import load_paper_tasks

SRC = Path(os.environ.get("AGENTFLOW_SRC") or Path(__file__).resolve().parents[4] / "shared" / "data" / "agentflow-src")
SCORE = SRC / "test" / "calculate_score_unified.py"
pytestmark = pytest.mark.skipif(not SCORE.is_file(), reason="AgentFlow sources not present")


def script(prompt: str) -> str:
    """The judge's reply: a deterministic function of the prompt (so equal prompts get equal replies)."""
    digest = int(hashlib.sha256(prompt.encode("utf-8")).hexdigest(), 16)
    modulus = 3 if "extracting the final predicted answer" in prompt else 4 if "Extracted Option:" in prompt else 11
    if digest % modulus == 0:
        return "I think it is correct."  # not JSON: a failed call (AgentFlow's two-stage fallbacks, or a raise)
    if "extracting the final predicted answer" in prompt:
        response = prompt.split("## Model Response:", 1)[1].split("## Answer Choices:", 1)[0].strip()
        picks = [response[:1], response[-12:], response, "", "Answer: 2", "0.9"]
        return json.dumps({"analysis": "found it", "extracted_option": picks[digest % len(picks)]})
    if "Extracted Option:" in prompt:
        correct = prompt.split("Correct Answer:", 1)[1].split("\n", 1)[0].strip()
        option = prompt.split("Extracted Option:", 1)[1].split("\n", 1)[0].strip()
        verdict: Any = correct.lower() in option.lower() or option.lower().startswith(correct.lower()[:2])
    else:
        correct = prompt.split("Correct answer:", 1)[1].split("\n", 1)[0].strip()
        response = prompt.split("Model response:", 1)[1].split("Correct answer:", 1)[0].strip()
        verdict = bool(response) and (response.lower() in correct.lower() or correct.lower() in response.lower())
    if digest % 7 == 0:
        verdict = ["True", "false", 1, 0][digest % 4]  # lax forms pydantic also accepts
    return json.dumps({"analysis": "compared", "true_false": verdict})


class FakeChatOpenAI:
    """AgentFlow's engine call, ``engine(prompt, response_format=Model)``, answered by :func:`script`."""

    model_string = "scripted"

    def __init__(self, *args: Any, **kwargs: Any):
        self.prompts: list[str] = []

    def __call__(self, prompt: str, response_format: Any = None) -> Any:
        self.prompts.append(prompt)
        return response_format.model_validate_json(script(prompt))


@pytest.fixture(scope="module")
def agentflow_scorer() -> Any:
    pytest.importorskip("pydantic")
    pytest.importorskip("tqdm")
    stubs = {
        "agentflow": types.ModuleType("agentflow"),
        "agentflow.agentflow": types.ModuleType("agentflow.agentflow"),
        "agentflow.agentflow.engine": types.ModuleType("agentflow.agentflow.engine"),
        "agentflow.agentflow.engine.openai": types.ModuleType("agentflow.agentflow.engine.openai"),
        "utils": types.ModuleType("utils"),
    }
    stubs["agentflow.agentflow.engine.openai"].ChatOpenAI = FakeChatOpenAI  # type: ignore[attr-defined]
    stubs["utils"].ResultAnalyzer = object  # type: ignore[attr-defined]
    saved = {name: sys.modules.get(name) for name in stubs}
    path_before = list(sys.path)
    sys.modules.update(stubs)
    try:
        spec = importlib.util.spec_from_file_location("agentflow_calculate_score_unified", SCORE)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        yield module
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
        sys.path[:] = path_before


def _responses(record: dict[str, Any]) -> list[str]:
    answer = record["answer"]
    gold = answer[0] if isinstance(answer, list) and answer else str(answer)
    choices = record.get("choices") or record.get("options") or []
    out = [
        f"Reasoning... <answer>{gold}</answer>",
        f"<answer>wrong</answer> then again <answer>{gold}</answer>",  # the last tag counts
        f"<answer>{gold}</answer> on reflection <answer>wrong</answer>",
        f"The answer is {gold}.",  # no tags: the whole response
        "",
        "<answer>2</answer>",
        "<answer>\n B \n</answer>",
    ]
    out += [f"<answer>{c}</answer>" for c in list(choices)[:2]]
    out += ["x" * 42 + " " + str(c).split(". ", 1)[-1] for c in list(choices)[1:3]]  # past 50 chars: the fallback cut
    return out


def _agentflow_verdict(module: Any, task: str, record: dict[str, Any], response: str) -> Any:
    scorer = module.ResultScorer(llm_engine=FakeChatOpenAI())
    data = dict(record)
    data.pop("task", None)
    data["response"] = response
    data["correct_answer"] = record["answer"]
    if task in ("gpqa", "medqa"):  # load_data: choices, else options
        if "choices" in record:
            data["choices"] = record["choices"]
        elif "options" in record:
            data["choices"] = record["options"]
    try:
        results, _ = scorer.score_results({"0": data}, max_workers=1, task_name=task)
    except Exception as exc:  # the single-stage path raises on a malformed reply
        return ("raises", type(exc).__name__), scorer.llm_engine.prompts
    return results["0"]["true_false"], scorer.llm_engine.prompts


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_verdicts_equal_agentflows_on_every_benchmark(
    name: str, agentflow_scorer: Any, testsets_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = BENCHMARKS[name]
    tasks = load_paper_tasks(bench, data_dir=testsets_dir, verbatim_query=True, shuffle_options=False, num_tasks=10)
    engine = ScriptedEngine(script)
    judge = AgentFlowJudge(engine, SRC)
    compared = raised = 0
    verdicts: set[Any] = set()
    for task in tasks:
        record = task.metadata["agentflow_record"]
        assert record["task"] == bench.file
        for response in _responses(record):
            expected, their_prompts = _agentflow_verdict(agentflow_scorer, bench.file, record, response)
            before = len(engine.calls)
            try:
                ours: Any = judge(response, task) == 1.0
            except EngineError:
                ours = ("raises", "ValidationError")
            our_prompts = [c.prompt for c in engine.calls[before:]]
            if isinstance(expected, tuple):
                assert ours == ("raises", "ValidationError") and expected[1] == "ValidationError", (response, expected)
                assert our_prompts[0] == their_prompts[0]
                raised += 1
            else:
                assert ours == expected, (name, response, their_prompts)
                assert our_prompts == their_prompts
            verdicts.add(ours)
            compared += 1
    capsys.readouterr()
    assert compared >= 6 * 7 and {True, False} <= verdicts  # both verdicts occur on every benchmark


def test_the_two_stage_path_is_gpqa_and_medqas() -> None:
    scoring = AgentFlowScoring(SRC)
    assert scoring.two_stage_tasks == ("gpqa", "medqa")
    assert scoring.answer_pattern.findall("<answer>a</answer> <answer>b</answer>") == ["a", "b"]


def test_option_matching_equals_agentflows(agentflow_scorer: Any) -> None:
    options = ["A. 0.9", "B. 0.7", "C. 10.1", "D. Colorectal cancer"]
    for text in ["", "a", "0.7", "answer 10", "colorectal", "C. 10.1", "zzz", "3", " B. 0.7 "]:
        assert most_similar_option(text, options) == agentflow_scorer.find_most_similar_candidate(text, options)
    assert most_similar_option("x", []) == agentflow_scorer.find_most_similar_candidate("x", [])


def test_the_question_field_is_preferred_over_query() -> None:
    judge = AgentFlowJudge(ScriptedEngine(lambda p: '{"analysis": "a", "true_false": true}'), SRC)
    task = Task(id="t", question="shown query", answer="x")
    task.metadata["agentflow_record"] = {"question": [1, 2, 3, 4], "query": "long query", "answer": ["x"], "task": "t"}
    assert judge("<answer>x</answer>", task) == 1.0
    sent = judge.engine.calls[-1].prompt
    assert "Question: [1, 2, 3, 4]" in sent and "long query" not in sent and "Correct answer: ['x']" in sent
    del task.metadata["agentflow_record"]["question"]
    judge("<answer>x</answer>", task)
    assert "Question: long query" in judge.engine.calls[-1].prompt
    assert judge.engine.calls[-1].sampling.response_format["json_schema"]["schema"]["required"] == [
        "analysis",
        "true_false",
    ]


def test_a_checkout_whose_scoring_logic_changed_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "src"
    (root / "test").mkdir(parents=True)
    import shutil

    shutil.copytree(SRC / "agentflow", root / "agentflow")
    text = SCORE.read_text(encoding="utf-8")
    (root / "test" / SCORE.name).write_text(text, encoding="utf-8")
    assert AgentFlowScoring(root).fingerprint == AgentFlowScoring(SRC).fingerprint
    mutated = re.sub(r"response = all_matches\[-1\]\.strip\(\)", "response = all_matches[0].strip()", text, count=1)
    assert mutated != text
    (root / "test" / SCORE.name).write_text(mutated, encoding="utf-8")
    with pytest.raises(AgentFlowSourceError, match="scoring logic differs"):
        AgentFlowScoring(root)
    # a changed prompt is read, not refused: the fingerprint moves with it
    (root / "test" / SCORE.name).write_text(text.replace("impartial judge", "fair judge"), encoding="utf-8")
    changed = AgentFlowScoring(root)
    assert "fair judge" in changed.extraction and changed.fingerprint != AgentFlowScoring(SRC).fingerprint
