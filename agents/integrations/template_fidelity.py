"""Token fidelity of a training bridge: are the ids it hands its trainer the ids the inference chat template renders?

A bridge (TRL, SkyRL, verl, the learner's rollouts) builds each episode's token sequence turn by turn: the model's
tokens as sampled, the env's replies as the template renders them after those tokens. A serving engine instead
renders the whole conversation from its messages every turn. :func:`check_fidelity` compares the two, turn by turn:

- before each trained span (an assistant turn), the sequence must equal the template's render of the conversation
  up to that turn with the generation prompt (what an inference server feeds the model for that turn);
- each trained span must be the assistant message as the template renders it, ending where the template ends the
  turn (the end-of-turn token is trained, what the template adds after it is not);
- the whole sequence must be the render of the whole conversation (bar whitespace the template adds after the
  final end-of-turn, which a model never generates).

The conversation is the env's ``info["messages"]`` as an OpenAI server receives it: tool calls structured, their
arguments parsed into objects (:func:`inference_messages`, as vLLM hands them to the template). ``tools`` go to the
template as ``tools=`` when it knows tools (``native_tools=None``), else in the Hermes system message of
:func:`~agentflow_env.engines.openai_wire.fallback_chat`, as ``agentflow-env serve`` renders them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["check_fidelity", "inference_messages", "render_reference", "trained_spans"]


def inference_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as a chat template receives them from an OpenAI server: tool-call arguments as objects."""
    out = []
    for message in messages:
        m = dict(message)
        if m.get("tool_calls"):
            calls = []
            for call in m["tool_calls"]:
                fn = dict(call.get("function") or {})
                if isinstance(fn.get("arguments"), str):
                    try:
                        fn["arguments"] = json.loads(fn["arguments"])
                    except ValueError:
                        pass
                calls.append({**call, "function": fn})
            m["tool_calls"] = calls
        out.append(m)
    return out


def render_reference(
    tokenizer: Any,
    messages: Sequence[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    add_generation_prompt: bool,
    native_tools: bool | None = None,
    **template_kwargs: Any,
) -> list[int]:
    """The token ids the inference template renders for ``messages`` (whole text, tokenised once)."""
    from agentflow_env.engines.openai_wire import _template_knows_tools, fallback_chat

    chat = inference_messages(messages)
    native = _template_knows_tools(tokenizer) if native_tools is None else native_tools
    kwargs = dict(template_kwargs)
    if tools is not None and native:
        kwargs["tools"] = tools
    elif tools is not None:
        chat = fallback_chat(chat, tools)
    text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def trained_spans(mask: Sequence[int]) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of 1s in ``mask``."""
    spans, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def _diff(tokenizer: Any, what: str, got: Sequence[int], want: Sequence[int]) -> str:
    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    lo = max(0, k - 4)
    return (
        f"{what}: token {k} of {len(got)} (template: {len(want)}) differs; the bridge has "
        f"{tokenizer.decode(list(got[lo : k + 8]))!r}, the template {tokenizer.decode(list(want[lo : k + 8]))!r}"
    )


def check_fidelity(
    tokenizer: Any,
    messages: Sequence[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    ids: Sequence[int],
    mask: Sequence[int],
    *,
    native_tools: bool | None = None,
    **template_kwargs: Any,
) -> list[str]:
    """What differs between a bridge's sequence (``ids``: prompt and completion; ``mask``: 1 on trained tokens) and
    the inference template's render of ``messages`` (see the module docstring); empty when they agree."""
    ids, mask = list(ids), list(mask)
    if len(ids) != len(mask):
        return [f"{len(ids)} ids but {len(mask)} mask values"]

    def render(chat: Sequence[dict[str, Any]], generation: bool) -> list[int]:
        return render_reference(tokenizer, chat, tools, generation, native_tools, **template_kwargs)

    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    spans = trained_spans(mask)
    problems = []
    if len(spans) != len(turns):
        problems.append(f"{len(spans)} trained spans for {len(turns)} assistant turns (a turn boundary moved)")
    for k, ((start, end), at) in enumerate(zip(spans, turns), 1):
        context = render(messages[:at], True)
        if ids[:start] != context:
            problems.append(_diff(tokenizer, f"turn {k}: the context the model continued", ids[:start], context))
        turn = render(messages[: at + 1], False)
        if ids[start:end] != turn[start:end]:
            problems.append(_diff(tokenizer, f"turn {k}: the trained tokens", ids[:end], turn[:end]))
    whole = render(messages, False)
    if ids != whole[: len(ids)] or tokenizer.decode(whole[len(ids) :]).strip():
        problems.append(_diff(tokenizer, "the whole sequence", ids, whole))
    return problems
