"""``--backend vllm`` from the command line on CPU: ``train`` runs steps with verified weight syncs and the
mismatch correction, ``eval`` takes a ``vllm:PATH`` policy, and ``serve vllm:PATH`` answers the official
``openai`` client with exact tokens and log-probs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

CLI = [sys.executable, "-m", "agentflow_env.cli"]


def run(args, tmp_path, timeout=600):
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(CLI + args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def test_train_with_the_vllm_backend(tmp_path):
    out = tmp_path / "run"
    args = "train --backend vllm --steps 2 --questions-per-step 2 --group-size 2 --max-new-tokens 8 --eval-every 2"
    args += " --eval-tasks 2 --checkpoint-every 0 --threads 1 --minibatch-size 2 --ppo-epochs 2 --progress false"
    args += f" --tensorboard false --output-dir {out}"
    run(args.split(), tmp_path)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [r for r in records if "rollout/reward" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for r in steps:  # the correction is on by default for vllm; in float32 the two agree to float error
        assert r["rollout/mismatch_abs_dlogp_mean"] < 1e-3
        assert 0.99 < r["rollout/tis_ratio_max"] < 1.01
    assert (out / "final" / "config.json").is_file()


def test_eval_with_a_vllm_policy(tmp_path, tiny_vllm_path):
    protocol = tmp_path / "tiny-protocol.toml"
    protocol.write_text(
        'name = "vllm-cpu-smoke"\ndescription = "two short Game-of-24 episodes"\nmode = "offline"\n'
        "max_turns = 2\nseeds = [0]\nsamples_per_task = 1\nfast_tasks = 2\n"
        '[env]\nexecutor = "direct"\nverifier = "rule"\ngenerator = "planner"\n'
        "[sampling]\ntemperature = 0.0\nmax_tokens = 16\n"
        '[[benchmarks]]\nenv_id = "agentflow/Gen-GameOf24-v1"\nlabel = "Gen-GameOf24"\ncategory = "math"\n'
        'split = "test"\nnum_tasks = 2\nscorer = "default"\n'
    )
    proc = run(
        ["eval", "--policy", f"vllm:{tiny_vllm_path}", "--protocol", str(protocol), "--output-dir", "lb"]
        + ["--no-progress", "--json"],
        tmp_path,
    )
    lines = proc.stdout.splitlines()  # vLLM may log to stdout too: the summary is the last JSON object
    summary = json.loads("\n".join(lines[max(i for i, line in enumerate(lines) if line == "{") :]))
    assert summary["episodes"] == 2 and 0.0 <= summary["overall"] <= 1.0


@pytest.fixture()
def served(tiny_vllm_path, tmp_path):
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    log = tmp_path / "serve.log"  # a file, not a pipe: vLLM logs every request and a full pipe would block it
    with log.open("w") as err:
        proc = subprocess.Popen(
            CLI + ["serve", f"vllm:{tiny_vllm_path}", "--port", "0", "--model-name", "tiny"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url, deadline = None, time.monotonic() + 180
    try:
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            m = re.search(r"(http://127\.0\.0\.1:\d+/v1)", log.read_text(errors="replace"))
            url = m.group(1) if m else None
        assert url, "the server did not start:\n" + log.read_text(errors="replace")[-4000:]
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_serve_a_vllm_engine(served, tiny_vllm_path):
    openai = pytest.importorskip("openai")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_vllm_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_vllm_path, dtype="float32").eval()
    client = openai.OpenAI(base_url=served, api_key="EMPTY", max_retries=0, timeout=120)
    chat = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Solve 1 2 3 4"}], max_tokens=6, n=2, temperature=1.0
    )
    assert len(chat.choices) == 2 and chat.usage.completion_tokens <= 12 and chat.usage.prompt_tokens > 0
    prompt_ids = tokenizer("Solve 4 4 6 8", add_special_tokens=False)["input_ids"]
    out = client.completions.create(model="tiny", prompt=prompt_ids, max_tokens=8, temperature=0, logprobs=0)
    tokens = out.choices[0].model_extra["token_ids"]
    assert out.model_extra["prompt_token_ids"] == prompt_ids and out.choices[0].finish_reason == "length"
    ids = torch.tensor([prompt_ids + tokens])
    with torch.no_grad():
        logp = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float().log_softmax(-1)
    hf = logp.gather(-1, torch.tensor(tokens).unsqueeze(-1)).squeeze(-1).tolist()
    assert max(abs(a - b) for a, b in zip(out.choices[0].logprobs.token_logprobs, hf)) < 1e-3
    stream = client.completions.create(model="tiny", prompt=prompt_ids, max_tokens=8, temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in stream) == out.choices[0].text
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="other", prompt="x", max_tokens=2)
    client.close()


def test_the_tiny_lm_in_vllm_shape_is_the_one_train_uses():
    from agents.training.config import FlowGRPOConfig
    from agents.training.flow_grpo import load_policy_model

    model, _, path = load_policy_model(FlowGRPOConfig(backend="vllm"))
    assert model.config.hidden_size // model.config.num_attention_heads >= 32
    assert Path(path).is_dir()


def test_vllm_engine_reports_token_counts(tiny_vllm_path):
    from agentflow_env.engines import make_engine
    from agentflow_env.engines.base import SamplingParams

    engine = make_engine(f"vllm:{tiny_vllm_path}?kv_cache_memory_bytes=33554432")
    chat = [{"role": "user", "content": "Solve 1 2 3 4"}]
    texts = engine.generate([chat, "Step 1:"], SamplingParams(max_tokens=5))
    assert len(texts) == 2
    prompt_ids = engine.llm.get_tokenizer()("Step 1:", add_special_tokens=False)["input_ids"]
    assert engine.last_usage[1] == {"prompt_tokens": len(prompt_ids), "completion_tokens": 5}
    assert engine.last_usage[0]["completion_tokens"] == 5 and engine.last_usage[0]["prompt_tokens"] > len(prompt_ids)
