"""``agentflow-env eval`` survives LLM replies it cannot read: a 200 whose body is not JSON, is empty or is cut
short is retried with backoff; one that stays unreadable is that unit's error (on the board) and the run goes
on (it stopped with rc 1 before)."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LoopbackServer, chat_completion

pytest.importorskip("openai")

from agentflow_env.engines.openai_engine import OpenAIEngine
from agents.policies.llm_planner import LLMPlanner
from leaderboards.runner import EvalConfig, evaluate

PROTOCOL = """
name = "bad-replies-test"
mode = "offline"
max_turns = 2
seeds = [0]

[[benchmarks]]
env_id = "agentflow/Gen-Math-v1"
category = "math"
num_tasks = 8
options = {{ seed = 0 }}
"""

BAD_BODIES = [
    (200, {"Content-Type": "text/html"}, b"<html>a proxy's error page</html>"),
    (200, {"Content-Type": "application/json"}, b""),
    (200, {"Content-Type": "application/json"}, b'{"id": "x", "object": "chat.completion", "choices": [{"ind'),
    (200, {"Content-Type": "application/json"}, b"{not json at all"),
    (200, {"Content-Type": "application/json"}, b'{"id": "x", "choices": []}'),
]


class Server:
    """Per question: ``poisoned`` ones always get an unreadable body, ``flaky`` ones one bad body and then good."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, int] = {}
        self.poisoned: set[str] = set()

    def kind(self, text: str) -> str:
        h = int(hashlib.sha256(text.encode()).hexdigest()[:4], 16) % 3
        return ["poisoned", "flaky", "good"][h]

    def __call__(self, request: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        body = request["json"]
        text = json.dumps(body["messages"])
        question = text[:2000]
        with self.lock:
            count = self.seen[question] = self.seen.get(question, 0) + 1
        kind = self.kind(question)
        if kind == "poisoned":
            self.poisoned.add(question)
            return BAD_BODIES[count % len(BAD_BODIES)]
        if kind == "flaky" and count == 1:
            return BAD_BODIES[hash(question) % len(BAD_BODIES)]
        return chat_completion(body, "Final Answer: 4")


@pytest.mark.parametrize("concurrency", [1, 4])
def test_unreadable_replies_are_retried_then_recorded_and_the_run_goes_on(tmp_path: Path, concurrency: int) -> None:
    (tmp_path / "p.toml").write_text(PROTOCOL.format())
    server = Server()
    with LoopbackServer(server) as srv:

        def policy(env_id: str) -> LLMPlanner:
            engine = OpenAIEngine("m", base_url=srv.url + "/v1", max_retries=2, backoff=0.01, max_backoff=0.05)
            return LLMPlanner(engine)

        result = evaluate(
            EvalConfig(
                policy="test:bad-replies",
                protocol=str(tmp_path / "p.toml"),
                out=tmp_path / "run",
                progress=False,
                concurrency=concurrency,
                policy_factory=policy,
            )
        )
    assert len(result.outcomes) == 8  # every unit ran and was stored
    errors = [o for o in result.outcomes if o.error]
    assert server.poisoned and errors, "no unit met an unreadable reply"
    assert all("could not be read" in o.error and "after 3 tries" in o.error for o in errors)
    assert len(errors) < len(result.outcomes)  # the flaky and good ones were read (the retry worked)
    stored = [json.loads(line) for line in (tmp_path / "run").rglob("tasks.jsonl").__next__().read_text().splitlines()]
    assert sum(1 for row in stored if row.get("error")) == len(errors)
