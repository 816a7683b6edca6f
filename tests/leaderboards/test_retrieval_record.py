"""Retrieval on the record: search backends and fingerprints of a run, comparability with the paper's backends,
board marks for runs with another fingerprint, and the leak meter."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agentflow_env.error import ConfigError
from agentflow_env.tools.bm25 import BM25Index
from agentflow_env.tools.search import BM25SearchTool
from agentflow_env.tools.web_search import WebSearchTool
from leaderboards.leaks import copies_question, episode_leaks, leak_rates
from leaderboards.protocol import COMPARABLE, NOT_COMPARABLE
from leaderboards.retrieval import (
    MISSING_TOOLS,
    OFFLINE_SEARCH,
    check_search_backends,
    collect_retrieval,
    retrieval_marks,
    tools_comparability,
)

PASSAGES = [{"title": "Paris", "text": "Paris is the capital of France."}, {"title": "Rome", "text": "Rome, Italy."}]


def _env(*tools):
    return SimpleNamespace(tools=list(tools))


def test_backends_and_fingerprints_are_collected(monkeypatch) -> None:
    for var in (
        "SERPER_API_KEY",
        "TAVILY_API_KEY",
        "GOOGLE_API_KEY",
        "AGENTFLOW_SEARCH_INDEX",
        "AGENTFLOW_RETRIEVER_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    local = BM25SearchTool(index=BM25Index.build(PASSAGES), top_k=2)
    missing = collect_retrieval([("a", _env(local, WebSearchTool())), ("b", _env(SimpleNamespace(name="Calc")))])
    assert missing["missing"] == ["Web_Search_Tool"] and set(missing["backends"]) == {"a"}
    [fp] = missing["fingerprints"]
    assert fp["retriever"] == "bm25" and fp["top_k"] == 2 and fp["corpus_hash"].startswith("sha256:")
    monkeypatch.setenv("SERPER_API_KEY", "k")
    online = collect_retrieval([("a", _env(local, WebSearchTool()))])
    assert online["kinds"] == ["local", "online"] and online["missing"] == []
    other = collect_retrieval([("a", _env(BM25SearchTool(index=BM25Index.build(PASSAGES), top_k=5), WebSearchTool()))])
    assert other["fingerprint_id"] != online["fingerprint_id"]  # top-k is part of the fingerprint
    assert collect_retrieval([("b", _env(SimpleNamespace(name="Calc")))]) is None


def test_comparability_needs_the_papers_backends() -> None:
    online = {"missing": [], "kinds": ["online"]}
    assert tools_comparability(COMPARABLE, online) == COMPARABLE
    assert tools_comparability(COMPARABLE, {"missing": [], "kinds": ["local", "online"]}) == OFFLINE_SEARCH
    assert tools_comparability(COMPARABLE, {"missing": ["X"], "kinds": ["missing"]}) == MISSING_TOOLS
    assert tools_comparability(NOT_COMPARABLE, {"missing": ["X"], "kinds": ["missing"]}) == NOT_COMPARABLE
    assert tools_comparability(None, {"missing": ["X"], "kinds": ["missing"]}) is None  # protocols of our own text
    paper = SimpleNamespace(name="paper-v2", wants_agentflow_src=True)
    with pytest.raises(ConfigError, match="--allow-missing-tools"):
        check_search_backends(paper, {"missing": ["Wikipedia_RAG_Search_Tool"]}, allow_missing=False)
    check_search_backends(paper, {"missing": ["Wikipedia_RAG_Search_Tool"]}, allow_missing=True)
    check_search_backends(SimpleNamespace(name="offline-v2"), {"missing": ["X"]}, allow_missing=False)


def test_board_marks_runs_with_another_fingerprint() -> None:
    def rec(name, fid, missing=()):
        retrieval = {"fingerprint_id": fid, "missing": list(missing), "kinds": ["local"], "fingerprints": []}
        return SimpleNamespace(name=name, retrieval=retrieval, comparability=None)

    marks = retrieval_marks([rec("a", "f1"), rec("b", "f1"), rec("c", "f2", ["Web_Search_Tool"]), rec("d", None)])
    assert [s for s, _ in marks["a"]] == ["retrieval f1"]
    assert [s for s, _ in marks["c"]] == ["no search backend", "retrieval f2, differs"]
    assert "d" not in marks


def test_leak_meter() -> None:
    question = "Who designed the basilica of the Sagrada Familia in Barcelona?"
    steps = [
        {"tool": "Calculator_Tool", "command": question, "result": "Antoni Gaudi"},
        {
            "tool": "Wikipedia_Search_Tool",
            "command": "Sagrada Familia architect",
            "result": "[1] designed by Antoni Gaudí",
        },
    ]
    out = episode_leaks(question, ["Antoni Gaudí", "Gaudi"], steps)
    assert out == {"searches": 1, "gold_retrieved": True, "query_copies_question": False}
    paper = [{"tool_name": "Wikipedia_RAG_Search_Tool", "command": f'tool.execute(query="{question}")', "result": "x"}]
    assert episode_leaks(question, "Gaudi", paper) == {
        "searches": 1,
        "gold_retrieved": False,
        "query_copies_question": True,
    }
    assert not copies_question("capital", "What is the capital of France?")
    assert episode_leaks(question, "Gaudi", [])["searches"] == 0
    rates = leak_rates([{"leak": out}, {"leak": None}, SimpleNamespace(leak={"gold_retrieved": False})])
    assert rates == {"episodes": 2, "gold_retrieved": 0.5, "query_copies_question": 0.0}
    assert leak_rates([{"leak": None}]) is None
