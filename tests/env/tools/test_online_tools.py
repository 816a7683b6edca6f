"""The online tool backends against loopback servers speaking each real API's wire format (never the internet):
Gemini's generateContent with Google Search grounding (the google-genai client), OpenAI-compatible embeddings
plus a web page (Web RAG), and the MediaWiki action API (Wikipedia search, extracts, page selection)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentflow_env.engines import ScriptedEngine
from agentflow_env.error import ConfigError
from agentflow_env.paper_flow.online_tools import GeminiGroundingTool, MediaWikiTool, WebRagTool, chunk_words
from tests.helpers import LoopbackServer, Response, json_response

SRC = Path(os.environ.get("AGENTFLOW_SRC") or Path(__file__).resolve().parents[4] / "shared" / "data" / "agentflow-src")

MOON_PAGE = (
    "<html><head><title>Moon</title><style>.x{color:red}</style><script>var moon = 1;</script></head><body>"
    + "<p>"
    + " ".join(f"filler{i}" for i in range(260))
    + "</p><p>The Moon has a mass of 7.342e22 kg, about 1.2% of Earth's mass.</p>"
    + "<p>"
    + " ".join(f"other{i}" for i in range(230))
    + "</p></body></html>"
)


@pytest.fixture
def mock() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


def _json(data: Any) -> Response:
    return json_response(data)


def _html(text: str) -> Response:
    return 200, {"Content-Type": "text/html; charset=utf-8"}, text.encode()


# ------------------------------------------------------------------ Gemini grounding
def test_gemini_grounding_inserts_citations_and_resolves_redirects(mock: LoopbackServer) -> None:
    pytest.importorskip("google.genai")
    text = "Spain won Euro 2024, beating England 2-1 in the final."
    mock.routes[("POST", "/v1beta/models/gemini-2.5-flash:generateContent")] = (
        lambda r: _json(
            {  # the REST response of generateContent with the googleSearch tool (ai.google.dev, grounding docs)
                "candidates": [
                    {
                        "content": {"parts": [{"text": text}], "role": "model"},
                        "finishReason": "STOP",
                        "groundingMetadata": {
                            "webSearchQueries": ["euro 2024 winner"],
                            "searchEntryPoint": {"renderedContent": "<div></div>"},
                            "groundingChunks": [
                                {"web": {"uri": f"{mock.url}/redirect/a", "title": "uefa.com"}},
                                {"web": {"uri": f"{mock.url}/redirect/b", "title": "bbc.co.uk"}},
                            ],
                            "groundingSupports": [
                                {
                                    "segment": {"startIndex": 0, "endIndex": 19, "text": text[:19]},
                                    "groundingChunkIndices": [0],
                                },
                                {
                                    "segment": {"startIndex": 21, "endIndex": 55, "text": text[21:]},
                                    "groundingChunkIndices": [0, 1],
                                },
                            ],
                        },
                    }
                ],
                "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 14, "totalTokenCount": 22},
                "modelVersion": "gemini-2.5-flash",
            }
        )
    )
    for name in ("a", "b"):
        mock.routes[("GET", f"/redirect/{name}")] = lambda r, n=name: (302, {"Location": f"{mock.url}/final/{n}"}, b"")
        mock.routes[("GET", f"/final/{name}")] = lambda r: _html("<p>ok</p>")
    tool = GeminiGroundingTool("Ground_Google_Search_Tool", api_key="test-key", base_url=mock.url)
    out = tool.execute(query="Who won the euro 2024?")
    a, b = f"{mock.url}/final/a", f"{mock.url}/final/b"
    assert out == f"Spain won Euro 2024[1]({a}), beating England 2-1 in the final.[1]({a}), [2]({b})"
    request = next(r for r in mock.log if r["method"] == "POST")
    assert request["json"]["contents"] == [{"parts": [{"text": "Who won the euro 2024?"}], "role": "user"}]
    assert request["json"]["tools"] == [{"googleSearch": {}}]
    assert request["headers"].get("x-goog-api-key") == "test-key"
    plain = tool.execute(query="Who won the euro 2024?", add_citations=False)
    assert plain == text


def test_gemini_failures_come_back_as_text(mock: LoopbackServer) -> None:
    pytest.importorskip("google.genai")
    mock.routes[("POST", "/v1beta/models/gemini-2.5-flash:generateContent")] = lambda r: (
        500,
        {"Content-Type": "application/json"},
        json.dumps({"error": {"code": 500, "message": "backend down", "status": "INTERNAL"}}).encode(),
    )
    tool = GeminiGroundingTool("Ground_Google_Search_Tool", api_key="k", base_url=mock.url, retries=2)
    out = tool.execute(query="q")
    assert out.startswith("Gemini search failed after 2 tries") and "backend down" in out


def test_gemini_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("google.genai")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="GOOGLE_API_KEY"):
        GeminiGroundingTool("Ground_Google_Search_Tool")


# ------------------------------------------------------------------ Web RAG
def _embeddings(request: dict[str, Any]) -> Response:
    """OpenAI's embeddings response; a text's vector counts the words 'mass' and 'moon' (plus a bias)."""
    texts = request["json"]["input"]
    data = [
        {"object": "embedding", "index": i, "embedding": [t.lower().count("mass"), t.lower().count("moon"), 0.1]}
        for i, t in enumerate(texts)
    ]
    return _json(
        {
            "object": "list",
            "data": data,
            "model": request["json"]["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
    )


def test_chunks_follow_agentflows_sizes() -> None:
    words = " ".join(str(i) for i in range(450))
    chunks = chunk_words(words)
    assert [len(c.split()) for c in chunks] == [200, 200, 90]
    assert chunks[1].split()[0] == "180" and chunks[2].split()[0] == "360"


def test_web_rag_fetches_embeds_ranks_and_summarises(mock: LoopbackServer) -> None:
    mock.routes[("GET", "/wiki/Moon")] = lambda r: _html(MOON_PAGE)
    mock.routes[("POST", "/v1/embeddings")] = _embeddings
    engine = ScriptedEngine(lambda prompt: "The Moon's mass is 7.342e22 kg.")
    tool = WebRagTool("Web_RAG_Search_Tool", engine, embed_base_url=f"{mock.url}/v1", embed_api_key="k", top_k=2)
    out = tool.execute(query="What is the mass of the moon?", url=f"{mock.url}/wiki/Moon")
    assert out == "The Moon's mass is 7.342e22 kg."
    embed = next(r for r in mock.log if r["path"] == "/v1/embeddings")
    assert (
        embed["json"]["model"] == "text-embedding-3-small"
        and embed["json"]["input"][0] == "What is the mass of the moon?"
    )
    assert len(embed["json"]["input"]) == 1 + 3 and "var moon" not in " ".join(embed["json"]["input"])  # script dropped
    prompt = engine.calls[0].prompt
    assert "Chunk [1]" in prompt and "7.342e22" in prompt.split("Chunk [2]")[0]  # the closest chunk comes first
    assert "Chunk [3]" not in prompt


def test_web_rag_failures_come_back_as_text(mock: LoopbackServer) -> None:
    mock.routes[("GET", "/missing")] = lambda r: (404, {}, b"gone")
    tool = WebRagTool("Web_RAG_Search_Tool", ScriptedEngine(["x"]), embed_base_url=f"{mock.url}/v1", embed_api_key="k")
    assert tool.execute(query="q", url=f"{mock.url}/missing").startswith(f"Error fetching {mock.url}/missing")


# ------------------------------------------------------------------ MediaWiki
def _mediawiki(mock: LoopbackServer) -> Callable[[dict[str, Any]], Response]:
    def api(request: dict[str, Any]) -> Response:
        q = request["query"]
        assert q["format"] == "json" and q["formatversion"] == "2" and q["action"] == "query"
        if q.get("list") == "search":  # action=query&list=search (MediaWiki API:Search)
            hits = [
                {"ns": 0, "title": t, "pageid": i + 1} for i, t in enumerate(["Moon", "Moon landing", "Hollow Moon"])
            ]
            return _json(
                {
                    "batchcomplete": True,
                    "continue": {"sroffset": 3},
                    "query": {"searchinfo": {"totalhits": 3}, "search": hits},
                }
            )
        title = q["titles"]  # action=query&prop=extracts|info&explaintext&inprop=url (TextExtracts, API:Info)
        page = {
            "pageid": 1,
            "ns": 0,
            "title": title,
            "extract": f"{title} is a topic. " * 20,
            "contentmodel": "wikitext",
            "fullurl": f"{mock.url}/wiki/{title.replace(' ', '_')}",
            "canonicalurl": f"{mock.url}/wiki/{title.replace(' ', '_')}",
        }
        return _json({"batchcomplete": True, "query": {"pages": [page]}})

    return api


def test_mediawiki_search_selection_and_rag(mock: LoopbackServer) -> None:
    mock.routes[("GET", "/w/api.php")] = _mediawiki(mock)
    mock.routes[("GET", "/wiki/Moon")] = lambda r: _html(MOON_PAGE)
    mock.routes[("POST", "/v1/embeddings")] = _embeddings

    def reply(prompt: str) -> str:
        if "matched_query_ids" in prompt or "Query Candidates" in prompt:
            return json.dumps({"matched_queries": ["Moon"], "matched_query_ids": [0]})
        return "Mass: 7.342e22 kg."

    engine = ScriptedEngine(reply)
    rag = WebRagTool("Web_RAG_Search_Tool", engine, embed_base_url=f"{mock.url}/v1", embed_api_key="k")
    tool = MediaWikiTool("Wikipedia_RAG_Search_Tool", engine, rag, api_url=f"{mock.url}/w/api.php")
    out = tool.execute(query="mass of the moon")
    assert [p["title"] for p in out["relevant_pages"]] == ["Moon"]
    assert out["relevant_pages"][0]["retrieved_information"] == "Mass: 7.342e22 kg."
    assert [p["title"] for p in out["other_pages"]] == ["Moon landing", "Hollow Moon"]
    assert (
        out["other_pages"][0]["abstract"].endswith("... [truncated]") and len(out["other_pages"][0]["abstract"]) == 115
    )
    search = next(r for r in mock.log if r["query"].get("list") == "search")
    assert search["query"]["srsearch"] == "mass of the moon" and search["query"]["srlimit"] == "10"
    selection = engine.calls[0]
    assert "0. Moon\n1. Moon landing\n2. Hollow Moon" in selection.prompt
    assert selection.sampling.response_format["json_schema"]["name"] == "Select_Relevant_Queries"


def test_mediawiki_bad_selection_selects_nothing(mock: LoopbackServer) -> None:
    mock.routes[("GET", "/w/api.php")] = _mediawiki(mock)
    engine = ScriptedEngine(["not json"])
    rag = WebRagTool("Web_RAG_Search_Tool", engine, embed_base_url=f"{mock.url}/v1", embed_api_key="k")
    out = MediaWikiTool("Wikipedia_RAG_Search_Tool", engine, rag, api_url=f"{mock.url}/w/api.php").execute(query="moon")
    assert out["relevant_pages"] == [] and len(out["other_pages"]) == 3


@pytest.mark.skipif(not (SRC / "agentflow").is_dir(), reason="AgentFlow sources not present")
def test_agentflow_checkout_supplies_the_online_prompts() -> None:
    from agentflow_env.paper_flow.agentflow_source import AgentFlowPrompts

    texts = AgentFlowPrompts(SRC).online_texts()
    select = texts.select("mass of the moon", "0. Moon\n1. Tides")
    assert "mass of the moon" in select and "0. Moon\n1. Tides" in select
    summary = texts.summarize("q?", "Chunk [1]\nfacts")
    assert "q?" in summary and "Chunk [1]\nfacts" in summary


def test_the_env_uses_the_online_backends_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("google.genai")
    from agentflow_env.paper_flow import PaperFlowEnv
    from agentflow_env.types import Task

    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    task = Task(id="t", question="q", answer="a")
    env = PaperFlowEnv([task], lambda a, t: 0.0, engine=ScriptedEngine(["x"]), tool_backends="online")
    tools = env.paper_settings["tools"]
    assert all(
        tools[n].startswith("online:")
        for n in ("Ground_Google_Search_Tool", "Wikipedia_RAG_Search_Tool", "Web_RAG_Search_Tool")
    )
    assert env.paper_settings["tool_backends"] == "online"
    offline = PaperFlowEnv([task], lambda a, t: 0.0, engine=ScriptedEngine(["x"]))
    assert not any(str(v).startswith("online:") for v in offline.paper_settings["tools"].values())
    with pytest.raises(ConfigError, match="tool_backends"):
        PaperFlowEnv([task], lambda a, t: 0.0, engine=ScriptedEngine(["x"]), tool_backends="live")
