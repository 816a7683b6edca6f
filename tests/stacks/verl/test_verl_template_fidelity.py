"""Template fidelity of verl's trajectory mode, run by verl 0.9's own ``AgentLoopBase`` machinery: for every
template family of the tests' chat_families.py, the ``AgentLoopOutput`` of a recorded tool-calling episode
(two tool results in a row, a tool error, a final answer) is the inference template's render, turn by turn, and the
check fails when the loop merges consecutive tool turns or strips the model's think block.

verl pins transformers < 5.11, so this runs in its own environment: ``tox -e verl`` (CI's verl stage).
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("verl")
pytest.importorskip("tokenizers")

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.workers.rollout.replica import TokenOutput

import agents.integrations.trajectory as trajectory_module
from agents.integrations.chat import env_reply
from agents.integrations.template_fidelity import check_fidelity
from agents.integrations.verl_agent_loop import AgentFlowAgentLoop
from agents.integrations.verl_data import verl_rows
from tests.agents.integrations.chat_families import (
    ENV_ID,
    FAMILIES,
    MAX_TURNS,
    actions,
    build_tokenizer,
    conversation,
    encode_reply,
    merge_tool_turns,
    strip_think,
)


class RecordedServer:
    """Stand-in for verl's async LLM server: answers each request with the episode's next recorded turn."""

    def __init__(self, tokenizer, texts):
        self.replies = [encode_reply(tokenizer, t) for t in texts]

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        ids = self.replies.pop(0)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def _output(tokenizer, texts):
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 8192,
                    "response_length": 8192,
                    "multi_turn": {"max_assistant_turns": None},
                    "agent": {},
                }
            },
            "data": {"apply_chat_template_kwargs": {}, "mm_processor_kwargs": {}},
        }
    )
    loop = AgentFlowAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=RecordedServer(tokenizer, texts),
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
    )
    (row,) = verl_rows(
        ENV_ID, split="test", num_tasks=1, env_kwargs={"max_turns": MAX_TURNS}, emit="trajectory", tool_calling=True
    )
    out = asyncio.run(loop.run({"temperature": 0.0}, **row))
    return out.prompt_ids + out.response_ids, [0] * len(out.prompt_ids) + out.response_mask


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_trajectory_is_the_templates_tokens(name):
    fam = FAMILIES[name]
    tok = build_tokenizer(fam)
    texts = actions(fam)
    messages, tools, _ = conversation(texts)
    ids, mask = _output(tok, texts)
    assert check_fidelity(tok, messages, tools, ids, mask) == []


def test_merged_tool_turns_and_stripped_thinking_are_caught(monkeypatch):
    fam = FAMILIES["reasoning"]
    tok = build_tokenizer(fam)
    texts = actions(fam)
    messages, tools, _ = conversation(texts)
    with monkeypatch.context() as m:
        m.setattr(trajectory_module, "env_reply", lambda info, seen, a: _merged(env_reply(info, seen, a)))
        problems = check_fidelity(tok, messages, tools, *_output(tok, texts))
    assert any("turn 2: the context" in p for p in problems)

    generate = AgentFlowAgentLoop._generate

    async def stripped(self, prompt_ids, sampling_params, max_tokens):
        out = await generate(self, prompt_ids, sampling_params, max_tokens)
        ids = strip_think(tok, list(out.token_ids))
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")

    monkeypatch.setattr(AgentFlowAgentLoop, "_generate", stripped)
    problems = check_fidelity(tok, messages, tools, *_output(tok, texts))
    assert any("turn 1: the trained tokens" in p and "<think>" in p for p in problems)


def _merged(reply):
    assistant, new = reply
    return assistant, merge_tool_turns(new)
