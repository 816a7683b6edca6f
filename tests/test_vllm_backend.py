"""The vLLM rollout backend's side of the contract, on CPU with a stand-in ``vllm`` module.

vLLM needs a GPU, so these tests replace the engine with a recorder that has vLLM's call shapes
(``LLM.generate``, ``load_weights`` on the runner's model, ``reset_prefix_cache``). They check what
the backend controls: every learner weight reaches the engine under the plain-model name (LoRA
merged for the read, then unmerged), the prefix cache is cleared on sync, prompts are encoded as the
HF planner encodes them, and vLLM's outputs become samples with per-token log-probs.
"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentflow_env.engines.base import SamplingParams  # noqa: E402
from agents.flow_grpo_backends import VLLMBackend  # noqa: E402
from agents.hf_policy import HFPlanner  # noqa: E402


class _EngineModel:
    def __init__(self) -> None:
        self.loaded: dict[str, torch.Tensor] = {}

    def load_weights(self, weights):
        for name, tensor in weights:
            self.loaded[name] = tensor.detach().clone()


class _FakeLLM:
    """Records the constructor arguments, weight loads, cache resets and generate calls."""

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        self.model = _EngineModel()
        runner = SimpleNamespace(model=self.model)
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(worker=SimpleNamespace(model_runner=runner)))
        )
        self.resets = 0
        self.calls: list[tuple[list, object]] = []

    def reset_prefix_cache(self) -> None:
        self.resets += 1

    def generate(self, prompts, params, use_tqdm=True):
        self.calls.append((prompts, params))
        outs = []
        for k, _ in enumerate(prompts):
            tokens = [11 + k, 12, 2] if k % 2 == 0 else [13, 14, 15]  # even rows stop at EOS (2), odd hit the cap
            logprobs = [{t: SimpleNamespace(logprob=-0.5 * (i + 1))} for i, t in enumerate(tokens)]
            choice = SimpleNamespace(
                token_ids=tokens,
                logprobs=logprobs,
                text=f"Final Answer: {k}",
                finish_reason="stop" if k % 2 == 0 else "length",
            )
            outs.append(SimpleNamespace(outputs=[choice]))
        return outs


@pytest.fixture()
def fake_vllm(monkeypatch):
    mod = types.ModuleType("vllm")
    mod.LLM = _FakeLLM
    mod.SamplingParams = lambda **kw: SimpleNamespace(**kw)
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": list(prompt_token_ids)}
    mod.inputs = inputs
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)  # the backend sets it; restored after
    return mod


@pytest.fixture(scope="module")
def tiny():
    from agents.tiny_lm import load_tiny_lm, tiny_lm_path

    torch.set_num_threads(1)
    path = tiny_lm_path()
    model, tokenizer = load_tiny_lm(path)
    return str(path), model, tokenizer


def test_sync_streams_every_weight_and_clears_the_prefix_cache(fake_vllm, tiny):
    path, model, tokenizer = tiny
    backend = VLLMBackend(path, tokenizer, SamplingParams(temperature=1.0, max_tokens=8), seed=3)
    assert backend.llm.kwargs["model"] == path and backend.llm.kwargs["enable_prefix_caching"]
    assert backend.llm.kwargs["logprobs_mode"] == "raw_logprobs"  # log-probs of the unprocessed policy
    backend.sync_weights(model)
    state = model.state_dict()
    assert set(backend.llm.model.loaded) == set(state)
    for name, tensor in state.items():
        assert torch.equal(backend.llm.model.loaded[name], tensor), name
    assert backend.llm.resets == 1
    backend.sync_weights(model)
    assert backend.llm.resets == 2


def test_sync_merges_lora_for_the_read_and_leaves_the_adapter_unmerged(fake_vllm, tiny):
    import copy

    peft = pytest.importorskip("peft")
    path, base, tokenizer = tiny
    lora = peft.get_peft_model(
        copy.deepcopy(base), peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    torch.manual_seed(0)
    with torch.no_grad():  # a trained adapter: B is zero at init, so give it values
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    ids = torch.tensor([[5, 6, 7, 8]])
    before = lora(input_ids=ids).logits.detach().clone()
    merged = copy.deepcopy(lora).merge_and_unload().state_dict()

    backend = VLLMBackend(path, tokenizer, SamplingParams(temperature=1.0, max_tokens=8))
    backend.sync_weights(lora)
    loaded = backend.llm.model.loaded
    assert set(loaded) == set(merged)  # plain-model names: no base_layer, no lora_ tensors
    assert not any("lora_" in n or "base_layer" in n for n in loaded)
    changed = [n for n in merged if not torch.equal(merged[n], base.state_dict()[n])]
    assert changed, "the adapter should change some merged weights"
    for name in merged:
        assert torch.allclose(loaded[name], merged[name], atol=1e-6), name
    after = lora(input_ids=ids).logits.detach()
    assert torch.allclose(before, after, atol=1e-5), "sync left the adapter merged"


def test_act_encodes_like_the_planner_and_returns_samples(fake_vllm, tiny):
    path, model, tokenizer = tiny
    sampling = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=3)
    backend = VLLMBackend(path, tokenizer, sampling)
    observations = [{"prompt": "Solve 1 2 3 4"}, {"prompt": "Solve 5 6 7 8"}]
    samples = backend.act_with_samples(observations)
    prompts, params = backend.llm.calls[-1]
    planner = HFPlanner(model, tokenizer, sampling=sampling)
    assert [p["prompt_token_ids"] for p in prompts] == [planner.encode_prompt(o)[0] for o in observations]
    assert params.temperature == 0.7 and params.top_p == 0.9 and params.max_tokens == 3 and params.logprobs == 0
    assert samples[0].response_ids == [11, 12, 2] and samples[0].finished
    assert samples[1].response_ids == [13, 14, 15] and not samples[1].finished
    assert samples[0].logprobs == [-0.5, -1.0, -1.5]
    assert samples[0].prompt_ids == prompts[0]["prompt_token_ids"]
    assert backend.act(observations) == ["Final Answer: 0", "Final Answer: 1"]
    assert backend.act_with_samples([]) == []


def test_greedy_sampling_turns_off_top_p(fake_vllm, tiny):
    path, _, tokenizer = tiny
    backend = VLLMBackend(path, tokenizer, SamplingParams(temperature=0.0, top_p=0.5, max_tokens=3))
    backend.act_with_samples([{"prompt": "x"}])
    params = backend.llm.calls[-1][1]
    assert params.temperature == 0.0 and params.top_p == 1.0


def test_hidden_model_runner_gets_a_clear_error(fake_vllm, tiny):
    from agentflow_env.error import ConfigError

    path, model, tokenizer = tiny
    backend = VLLMBackend(path, tokenizer, SamplingParams())
    backend.llm.llm_engine = SimpleNamespace(model_executor=None)  # e.g. the engine core runs in another process
    with pytest.raises(ConfigError, match="VLLM_ENABLE_V1_MULTIPROCESSING=0"):
        backend.sync_weights(model)
