"""``serve`` with ``tools``, driven by the official ``openai`` client: tools rendered (the tokenizer's
tools-aware template, else the Hermes fallback), Hermes ``<tool_call>`` replies parsed back into ``tool_calls``
(streaming included), and ``LLMPlanner(tool_calling=True)`` playing whole episodes through it with the
same scores as the scripted text planner."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest

openai = pytest.importorskip("openai")

import agentflow_env  # noqa: E402,F401
from agentflow_env.engines.scripted import ScriptedEngine  # noqa: E402
from agentflow_env.engines.server import EngineServer  # noqa: E402
from agents.policies.baselines import ScriptedGameOf24Planner  # noqa: E402
from agents.policies.llm_planner import LLMPlanner  # noqa: E402
from agents.policies.tool_calling import as_tool_call  # noqa: E402

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def _weather_model(text: str) -> str:
    """A forced model: a tool call when tools are offered and none has answered yet, then an answer."""
    if "<tool_response>" in text:
        return "It is " + re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text)[-1]
    if "<tools>" in text and '"get_weather"' in text:
        return "Let me check.\n" + CALL
    return "no tools were rendered"


@pytest.fixture
def client():
    with EngineServer(ScriptedEngine(_weather_model), model_name="m") as srv:
        c = openai.OpenAI(base_url=srv.url, api_key="EMPTY", max_retries=0, timeout=30)
        yield c
        c.close()


def test_tool_call_round_trip_with_the_official_client(client):
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    out = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER])
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me check."
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"})
    final = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER])
    assert final.choices[0].message.content == "It is sunny, 21 C" and not final.choices[0].message.tool_calls
    assert final.choices[0].finish_reason == "stop"
    # tool_choice="none" sends no tools: the model sees none
    plain = client.chat.completions.create(model="m", messages=messages[:1], tools=[WEATHER], tool_choice="none")
    assert plain.choices[0].message.content == "no tools were rendered"


def test_streamed_tool_calls_match_the_whole_reply(client):
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    chunks = list(client.chat.completions.create(model="m", messages=messages, tools=[WEATHER], stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert content == "Let me check."
    assert [(tc.index, tc.function.name, json.loads(tc.function.arguments)) for tc in calls] == [
        (0, "get_weather", {"city": "Paris"})
    ]
    assert calls[0].id and chunks[-1].choices[0].finish_reason == "tool_calls"


def test_bad_tool_requests_are_400s(client):
    messages = [{"role": "user", "content": "x"}]
    with pytest.raises(openai.BadRequestError, match="required"):
        client.chat.completions.create(model="m", messages=messages, tools=[WEATHER], tool_choice="required")
    with pytest.raises(openai.BadRequestError, match="'tools' must be"):
        client.chat.completions.create(model="m", messages=messages, tools=[{"type": "function"}])
    with pytest.raises(openai.BadRequestError, match="chat feature"):
        client.completions.create(model="m", prompt="x", extra_body={"tools": [WEATHER]})


def test_the_tokenizers_template_renders_tools_when_it_knows_them():
    pytest.importorskip("transformers")
    from agentflow_env.engines.openai_wire import Request, fallback_chat, tool_prompt
    from agentflow_env.engines.transformers_engine import TransformersEngine
    from agents.tiny_lm import tiny_lm_path

    engine = TransformersEngine(str(tiny_lm_path()), device="cpu", threads=1)
    messages = [{"role": "user", "content": "hi"}]
    req = Request(prompt=messages, sampling=None, chat=True, model="m", tools=[WEATHER], messages=messages)  # type: ignore[arg-type]
    # the tiny LM's template has no tools: the Hermes fallback, rendered by its own template
    fallback = tool_prompt(req, engine)
    assert fallback == fallback_chat(messages, [WEATHER])
    assert '"get_weather"' in engine.render(fallback) and "<|im_start|>system" in engine.render(fallback)
    # a tools-aware template is used as it is
    engine.tokenizer.chat_template = (
        "{% for t in tools %}TOOL:{{ t.function.name }}\n{% endfor %}"
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:"
    )
    assert tool_prompt(req, engine) == "TOOL:get_weather\nuser: hi\nassistant:"


def _planner_model(text: str) -> str:
    """A Hermes-speaking model that plays Game of 24 like the scripted planner, from the rendered chat."""
    m = re.search(r"Question:\n(.*?)\n\nResults so far:\n(.*)\n\n(Turns left.*|This is your last.*)$", text, re.S)
    if m is None or "<tools>" not in text or '"Calculator_Tool"' not in text:
        return "the prompt is not what the planner sends"
    memory = "" if m.group(2) == "(empty)" else m.group(2)
    obs = {"question": m.group(1), "memory": memory, "prompt": m.group(3), "tools": ""}
    return as_tool_call(ScriptedGameOf24Planner().act([obs])[0], "hermes")


def _scores(env, planner, n):
    out = []
    for i in range(n):
        obs, _ = env.reset(options={"index": i})
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(planner.act([obs])[0])
            done = terminated or truncated
        out.append((reward, len(info["memory_steps"])))
    return out


def test_llm_planner_calls_tools_through_serve_with_the_scripted_scores():
    env = gym.make("agentflow/Gen-GameOf24-v1", split="test").unwrapped
    try:
        expected = _scores(env, ScriptedGameOf24Planner(), 6)
        assert sum(r for r, _ in expected) >= 4 and all(k >= 1 for _, k in expected)
        with EngineServer(ScriptedEngine(_planner_model), model_name="m") as srv:
            planner = LLMPlanner(f"openai:m@{srv.url}?max_retries=0", tool_calling=True)
            assert _scores(env, planner, 6) == expected
            sent = planner.last_messages[0]
            assert sent[0]["role"] == "system" and "Question:" in sent[1]["content"]
            assert [t["function"]["name"] for t in planner.tool_schemas(env._observation())] == [
                "Calculator_Tool",
                "final_answer",
            ]
        # a plain engine (no tools= in its API) gets the Hermes prompt and its text goes to the env as is
        plain = LLMPlanner(ScriptedEngine(_planner_model), tool_calling=True)
        assert _scores(env, plain, 6) == expected
    finally:
        env.close()
