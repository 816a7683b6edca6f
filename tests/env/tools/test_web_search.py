"""Tests of Web_Search_Tool against a local HTTP server on 127.0.0.1 speaking Serper's, Tavily's and Google CSE's JSON.

Also: provider choice by key, messages that name the variable to set, unreachable hosts, HTTP errors and timeouts.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from agentflow_env.tools import make_tool
from agentflow_env.tools.web_search import WebSearchTool
from tests.helpers import LoopbackServer, Response, json_response

KEY_VARS = ("SERPER_API_KEY", "TAVILY_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CSE_ID")
URL_VARS = ("SERPER_BASE_URL", "TAVILY_BASE_URL", "GOOGLE_CSE_BASE_URL")


def _search_api(request: dict) -> Response:
    """/serper/search, /tavily/search and /google/customsearch/v1; /status/NNN answers that HTTP status."""
    path, headers, query = request["path"], request["headers"], request["query"]
    if request["method"] == "GET":
        if path == "/google/customsearch/v1":
            if query.get("key") != "g-key" or query.get("cx") != "g-cx":
                return json_response({"error": {"code": 400}}, 400)
            item = {"title": "Nile", "link": "https://example.org/nile", "snippet": f"About {query['q']}."}
            return json_response({"items": [item]})
        return json_response({"error": "not found"}, 404)
    if path.startswith("/status/"):
        return json_response({"error": "x"}, int(path.split("/")[2]))
    if path.startswith("/slow/"):
        time.sleep(1.5)
        return json_response({})
    if path == "/serper/search":
        if headers.get("X-API-KEY") != "serper-key":
            return json_response({"message": "Unauthorized"}, 403)
        return json_response(
            {
                "answerBox": {"answer": "Canberra"},
                "organic": [
                    {
                        "title": "Canberra - Wikipedia",
                        "link": "https://en.wikipedia.org/wiki/Canberra",
                        "snippet": "Canberra is the capital city of Australia.",
                    },
                    {"title": "Australia", "link": "https://example.org/au", "snippet": "A country."},
                ],
            }
        )
    if path == "/tavily/search":
        if headers.get("Authorization") != "Bearer tavily-key":
            return json_response({"detail": "bad key"}, 401)
        n = request["json"]["max_results"]
        return json_response(
            {
                "answer": "Lima is the capital of Peru.",
                "results": [
                    {"title": f"Result {i}", "url": f"https://example.org/{i}", "content": f"content {i}"}
                    for i in range(n)
                ],
            }
        )
    return json_response({"error": "not found"}, 404)


@pytest.fixture(scope="module")
def api() -> Iterator[LoopbackServer]:
    with LoopbackServer(_search_api) as server:
        yield server


@pytest.fixture
def server(api: LoopbackServer) -> str:
    api.log.clear()
    return api.url


@pytest.fixture(autouse=True)
def clean_env(monkeypatch) -> None:
    for var in (*KEY_VARS, *URL_VARS, "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)


def test_serper_chosen_by_its_key(api: LoopbackServer, server: str, monkeypatch) -> None:
    monkeypatch.setenv("SERPER_API_KEY", "serper-key")
    monkeypatch.setenv("SERPER_BASE_URL", f"{server}/serper")
    tool = make_tool("web_search")
    assert tool.name == "Web_Search_Tool"
    result = tool.run("capital of Australia")
    assert result.ok, result.text
    assert result.text.startswith(
        "Answer: Canberra\n\n[1] Canberra - Wikipedia\nhttps://en.wikipedia.org/wiki/Canberra"
    )
    assert "[2] Australia" in result.text
    assert api.log[-1]["json"] == {"q": "capital of Australia", "num": 5}


def test_tavily_chosen_when_only_its_key_is_set(api: LoopbackServer, server: str, monkeypatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tavily-key")
    tool = WebSearchTool(base_url=f"{server}/tavily", top_k=3)
    result = tool.run("capital of Peru")
    assert result.ok, result.text
    assert result.text.startswith("Answer: Lima is the capital of Peru.")
    assert "[3] Result 2" in result.text and "[4]" not in result.text
    assert api.log[-1]["json"]["max_results"] == 3


def test_google_cse_needs_both_variables(api: LoopbackServer, server: str, monkeypatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")
    monkeypatch.setenv("GOOGLE_CSE_BASE_URL", f"{server}/google")
    missing = WebSearchTool().run("nile")
    assert not missing.ok and "GOOGLE_CSE_ID" in missing.text
    monkeypatch.setenv("GOOGLE_CSE_ID", "g-cx")
    result = WebSearchTool().run("longest river")
    assert result.ok and result.text == "[1] Nile\nhttps://example.org/nile\nAbout longest river."
    assert api.log[-1]["query"]["num"] == "5"


def test_serper_wins_when_several_keys_are_set_and_provider_overrides(server: str, monkeypatch) -> None:
    monkeypatch.setenv("SERPER_API_KEY", "serper-key")
    monkeypatch.setenv("TAVILY_API_KEY", "tavily-key")
    monkeypatch.setenv("SERPER_BASE_URL", f"{server}/serper")
    monkeypatch.setenv("TAVILY_BASE_URL", f"{server}/tavily")
    assert WebSearchTool().run("q").text.startswith("Answer: Canberra")
    assert WebSearchTool(provider="tavily").run("q").text.startswith("Answer: Lima")
    with pytest.raises(ValueError, match="unknown web search provider"):
        WebSearchTool(provider="bing")


def test_no_key_names_the_variables() -> None:
    result = WebSearchTool().run("anything")
    assert not result.ok
    for var in ("SERPER_API_KEY", "TAVILY_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CSE_ID"):
        assert var in result.text
    assert "TAVILY_API_KEY" in WebSearchTool(provider="tavily").run("q").text


def test_rejected_key_and_http_errors(server: str) -> None:
    bad = WebSearchTool(provider="serper", api_key="wrong", base_url=f"{server}/serper").run("q")
    assert not bad.ok and "rejected the key" in bad.text and "SERPER_API_KEY" in bad.text
    limited = WebSearchTool(provider="serper", api_key="k", base_url=f"{server}/status/429").run("q")
    assert "rate-limiting" in limited.text
    missing = WebSearchTool(provider="tavily", api_key="tavily-key", base_url=f"{server}/nowhere").run("q")
    assert not missing.ok and "HTTP 404" in missing.text


def test_no_network_fails_with_a_message_naming_the_variable() -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = WebSearchTool(provider="serper", api_key="k", base_url=f"http://127.0.0.1:{port}").run("q")
    assert not result.ok and "could not reach" in result.text and "SERPER_API_KEY" in result.text


def test_slow_api_times_out_without_retrying(api: LoopbackServer, server: str) -> None:
    tool = WebSearchTool(provider="serper", api_key="k", base_url=f"{server}/slow", request_timeout=0.3)
    start = time.perf_counter()
    result = tool.run("q")
    assert time.perf_counter() - start < 1.2
    assert not result.ok and "could not reach" in result.text
    assert sum(r["path"].startswith("/slow") for r in api.log) == 1


def test_empty_query_and_trimming(server: str) -> None:
    assert not WebSearchTool(provider="serper", api_key="serper-key").run("  ").ok
    tool = WebSearchTool(provider="tavily", api_key="tavily-key", base_url=f"{server}/tavily", top_k=10, max_chars=150)
    text = tool.run("many").text
    assert len(text) <= 150 and "[cut: results trimmed to 150 of" in text
