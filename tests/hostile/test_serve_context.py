"""``serve`` caps ``max_tokens`` to the model's context minus the prompt (``max_tokens=1e9`` used to run for
minutes with the prompt cut to one token), and answers 400 when the prompt alone fills the context."""

from __future__ import annotations

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentflow_env.engines.server import EngineServer  # noqa: E402
from agentflow_env.engines.transformers_engine import TransformersEngine  # noqa: E402

CONTEXT = 48  # the test's engine claims this context, so a capped reply is short


@pytest.fixture(scope="module")
def client():
    from agents.tiny_lm import tiny_lm_path

    engine = TransformersEngine(str(tiny_lm_path()), device="cpu", threads=1)
    engine.model.config.max_position_embeddings = CONTEXT
    with EngineServer(engine, model_name="tiny") as srv:
        c = openai.OpenAI(base_url=srv.url, api_key="EMPTY", max_retries=0, timeout=60)
        yield c
        c.close()


def test_max_tokens_beyond_the_context_is_capped_and_the_prompt_kept(client) -> None:
    prompt = [5, 6, 7, 8, 9, 10, 11, 12]
    out = client.completions.create(model="tiny", prompt=prompt, max_tokens=10**9, temperature=0)
    assert out.usage.prompt_tokens == len(prompt)  # not cut to make room
    assert out.usage.completion_tokens <= CONTEXT - len(prompt)


def test_a_chat_with_max_tokens_1e9_is_answered(client) -> None:
    out = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=10**9, temperature=0
    )
    assert out.usage.prompt_tokens + out.usage.completion_tokens <= CONTEXT


def test_a_prompt_that_fills_the_context_is_a_400(client) -> None:
    with pytest.raises(openai.BadRequestError, match="context"):
        client.completions.create(model="tiny", prompt=list(range(5, 5 + CONTEXT)), max_tokens=4)
