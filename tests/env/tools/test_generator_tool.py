"""Tests of Base_Generator_Tool: engine objects and spec strings, the missing-engine message, timeouts, trimming.

Engines here are tiny fakes defined in the test (and the scripted engine through a spec); nothing is downloaded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from agentflow_env.engines.base import Engine, Prompt, SamplingParams
from agentflow_env.tools import make_tool
from agentflow_env.tools.generator import GENERATOR_ENV_VAR, BaseGeneratorTool


class FakeEngine:
    """Answers "What is X?" with "X is known."; records every prompt it gets."""

    def __init__(self, reply: str | None = None, delay: float = 0.0, fail: bool = False):
        self.reply, self.delay, self.fail = reply, delay, fail
        self.calls: list[tuple[Prompt, SamplingParams | None]] = []

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingParams | None = None) -> list[str]:
        self.calls.extend((p, sampling) for p in prompts)
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("backend down")
        out = []
        for p in prompts:
            question = p[-1]["content"] if isinstance(p, list) else p
            out.append(self.reply if self.reply is not None else f"{question.removeprefix('What is ')[:-1]} is known.")
        return out


def test_fake_engine_satisfies_the_protocol() -> None:
    assert isinstance(FakeEngine(), Engine)


def test_answers_with_the_engine_and_sends_a_chat() -> None:
    engine = FakeEngine()
    tool = make_tool("generator", engine=engine)
    assert tool.name == "Base_Generator_Tool"
    result = tool.run("What is tungsten?")
    assert result.ok and result.text == "tungsten is known."
    prompt, sampling = engine.calls[0]
    assert (
        isinstance(prompt, list)
        and prompt[0]["role"] == "system"
        and prompt[-1]
        == {
            "role": "user",
            "content": "What is tungsten?",
        }
    )
    assert sampling is not None and sampling.temperature == 0.0


def test_custom_system_prompt_and_sampling() -> None:
    engine = FakeEngine(reply="ok")
    tool = BaseGeneratorTool(engine, system_prompt=None, sampling=SamplingParams(temperature=0.7, max_tokens=9))
    assert tool.run("hello").text == "ok"
    prompt, sampling = engine.calls[0]
    assert prompt == [{"role": "user", "content": "hello"}]
    assert sampling is not None and sampling.max_tokens == 9


def test_without_engine_the_error_says_how_to_set_one(monkeypatch) -> None:
    monkeypatch.delenv(GENERATOR_ENV_VAR, raising=False)
    result = make_tool("generator").run("What is 2+2?")
    assert not result.ok
    assert "engine=" in result.text and GENERATOR_ENV_VAR in result.text


def test_spec_strings_resolve_lazily_through_make_engine(monkeypatch) -> None:
    tool = BaseGeneratorTool("scripted:echo")
    assert tool._engine is None  # nothing built until the first call
    assert tool.run("repeat me").text == "repeat me"
    monkeypatch.setenv(GENERATOR_ENV_VAR, "scripted:echo")
    assert BaseGeneratorTool().run("from the env").text == "from the env"


def test_a_bad_spec_is_an_error_result_not_an_exception() -> None:
    result = BaseGeneratorTool("nosuchbackend:model").run("hi")
    assert not result.ok and "could not build its engine" in result.text and "nosuchbackend" in result.text


def test_engine_failures_and_bad_outputs_cost_the_turn_only() -> None:
    assert "backend down" in BaseGeneratorTool(FakeEngine(fail=True)).run("q").text
    assert "empty answer" in BaseGeneratorTool(FakeEngine(reply="   ")).run("q").text
    assert not BaseGeneratorTool(FakeEngine()).run("   ").ok

    class Wrong:
        def generate(self, prompts, sampling=None):  # type: ignore[no-untyped-def]
            return ["a", "b"]

    assert "one string per prompt" in BaseGeneratorTool(Wrong()).run("q").text


def test_a_hung_engine_times_out() -> None:
    tool = BaseGeneratorTool(FakeEngine(delay=2.0))
    start = time.perf_counter()
    result = tool.run("slow question", timeout=0.2)
    assert time.perf_counter() - start < 1.5
    assert not result.ok and result.error == "timeout" and "0.2 s" in result.text


def test_long_answers_are_trimmed_with_a_notice() -> None:
    result = BaseGeneratorTool(FakeEngine(reply="word " * 500), max_chars=300).run("q")
    assert result.ok and len(result.text) <= 300 and "[cut: answer trimmed to 300 of" in result.text


def test_card_and_custom_name() -> None:
    tool = BaseGeneratorTool(FakeEngine(), name="Solver", description="Solves things.")
    card = tool.card()
    assert card.startswith("- Solver: Solves things.") and "Example command:" in card


def test_concurrent_first_use_builds_one_engine(monkeypatch) -> None:
    built: list[object] = []

    def fake_make_engine(spec, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(0.05)
        built.append(spec)
        return FakeEngine(reply="fine")

    import agentflow_env.engines as engines

    monkeypatch.setattr(engines, "make_engine", fake_make_engine)
    tool = BaseGeneratorTool("fake:spec")
    threads = [threading.Thread(target=tool.run, args=("q",)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == ["fake:spec"]
