"""Tests of the trainable HF planner: shapes, log-prob consistency with teacher forcing, left padding, sampling.

They use the tiny offline LM (built in-process once, cached); nothing is downloaded.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import agentflow_env  # noqa: E402,F401
from agentflow_env.engines.base import SamplingParams  # noqa: E402
from agentflow_env.error import ConfigError  # noqa: E402
from agents.lm import sequence_logprobs  # noqa: E402
from agents.policies.hf_policy import HFPlanner, PolicySample  # noqa: E402


@pytest.fixture(scope="module")
def lm():
    from agents.tiny_lm import load_tiny_lm, tiny_lm_path

    torch.set_num_threads(1)
    return load_tiny_lm(tiny_lm_path())


@pytest.fixture(scope="module")
def observations():
    env = gym.make("agentflow/Gen-GameOf24-v1", split="train", max_turns=3)
    obs = []
    for seed in range(3):
        o, _ = env.reset(seed=seed)
        obs.append(o)
    # a second-turn observation has a longer prompt (memory), so the batch needs padding
    o, *_ = env.step("Tool Name: Calculator_Tool\nCommand: 1+2")
    obs.append(o)
    env.close()
    short = dict(obs[0])
    short["prompt"] = "Question: 1 2 3 4?"
    return [*obs, short]


def _planner(lm, **sampling) -> HFPlanner:
    model, tokenizer = lm
    return HFPlanner(model, tokenizer, sampling=SamplingParams(**sampling), max_prompt_tokens=1024)


def test_act_and_samples_shapes(lm, observations):
    planner = _planner(lm, temperature=1.0, max_tokens=10, seed=0)
    actions = planner.act(observations)
    assert len(actions) == len(observations) and all(isinstance(a, str) for a in actions)
    samples = planner.act_with_samples(observations)
    assert len(samples) == len(observations)
    for obs, s in zip(observations, samples):
        assert isinstance(s, PolicySample)
        assert s.prompt_ids == planner.encode_prompt(obs)[0]
        assert 1 <= len(s.response_ids) <= 10
        assert len(s.logprobs) == len(s.response_ids)
        assert all(lp <= 0.0 for lp in s.logprobs)
        assert s.finished == (s.response_ids[-1] in planner.eos_ids)
        assert s.text == planner.tokenizer.decode(s.response_ids, skip_special_tokens=True)
    assert planner.act([]) == []


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9)])
def test_logprobs_match_teacher_forcing(lm, observations, temperature, top_p):
    planner = _planner(lm, temperature=temperature, top_p=top_p, max_tokens=12, seed=3)
    samples = planner.act_with_samples(observations)
    recomputed = sequence_logprobs(
        planner.model, [s.prompt_ids for s in samples], [s.response_ids for s in samples], planner.pad_id
    )
    for s, r in zip(samples, recomputed):
        # the raw (temperature 1) distribution, whatever the sampling settings
        assert torch.allclose(torch.tensor(s.logprobs), r.detach(), atol=1e-4)


def test_forward_logprob_source_matches_generate(lm, observations):
    model, tokenizer = lm
    sampling = SamplingParams(temperature=1.0, max_tokens=8, seed=5)
    a = HFPlanner(model, tokenizer, sampling=sampling).act_with_samples(observations)
    b = HFPlanner(model, tokenizer, sampling=sampling, logprob_source="forward").act_with_samples(observations)
    for x, y in zip(a, b):
        assert x.response_ids == y.response_ids
        assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4)


def test_sequence_logprobs_ignores_padding(lm):
    model, tokenizer = lm
    prompts, responses = [[5, 6, 7], list(range(10, 40))], [[8, 9], [41, 42, 43, 44]]
    batched = sequence_logprobs(model, prompts, responses, tokenizer.pad_token_id)
    for p, r, b in zip(prompts, responses, batched):
        alone = sequence_logprobs(model, [p], [r], tokenizer.pad_token_id)[0]
        assert b.shape == (len(r),)
        assert torch.allclose(alone, b, atol=1e-5)
    empty = sequence_logprobs(model, [[5]], [[]], tokenizer.pad_token_id)[0]
    assert empty.numel() == 0


def test_left_padding_batched_equals_single_greedy(lm, observations):
    planner = _planner(lm, temperature=0.0, max_tokens=8)
    batched = planner.act_with_samples(observations)
    assert len({len(s.prompt_ids) for s in batched}) > 1  # the batch really was padded
    for obs, b in zip(observations, batched):
        single = planner.act_with_samples([obs])[0]
        assert single.response_ids == b.response_ids
        assert torch.allclose(torch.tensor(single.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_sampling_settings_are_applied(lm, observations):
    obs = observations[:2]
    greedy = _planner(lm, temperature=0.0, max_tokens=8).act_with_samples(obs)
    # top_p that keeps only the most likely token is greedy, even at temperature 1
    nucleus = _planner(lm, temperature=1.0, top_p=1e-6, max_tokens=8, seed=1).act_with_samples(obs)
    assert [s.response_ids for s in nucleus] == [s.response_ids for s in greedy]
    # a seed makes sampling reproducible; different seeds explore
    a = _planner(lm, temperature=1.0, max_tokens=8, seed=11).act_with_samples(obs)
    b = _planner(lm, temperature=1.0, max_tokens=8, seed=11).act_with_samples(obs)
    c = _planner(lm, temperature=1.0, max_tokens=8, seed=12).act_with_samples(obs)
    assert [s.response_ids for s in a] == [s.response_ids for s in b]
    assert [s.response_ids for s in a] != [s.response_ids for s in c]
    assert all(len(s.response_ids) <= 8 for s in a + c)


def test_long_prompt_drops_oldest_memory(lm):
    model, tokenizer = lm
    env = gym.make("agentflow/Gen-GameOf24-v1", split="train", max_turns=8)
    obs, _ = env.reset(seed=0)
    for k in range(5):
        obs, *_ = env.step(f"Tool Name: Calculator_Tool\nCommand: {k}+{k}*{k}")
    env.close()
    full, truncated = HFPlanner(model, tokenizer, max_prompt_tokens=4096).encode_prompt(obs)
    assert not truncated
    limit = len(full) - 40
    planner = HFPlanner(model, tokenizer, sampling=SamplingParams(max_tokens=4), max_prompt_tokens=limit)
    ids, truncated = planner.encode_prompt(obs)
    text = tokenizer.decode(ids)
    assert truncated and len(ids) <= limit
    assert obs["question"] in text and "omitted" in text
    assert "Step 5" in text and "Step 1:" not in text  # the newest step is kept, the oldest dropped
    assert planner.act_with_samples([obs])[0].prompt_truncated


def test_bad_settings_say_what_to_change(lm):
    model, tokenizer = lm
    with pytest.raises(ConfigError, match="logprob_source"):
        HFPlanner(model, tokenizer, logprob_source="vllm")
    with pytest.raises(ConfigError, match="top_p"):
        HFPlanner(model, tokenizer, sampling=SamplingParams(top_p=0.0))
    with pytest.raises(ValueError, match="prompt"):
        HFPlanner(model, tokenizer).act([{"question": "no prompt"}])


def test_stop_strings_end_the_response(lm, observations):
    model, tokenizer = lm
    free = HFPlanner(model, tokenizer, sampling=SamplingParams(temperature=0.0, max_tokens=12)).act(observations[:2])
    stop = next((c for c in free[0][2:] if c.strip()), None)
    if stop is None:
        pytest.skip("the untrained model's greedy text has no usable stop character")
    planner = HFPlanner(model, tokenizer, sampling=SamplingParams(temperature=0.0, max_tokens=12, stop=[stop]))
    sample = planner.act_with_samples(observations[:1])[0]
    assert stop not in sample.text and free[0].startswith(sample.text)
    assert sample.finished and len(sample.logprobs) == len(sample.response_ids)
    assert planner.pad_id not in sample.response_ids or planner.pad_id in planner.eos_ids


def test_pad_left_and_right_place_tokens_and_masks():
    from agents.lm import pad_left, pad_right

    ids, mask = pad_left([[1, 2], [3], []], 0)
    assert ids.tolist() == [[1, 2], [0, 3], [0, 0]] and mask.tolist() == [[1, 1], [0, 1], [0, 0]]
    ids, mask = pad_right([[1, 2], [3], []], 9)
    assert ids.tolist() == [[1, 2], [3, 9], [9, 9]] and mask.tolist() == [[1, 1], [1, 0], [0, 0]]


def test_a_stop_string_matches_only_inside_the_completion(lm, observations):
    """A stop string that straddles the prompt's end (the prompt's last character + the first generated one)
    must not end the row: servers match stop strings in the completion only, and so does the planner."""
    model, tokenizer = lm
    greedy = SamplingParams(temperature=0.0, max_tokens=10)
    full = HFPlanner(model, tokenizer, sampling=greedy).act(observations[:1])[0]
    if not full:
        pytest.skip("the untrained model generated nothing")
    prompt_text = tokenizer.decode(HFPlanner(model, tokenizer)._encode(observations[0]).ids, skip_special_tokens=True)
    stop = prompt_text[-1:] + full[:1]
    planner = HFPlanner(model, tokenizer, sampling=SamplingParams(temperature=0.0, max_tokens=10, stop=[stop]))
    cut = planner.act(observations[:1])[0]
    at = full.find(stop)
    assert cut == (full if at < 0 else full[:at]), (full, stop, cut)
