"""The paper flow asks AgentFlow's questions: each task's question is the record's ``query`` field byte for
byte, for every record of every AgentFlow test file present, on every trial seed; options keep the file's
order unless a protocol asks for a shuffle. The other modes keep building their own question text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentflow_env.engines import ScriptedEngine
from agentflow_env.error import DataError
from benchmarks.paper.catalog import BENCHMARKS
from benchmarks.paper.loading import load_paper_tasks
from benchmarks.paper.rows import rows_to_tasks
from benchmarks.specs import make_env
from tests.helpers import FakeSearch, paper_toolbox

NAMES = sorted(BENCHMARKS)


def _records(testsets_dir: Path, name: str) -> list[dict]:
    path = testsets_dir / f"{BENCHMARKS[name].file}.json"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    return json.loads(path.read_text(encoding="utf-8"))


def _paper_env(name: str, data_dir: Path, **options):
    engine = ScriptedEngine(["x"])
    return make_env(
        name, flow="paper", engine=engine, data_dir=str(data_dir), tools=paper_toolbox(engine, FakeSearch()), **options
    )


@pytest.mark.parametrize("name", NAMES)
def test_paper_flow_questions_are_agentflow_queries_verbatim(name: str, testsets_dir: Path) -> None:
    rows = _records(testsets_dir, name)
    for seed in (None, 0, 2):  # a protocol's trial seed reaches the loader and changes nothing here
        env = _paper_env(name, testsets_dir, **({} if seed is None else {"seed": seed}))
        tasks = list(env.unwrapped.tasks)
        assert len(tasks) == len(rows)
        different = [i for i, (task, row) in enumerate(zip(tasks, rows)) if task.question != row["query"]]
        assert different == [], f"{name} seed {seed}: records {different[:5]} differ from their query"
        assert env.unwrapped.paper_settings["questions"] == {
            "text": "AgentFlow's query field, verbatim",
            "shuffle_options": False,
        }
        env.close()


@pytest.mark.parametrize("name", ["GPQA", "MedQA"])
def test_paper_flow_choice_golds_name_the_files_correct_option(name: str, testsets_dir: Path) -> None:
    rows = _records(testsets_dir, name)
    tasks = load_paper_tasks(BENCHMARKS[name], data_dir=testsets_dir, verbatim_query=True, shuffle_options=False)
    for task, row in zip(tasks, rows):
        options = row.get("choices") or row["options"]
        line = (
            options[row["answer_idx"]] if "answer_idx" in row else next(o for o in options if o.endswith(row["answer"]))
        )
        assert line.startswith(f"{task.answer}. ")  # the gold letter is the letter AgentFlow's query shows
        assert f"\n{line}" in task.question
        assert task.metadata["option_seed"] is None


def test_a_protocol_can_ask_for_shuffled_options(testsets_dir: Path) -> None:
    rows = _records(testsets_dir, "GPQA")[:40]
    bench = BENCHMARKS["GPQA"]
    orders = []
    for seed in (0, 1):
        tasks = rows_to_tasks(bench, rows, bench.local_columns, "gpqa", seed=seed, verbatim_query=True)
        orders.append([t.metadata["options"] for t in tasks])
        for task, row in zip(tasks, rows):
            head, _, _ = row["query"].partition("\nChoices:\n")
            assert task.question.startswith(head + "\nChoices:\n")  # only the option lines change
            shown = re.findall(r"^([A-D])\. (.*)$", task.question.split("\nChoices:\n", 1)[1], re.MULTILINE)
            assert [t for _, t in shown] == task.metadata["options"]
            assert dict(shown)[task.answer] == task.metadata["answer_text"] and task.metadata["option_seed"] == seed
    assert orders[0] != orders[1]
    env = _paper_env("GPQA", testsets_dir, seed=1, shuffle_options=True, num_tasks=3)
    assert env.unwrapped.paper_settings["questions"]["shuffle_options"] is True
    env.close()


def test_a_query_without_its_option_lines_cannot_be_shuffled() -> None:
    bench = BENCHMARKS["GPQA"]
    row = {"pid": "1", "question": "Q?", "choices": ["A. x", "B. y"], "answer_idx": 0, "query": "Q? (options lost)"}
    (task,) = rows_to_tasks(
        bench, [row], bench.local_columns, "f.json", seed=3, verbatim_query=True, shuffle_options=False
    )
    assert task.question == "Q? (options lost)" and task.answer == "A"
    with pytest.raises(DataError, match="cannot be shuffled"):
        rows_to_tasks(bench, [row], bench.local_columns, "f.json", seed=3, verbatim_query=True)


def test_other_modes_keep_their_own_question_text(testsets_dir: Path) -> None:
    bamboogle = _records(testsets_dir, "Bamboogle")
    tasks = load_paper_tasks(BENCHMARKS["Bamboogle"], data_dir=testsets_dir)
    assert "<answer>" in bamboogle[0]["query"] and "<answer>" not in tasks[0].question
    medqa = _records(testsets_dir, "MedQA")
    tasks = load_paper_tasks(BENCHMARKS["MedQA"], data_dir=testsets_dir, seed=0)
    assert tasks[0].question != medqa[0]["query"] and "\nChoices:\n" in tasks[0].question
    # without a query field the paper flow falls back to the question, as AgentFlow's solver does
    bench = BENCHMARKS["AMC23"]
    (task,) = rows_to_tasks(
        bench, [{"pid": 0, "question": " 1+1? ", "answer": 2}], bench.local_columns, "f", verbatim_query=True
    )
    assert task.question == " 1+1? "
