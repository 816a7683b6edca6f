"""Token fidelity of every bridge, per chat-template family: the ids TRL, SkyRL, verl's trajectory mode and the
learner's own rollouts hand their trainers equal what the inference template renders for the same conversation,
turn by turn (the generation prompt and the assistant-mask boundaries included), and the check fails when a
bridge drops a turn boundary or re-renders a think block (mutation tests).

The episode (tests/agents/integrations/chat_families.py) is replayed through the real env: two tool calls in one turn
(two tool results in a row), a call whose tool fails, a final answer; the model's turns are recorded token ids.
verl's own machinery runs the same checks in its stage (tests/stacks/verl/test_verl_template_fidelity.py).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from agents.integrations import trajectory as trajectory_module
from agents.integrations.chat import ChatCodec
from agents.integrations.template_fidelity import check_fidelity
from tests.agents.integrations.chat_families import (
    FAMILIES,
    MAX_TURNS,
    actions,
    build_tokenizer,
    conversation,
    encode_reply,
    make_env,
    merge_tool_turns,
    run,
    strip_think,
    task_id,
)

FAMILY_NAMES = list(FAMILIES)


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family(request):
    fam = FAMILIES[request.param]
    return fam, build_tokenizer(fam)


def _replies(tokenizer, texts):
    return iter([encode_reply(tokenizer, t) for t in texts])


# ---------------------------------------------------------------------------------------------- the bridges
def trl_sequence(tokenizer, texts, monkeypatch):
    """The TRL bridge's row for the episode: prompt + completion ids and the mask (1: trained)."""
    pytest.importorskip("datasets")
    import agents.integrations.trl as trl_module

    replies = _replies(tokenizer, texts)

    def replay(model, tok, contexts, args, max_new):
        return [(ids := next(replies), [-0.5] * len(ids)) for _ in contexts]

    monkeypatch.setattr(trl_module, "_generate", replay)
    bridge = trl_module.AgentFlowTRL(
        "agentflow/Gen-GameOf24-v2", split="test", env_kwargs={"max_turns": MAX_TURNS}, num_tasks=1, tool_calling=True
    )
    try:
        data = bridge.dataset()
        trainer = SimpleNamespace(
            processing_class=tokenizer,
            model=None,
            accelerator=SimpleNamespace(unwrap_model=lambda m: m),
            args=SimpleNamespace(max_completion_length=8000, temperature=1.0, top_p=1.0),
        )
        out = bridge.rollout_func([data[0]["prompt"]], trainer)
    finally:
        bridge.close()
    prompt, completion = out["prompt_ids"][0], out["completion_ids"][0]
    return prompt + completion, [0] * len(prompt) + out["env_mask"][0]


def verl_sequence(tokenizer, texts, monkeypatch=None, mutate_tokens=None):
    """verl's trajectory mode (tool calling), through the loop's own core (agents.integrations.trajectory)."""
    env = make_env()
    _, info = env.reset(options={"task_id": task_id(), "tool_calling": True})
    codec = ChatCodec(tokenizer, tools=info["tools"])
    messages = [dict(m) for m in info["messages"]]
    replies = _replies(tokenizer, texts)

    async def generate(context, room):
        ids = next(replies)
        return (mutate_tokens(tokenizer, ids) if mutate_tokens else ids), None

    async def step(action):
        return env.step(action)

    def decode(ids):
        return tokenizer.decode(ids, skip_special_tokens=True)

    played = run(
        trajectory_module.play_trajectory(
            codec.start_messages(messages),
            generate,
            step,
            decode,
            trajectory_module.tool_call_turns(codec, messages),
            codec.eos_ids,
            response_length=8000,
        )
    )
    env.close()
    return played.prompt_ids + played.response_ids, [0] * len(played.prompt_ids) + played.mask


def skyrl_sequence(tokenizer, texts):
    """SkyRL's generator (multi-turn conversation, token in token out: its fixed-base encoding of observations,
    skyrl-train's documented codepath 1) over the SkyRL bridge's env."""
    pytest.importorskip("skyrl_gym")
    from agents.integrations.skyrl import AgentFlowSkyRLEnv

    env = AgentFlowSkyRLEnv(
        "agentflow/Gen-GameOf24-v2",
        env_config={"tool_calling": True, "max_turns": MAX_TURNS},
        extras={"task_id": task_id(), "split": "test"},
    )
    chat, _ = env.init()

    def encode_chat(messages, generation):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    base = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "I am a user."},
        {"role": "assistant", "content": "I am an assistant."},
    ]
    base_ids = encode_chat(base, False)
    eos = tokenizer.eos_token_id
    base_ids = base_ids[: len(base_ids) - base_ids[::-1].index(eos)]  # cut after the last end-of-turn token
    ids = encode_chat(chat, True)
    mask = [0] * len(ids)
    for reply in _replies(tokenizer, texts):
        ids += reply
        mask += [1] * len(reply)
        out = env.step(tokenizer.decode(reply, skip_special_tokens=True))
        if out["done"]:
            break
        obs = encode_chat([*base, *out["observations"]], True)[len(base_ids) :]
        ids += obs
        mask += [0] * len(obs)
    env.close()
    return ids, mask


class ReplayPlanner:
    """The learner's planner (HFPlanner's prompt encoding, tool calling on) with recorded turns for its samples."""

    def __init__(self, tokenizer, texts):
        from agents.policies.hf_policy import HFPlanner, PolicySample

        self.encoder = HFPlanner(SimpleNamespace(), tokenizer, tool_calling=True)
        self.sample_cls = PolicySample
        self.replies = _replies(tokenizer, texts)
        self.tokenizer = tokenizer

    def act(self, observations):
        return [s.text for s in self.act_with_samples(observations)]

    def act_with_samples(self, observations):
        out = []
        for obs in observations:
            prompt_ids, _ = self.encoder.encode_prompt(obs)
            ids = next(self.replies)
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            out.append(self.sample_cls(prompt_ids, ids, [-0.5] * len(ids), text))
        return out


def learner_turns(tokenizer, texts):
    from agents.training.rollout import collect_group_rollouts

    (group,) = collect_group_rollouts([make_env], ReplayPlanner(tokenizer, texts), [task_id()], group_size=1)
    return group[0].turns


def learner_problems(tokenizer, texts, messages):
    """Each learner turn against the template's render of that turn's chat (its own prompt, re-rendered from the
    env's memory as Flow-GRPO does) followed by the assistant's message."""
    from agents.policies.llm_planner import card_schemas, tool_system_prompt, tool_user_content

    _, _, observations = conversation(texts)
    assistants = [m for m in messages if m["role"] == "assistant"]
    turns = learner_turns(tokenizer, texts)
    assert len(turns) == len(assistants) == len(observations)
    problems = []
    for k, (turn, obs, assistant) in enumerate(zip(turns, observations, assistants), 1):
        chat = [
            {"role": "system", "content": tool_system_prompt()},
            {"role": "user", "content": tool_user_content(obs)},
            assistant,
        ]
        ids = turn.prompt_ids + turn.response_ids
        mask = [0] * len(turn.prompt_ids) + [1] * len(turn.response_ids)
        problems += [f"learner turn {k}: {p}" for p in check_fidelity(tokenizer, chat, card_schemas(obs), ids, mask)]
    return problems


# ---------------------------------------------------------------------------------------------- exact
def test_trl_rows_are_the_templates_tokens(family, monkeypatch):
    fam, tok = family
    texts = actions(fam)
    messages, tools, _ = conversation(texts)
    ids, mask = trl_sequence(tok, texts, monkeypatch)
    assert check_fidelity(tok, messages, tools, ids, mask) == []
    assert sum(1 for m in messages if m["role"] == "tool") == 3  # two results in a row, then the tool's error


def test_verl_trajectories_are_the_templates_tokens(family):
    fam, tok = family
    texts = actions(fam)
    messages, tools, _ = conversation(texts)
    ids, mask = verl_sequence(tok, texts)
    assert check_fidelity(tok, messages, tools, ids, mask) == []


def test_skyrl_sequences_are_the_hermes_chats_tokens(family, caplog):
    """SkyRL renders without tools=, so its reference is the Hermes chat; against a template with its own tools
    section the tokens differ, and the bridge said so when its env started."""
    fam, tok = family
    texts = actions(fam)
    messages, tools, _ = conversation(texts)
    with caplog.at_level(logging.WARNING):
        import agents.integrations.chat as chat_module

        chat_module._WARNED.clear()
        ids, mask = skyrl_sequence(tok, texts)
    assert check_fidelity(tok, messages, tools, ids, mask, native_tools=False) == []
    if fam.template is not None:  # a template that knows tools renders them its own way
        assert check_fidelity(tok, messages, tools, ids, mask) != []
        assert "SkyRL" in caplog.text and "without tools=" in caplog.text


def test_learner_turns_are_the_templates_tokens(family):
    fam, tok = family
    texts = actions(fam)
    messages, _, _ = conversation(texts)
    assert learner_problems(tok, texts, messages) == []


def test_a_template_without_history_rewrites_starts_without_a_warning(family, caplog):
    fam, tok = family
    import agents.integrations.chat as chat_module

    chat_module._WARNED.clear()
    with caplog.at_level(logging.WARNING):
        codec = ChatCodec(tok, tools=conversation(actions(fam))[1])
    if fam.thinking:
        assert codec.rewrites and "drops the <think> block" in codec.rewrites and "a user message" in codec.rewrites
        assert "<think>" in caplog.text and "not token-exact" in caplog.text
    else:
        assert codec.rewrites is None and "not token-exact" not in caplog.text


# ---------------------------------------------------------------------------------------------- cannot be exact
def test_a_user_note_after_thinking_is_the_one_documented_difference(monkeypatch):
    """The reasoning template drops earlier think blocks once a user message (here the env's note after an invalid
    action) follows them. The bridges keep the model's tokens: their sequence is the template's render with past
    thinking kept, not the inference render, and the turn boundaries stay exact."""
    fam = FAMILIES["reasoning"]
    tok = build_tokenizer(fam)
    texts = actions(fam, malformed=True)
    messages, tools, _ = conversation(texts)
    assert [m["role"] for m in messages].count("user") == 2  # the question and the env's note
    for ids, mask in (trl_sequence(tok, texts, monkeypatch), verl_sequence(tok, texts)):
        problems = check_fidelity(tok, messages, tools, ids, mask)
        assert problems and any("turn 3: the context" in p for p in problems)
        assert all("spans" not in p for p in problems)  # the turn boundaries did not move
        assert check_fidelity(tok, messages, tools, ids, mask, keep_past_thinking=True) == []


# ---------------------------------------------------------------------------------------------- mutations
MUTATED_FAMILIES = ["chatml-hermes", "llama3.1"]


@pytest.mark.parametrize("name", MUTATED_FAMILIES)
def test_merging_consecutive_tool_turns_is_caught_in_every_bridge(name, monkeypatch):
    import agents.integrations.chat as chat_module
    import agents.integrations.skyrl as skyrl_module
    import agents.integrations.trl as trl_module
    from agents.policies import hf_policy

    fam = FAMILIES[name]
    tok = build_tokenizer(fam)
    texts = actions(fam)
    messages, tools, _ = conversation(texts)

    def merged_reply(info, seen, action):
        assistant, new = chat_module.env_reply(info, seen, action)
        return assistant, merge_tool_turns(new)

    with monkeypatch.context() as m:
        m.setattr(trl_module, "env_reply", merged_reply)
        m.setattr(trajectory_module, "env_reply", merged_reply)
        hermes = skyrl_module._hermes
        m.setattr(skyrl_module, "_hermes", lambda msgs, tools: hermes(merge_tool_turns(msgs), tools))
        for ids, mask in (trl_sequence(tok, texts, m), verl_sequence(tok, texts)):
            assert any("turn 2: the context" in p for p in check_fidelity(tok, messages, tools, ids, mask))
        ids, mask = skyrl_sequence(tok, texts)
        assert any(
            "turn 2: the context" in p for p in check_fidelity(tok, messages, tools, ids, mask, native_tools=False)
        )

    # the learner's boundary is between its prompt and its turn: a prompt without the generation prompt
    real = hf_policy.format_chat
    monkeypatch.setattr(
        hf_policy, "format_chat", lambda t, msgs, tl, add_generation_prompt=True: real(t, msgs, tl, False)
    )
    problems = learner_problems(tok, texts, messages)
    assert any("learner turn 1: turn 1: the context" in p for p in problems)


def test_stripping_the_think_block_is_caught(monkeypatch):
    import agents.integrations.trl as trl_module

    fam = FAMILIES["reasoning"]
    tok = build_tokenizer(fam)
    texts = actions(fam)
    messages, tools, _ = conversation(texts)
    add = trl_module._Row.add

    def add_stripped(self, ids, logps, trained):
        if trained:
            ids = strip_think(tok, list(ids))
            logps = [-0.5] * len(ids)
        add(self, ids, logps, trained)

    with monkeypatch.context() as m:
        m.setattr(trl_module._Row, "add", add_stripped)
        problems = check_fidelity(tok, messages, tools, *trl_sequence(tok, texts, m))
    assert any("turn 1: the trained tokens" in p and "<think>" in p for p in problems)
    problems = check_fidelity(tok, messages, tools, *verl_sequence(tok, texts, mutate_tokens=strip_think))
    assert any("turn 1: the trained tokens" in p and "<think>" in p for p in problems)
