"""The paper's ten benchmarks: every loader on AgentFlow's test files, the hub path on locally saved datasets,
JSONL/Parquet files with column maps, clear errors on broken files, whole episodes and Gymnasium's checker."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import ConfigError, DataError
from agentflow_env.tools.calculator.tool import CalculatorTool
from benchmarks.paper.catalog import BENCHMARKS
from benchmarks.paper.loading import load_paper_tasks
from benchmarks.paper.specs import make_paper_scorer
from benchmarks.specs import get_spec

PAPER = list(BENCHMARKS)
EXPECTED_FAMILY = {
    "Bamboogle": "search",
    "TwoWiki": "search",
    "HotpotQA": "search",
    "Musique": "search",
    "GAIA": "agentic",
    "AIME24": "math",
    "AMC23": "math",
    "GameOf24": "math",
    "GPQA": "science",
    "MedQA": "science",
}


# ------------------------------------------------------------------ AgentFlow's test files
@pytest.mark.parametrize("name", PAPER)
def test_loader_parses_every_file(testsets_dir, name):
    bench = BENCHMARKS[name]
    raw = json.loads((testsets_dir / f"{bench.file}.json").read_text(encoding="utf-8"))
    tasks = load_paper_tasks(bench, data_dir=testsets_dir)
    assert len(tasks) == len(raw) == bench.known_size
    assert len({t.id for t in tasks}) == len(tasks)  # content ids are unique
    for task in tasks:
        assert task.family == EXPECTED_FAMILY[name]
        assert task.question.strip()
        assert "<answer>" not in task.question  # AgentFlow's output-format tail is stripped
    # the gold answer of every task scores 1 with the benchmark's own rule scorer
    scorer = make_paper_scorer(bench)
    sample = [tasks[i] for i in range(0, len(tasks), max(1, len(tasks) // 15))]
    for task in sample:
        gold = task.answer[0] if isinstance(task.answer, list) else task.answer
        assert scorer(str(gold), task) == 1.0, (name, task.id, gold)


def test_medqa_ids_are_content_hashes(testsets_dir):
    raw = json.loads((testsets_dir / "medqa.json").read_text(encoding="utf-8"))
    assert len({r["pid"] for r in raw}) < len(raw)  # the file repeats pids...
    tasks = load_paper_tasks(BENCHMARKS["MedQA"], data_dir=testsets_dir)
    assert len({t.id for t in tasks}) == len(raw)  # ...content ids do not
    first = tasks[0]
    assert first.question.count("Hemolytic uremic syndrome") == 1  # options shown once, not twice
    assert first.answer == "C" and first.metadata["answer_text"] == "Colorectal cancer"
    again = load_paper_tasks(BENCHMARKS["MedQA"], data_dir=testsets_dir)
    assert [t.id for t in again] == [t.id for t in tasks]  # stable


def test_gameof24_and_gpqa_fields(testsets_dir):
    g24 = load_paper_tasks(BENCHMARKS["GameOf24"], data_dir=testsets_dir)
    assert g24[0].metadata["numbers"] == [1, 1, 1, 8] and g24[0].answer == ["(1+1+1)×8"]
    scorer = make_paper_scorer(BENCHMARKS["GameOf24"])
    assert all(scorer(sol, t) == 1.0 for t in list(g24)[:60] for sol in t.answer)  # every gold solution checks
    assert scorer("8*3", g24[0]) == 0.0
    gpqa = load_paper_tasks(BENCHMARKS["GPQA"], data_dir=testsets_dir)
    assert gpqa[0].answer == "A" and gpqa[0].question.endswith("Choices:\nA. 0.9\nB. 0.7\nC. 0.1\nD. 0.3")


def test_gpqa_shuffles_per_seed(testsets_dir):
    bench = BENCHMARKS["GPQA"]
    base = load_paper_tasks(bench, data_dir=testsets_dir, num_tasks=60)
    s1 = load_paper_tasks(bench, data_dir=testsets_dir, num_tasks=60, seed=1)
    s1_again = load_paper_tasks(bench, data_dir=testsets_dir, num_tasks=60, seed=1)
    s2 = load_paper_tasks(bench, data_dir=testsets_dir, num_tasks=60, seed=2)
    assert [t.question for t in s1] == [t.question for t in s1_again]  # deterministic
    assert [t.id for t in s1] == [t.id for t in base]  # same questions, only the order of options moves
    assert sum(a.answer != b.answer for a, b in zip(s1, s2)) > 20
    for task in list(s1) + list(s2):
        letter_index = ord(task.answer) - ord("A")
        assert task.metadata["options"][letter_index] == task.metadata["answer_text"]
        assert f"{task.answer}. {task.metadata['answer_text']}" in task.question


def test_medqa_shuffles_per_seed_too(testsets_dir):
    bench = BENCHMARKS["MedQA"]
    base = load_paper_tasks(bench, data_dir=testsets_dir, num_tasks=40)
    trials = [load_paper_tasks(bench, data_dir=testsets_dir, num_tasks=40, seed=s) for s in (0, 1, 2)]
    assert all([t.id for t in trial] == [t.id for t in base] for trial in trials)
    assert sum(a.answer != b.answer for a, b in zip(trials[0], trials[1])) > 15
    for trial in trials:
        for task, plain in zip(trial, base):
            assert task.metadata["answer_text"] == plain.metadata["answer_text"]
            assert task.metadata["options"][ord(task.answer) - ord("A")] == task.metadata["answer_text"]
    no_shuffle = load_paper_tasks(bench, data_dir=testsets_dir, num_tasks=40, seed=1, shuffle_options=False)
    assert [t.question for t in no_shuffle] == [t.question for t in base]


def _gpqa_rows(choices_and_answers):
    return [
        {
            "pid": i,
            "question": f"Question {i}?",
            "choices": [f"{'ABCD'[j]}. {c}" for j, c in enumerate(cs)],
            "answer_idx": a,
        }
        for i, (cs, a) in enumerate(choices_and_answers)
    ]


def test_gpqa_suspect_options_are_cleaned_and_reported(tmp_path, caplog):
    rows = _gpqa_rows(
        [
            (["200 mL", "200 mL", "180 mL", "100 mL"], 1),  # the correct text twice (AgentFlow row 272)
            (["x-ene", "y-ene", "z-ene", "x-ene"], 2),  # a wrong option twice (rows 14, 286)
            (["\\rangle\\rightarrow|1\\rangle", "|3\\rangle", "|2\\rangle", "|4\\rangle"], 1),  # cut off (row 135)
            (["c", "a", "d", "b"], 0),  # bare statement labels (row 168), here out of order: correct is "c"
            (["q/L^2", "q/l^2", "q/s", "q/r"], 1),  # differ only by case (row 239): both stay
        ]
    )
    path = tmp_path / "gpqa.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    with caplog.at_level("WARNING", logger="benchmarks.paper.rows"):
        trials = [load_paper_tasks(BENCHMARKS["GPQA"], path=path, seed=s) for s in range(6)]
    messages = [r.getMessage() for r in caplog.records if "suspect options" in r.getMessage()]
    assert len(messages) == len(trials)  # one summary per load, not one line per option
    logged = messages[0]
    assert str(path) in logged and all(f"record {i}:" in logged for i in (0, 1, 2, 3)) and "record 4:" not in logged
    for trial in trials:
        dup_right, dup_wrong, cut, labels, cased = trial
        assert sorted(dup_right.metadata["options"]) == ["100 mL", "180 mL", "200 mL"]
        assert dup_right.metadata["options"][ord(dup_right.answer) - ord("A")] == "200 mL"
        assert sorted(dup_wrong.metadata["options"]) == ["x-ene", "y-ene", "z-ene"]
        assert (
            dup_wrong.metadata["answer_text"] == "z-ene"
            and "repeats option A" in dup_wrong.metadata["data_warnings"][0]
        )
        assert "cut off" in cut.metadata["data_warnings"][0] and len(cut.metadata["options"]) == 4
        # option X is always label x: "C" and "c" can never name different options
        assert labels.metadata["options"] == ["a", "b", "c", "d"] and labels.answer == "C"
        assert labels.question.endswith("Choices:\nA. a\nB. b\nC. c\nD. d")
        assert len(cased.metadata["options"]) == 4 and "data_warnings" not in cased.metadata
    assert len({tuple(t[0].metadata["options"]) for t in trials}) > 1  # cleaned rows still shuffle per seed


def test_gpqa_agentflow_rows_with_bad_options(testsets_dir, caplog):
    with caplog.at_level("WARNING", logger="benchmarks.paper.rows"):
        tasks = [load_paper_tasks(BENCHMARKS["GPQA"], data_dir=testsets_dir, seed=s) for s in (0, 1, 2)]
    flagged = {i for i, t in enumerate(tasks[0]) if t.metadata.get("data_warnings")}
    assert flagged == {14, 135, 168, 272, 286}
    for trial in tasks:
        assert all(len(trial[i].metadata["options"]) == 3 for i in (14, 272, 286))
        assert trial[272].metadata["answer_text"] == "200 mL"
        assert "cut off" in trial[135].metadata["data_warnings"][0]
        assert trial[168].metadata["options"] == ["a", "b", "c", "d"] and trial[168].answer == "C"
        assert len(set(trial[239].metadata["options"])) == 4  # L vs l: two different options
    assert any("5 record(s) with suspect options" in r.getMessage() for r in caplog.records)
    medqa = load_paper_tasks(BENCHMARKS["MedQA"], data_dir=testsets_dir, seed=0)
    assert not any(t.metadata.get("data_warnings") for t in medqa)


def test_env_var_data_dir_and_agentflow_layout(tmp_path, monkeypatch, testsets_dir):
    nested = tmp_path / "hotpotqa" / "data"
    nested.mkdir(parents=True)
    (nested / "data.json").write_text((testsets_dir / "hotpotqa.json").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("AGENTFLOW_DATA_DIR", str(tmp_path))
    tasks = load_paper_tasks(BENCHMARKS["HotpotQA"], num_tasks=7)  # AgentFlow repo layout <task>/data/data.json
    assert len(tasks) == 7
    assert get_spec("HotpotQA").size() == 100
    monkeypatch.delenv("AGENTFLOW_DATA_DIR")
    with pytest.raises(DataError, match="data_dir"):
        load_paper_tasks(BENCHMARKS["HotpotQA"])


# ------------------------------------------------------------------ the hub path, offline
def _save(tmp_path: Path, name: str, rows, split: str | None = None) -> str:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(rows)
    target = tmp_path / name
    (datasets.DatasetDict({split: ds}) if split else ds).save_to_disk(str(target))
    return str(target)


def test_hub_loader_flashrag_layout(tmp_path):
    rows = [
        {
            "id": f"dev_{i}",
            "question": f"Who founded company {i}?",
            "golden_answers": [f"Founder {i}", "F"],
            "metadata": {"type": "bridge"},
        }
        for i in range(5)
    ]
    path = _save(tmp_path, "hotpot", rows, split="dev")  # "test" maps to the hub's evaluation split, "dev"
    tasks = load_paper_tasks(BENCHMARKS["HotpotQA"], source="hub", hub_dataset=path)
    assert len(tasks) == 5 and tasks[2].answer == ["Founder 2", "F"]
    assert tasks[2].metadata["source_id"] == "dev_2"
    assert make_paper_scorer(BENCHMARKS["HotpotQA"])("founder 2", tasks[2]) == 1.0
    with pytest.raises(DataError, match="split"):
        load_paper_tasks(BENCHMARKS["HotpotQA"], source="hub", hub_dataset=path, split="train")


def test_hub_loader_through_load_dataset_on_a_parquet_repo(tmp_path):
    # a folder laid out like a hub dataset repo goes through datasets.load_dataset, offline
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    repo = tmp_path / "bamboogle_repo"
    (repo / "data").mkdir(parents=True)
    rows = [
        {"id": f"test_{i}", "question": f"Who built tower {i}?", "golden_answers": [f"Builder {i}"]} for i in range(4)
    ]
    pq.write_table(pa.Table.from_pylist(rows), repo / "data" / "test-00000-of-00001.parquet")
    tasks = load_paper_tasks(
        BENCHMARKS["Bamboogle"], source="hub", hub_dataset=str(repo), hub_cache_dir=str(tmp_path / "cache")
    )
    assert [t.answer for t in tasks] == [[f"Builder {i}"] for i in range(4)]


def test_hub_loader_gpqa_shuffles_correct_answer(tmp_path):
    rows = [
        {
            "Question": f"Q{i}: which value?",
            "Correct Answer": f"right {i}",
            "Incorrect Answer 1": f"w1 {i}",
            "Incorrect Answer 2": f"w2 {i}",
            "Incorrect Answer 3": f"w3 {i}",
            "Record ID": f"rec{i}",
        }
        for i in range(12)
    ]
    path = _save(tmp_path, "gpqa", rows)
    a = load_paper_tasks(BENCHMARKS["GPQA"], source="hub", hub_dataset=path, seed=3)
    b = load_paper_tasks(BENCHMARKS["GPQA"], source="hub", hub_dataset=path, seed=3)
    assert [t.answer for t in a] == [t.answer for t in b]
    assert len({t.answer for t in a}) > 1  # the right answer is not always A
    for t in a:
        assert t.metadata["options"][ord(t.answer) - 65] == t.metadata["answer_text"]
        assert t.metadata["answer_text"].startswith("right")


def test_hub_loader_gaia_medqa_game24(tmp_path):
    gaia = [
        {"task_id": "t1", "Question": "How many?", "Level": "1", "Final answer": "3", "file_name": ""},
        {"task_id": "t2", "Question": "Read the file.", "Level": "2", "Final answer": "x", "file_name": "a.png"},
    ]
    tasks = load_paper_tasks(BENCHMARKS["GAIA"], source="hub", hub_dataset=_save(tmp_path, "gaia", gaia))
    assert [t.metadata["source_id"] for t in tasks] == ["t1"]  # text-only: the attachment question is dropped
    medqa = [
        {
            "question": "Most likely cause?",
            "answer": "Delirium",
            "answer_idx": "C",
            "options": {"A": "Dementia", "B": "Opioid intoxication", "C": "Delirium", "D": "UTI"},
        }
    ]
    med = load_paper_tasks(BENCHMARKS["MedQA"], source="hub", hub_dataset=_save(tmp_path, "medqa", medqa))
    assert med[0].answer == "C" and med[0].question.endswith("C. Delirium\nD. UTI")
    g24 = [
        {"numbers": [4, 9, 10, 13], "solutions": ["(10-4)×(13-9)"], "solvable": True},
        {"numbers": [1, 1, 1, 1], "solutions": [], "solvable": False},
    ]
    games = load_paper_tasks(BENCHMARKS["GameOf24"], source="hub", hub_dataset=_save(tmp_path, "g24", g24))
    assert len(games) == 1 and games[0].metadata["numbers"] == [4, 9, 10, 13]
    assert make_paper_scorer(BENCHMARKS["GameOf24"])("(13-9)*(10-4)", games[0]) == 1.0


# ------------------------------------------------------------------ JSONL / Parquet with a column map
def test_jsonl_and_parquet_with_column_map(tmp_path):
    rows = [{"q": f"What is {i} squared?", "gold": str(i * i), "uid": i} for i in range(1, 6)]
    jsonl = tmp_path / "sq.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    cols = {"question": "q", "answer": "gold", "id": "uid"}
    from_jsonl = load_paper_tasks(BENCHMARKS["AMC23"], path=jsonl, columns=cols)
    assert [t.answer for t in from_jsonl] == ["1", "4", "9", "16", "25"]
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    parquet = tmp_path / "sq.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    from_parquet = load_paper_tasks(BENCHMARKS["AMC23"], path=parquet, columns=cols)
    assert [t.id for t in from_parquet] == [t.id for t in from_jsonl]
    mc = tmp_path / "mc.jsonl"
    mc.write_text(json.dumps({"stem": "Pick two.", "opts": ["one", "two", "three"], "gold": 1}) + "\n", "utf-8")
    task = load_paper_tasks(
        BENCHMARKS["GPQA"], path=mc, columns={"question": "stem", "choices": "opts", "answer_index": "gold"}
    )[0]
    assert task.answer == "B" and task.question.endswith("A. one\nB. two\nC. three")


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("", "empty"),
        ("{not json", "invalid JSON"),
        ('{"a": 1}', "list of records"),
        ("[1, 2]", "record 0 is a int"),
        ('[{"question": "q?"}]', "no field 'answer'"),
        ('[{"query": "q?", "answer": "a"}]', "no field 'question'"),
        ('[{"question": "", "answer": "x"}]', "no question text"),
        ('[{"question": "q", "answer": ""}]', "empty gold answer"),
    ],
)
def test_broken_files_give_data_errors(tmp_path, content, match):
    path = tmp_path / "broken.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=match) as info:
        load_paper_tasks(BENCHMARKS["Bamboogle"], path=path)
    assert "broken.json" in str(info.value)


def test_broken_choice_and_missing_files(tmp_path):
    bad = tmp_path / "medqa.json"
    bad.write_text(json.dumps([{"question": "q", "options": ["A. x", "B. y"], "answer": "z"}]), encoding="utf-8")
    with pytest.raises(DataError, match="matches 0 of the options"):
        load_paper_tasks(BENCHMARKS["MedQA"], data_dir=tmp_path)
    with pytest.raises(DataError, match="no file for this benchmark"):
        load_paper_tasks(BENCHMARKS["GPQA"], data_dir=tmp_path)
    (tmp_path / "x.csv").write_text("a,b\n", encoding="utf-8")
    with pytest.raises(DataError, match="unsupported file type"):
        load_paper_tasks(BENCHMARKS["GPQA"], path=tmp_path / "x.csv")
    with pytest.raises(ConfigError, match="source"):
        load_paper_tasks(BENCHMARKS["GPQA"], source="ftp")


# ------------------------------------------------------------------ envs: whole episodes and the checker
def _make_paper_env(name: str, data_dir: Path):
    """``gymnasium.make`` with the spec's own tools; a calculator stands in while a tool module is missing."""
    try:
        return gym.make(f"agentflow/{name}-v1", data_dir=str(data_dir))
    except (ImportError, ConfigError):
        return gym.make(f"agentflow/{name}-v1", data_dir=str(data_dir), tools=[CalculatorTool()])


def _tool_action(env) -> str:
    names = env.unwrapped.tool_names
    tool = next((n for n in names if "alculator" in n), None) or next((n for n in names if "ython" in n), names[0])
    command = "2+2" if "alculator" in tool else "print(2 + 2)"
    return f"Justification: check.\nContext: none\nSub-Goal: Compute.\nTool Name: {tool}\nCommand: {command}"


@pytest.mark.parametrize("name", PAPER)
def test_paper_env_runs_an_episode_and_passes_checker(testsets_dir, name):
    env = _make_paper_env(name, testsets_dir)
    try:
        obs, info = env.reset(seed=0)
        task = env.unwrapped.task
        assert obs["question"] == task.question and info["family"] == EXPECTED_FAMILY[name]
        assert env.unwrapped.max_turns == 10
        for _ in range(2):
            obs, reward, terminated, truncated, info = env.step(_tool_action(env))
            assert reward == 0.0 and not (terminated or truncated)
        obs, reward, terminated, truncated, info = env.step("Justification: not a valid action")
        assert not terminated and "Invalid action" in info["memory_steps"][-1]["result"]
        gold = task.answer[0] if isinstance(task.answer, list) else task.answer
        obs, reward, terminated, truncated, info = env.step(f"Final Answer: {gold}")
        assert terminated and reward == 1.0 and info["score"] == 1.0
        env.reset(seed=1)
        *_, info = env.step("Final Answer: certainly not the answer 12345")
        assert info["score"] == 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_spec_metadata_and_options(testsets_dir):
    for name in PAPER:
        spec = get_spec(name)
        assert spec.max_turns == 10 and spec.family == EXPECTED_FAMILY[name]
        assert "generator" in spec.tools and "python" in spec.tools
        assert ("wikipedia" in spec.tools) == (spec.family != "math")
        assert spec.source and spec.size is not None
    assert "calculator" in get_spec("AIME24").tools
    with pytest.raises(ConfigError, match="does not take"):
        gym.make("agentflow/HotpotQA-v1", data_dir=str(testsets_dir), tools=[CalculatorTool()], colour="red")
    env = gym.make(
        "agentflow/HotpotQA-v1", data_dir=str(testsets_dir), tools=[CalculatorTool()], metric="f1", num_tasks=5
    )
    assert len(env.unwrapped.tasks) == 5 and env.unwrapped.scorer.metric == "f1"
    env.close()


def test_judge_scorer_through_make_env(testsets_dir):
    class Always:
        def generate(self, prompts, sampling=None):
            return ["Verdict: CORRECT" for _ in prompts]

    env = gym.make(
        "agentflow/Bamboogle-v1",
        data_dir=str(testsets_dir),
        tools=[CalculatorTool()],
        scoring="judge",
        judge_engine=Always(),
    )
    env.reset(seed=0)
    *_, info = env.step("Final Answer: anything at all")
    assert info["score"] == 1.0
    env.close()
    with pytest.raises(ConfigError, match="judge_engine"):
        gym.make("agentflow/Bamboogle-v1", data_dir=str(testsets_dir), tools=[CalculatorTool()], scoring="judge")


def test_cli_list_shows_size_and_source(testsets_dir, monkeypatch, capsys):
    from agentflow_env.cli import main
    from agentflow_env.registration import LATEST_VERSION

    monkeypatch.delenv("AGENTFLOW_DATA_DIR", raising=False)
    assert main(["list", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    for name in PAPER:
        row = rows[f"agentflow/{name}-v{LATEST_VERSION}"]
        assert row["size"] == BENCHMARKS[name].known_size and "AgentFlow file" in row["source"]
        assert "hub " in row["source"]
    small = testsets_dir.parent / "nonexistent"
    assert not small.exists()
    monkeypatch.setenv("AGENTFLOW_DATA_DIR", str(testsets_dir))
    assert main(["list", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[f"agentflow/MedQA-v{LATEST_VERSION}"]["size"] == 300
