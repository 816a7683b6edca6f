"""``serve`` under load, on loopback: 64 concurrent ``openai`` clients with short timeouts against a slow engine
leave no backlog (requests of clients that gave up are cancelled unrun, a full queue answers 503 with
Retry-After), and a transformers engine gets its concurrent requests as real batches."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

openai = pytest.importorskip("openai")

from agentflow_env.engines.base import SamplingParams  # noqa: E402
from agentflow_env.engines.server import EngineServer  # noqa: E402


class _SlowEngine:
    """Every call takes ``seconds`` whatever its size, like a GPU batch; records the batch sizes."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.batches: list[int] = []

    def generate(self, prompts, sampling: SamplingParams | None = None):
        self.batches.append(len(prompts))
        time.sleep(self.seconds)
        return ["ok"] * len(prompts)


def _client_run(client, barrier: threading.Barrier, outcomes: list, lock: threading.Lock) -> None:
    barrier.wait()
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        outcome = "ok"
    except openai.APITimeoutError:
        outcome = "timeout"
    except openai.APIStatusError as exc:
        outcome = f"{exc.status_code}:{exc.response.headers.get('retry-after')}"
    finally:
        client.close()
    with lock:
        outcomes.append(outcome)


def _drained(srv: EngineServer, seconds: float = 10.0) -> dict[str, int]:
    deadline = time.monotonic() + seconds
    while srv.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    return srv.stats


def test_64_impatient_clients_leave_no_backlog():
    engine = _SlowEngine(0.3)
    with EngineServer(engine, model_name="m", max_batch=4, max_queue=32, batch_window_s=0.01) as srv:
        outcomes: list[str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(64)
        clients = [openai.OpenAI(base_url=srv.url, api_key="EMPTY", max_retries=0, timeout=1.0) for _ in range(64)]
        threads = [
            threading.Thread(target=_client_run, args=(c, barrier, outcomes, lock), daemon=True) for c in clients
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        counts = Counter(outcomes)
        assert sum(counts.values()) == 64 and set(counts) <= {"ok", "timeout", "503:1"}, counts
        assert counts["timeout"] > 0, counts  # 64 requests at 4 per 0.3 s cannot all finish within 1 s
        stats = _drained(srv)
        assert stats["pending"] == 0, stats  # no backlog once the clients are gone
        # every queued request was either run or cancelled unrun (a 503 was never queued)
        assert stats["cancelled"] + stats["prompts_run"] == 64 - counts["503:1"], (stats, counts)
        assert stats["cancelled"] > 0, (stats, counts)
        # the engine is free again: a fresh request is answered at once
        started = time.monotonic()
        fresh = openai.OpenAI(base_url=srv.url, api_key="EMPTY", max_retries=0, timeout=10)
        out = fresh.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        fresh.close()
        assert out.choices[0].message.content == "ok" and time.monotonic() - started < 5
        assert max(engine.batches) <= 4


class _BlockedEngine:
    def __init__(self) -> None:
        self.release = threading.Event()

    def generate(self, prompts, sampling=None):
        self.release.wait(30)
        return ["done"] * len(prompts)


def test_a_full_queue_answers_503_with_retry_after():
    import httpx

    engine = _BlockedEngine()
    with EngineServer(engine, model_name="m", max_batch=1, max_queue=2, batch_window_s=0.0) as srv:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        results: list[int] = []
        waiting = [
            threading.Thread(
                target=lambda: results.append(
                    httpx.post(f"{srv.url}/chat/completions", json=body, timeout=30).status_code
                )
            )
            for _ in range(2)
        ]
        for t in waiting:
            t.start()
        deadline = time.monotonic() + 10
        while srv.pending < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        full = httpx.post(f"{srv.url}/chat/completions", json=body, timeout=10)
        assert full.status_code == 503 and full.headers["retry-after"] == "1"
        assert "busy" in full.json()["error"]["message"]
        engine.release.set()
        for t in waiting:
            t.join(timeout=30)
        assert results == [200, 200] and _drained(srv)["pending"] == 0


def test_transformers_requests_are_generated_in_batches():
    pytest.importorskip("transformers")
    from agentflow_env.engines.transformers_engine import TransformersEngine
    from agents.tiny_lm import tiny_lm_path

    engine = TransformersEngine(str(tiny_lm_path()), device="cpu", threads=1)
    calls: list[int] = []
    generate = engine.model.generate

    def counting(*args, **kwargs):
        calls.append(int(kwargs["input_ids"].shape[0]))
        return generate(*args, **kwargs)

    engine.model.generate = counting
    prompts = ["Solve 1 2 3 4", "x", "Tool Name: Calculator_Tool\nCommand:", "Final"]
    with EngineServer(engine, model_name="m", batch_window_s=0.5) as srv:
        client = openai.OpenAI(base_url=srv.url, api_key="EMPTY", max_retries=0, timeout=60)
        texts: dict[str, str] = {}

        def one(p: str) -> None:
            texts[p] = client.completions.create(model="m", prompt=p, max_tokens=6, temperature=0).choices[0].text

        threads = [threading.Thread(target=one, args=(p,)) for p in prompts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        client.close()
    assert calls == [4]  # one left-padded generate for the four concurrent requests
    alone = {p: engine.generate([p], SamplingParams(max_tokens=6))[0] for p in prompts}
    assert texts == alone  # left padding changes no greedy reply


def test_a_generating_request_whose_client_left_stops_early():
    """A transformers batch stops the rows of clients that went away mid-generation."""
    pytest.importorskip("transformers")
    from agentflow_env.engines.transformers_engine import TransformersEngine
    from agents.tiny_lm import tiny_lm_path

    engine = TransformersEngine(str(tiny_lm_path()), device="cpu", threads=1)
    generated: list[int] = []
    generate = engine.model.generate

    def recording(*args, **kwargs):
        out = generate(*args, **kwargs)
        generated.append(int(out.sequences.shape[1] - kwargs["input_ids"].shape[1]))
        return out

    engine.model.generate = recording
    with EngineServer(engine, model_name="m") as srv:
        client = openai.OpenAI(base_url=srv.url, api_key="EMPTY", max_retries=0, timeout=0.5)
        with pytest.raises(openai.APITimeoutError):  # 1,000 tokens take seconds here
            client.completions.create(model="m", prompt="Final Answer:", max_tokens=1000, temperature=0)
        client.close()
        stats = _drained(srv, 30)
    assert stats["pending"] == 0 and generated and generated[0] < 1000, (stats, generated)
