"""Tests of the tiny offline LM: deterministic build, HF save/load, tokenizer efficiency, chat template.

Everything is built in-process (no hub access); the shared build is cached across xdist workers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agents.tiny_lm import CORPUS_ENV_IDS, build_tiny_lm, corpus_texts, load_tiny_lm, tiny_lm_path  # noqa: E402


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)  # tiny matrices: extra threads only wait on each other
    # the parent of the per-worker base temp is shared by all xdist workers of one run
    return tiny_lm_path(tmp_path_factory.getbasetemp().parent / "agentflow-cache")


def test_build_is_deterministic_by_seed(tmp_path: Path) -> None:
    a = build_tiny_lm(tmp_path / "a", num_episodes=4, seed=3)
    b = build_tiny_lm(tmp_path / "b", num_episodes=4, seed=3)
    c = build_tiny_lm(tmp_path / "c", num_episodes=4, seed=4)
    assert (a / "tokenizer.json").read_text() == (b / "tokenizer.json").read_text()
    ma, _ = load_tiny_lm(a)
    mb, _ = load_tiny_lm(b)
    mc, _ = load_tiny_lm(c)
    for (name, pa), pb in zip(ma.state_dict().items(), mb.state_dict().values(), strict=True):
        assert torch.equal(pa, pb), name
    assert not torch.equal(ma.model.embed_tokens.weight, mc.model.embed_tokens.weight)


def test_load_roundtrip_and_config(tiny_lm: Path) -> None:
    model, tok = load_tiny_lm(tiny_lm)
    assert model.config.vocab_size == len(tok)
    assert model.config.max_position_embeddings >= 2048
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|pad|>"
    assert tok.pad_token_id != tok.eos_token_id
    assert tok.padding_side == "left"
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert 50_000 < model.num_parameters() < 2_000_000


def test_tokenizer_is_efficient_on_unseen_prompts(tiny_lm: Path) -> None:
    _, tok = load_tiny_lm(tiny_lm)
    held_out = corpus_texts(num_episodes=3, seed=10_000, env_ids=CORPUS_ENV_IDS[:1])
    prompts = held_out[::2]
    chars = sum(len(p) for p in prompts)
    tokens = sum(len(tok(p)["input_ids"]) for p in prompts)
    assert chars / tokens > 6.0, f"only {chars / tokens:.2f} characters per token"
    assert max(len(tok(p)["input_ids"]) for p in prompts) < 600
    for env_id in CORPUS_ENV_IDS[1:]:  # the other families' first prompts pack well too
        first = corpus_texts(num_episodes=4, seed=10_000, env_ids=(env_id,))[0]
        assert len(first) / len(tok(first)["input_ids"]) > 4.0, env_id


def test_tokenizer_roundtrips_any_unicode(tiny_lm: Path) -> None:
    _, tok = load_tiny_lm(tiny_lm)
    text = "Final Answer: (13 − 1) × 2 ÷ ½ — 日本語 🙂\n\tdone"
    assert tok.decode(tok(text)["input_ids"]) == text
    digits = tok.convert_ids_to_tokens(tok("12345")["input_ids"])
    assert digits == list("12345")


def test_chat_template_and_assistant_mask(tiny_lm: Path) -> None:
    _, tok = load_tiny_lm(tiny_lm)
    chat = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "Final Answer: 24"},
    ]
    text = tok.apply_chat_template(chat, tokenize=False)
    assert text == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
        "<|im_start|>assistant\nFinal Answer: 24<|im_end|>\n"
    )
    prompt = tok.apply_chat_template(chat[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    out = tok.apply_chat_template(chat, return_dict=True, return_assistant_tokens_mask=True)
    masked = [t for t, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    assert tok.decode(masked) == "Final Answer: 24<|im_end|>"


def test_extra_texts_extend_the_vocabulary(tmp_path: Path) -> None:
    extra = ["Zephyrine quokka archipelago\n"] * 50
    path = build_tiny_lm(tmp_path / "x", texts=extra, num_episodes=4)
    _, tok = load_tiny_lm(path)
    assert len(tok("Zephyrine quokka archipelago\n")["input_ids"]) <= 3


def test_batched_left_padded_generation(tiny_lm: Path) -> None:
    model, tok = load_tiny_lm(tiny_lm)
    chats = [
        [{"role": "user", "content": "a much longer question than the other one"}],
        [{"role": "user", "content": "hi"}],
    ]
    enc = tok.apply_chat_template(
        chats, add_generation_prompt=True, padding=True, return_dict=True, return_tensors="pt"
    )
    assert enc["attention_mask"][1, 0] == 0  # left padding
    out = model.generate(**enc, max_new_tokens=5, do_sample=False)
    width = enc["input_ids"].shape[1]
    assert out.shape[0] == 2 and width < out.shape[1] <= width + 5
    assert torch.equal(out[:, :width], enc["input_ids"])


def test_tiny_lm_path_builds_once(tmp_path: Path) -> None:
    first = tiny_lm_path(tmp_path, num_episodes=4)
    stamp = (first / "config.json").stat().st_mtime_ns
    again = tiny_lm_path(tmp_path, num_episodes=4)
    assert again == first and (again / "config.json").stat().st_mtime_ns == stamp
    other = tiny_lm_path(tmp_path, num_episodes=5)
    assert other != first
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tiny_lm-")]
