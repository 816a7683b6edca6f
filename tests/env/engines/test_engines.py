"""Tests of the engines: spec grammar, scripted replies, the OpenAI-compatible server and client
(retries, timeouts, concurrency, batching), the transformers engine on the tiny LM, and vLLM's extra."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentflow_env.engines import (
    EngineServer,
    HTTPFault,
    OpenAIEngine,
    SamplingParams,
    ScriptedEngine,
    make_engine,
    parse_spec,
)
from agentflow_env.engines.scripted import Delayed
from agentflow_env.error import ConfigError, DependencyNotInstalled, EngineError

FAST = "timeout=2&backoff=0.005&max_backoff=0.02"


# ---------------------------------------------------------------- spec grammar
def test_parse_spec_grammar() -> None:
    assert parse_spec("openai:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1") == (
        "openai",
        "Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1",
        {},
    )
    assert parse_spec("hf:runs/tiny?batch_size=8&device=cpu&x=null") == (
        "hf",
        "runs/tiny",
        {"batch_size": 8, "device": "cpu", "x": None},
    )
    assert parse_spec(" VLLM:meta/llama ")[:2] == ("vllm", "meta/llama")
    for bad in ("nope:model", "openai", "openai:", "hf:x?batch_size"):
        with pytest.raises(ConfigError):
            parse_spec(bad)


def test_openai_spec_model_url_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    engine = make_engine("openai:org/model@v2@http://10.0.0.1:9000/v1/?mode=completion&concurrency=3")
    assert isinstance(engine, OpenAIEngine)
    assert (engine.model, engine.base_url, engine.mode, engine.concurrency) == (
        "org/model@v2",
        "http://10.0.0.1:9000/v1",
        "completion",
        3,
    )
    assert engine.client.api_key == "sk-test"
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://example.invalid/v1")
    engine = make_engine("openai:gpt-x")
    assert engine.base_url == "http://example.invalid/v1" and engine.client.api_key == "EMPTY"
    with pytest.raises(ConfigError):
        make_engine("openai:m@http://x/v1?mode=stream")


def test_make_engine_passes_engines_through_and_rejects_others() -> None:
    engine = ScriptedEngine(["x"])
    assert make_engine(engine) is engine
    with pytest.raises(ConfigError):
        make_engine(42)  # type: ignore[arg-type]


def test_importing_engines_stays_light() -> None:
    code = (
        "import sys, agentflow_env, agentflow_env.engines as e; e.make_engine('scripted:echo'); "
        "assert 'torch' not in sys.modules and 'openai' not in sys.modules, 'heavy import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_vllm_is_an_optional_extra() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(DependencyNotInstalled, match=r"agentflow-env\[vllm(-cpu)?\]"):  # -cpu without CUDA
            make_engine("vllm:some/model")
    else:  # pragma: no cover - vLLM is not installed on the CI machines
        pytest.skip("vLLM is installed; the missing-extra message cannot be checked")


# ---------------------------------------------------------------- scripted engine
def test_scripted_list_table_callable_and_recording() -> None:
    engine = ScriptedEngine(["a", "b"])
    assert engine.generate(["p1", "p2", "p3"]) == ["a", "b", "b"]
    cyc = ScriptedEngine(["a", "b"], cycle=True)
    assert cyc.generate(["1", "2", "3"]) == ["a", "b", "a"]
    table = ScriptedEngine(
        {r"numbers \[(\d+)": r"first=\1", "queue": ["q1", ValueError("boom"), "q3"]}, default="other"
    )
    assert table.generate(["numbers [7, 8]", "queue", "zzz"]) == ["first=7", "q1", "other"]
    with pytest.raises(ValueError, match="boom"):
        table.generate(["queue"])
    assert table.generate([[{"role": "user", "content": "queue"}]]) == ["q3"]
    func = ScriptedEngine(lambda text: text.upper())
    sampling = SamplingParams(temperature=0.5, max_tokens=7)
    assert func.generate(["hi"], sampling) == ["HI"]
    assert func.calls[0].sampling is sampling and func.calls[0].prompt == "hi"
    with pytest.raises(LookupError):
        ScriptedEngine({"x": "y"}).generate(["nothing"])
    with pytest.raises(ConfigError):
        ScriptedEngine({"(": "bad regex"})


def test_scripted_specs(tmp_path: Path) -> None:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps({"hello": "world"}))
    assert make_engine(f'scripted:{path}?default="d"').generate(["hello", "x"]) == ["world", "d"]
    assert make_engine("scripted:echo").generate(
        [[{"role": "system", "content": "s"}, {"role": "user", "content": "last\n\nmessage"}]]
    ) == ["last\n\nmessage"]
    assert make_engine("scripted:json:dumps").generate(["q"]) == ['"q"']  # a reply function by import path
    for bad in ("scripted:missing.json", "scripted:no_colon_here", "scripted:json:no_such_attr"):
        with pytest.raises(ConfigError):
            make_engine(bad)


# ---------------------------------------------------------------- server and HTTP client
@pytest.fixture()
def served():
    """Start a server around a ScriptedEngine; yields ``serve(engine, **server_kw) -> url``."""
    servers: list[EngineServer] = []

    def serve(engine, **kw) -> str:
        srv = EngineServer(engine, model_name="tiny", **kw).start()
        servers.append(srv)
        return srv.url

    yield serve
    for srv in servers:
        srv.close()


def test_chat_and_completion_roundtrip_with_sampling(served) -> None:
    engine = ScriptedEngine(lambda text: f"got:{text}")
    url = served(engine)
    chat = make_engine(f"openai:tiny@{url}?{FAST}")
    sampling = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=33, stop=["\nX"], seed=5)
    assert chat.generate([[{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]], sampling) == [
        "got:system: S\n\nuser: U"
    ]
    got = engine.calls[-1]
    assert got.prompt == [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert got.sampling == sampling
    completion = make_engine(f"openai:tiny@{url}?mode=completion&{FAST}")
    assert completion.generate(["plain"]) == ["got:plain"]
    assert engine.calls[-1].prompt == "plain"


def test_retries_429_and_500_then_succeeds(served) -> None:
    engine = ScriptedEngine([HTTPFault(429, "slow down", retry_after=0.01), HTTPFault(500), HTTPFault(503), "ok"])
    engine_client = make_engine(f"openai:tiny@{served(engine)}?{FAST}&max_retries=3")
    assert engine_client.generate(["x"]) == ["ok"]
    assert len(engine.calls) == 4


def test_fails_cleanly_after_retries(served) -> None:
    engine = ScriptedEngine([HTTPFault(500, "always broken")])
    client = make_engine(f"openai:tiny@{served(engine)}?{FAST}&max_retries=2")
    with pytest.raises(EngineError, match=r"after 3 tries.*always broken"):
        client.generate(["x"])
    assert len(engine.calls) == 3
    bad_request = ScriptedEngine([HTTPFault(400, "your prompt is bad"), "never"])
    client = make_engine(f"openai:tiny@{served(bad_request)}?{FAST}")
    with pytest.raises(EngineError, match="your prompt is bad"):
        client.generate(["x"])
    assert len(bad_request.calls) == 1  # a 4xx other than 408/409/425/429 is not retried


def test_slow_reply_times_out_and_the_retry_succeeds(served) -> None:
    engine = ScriptedEngine([Delayed(0.8, "too late"), "in time"])
    client = make_engine(f"openai:tiny@{served(engine)}?timeout=0.4&backoff=0.01&max_retries=2")
    start = time.monotonic()
    assert client.generate(["x"]) == ["in time"]  # the first reply came too late: timed out, then retried
    took = time.monotonic() - start
    # 0.4 s timeout + a retry; the bound only catches a hang (wall time: 3.4 s was seen beside 4 busy loops)
    assert took < 15.0, f"generate took {took:.1f} s with a 0.4 s timeout and one retry"


def test_unreachable_server_fails_with_engine_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    client = make_engine(f"openai:tiny@http://127.0.0.1:{port}/v1?timeout=0.5&backoff=0.001&max_retries=1")
    with pytest.raises(EngineError, match="after 2 tries"):
        client.generate(["x"])


def test_server_batches_concurrent_requests(served) -> None:
    sizes: list[int] = []

    class Recording(ScriptedEngine):
        def generate(self, prompts, sampling=None):
            sizes.append(len(prompts))
            return super().generate(prompts, sampling)

    engine = Recording(lambda text: text[::-1])
    client = make_engine(f"openai:tiny@{served(engine, batch_window_s=0.1)}?{FAST}&concurrency=16")
    prompts = [f"p{i:02d}" for i in range(16)]
    assert client.generate(prompts) == [f"user: {p}"[::-1] for p in prompts]  # order kept
    assert sum(sizes) == 16 and max(sizes) > 1


def test_server_routes_and_bad_requests(served) -> None:
    import httpx

    url = served(ScriptedEngine(["x"]))
    assert httpx.get(f"{url}/models").json()["data"][0]["id"] == "tiny"
    assert httpx.get(f"{url}/nowhere").status_code == 404
    r = httpx.post(f"{url}/chat/completions", json={"model": "tiny", "messages": [], "stream": False})
    assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
    r = httpx.post(f"{url}/chat/completions", json={"messages": [{"role": "user", "content": "a"}], "tools": [{}]})
    assert r.status_code == 400 and "tools" in r.json()["error"]["message"]  # streaming works: see test_server_openai
    r = httpx.post(f"{url}/completions", content=b"not json")
    assert r.status_code == 400


class _FakeCompletions:
    """A stand-in for ``client.chat.completions`` that tracks requests in flight."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0

    def create(self, messages, **kwargs):
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(0.02)
        with self.lock:
            self.active -= 1
        message = SimpleNamespace(content=messages[-1]["content"] + "!")
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


def test_concurrency_limit_holds_across_threads() -> None:
    fake = _FakeCompletions()
    engine = OpenAIEngine(
        "m", base_url="http://unused/v1", concurrency=3, client=SimpleNamespace(chat=SimpleNamespace(completions=fake))
    )
    results: list[list[str]] = []
    threads = [
        threading.Thread(target=lambda k=k: results.append(engine.generate([f"{k}-{i}" for i in range(6)])))
        for k in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake.peak == 3
    assert sorted(results) == sorted([[f"{k}-{i}!" for i in range(6)] for k in range(3)])
    with pytest.raises(ConfigError, match="n > 1"):
        engine.generate(["x"], SamplingParams(n=2))


# ---------------------------------------------------------------- transformers engine on the tiny LM
@pytest.fixture(scope="module")
def hf_engine(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from agents.tiny_lm import tiny_lm_path

    path = tiny_lm_path(tmp_path_factory.getbasetemp().parent / "agentflow-cache")
    return make_engine(f"hf:{path}?batch_size=2&device=cpu&threads=1")


CHATS = [
    [{"role": "user", "content": "Using the numbers [1, 2, 3, 4], write 24."}],
    [{"role": "user", "content": "Question:\nshort"}],
    "a plain text prompt",
    [{"role": "system", "content": "You plan."}, {"role": "user", "content": "Memory:\n(no steps yet)"}],
]


def test_hf_greedy_is_batch_invariant_with_left_padding(hf_engine) -> None:
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    batched = hf_engine.generate(CHATS, greedy)
    alone = [hf_engine.generate([c], greedy)[0] for c in CHATS]
    assert batched == alone
    assert hf_engine.render(CHATS[0]).endswith("<|im_start|>assistant\n")


def test_hf_honours_sampling_params(hf_engine) -> None:
    greedy = hf_engine.generate(CHATS, SamplingParams(temperature=0.0, max_tokens=12))
    s1 = hf_engine.generate(CHATS, SamplingParams(temperature=1.0, max_tokens=12, seed=1))
    assert s1 == hf_engine.generate(CHATS, SamplingParams(temperature=1.0, max_tokens=12, seed=1))
    assert s1 != hf_engine.generate(CHATS, SamplingParams(temperature=1.0, max_tokens=12, seed=2))
    assert s1 != greedy
    # nucleus of (almost) zero mass keeps only the top token: sampling becomes greedy
    assert hf_engine.generate(CHATS, SamplingParams(temperature=1.0, top_p=1e-9, max_tokens=12, seed=3)) == greedy
    seen: list[dict] = []
    original = hf_engine.model.generate

    def spy(**kwargs):
        out = original(**kwargs)
        seen.append({**kwargs, "new_tokens": out.shape[1] - kwargs["input_ids"].shape[1]})
        return out

    hf_engine.model.generate = spy
    try:
        short = hf_engine.generate(CHATS, SamplingParams(temperature=0.8, top_p=0.95, max_tokens=3, seed=1))
    finally:
        hf_engine.model.generate = original
    assert [s["max_new_tokens"] for s in seen] == [3, 3]  # two batches of two
    assert all(s["do_sample"] and s["temperature"] == 0.8 and s["top_p"] == 0.95 for s in seen)
    assert all(s["new_tokens"] <= 3 for s in seen) and all(s["attention_mask"][:, -1].all() for s in seen)
    assert any(len(a) > len(b) for a, b in zip(s1, short, strict=True))
    long = hf_engine.generate(CHATS[:1], SamplingParams(temperature=1.0, max_tokens=40, seed=1))[0]
    stop = long.strip()[:1]
    cut = hf_engine.generate(CHATS[:1], SamplingParams(temperature=1.0, max_tokens=40, seed=1, stop=[stop]))[0]
    assert stop not in cut and long.startswith(cut)


def test_serve_command_in_a_subprocess() -> None:
    import re

    proc = subprocess.Popen(
        [sys.executable, "-m", "agentflow_env.cli", "serve", "scripted:echo", "--port", "0", "--model-name", "echo"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = ""
        deadline = time.monotonic() + 60
        while "serving" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stderr.readline()
        url = re.search(r"http://\S+/v1", line)
        assert url, f"no URL in {line!r}"
        assert make_engine(f"openai:echo@{url.group(0)}?{FAST}").generate(["ping"]) == ["ping"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_hf_overlong_prompt_keeps_its_end(hf_engine) -> None:
    limit = hf_engine.model.config.max_position_embeddings
    long_prompt = "7 " * (limit + 100) + "Final"
    seen: list[int] = []
    tails: list[str] = []
    original = hf_engine.model.generate

    def spy(**kwargs):
        seen.append(kwargs["input_ids"].shape[1])
        tails.append(hf_engine.tokenizer.decode(kwargs["input_ids"][0, -3:]))
        return original(**kwargs)

    hf_engine.model.generate = spy
    try:
        [out] = hf_engine.generate([long_prompt], SamplingParams(max_tokens=2))
    finally:
        hf_engine.model.generate = original
    assert isinstance(out, str) and seen == [limit - 2] and tails[0].endswith("Final")


def test_hf_a_stop_string_matches_only_inside_the_completion(hf_engine) -> None:
    """A stop string that would straddle the prompt's end ("Answer:" + ":") must not stop the row early."""
    greedy = SamplingParams(temperature=0.0, max_tokens=10)
    full = hf_engine.generate(["Final Answer:"], greedy)[0]
    assert full, "the tiny LM generated nothing to cut"
    stop = hf_engine.render("Final Answer:")[-1:] + full[:1]  # the prompt's last char + the first generated one
    cut = hf_engine.generate(["Final Answer:"], SamplingParams(temperature=0.0, max_tokens=10, stop=[stop]))[0]
    at = full.find(stop)
    assert cut == (full if at < 0 else full[:at]), (full, stop, cut)
