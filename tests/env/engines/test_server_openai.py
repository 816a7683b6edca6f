"""Conformance of ``agentflow-env serve`` driven by the official ``openai`` client, on a loopback server
around the tiny LM (transformers engine): usage, finish_reason, n, stream, token ids and log-probs, errors;
and ``openai:`` engines recording the token counts the server reports."""

from __future__ import annotations

import pytest

openai = pytest.importorskip("openai")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentflow_env.engines import make_engine  # noqa: E402
from agentflow_env.engines.base import SamplingParams  # noqa: E402
from agentflow_env.engines.scripted import ScriptedEngine  # noqa: E402
from agentflow_env.engines.server import EngineServer  # noqa: E402
from agentflow_env.engines.transformers_engine import TransformersEngine  # noqa: E402

MODEL = "tiny"
CHAT = [{"role": "user", "content": "Solve 1 2 3 4 to make 24"}]


@pytest.fixture(scope="module")
def engine():
    from agents.tiny_lm import tiny_lm_path

    return TransformersEngine(str(tiny_lm_path()), device="cpu", threads=1)


@pytest.fixture(scope="module")
def server(engine):
    with EngineServer(engine, model_name=MODEL) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    c = openai.OpenAI(base_url=server.url, api_key="EMPTY", max_retries=0, timeout=60)
    yield c
    c.close()


def teacher_forced(engine, prompt_ids, tokens):
    ids = torch.tensor([list(prompt_ids) + list(tokens)])
    with torch.no_grad():
        logp = engine.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float().log_softmax(-1)
    return logp.gather(-1, torch.tensor(tokens).unsqueeze(-1)).squeeze(-1).tolist()


def test_chat_reply_has_usage_and_length_when_cut(client, engine):
    out = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=5, temperature=0)
    assert out.object == "chat.completion" and out.model == MODEL and len(out.choices) == 1
    choice = out.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == engine.generate([CHAT], SamplingParams(max_tokens=5))[0]
    assert choice.finish_reason == "length"  # the untrained tiny LM does not stop within 5 tokens
    prompt_ids = engine.tokenizer(engine.render(CHAT), add_special_tokens=False)["input_ids"]
    assert out.usage.prompt_tokens == len(prompt_ids) and out.usage.completion_tokens == 5
    assert out.usage.total_tokens == len(prompt_ids) + 5


def test_a_stop_string_ends_with_stop(client):
    full = client.completions.create(model=MODEL, prompt="Final Answer:", max_tokens=12, temperature=0)
    text = full.choices[0].text
    stop = text.strip()[len(text.strip()) // 2 :][:2] or text[:1]
    assert stop and stop in text
    cut = client.completions.create(model=MODEL, prompt="Final Answer:", max_tokens=12, temperature=0, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == text[: text.find(stop)]
    assert cut.usage.completion_tokens <= full.usage.completion_tokens


def test_n_choices(client):
    out = client.chat.completions.create(
        model=MODEL, messages=CHAT, max_tokens=6, temperature=1.0, n=3, seed=1, logprobs=True
    )
    assert [c.index for c in out.choices] == [0, 1, 2]
    assert len({c.message.content for c in out.choices}) > 1  # sampled, not copies
    lengths = [len(c.logprobs.content) for c in out.choices]
    assert out.usage.completion_tokens == sum(lengths) and all(1 <= n <= 6 for n in lengths)


def test_stream_chat_and_completions_match_the_whole_reply(client):
    whole = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=8, temperature=0)
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=CHAT,
            max_tokens=8,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1, "sent in pieces"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == whole.usage.total_tokens
    stream = client.completions.create(model=MODEL, prompt="Step 1:", max_tokens=6, temperature=0, stream=True)
    plain = client.completions.create(model=MODEL, prompt="Step 1:", max_tokens=6, temperature=0)
    assert "".join(c.choices[0].text for c in stream) == plain.choices[0].text


def test_token_exact_mode_returns_the_sampled_tokens_and_their_logprobs(client, engine):
    prompt_ids = engine.tokenizer("Solve 4 4 6 8", add_special_tokens=False)["input_ids"]
    out = client.completions.create(model=MODEL, prompt=prompt_ids, max_tokens=8, temperature=0, logprobs=0)
    extra = out.model_extra
    assert extra["prompt_token_ids"] == prompt_ids
    choice = out.choices[0]
    tokens = choice.model_extra["token_ids"]
    assert len(tokens) == out.usage.completion_tokens == 8 and out.usage.prompt_tokens == len(prompt_ids)
    lps = choice.logprobs.token_logprobs
    assert max(abs(a - b) for a, b in zip(lps, teacher_forced(engine, prompt_ids, tokens))) < 1e-4
    assert choice.text == engine.tokenizer.decode(tokens, skip_special_tokens=True)
    # the same through chat with prompt_token_ids (the messages are not re-tokenised)
    chat = client.chat.completions.create(
        model=MODEL, messages=CHAT, max_tokens=8, temperature=0, extra_body={"prompt_token_ids": prompt_ids}
    )
    assert chat.model_extra["prompt_token_ids"] == prompt_ids
    assert chat.choices[0].model_extra["token_ids"] == tokens
    assert [e.logprob for e in chat.choices[0].logprobs.content] == pytest.approx(lps, abs=1e-5)
    # sampled (temperature 1): the returned log-probs are the raw policy's for the returned tokens
    hot = client.completions.create(
        model=MODEL, prompt=prompt_ids, max_tokens=6, temperature=1.0, seed=3, extra_body={"return_token_ids": True}
    )
    hot_tokens = hot.choices[0].model_extra["token_ids"]
    hot_lps = hot.choices[0].logprobs.token_logprobs
    assert max(abs(a - b) for a, b in zip(hot_lps, teacher_forced(engine, prompt_ids, hot_tokens))) < 1e-4


def test_errors(client, server):
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="gpt-4o", messages=CHAT, max_tokens=2)
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    with pytest.raises(openai.BadRequestError, match="tool_choice 'required'"):  # tools work: test_serve_tools
        client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=2, tools=[tool], tool_choice="required")
    assert client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=2, tools=[tool]).choices
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=2, logprobs=True, top_logprobs=3)
    with pytest.raises(openai.BadRequestError, match="'n'"):
        client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=2, n=0)
    with pytest.raises(openai.BadRequestError, match="JSON mode"):
        client.chat.completions.create(
            model=MODEL, messages=CHAT, max_tokens=2, response_format={"type": "json_object"}
        )
    with pytest.raises(openai.BadRequestError, match="token ids"):
        client.completions.create(model=MODEL, prompt=[10**9], max_tokens=2)
    ok = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=2, tool_choice="none")
    assert ok.choices[0].finish_reason == "length"  # a no-op setting is accepted


def test_openai_engine_records_the_reported_tokens(server):
    eng = make_engine(f"openai:{MODEL}@{server.url}", timeout=60, max_retries=0)
    texts = eng.generate([CHAT, "Step 1:"], SamplingParams(max_tokens=4))
    assert len(texts) == 2
    assert [u["completion_tokens"] for u in eng.last_usage] == [4, 4]
    assert all(u["prompt_tokens"] > 0 for u in eng.last_usage)
    assert eng.usage_total["requests_with_usage"] == 2 and eng.usage_total["completion_tokens"] == 8
    eng.close()


def test_an_engine_without_tokens_gets_a_flagged_estimate_which_evals_do_not_record():
    with EngineServer(ScriptedEngine(lambda text: "four words right here"), model_name=MODEL) as srv:
        c = openai.OpenAI(base_url=srv.url, api_key="EMPTY", max_retries=0)
        out = c.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=9)
        assert out.usage.completion_tokens == 4 and out.usage.model_extra["estimated"] is True
        with pytest.raises(openai.BadRequestError, match="reports no tokens"):
            c.completions.create(model=MODEL, prompt=[1, 2, 3], max_tokens=2)
        c.close()
        eng = make_engine(f"openai:{MODEL}@{srv.url}", max_retries=0)
        assert eng.generate(["x"]) == ["four words right here"] and eng.last_usage == [None]
        eng.close()
