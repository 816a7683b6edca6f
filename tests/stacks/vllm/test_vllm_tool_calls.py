"""``LLMPlanner(tool_calling=True)`` against vLLM's own OpenAI server with its Hermes parser
(``--enable-auto-tool-choice --tool-call-parser hermes``): the same planner as against ``agentflow-env serve``.

The tiny LM cannot write tool calls by itself, so a copy of it learns the two Hermes tags as tokens (the
parser looks them up in the vocabulary) and the reply is forced with a structured-output regex; what is
tested is the path: ``tools=`` sent, vLLM's parser turning the reply into ``tool_calls``, the env running
the call. Runs in the vLLM venv (``tests/stacks/vllm``); skips where vLLM is not installed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("vllm")
pytest.importorskip("openai")
torch = pytest.importorskip("torch")

CALL = '<tool_call>{"name": "Calculator_Tool", "arguments": {"command": "1+1"}}</tool_call>'


@pytest.fixture()
def hermes_tiny(tiny_vllm_path, tmp_path):
    """The tiny LM with ``<tool_call>`` and ``</tool_call>`` added to its vocabulary."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_vllm_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_vllm_path, dtype="float32")
    tokenizer.add_tokens(["<tool_call>", "</tool_call>"])
    model.resize_token_embeddings(len(tokenizer))
    out = tmp_path / "tiny-hermes"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def vllm_server(hermes_tiny, tmp_path):
    port = _free_port()
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", hermes_tiny]
    cmd += ["--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    cmd += ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--kv-cache-memory-bytes", "33554432"]
    log = tmp_path / "vllm.log"  # a file, not a pipe: a full pipe would block the server
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=err, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    try:
        import httpx

        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            pytest.fail("vLLM's server did not start:\n" + log.read_text(errors="replace")[-4000:])
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_tool_calling_planner_against_vllms_hermes_parser(vllm_server):
    import gymnasium as gym

    import agentflow_env  # noqa: F401
    from agentflow_env.engines.base import SamplingParams
    from agents.policies.llm_planner import LLMPlanner

    regex = re.escape(CALL)
    planner = LLMPlanner(
        f"openai:tiny@{vllm_server}?max_retries=0&timeout=300",
        SamplingParams(temperature=0.0, max_tokens=200),
        tool_calling=True,
        # the structured-output field of current vLLM, and its older spelling (an unknown field is ignored)
        extra_body={"structured_outputs": {"regex": regex}, "guided_regex": regex},
    )
    env = gym.make("agentflow/Gen-GameOf24-v1", split="test", max_turns=2).unwrapped
    try:
        obs, _ = env.reset(options={"index": 0})
        action = planner.act([obs])[0]
        message = json.loads(action)
        # vLLM's hermes parser, not the env, turned the reply into tool_calls
        (call,) = message["tool_calls"]
        assert call["function"]["name"] == "Calculator_Tool"
        assert json.loads(call["function"]["arguments"]) == {"command": "1+1"}
        _, _, _, _, info = env.step(action)
        step = info["memory_steps"][-1]
        assert step["tool"] == "Calculator_Tool" and "2" in step["result"]
        assert info["messages"][-1]["role"] == "tool" and info["messages"][-1]["tool_call_id"] == call["id"]
    finally:
        env.close()
        planner.engine.close()
