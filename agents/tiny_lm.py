"""A tiny offline causal LM for tests and CPU training: a byte-level BPE tokenizer and a random model.

Both are built in-process in seconds from the generated task families' planner text, saved in HF format.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentflow_env.error import DependencyNotInstalled

__all__ = [
    "CHAT_TEMPLATE",
    "DEFAULT_MODEL_KWARGS",
    "SPECIAL_TOKENS",
    "VLLM_MODEL_KWARGS",
    "build_tiny_lm",
    "build_tokenizer",
    "corpus_texts",
    "load_tiny_lm",
    "tiny_lm_cache_path",
    "tiny_lm_path",
]

logger = logging.getLogger(__name__)

# part of the cache key: bump when the tokenizer or model recipe changes, so old caches are not reused
RECIPE_VERSION = 3

PAD, EOS, IM_START = "<|pad|>", "<|im_end|>", "<|im_start|>"
SPECIAL_TOKENS = (PAD, EOS, IM_START, "<|endoftext|>")

# ChatML-style turns; the {% generation %} markers let SFT compute assistant-only loss masks.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{ '\\n' }}"
    "{%- else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Llama architecture, shrunk (about 0.2M parameters, 4k positions). Llama rather than Qwen2 because
# transformers 5 loads a qwen2 checkpoint with Qwen2's own pre-tokenizer, discarding ours.
DEFAULT_MODEL_KWARGS: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
}

# The same tiny LM in a shape vLLM's CPU attention accepts (it rejects head_dim 16: hidden 64 over 4 heads);
# hidden 64 over 2 heads and 1 KV head gives head_dim 32. Pass as ``tiny_lm_path(**VLLM_MODEL_KWARGS)``.
VLLM_MODEL_KWARGS: dict[str, Any] = {"num_attention_heads": 2, "num_key_value_heads": 1}


def _require_hf() -> None:
    try:
        import tokenizers  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise DependencyNotInstalled(exc.name or "transformers", "train") from exc


# the generated families whose planner text makes the default corpus (Game-of-24 first: most episodes)
CORPUS_ENV_IDS = (
    "agentflow/Gen-GameOf24-v2",
    "agentflow/Gen-Math-v2",
    "agentflow/Gen-MultiHop-v2",
    "agentflow/Gen-Agentic-v2",
    "agentflow/Gen-Science-v2",
)


def _scripted_planner(env_id: str) -> Any:
    if "GameOf24" in env_id:
        from agents.policies.baselines import ScriptedGameOf24Planner

        return ScriptedGameOf24Planner()
    from agents.policies.scripted import scripted_planner_for

    return scripted_planner_for(env_id)


def _family_texts(env_id: str, episodes: int, seed: int, max_steps: int = 10) -> list[str]:
    import gymnasium as gym

    planner = _scripted_planner(env_id)
    # short budgets on some episodes put the "last turn" wording into the corpus too
    budgets = (1, 2, 3, 10) if max_steps > 1 else (10,)
    # the train split: it is the largest, so its first tasks are the cheapest to generate
    envs = [gym.make(env_id, split="train", max_turns=turns, disable_env_checker=True) for turns in budgets]
    texts: list[str] = []
    try:
        for episode in range(episodes):
            env = envs[episode % len(envs)]
            # small task indices are cheap in every family (generated sources sample tasks in order)
            size = len(env.unwrapped.tasks)  # type: ignore[attr-defined]
            obs, _ = env.reset(seed=seed + episode, options={"index": (seed * 7919 + episode) % size})
            for step in range(max_steps):
                action = planner.act([obs])[0]
                texts.append(obs["prompt"])
                texts.append(action)
                if step == max_steps - 1:
                    break
                obs, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    texts.append(obs["memory"])
                    break
    finally:
        for env in envs:
            env.close()
    return texts


def corpus_texts(num_episodes: int = 48, seed: int = 0, env_ids: Sequence[str] = CORPUS_ENV_IDS) -> list[str]:
    """Planner prompts, scripted actions and final memories from episodes of the generated families.

    The first env id gets ``num_episodes`` whole episodes. The others (whose tools are slower) give
    the first prompt and action of ``num_episodes // 2`` episodes: the prompts' fixed wording (tool
    cards, format, instructions) is what the tokenizer must pack. A family that is not installed or
    fails to build is skipped with a warning.
    """
    import agentflow_env  # noqa: F401  (registers the env ids)

    texts: list[str] = []
    for i, env_id in enumerate(env_ids):
        episodes, steps = (num_episodes, 10) if i == 0 else (max(2, num_episodes // 2), 1)
        try:
            texts.extend(_family_texts(env_id, episodes, seed, max_steps=steps))
        except Exception as exc:  # a missing family must not stop the tiny LM from building
            logger.warning("tiny LM corpus: skipping %s (%s: %s)", env_id, type(exc).__name__, exc)
    return texts


def build_tokenizer(texts: Iterable[str], vocab_size: int = 4096, max_token_chars: int = 24) -> Any:
    """Train a byte-level BPE on ``texts``; returns a ``PreTrainedTokenizerFast`` with chat template.

    ``vocab_size`` is an upper bound: a small corpus stops earlier (merges need two occurrences).
    """
    _require_hf()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # Merges may cross spaces (not lines), so the prompts' fixed wording packs into few tokens
    # (about 9 characters per token on planner prompts, against 3.5 with word-level splits);
    # single digits keep arithmetic learnable, and byte-level covers all of Unicode.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split("\n", behavior="merged_with_previous"),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
        max_token_length=max_token_chars,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=None,
        bos_token=None,
        additional_special_tokens=[IM_START, "<|endoftext|>"],
        model_max_length=DEFAULT_MODEL_KWARGS["max_position_embeddings"],
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_lm(
    out_dir: str | os.PathLike[str],
    texts: Sequence[str] | None = None,
    vocab_size: int = 4096,
    seed: int = 0,
    num_episodes: int = 48,
    added_tokens: Sequence[str] = (),
    **model_kwargs: Any,
) -> Path:
    """Train the tokenizer, initialise a random Llama-style causal LM, and ``save_pretrained`` both.

    ``texts`` are added to the Game-of-24 corpus (other families' prompts, for example); ``added_tokens``
    become whole tokens. The result is deterministic given the arguments. Returns ``out_dir``.
    """
    _require_hf()
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    corpus = corpus_texts(num_episodes=num_episodes, seed=seed) + list(texts or [])
    tokenizer = build_tokenizer(corpus, vocab_size=vocab_size)
    if added_tokens:  # whole tokens, matched before pre-tokenisation (e.g. entity names a policy must copy)
        tokenizer.add_tokens(list(added_tokens))
    kwargs = {**DEFAULT_MODEL_KWARGS, **model_kwargs}
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **kwargs,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=False
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    logger.info("tiny LM: %d parameters, vocab %d, saved to %s", model.num_parameters(), len(tokenizer), out)
    return out


def load_tiny_lm(path: str | os.PathLike[str]) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a folder written by :func:`build_tiny_lm` (eval mode, float32)."""
    _require_hf()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    model.eval()
    return model, tokenizer


def tiny_lm_cache_path(cache_dir: str | os.PathLike[str] | None = None, **build_kwargs: Any) -> Path:
    """Where :func:`tiny_lm_path` keeps the tiny LM built with ``build_kwargs`` (it may not be built yet)."""
    root = Path(cache_dir or os.environ.get("AGENTFLOW_CACHE") or Path.home() / ".cache" / "agentflow_env")
    blob = json.dumps({"recipe": RECIPE_VERSION, **build_kwargs}, sort_keys=True, default=str)
    return root / f"tiny_lm-{hashlib.sha1(blob.encode()).hexdigest()[:10]}"


def tiny_lm_path(cache_dir: str | os.PathLike[str] | None = None, **build_kwargs: Any) -> Path:
    """The tiny LM's folder under ``cache_dir``, built once per set of arguments and reused.

    Safe under ``pytest -n auto``: each builder writes a private folder and renames it into
    place; whoever loses the race uses the winner's copy. ``cache_dir`` defaults to
    ``$AGENTFLOW_CACHE`` or ``~/.cache/agentflow_env``.
    """
    target = tiny_lm_cache_path(cache_dir, **build_kwargs)
    root = target.parent
    if (target / "config.json").is_file() and (target / "tokenizer.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".tiny_lm-", dir=root))
    try:
        build_tiny_lm(scratch / "model", **build_kwargs)
        try:
            os.rename(scratch / "model", target)
        except OSError:
            if not (target / "config.json").is_file():  # not a lost race: a real failure
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
