"""A run's surroundings: the device, the seeds and RNG state (saved in checkpoints), and the start policy."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from agents.training.config import FlowGRPOConfig

__all__ = ["load_policy_model", "resolve_device", "rng_state", "set_rng_state", "set_seed"]


def resolve_device(config: FlowGRPOConfig) -> str:
    import torch

    if config.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if config.device == "cuda" and not torch.cuda.is_available():
        from agentflow_env.error import ConfigError

        raise ConfigError("device='cuda' but torch sees no CUDA GPU; set device='cpu' (or 'auto')")
    return config.device


def set_seed(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def load_policy_model(config: FlowGRPOConfig) -> tuple[Any, Any, str]:
    """``(model, tokenizer, path)`` of the start policy: ``init_from``, the tiny LM, or a HF model path."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if config.init_from:
        path = config.init_from
    elif config.model == "tiny":
        from agents.tiny_lm import VLLM_MODEL_KWARGS, tiny_lm_path

        shape = VLLM_MODEL_KWARGS if config.backend == "vllm" else {}  # vLLM's CPU attention needs head_dim 32
        path = str(tiny_lm_path(config.tiny_cache_dir or None, **shape))
    else:
        path = config.model
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer, path
