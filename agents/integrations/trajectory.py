"""One env episode as one token sequence, without verl: the core of the verl bridge's trajectory mode.

:class:`~agents.integrations.verl_agent_loop.AgentFlowAgentLoop` (``emit="trajectory"``) plays its episodes with
:func:`play_trajectory`; keeping it free of verl lets the main test env check, token for token, what verl's
trainer receives (tests/integrations), while verl's own stage runs the loop through verl's machinery.

The sequence is the first prompt, then each planner turn's tokens as the model produced them (``mask`` 1) and the
env's reply as the chat template renders it after them (``mask`` 0): :class:`~agents.integrations.chat.ChatCodec`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agents.integrations.chat import ChatCodec, env_reply, step_message

__all__ = ["EnvTurn", "TokenTrajectory", "play_trajectory", "text_turns", "tool_call_turns"]

#: ``(action, info, done, ended_with_eos) -> the env reply's token ids`` (and the turn added to the chat)
EnvTurn = Callable[[str, dict, bool, bool], list[int]]
#: ``(context ids, max new tokens) -> (token ids, their log-probs or None)``
Generate = Callable[[list[int], int], Awaitable[tuple[list[int], list[float] | None]]]
#: ``(action) -> env.step(action)``, awaited (verl runs it in a worker thread)
Step = Callable[[str], Awaitable[tuple[Any, float, bool, bool, dict]]]


@dataclass
class TokenTrajectory:
    """What the trainer gets for one episode: ``prompt_ids`` then ``response_ids`` with ``mask`` and log-probs."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    reward: float = 0.0
    done: bool = False
    turns: int = 0


def text_turns(codec: ChatCodec, messages: list[dict[str, Any]]) -> EnvTurn:
    """The env's replies in the text format: a user message with the newest memory step."""

    def env_turn(action: str, info: dict, done: bool, eos: bool) -> list[int]:
        messages.append({"role": "assistant", "content": action})
        if done:
            return []
        message = step_message(info)
        reply = codec.reply(messages, message, ended_with_eos=eos)
        messages.append({"role": "user", "content": message})
        return reply

    return env_turn


def tool_call_turns(codec: ChatCodec, messages: list[dict[str, Any]]) -> EnvTurn:
    """The env's replies in the tool-calling format: its own ``info["messages"]`` after the model's turn."""
    seen = len(messages)

    def env_turn(action: str, info: dict, done: bool, eos: bool) -> list[int]:
        nonlocal seen
        assistant, new = env_reply(info, seen, action)
        seen = len(info["messages"])
        messages.append(assistant)
        if done:
            return []
        reply = codec.reply_messages(messages, new, ended_with_eos=eos)
        messages.extend(new)
        return reply

    return env_turn


async def play_trajectory(
    prompt_ids: list[int],
    generate: Generate,
    step: Step,
    decode: Callable[[list[int]], str],
    env_turn: EnvTurn,
    eos_ids: set[int],
    response_length: int,
    max_turns: int | None = None,
) -> TokenTrajectory:
    """Play until the episode ends, ``max_turns`` planner turns or ``response_length`` response tokens: each turn
    generates from the prompt plus everything so far, steps the env with the decoded action, and appends the
    env's reply (masked) unless the episode ended or the reply would not fit."""
    out = TokenTrajectory(prompt_ids=list(prompt_ids))
    while not out.done and (max_turns is None or out.turns < max_turns):
        room = response_length - len(out.response_ids)
        if room <= 0:
            break
        ids, logprobs = await generate(out.prompt_ids + out.response_ids, room)
        ids = list(ids)[:room]
        out.response_ids += ids
        out.mask += [1] * len(ids)
        out.logprobs += list(logprobs)[: len(ids)] if logprobs else [0.0] * len(ids)
        action = decode(ids)
        _, reward, terminated, truncated, info = await step(action)
        out.turns += 1
        out.done = bool(terminated or truncated)
        out.reward = float(reward)
        reply = env_turn(action, info, out.done, bool(ids) and ids[-1] in eos_ids)
        if out.done or len(out.response_ids) + len(reply) >= response_length:
            break
        out.response_ids += reply
        out.mask += [0] * len(reply)
        out.logprobs += [0.0] * len(reply)
    if not out.done:
        out.reward = 0.0
    return out
