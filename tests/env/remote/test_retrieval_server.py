"""``agentflow-env retrieval-server`` (Search-R1's ``/retrieve`` wire format) and search tools given a retriever URL:
our server, and a Search-R1-style stub server written here, both behind a search env."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import ConfigError
from agentflow_env.remote.retrieval_server import RetrievalServer
from agentflow_env.tools import make_tool
from agentflow_env.tools.bm25 import BM25Index
from agentflow_env.tools.retrieval import RemoteRetriever, hit_from_document, search_r1_document
from agentflow_env.types import Task

PASSAGES = [
    {"id": "p1", "title": "Eiffel Tower", "text": "The Eiffel Tower is 330 metres tall and stands in Paris."},
    {"id": "p2", "title": "Big Ben", "text": "Big Ben is the nickname of the Great Bell in London."},
    {"id": "p3", "title": "Colosseum", "text": "The Colosseum is an ancient amphitheatre in Rome."},
    {"id": "p4", "title": "Sagrada Familia", "text": "A basilica in Barcelona designed by Antoni Gaudi."},
]


def _post(url: str, body: dict, token: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("idx")
    return BM25Index.build(PASSAGES, out_dir=folder)


@pytest.fixture()
def server(index):
    srv = RetrievalServer(index, port=0, owns_index=False).start()  # the module's index outlives the server
    yield srv
    srv.close()


def test_retrieve_answers_search_r1s_format(server) -> None:
    status, out = _post(
        f"{server.url}/retrieve", {"queries": ["Eiffel Tower Paris", "bell London"], "topk": 2, "return_scores": True}
    )
    assert status == 200 and len(out["result"]) == 2
    first = out["result"][0][0]
    assert first["document"]["id"] == "p1"
    assert first["document"]["contents"].startswith('"Eiffel Tower"\n') and first["score"] > 0
    assert out["result"][1][0]["document"]["id"] == "p2" and len(out["result"][1]) <= 2
    status, bare = _post(f"{server.url}/retrieve", {"queries": ["Rome amphitheatre"], "topk": 1})
    assert status == 200 and bare["result"][0][0]["id"] == "p3"  # return_scores false: bare documents
    status, err = _post(f"{server.url}/retrieve", {"queries": ["Paris"], "topk": -1})
    assert status == 400 and "topk" in err["error"]
    status, err = _post(f"{server.url}/retrieve", {"queries": [1, 2]})
    assert status == 400 and "queries" in err["error"]
    with urllib.request.urlopen(f"{server.url}/fingerprint", timeout=10) as reply:
        fp = json.loads(reply.read())
    assert fp["retriever"] == "bm25" and fp["corpus_hash"].startswith("crc32:") and fp["index_type"] == "bm25-csc"


def test_documents_round_trip() -> None:
    hit = hit_from_document({"id": "7", "contents": '"A title"\nline one\nline two'}, 1, 2.5)
    assert (hit.title, hit.text, hit.id, hit.score) == ("A title", "line one\nline two", "7", 2.5)
    assert hit_from_document(search_r1_document(hit), 1, 2.5) == hit


def test_token_beyond_loopback_and_wrong_token(index) -> None:
    with pytest.raises(ConfigError, match="token"):
        RetrievalServer(index, host="0.0.0.0", port=0)
    token = "t" * 32
    srv = RetrievalServer(index, port=0, token=token, owns_index=False).start()
    try:
        status, err = _post(f"{srv.url}/retrieve", {"queries": ["Paris"]})
        assert status == 401 and "AGENTFLOW_RETRIEVER_TOKEN" in err["error"]
        status, out = _post(f"{srv.url}/retrieve", {"queries": ["Paris"]}, token=token)
        assert status == 200 and out["result"][0][0]["id"] == "p1"
        hits = RemoteRetriever(f"{srv.url}/retrieve", token=token).search("Barcelona Gaudi", 1)
        assert hits[0].title == "Sagrada Familia"
    finally:
        srv.close()


class _StubSearchR1(BaseHTTPRequestHandler):
    """What Search-R1's retrieval_server.py answers, written here: a fixed corpus, word-overlap scores."""

    docs = [{"id": str(i), "contents": f'"{p["title"]}"\n{p["text"]}'} for i, p in enumerate(PASSAGES)]
    seen: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        result = []
        for query in body["queries"]:
            words = set(query.lower().split())
            scored = sorted(
                ((len(words & set(d["contents"].lower().split())), d) for d in self.docs), key=lambda x: -x[0]
            )
            top = scored[: body.get("topk", 3)]
            result.append(
                [{"document": d, "score": float(s)} for s, d in top]
                if body.get("return_scores")
                else [d for _, d in top]
            )
        data = json.dumps({"result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def stub_url():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _StubSearchR1)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/retrieve"
    httpd.shutdown()
    httpd.server_close()


def _search_episode(url: str) -> dict:
    """A search benchmark's env (Bamboogle's tools and scorer) whose Wikipedia tool asks ``url``."""
    task = Task(id="t1", question="How tall is the Eiffel Tower?", answer="330 metres", family="search")
    env = gym.make("agentflow/Bamboogle-v2", tasks=[task], retriever=url, disable_env_checker=True)
    try:
        env.reset(seed=0)
        tool = next(n for n in env.unwrapped.tool_names if "Wikipedia" in n)
        action = (
            "Justification: look it up.\nContext: none\nSub-Goal: find the height.\n"
            f"Tool Name: {tool}\nCommand: Eiffel Tower tall"
        )
        _, reward, terminated, _, info = env.step(action)
        assert not terminated
        result = info["memory_steps"][-1]["result"]
        *_, info = env.step("Final Answer: 330 metres")
        assert info["score"] == 1.0
        return {"result": result, "backend": next(t for t in env.unwrapped.tools if t.name == tool).backend()}
    finally:
        env.close()


def test_search_env_runs_against_our_server(server) -> None:
    out = _search_episode(f"{server.url}/retrieve")
    assert "Eiffel Tower" in out["result"] and "330 metres" in out["result"]
    assert out["backend"]["backend"] == "remote"
    assert out["backend"]["fingerprint"]["retriever"] == "bm25" and out["backend"]["fingerprint"]["top_k"] == 3


def test_search_env_runs_against_a_search_r1_style_server(stub_url) -> None:
    _StubSearchR1.seen.clear()
    out = _search_episode(stub_url)
    assert "Eiffel Tower" in out["result"].splitlines()[0]
    assert _StubSearchR1.seen[0] == {"queries": ["Eiffel Tower tall"], "topk": 3, "return_scores": True}
    fp = out["backend"]["fingerprint"]
    assert fp["retriever"] == "remote" and fp["corpus_hash"] is None and fp["url"] == stub_url


def test_unreachable_retriever_is_a_tool_error_not_a_crash() -> None:
    tool = make_tool("wikipedia", retriever="http://127.0.0.1:9/retrieve")
    result = tool.run("anything", 5)
    assert not result.ok and "could not be reached" in result.text
    with pytest.raises(ConfigError):
        make_tool("search", retriever="ftp://nowhere")


def test_generated_corpus_benchmarks_refuse_a_retriever() -> None:
    with pytest.raises(ConfigError, match="own generated corpus"):
        gym.make("agentflow/Gen-MultiHop-v2", retriever="http://127.0.0.1:9/retrieve")
