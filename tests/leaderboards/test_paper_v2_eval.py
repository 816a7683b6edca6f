"""paper-v2 end to end on a scripted loopback server: `eval --protocol paper-v2 --agentflow-src SRC --fast` runs
AgentFlow's own prompts and judge (read from the checkout) and records their fingerprints; with no search
backends it refuses to start unless `--allow-missing-tools` is given, and then its board row says so and is never
"comparable"; the same run without a checkout uses this project's wording and is labelled "not comparable", and
with a local Wikipedia index its run.json and board row carry the retrieval fingerprint.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentflow_env.paper_flow.agentflow_judge import AgentFlowScoring
from leaderboards.protocol import COMPARABLE, NOT_COMPARABLE, PROTOCOL_DIR, load_protocol
from leaderboards.retrieval import MISSING_TOOLS
from perf.latency_process import paper_v2_reply
from tests.helpers import LoopbackServer, chat_server

SRC = Path(os.environ.get("AGENTFLOW_SRC") or Path(__file__).resolve().parents[3] / "shared" / "data" / "agentflow-src")
pytestmark = pytest.mark.skipif(
    not (SRC / "test" / "calculate_score_unified.py").is_file(), reason="AgentFlow sources not present"
)


def _reply(body: dict[str, Any]) -> str:
    """One reply every module reads as it needs (a plan, a command, the verifier's STOP, a final answer); the
    judge's structured fields (perf/latency_process.py's paper-v2 replies)."""
    return paper_v2_reply("judge" if body["model"] == "judge" else "module", body)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with chat_server(_reply) as srv:
        yield srv


def _run(
    tmp_path: Path, server: LoopbackServer, testsets: Path, name: str, extra: list[str], rc: int = 0
) -> dict[str, Any]:
    from agentflow_env.cli import main

    small = tmp_path / "paper-v2.toml"  # paper-v2 itself, one trial, one task per benchmark
    text = (PROTOCOL_DIR / "paper-v2.toml").read_text(encoding="utf-8")
    small.write_text(text.replace("seeds = [0, 1, 2]", "seeds = [0]").replace("fast_tasks = 5", "fast_tasks = 1"))
    args = [
        "eval",
        "--protocol",
        str(small),
        "--fast",
        "--policy",
        f"openai:planner@{server.url}",
        "--concurrency",
        "4",
    ]
    args += ["--engine", f"openai:qwen@{server.url}", "--judge-engine", f"openai:judge@{server.url}"]
    args += ["--data-dir", str(testsets), "--out", str(tmp_path / "runs"), "--no-progress", "--name", name, *extra]
    assert main(args) == rc
    run_dir = tmp_path / "runs" / "paper-v2" / name
    if rc:
        assert not run_dir.exists()  # refused before anything is written
        return {}
    return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))


def _board_label(tmp_path: Path) -> list[str]:
    from leaderboards.render import _row_label, board_rows, group_by_protocol

    return [_row_label(r) for r in board_rows(group_by_protocol(tmp_path / "runs")["paper-v2"]).rows]


def test_paper_v2_needs_search_backends_and_reads_agentflow_src(
    tmp_path: Path, testsets_dir: Path, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from agentflow_env.paper_flow import planner_system_prompt
    from agentflow_env.tools.bm25 import BM25Index

    monkeypatch.delenv("AGENTFLOW_SRC", raising=False)
    for var in (
        "AGENTFLOW_WIKI_INDEX",
        "AGENTFLOW_RETRIEVER_URL",
        "SERPER_API_KEY",
        "TAVILY_API_KEY",
        "GOOGLE_API_KEY",
    ):
        monkeypatch.delenv(var, raising=False)
    _run(tmp_path, server, testsets_dir, "refused", ["--agentflow-src", str(SRC)], rc=2)
    assert "Wikipedia_RAG_Search_Tool" in capsys.readouterr().err
    stored = _run(tmp_path, server, testsets_dir, "with-src", ["--agentflow-src", str(SRC), "--allow-missing-tools"])
    assert stored["comparability"] == MISSING_TOOLS != COMPARABLE
    assert "Ground_Google_Search_Tool" in stored["retrieval"]["missing"]
    used = stored["agentflow"]
    assert used["source"] == str(SRC.resolve()) and used["judge_fingerprint"] == AgentFlowScoring(SRC).fingerprint
    assert used["prompt_fingerprint"] == stored["paper_settings"]["prompt_fingerprint"]
    assert stored["paper_settings"]["prompts"] == f"agentflow:{SRC.resolve()}"
    assert all("agentflow[" in s for s in stored["scorers"].values())
    judged = [b for b in server.bodies if b["model"] == "judge"]
    assert judged and all(b["response_format"]["type"] == "json_schema" for b in judged)
    names = {b["response_format"]["json_schema"]["name"] for b in judged}
    assert names == {"AnswerExtraction", "AnswerVerification"}  # GPQA/MedQA two-stage, the rest single-stage
    planner = [b for b in server.bodies if b["model"] == "planner"]
    assert planner[0]["messages"][0]["content"] == planner_system_prompt(f"agentflow:{SRC}")
    assert planner_system_prompt(f"agentflow:{SRC}") != planner_system_prompt("builtin")
    with_src = json.loads((tmp_path / "runs" / "paper-v2" / "with-src" / "tasks.jsonl").read_text().splitlines()[0])
    assert with_src["score"] == 1.0

    search = [json.loads(x) for x in (tmp_path / "runs" / "paper-v2" / "with-src" / "tasks.jsonl").open()]
    leaks = [t["leak"] for t in search if t["env_id"] == "agentflow/Bamboogle-v2"]
    assert leaks and all(x == {"searches": 0, "gold_retrieved": False, "query_copies_question": False} for x in leaks)
    assert all(t["leak"] is None for t in search if t["env_id"] == "agentflow/AIME24-v2")

    server.log.clear()
    BM25Index.build([{"title": "Paris", "text": "Paris is the capital of France."}], out_dir=tmp_path / "wiki")
    monkeypatch.setenv("AGENTFLOW_WIKI_INDEX", str(tmp_path / "wiki"))
    monkeypatch.setenv("SERPER_API_KEY", "not-a-real-key")  # stated, never called: the planner asks no search
    bare = _run(tmp_path, server, testsets_dir, "without-src", [])
    assert bare["comparability"] == NOT_COMPARABLE and bare["paper_settings"]["prompts"] == "builtin"
    retrieval = bare["retrieval"]
    assert retrieval["missing"] == [] and retrieval["kinds"] == ["local", "online"]
    [fingerprint] = retrieval["fingerprints"]
    assert fingerprint["retriever"] == "bm25" and fingerprint["corpus_hash"].startswith("crc32:")
    assert not any("response_format" in b for b in server.bodies)  # this project's judge
    assert bare["agentflow"]["source"] is None

    labels = _board_label(tmp_path)
    [missing] = [x for x in labels if x.startswith("with-src")]
    [not_comparable] = [x for x in labels if x.startswith("without-src")]
    assert MISSING_TOOLS in missing and "leak meter over" in missing
    assert NOT_COMPARABLE in not_comparable and f"retrieval {retrieval['fingerprint_id']}" in not_comparable


def test_agentflow_src_comes_from_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from leaderboards.runner import _with_agentflow_src

    monkeypatch.setenv("AGENTFLOW_SRC", str(SRC))
    protocol = _with_agentflow_src(load_protocol("paper-v2"), None)
    assert protocol.comparability == COMPARABLE and protocol.judge_rules == f"agentflow:{SRC.resolve()}"
    assert protocol.hash == load_protocol("paper-v2").hash  # the checkout's path is not part of the protocol
    monkeypatch.delenv("AGENTFLOW_SRC")
    assert _with_agentflow_src(load_protocol("paper-v2"), None).comparability == NOT_COMPARABLE
    assert load_protocol("paper-v1").comparability is None


def test_a_wrong_checkout_is_a_clear_error(tmp_path: Path) -> None:
    from agentflow_env.error import ConfigError

    with pytest.raises(ConfigError, match="not an AgentFlow checkout"):
        load_protocol("paper-v2").with_agentflow_src(str(tmp_path))
