"""AgentFlow's training sets (NQ search, DeepMath, AgentFlow's combined file) load from local Parquet/JSON
files the test writes, and AgentFlow's outcome reward scores trajectories with the rule scorers or a judge."""

from __future__ import annotations

import json

import pytest

from agentflow_env.engines.scripted import ScriptedEngine
from agentflow_env.error import ConfigError, DataError
from agents.training.reward import OutcomeReward, make_training_reward
from agents.training.rollout import Trajectory
from benchmarks.training_data import TRAIN_SETS, load_train_tasks

NQ_ROWS = [
    {
        "id": "train_0",
        "question": "who wrote the declaration of independence?",
        "golden_answers": ["Thomas Jefferson"],
        "data_source": "nq",
    },
    {
        "id": "train_1",
        "question": "capital of france?",
        "golden_answers": ["Paris", "Paris, France"],
        "data_source": "nq",
    },
    {
        "id": "train_2",
        "question": "which band made abbey road?",
        "golden_answers": ["The Beatles"],
        "data_source": "hotpotqa",
    },
]
MATH_ROWS = [
    {"question": "What is 2 + 3?", "final_answer": "5", "difficulty": 1.0},
    {"question": "Compute 1/2 + 1/4.", "final_answer": "\\frac{3}{4}", "difficulty": 2.0},
]


def _parquet(path, rows):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_nq_from_parquet_keeps_every_gold(tmp_path):
    tasks = load_train_tasks("nq", path=str(_parquet(tmp_path / "nq.parquet", NQ_ROWS)))
    assert [t.id for t in tasks] == ["train_0", "train_1", "train_2"]
    assert tasks[1].answer == ["Paris", "Paris, France"] and tasks[1].family == "search"
    assert tasks[0].metadata == {"data_source": "nq", "train_set": "nq", "scorer": "em"}


def test_deepmath_from_json_and_jsonl(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps(MATH_ROWS))
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MATH_ROWS))
    a = load_train_tasks("deepmath", path=str(tmp_path / "m.json"))
    b = load_train_tasks("deepmath", path=str(tmp_path / "m.jsonl"))
    assert a == b and a[1].answer == "\\frac{3}{4}" and a[1].family == "math"
    assert a[0].id != a[1].id  # content ids when the file has none


def test_agentflows_combined_file_mixes_by_data_source(tmp_path):
    # AgentFlow's combined rows: a chat prompt, the gold under reward_model, the set in data_source
    rows = [
        {
            "data_source": "nq",
            "prompt": [{"role": "user", "content": "capital of france?"}],
            "reward_model": {"ground_truth": {"target": ["Paris"]}},
        },
        {
            "data_source": "deepmath-103k",
            "prompt": [{"role": "system", "content": "box it"}, {"role": "user", "content": "What is 2 + 3?"}],
            "reward_model": {"ground_truth": {"target": ["5"]}},
        },
    ]
    path = _parquet(tmp_path / "combined_train.parquet", rows)
    tasks = load_train_tasks("combined", path=str(path), seed=0)
    by_q = {t.question: t for t in tasks}
    assert by_q["capital of france?"].answer == ["Paris"] and by_q["capital of france?"].family == "search"
    assert by_q["What is 2 + 3?"].answer == "5" and by_q["What is 2 + 3?"].metadata["scorer"] == "math"
    assert len(load_train_tasks("combined", path=str(path), limit=1)) == 1


def test_hub_sets_are_named_with_their_sizes():
    assert TRAIN_SETS["nq"].hub.dataset == "PeterJinGo/nq_hotpotqa_train"
    assert TRAIN_SETS["deepmath"].hub.dataset == "zwhe99/DeepMath-103K"
    assert TRAIN_SETS["nq"].size + TRAIN_SETS["deepmath"].size == 182_190  # AgentFlow's combined file


def test_bad_input_says_what_to_fix(tmp_path):
    with pytest.raises(ConfigError, match="unknown training set"):
        load_train_tasks("gsm8k")
    (tmp_path / "x.json").write_text(json.dumps([{"question": "q", "golden_answers": ["a"], "data_source": "wiki"}]))
    with pytest.raises(DataError, match="record 0 has data_source 'wiki'"):
        load_train_tasks("combined", path=str(tmp_path / "x.json"))
    (tmp_path / "y.json").write_text(json.dumps([{"question": "q"}]))
    with pytest.raises(DataError, match="record 0 has none of the fields"):
        load_train_tasks("nq", path=str(tmp_path / "y.json"))
    with pytest.raises(ConfigError, match="limit"):
        load_train_tasks("nq", path=str(tmp_path / "y.json"), limit=0)


def _traj(task, answer):
    return Trajectory(task_id=task.id, env_id="x", answer=answer)


def test_rule_reward_scores_search_by_exact_match_and_math_by_value(tmp_path):
    (tmp_path / "nq.json").write_text(json.dumps(NQ_ROWS))
    (tmp_path / "m.json").write_text(json.dumps(MATH_ROWS))
    tasks = load_train_tasks("nq", path=str(tmp_path / "nq.json")) + load_train_tasks(
        "deepmath", path=str(tmp_path / "m.json")
    )
    reward = make_training_reward(tasks)
    assert reward(_traj(tasks[1], "Paris")) == 1.0
    assert reward(_traj(tasks[1], "Lyon")) == 0.0
    assert reward(_traj(tasks[3], "5.0")) == 1.0  # by value
    assert reward(_traj(tasks[3], "6")) == 0.0
    assert reward(_traj(tasks[0], None)) == 0.0 and reward(_traj(tasks[0], "  ")) == 0.0


def test_judge_reward_asks_the_engine_and_reads_its_verdict(tmp_path):
    (tmp_path / "nq.json").write_text(json.dumps(NQ_ROWS))
    tasks = load_train_tasks("nq", path=str(tmp_path / "nq.json"))
    engine = ScriptedEngine([(r"Jefferson", "VERDICT: CORRECT")], default="VERDICT: INCORRECT")
    reward = make_training_reward(tasks, judge=engine)
    assert reward(_traj(tasks[0], "It was Jefferson")) == 1.0
    assert reward(_traj(tasks[1], "Lyon")) == 0.0
    assert len(engine.calls) == 2 and reward.calls == 2


def test_any_scorer_object_is_the_judge():
    """The hook for a judge read from the user's AgentFlow checkout: any scorer(prediction, task) works."""
    from agentflow_env.types import Task

    task = Task(id="t", question="q", answer=["a"], family="search")
    seen = []

    def scorer(prediction, t):
        seen.append((prediction, t.id))
        return 1.0

    reward = make_training_reward([task], judge=scorer)
    assert reward(_traj(task, "anything")) == 1.0 and seen == [("anything", "t")]
    with pytest.raises(ConfigError, match="not among"):
        reward(Trajectory(task_id="other", env_id="x", answer="a"))
    with pytest.raises(ConfigError, match="not callable"):
        OutcomeReward(42, [task])


def test_verl_rows_play_a_training_set_in_an_envs_flow(tmp_path):
    pytest.importorskip("pyarrow")
    from agents.integrations.verl_data import main, make_row_env, verl_rows

    (tmp_path / "nq.json").write_text(json.dumps(NQ_ROWS))
    train_set = {"name": "nq", "path": str(tmp_path / "nq.json")}
    rows = verl_rows("agentflow/Gen-Math-v1", "train", train_set=train_set)
    assert len(rows) == 3 and all("capital of france?" not in str(r["reward_model"]) for r in rows)
    info = rows[1]["extra_info"]
    env = make_row_env(info["env_id"], info["split"], json.loads(info["env_kwargs"]), info["train_set"])
    obs, got = env.reset(options={"task_id": info["task_id"]})
    assert got["task_id"] == "train_1" and "capital of france?" in obs["prompt"]
    env.close()
    out = tmp_path / "rows.parquet"
    argv = ["--env-id", "agentflow/Gen-Math-v1", "--train-set", "nq", "--train-path", str(tmp_path / "nq.json")]
    assert main([*argv, "--train-limit", "2", "--out", str(out)]) == 0 and out.is_file()
    assert main([*argv, "--env-id", "agentflow/Gen-Math-v1", "--out", str(out)]) == 2  # one env only


def test_agentflows_own_judge_from_its_checkout(tmp_path):
    """rules="agentflow:PATH": AgentFlow's judge prompt, read from the checkout, answered by the engine."""
    import os
    from pathlib import Path

    src = Path(os.environ.get("AGENTFLOW_SRC") or Path(__file__).resolve().parents[3] / "shared/data/agentflow-src")
    if not (src / "test" / "calculate_score_unified.py").is_file():
        pytest.skip("AgentFlow sources not present")
    (tmp_path / "nq.json").write_text(json.dumps(NQ_ROWS))
    tasks = load_train_tasks("nq", path=str(tmp_path / "nq.json"))

    def verdict(prompt):
        return json.dumps({"analysis": "compared", "true_false": "Jefferson" in prompt.split("Correct answer:")[0]})

    engine = ScriptedEngine(verdict)
    reward = make_training_reward(tasks, judge=engine, rules=f"agentflow:{src}")
    assert reward.scorer.kind == "judge" and type(reward.scorer).__name__ == "AgentFlowJudge"
    assert reward(_traj(tasks[0], "Thomas Jefferson")) == 1.0
    assert reward(_traj(tasks[0], "John Adams")) == 0.0
    assert len(engine.calls) == 2 and "Correct answer:" in engine.calls[0].prompt
