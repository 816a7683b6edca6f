"""A multi-turn env episode as one growing chat: the first user message is the env's planner
prompt; after each planner turn, a user message carries what that turn added to memory (the tool's
result, or what was wrong with the action). The chat stacks (TRL, SkyRL, verl) generate each turn
with the whole conversation as context, so this is the view they train on.

With ``tool_calling`` the chat is the env's own ``info["messages"]`` instead (system, the question, the
planner's replies with Hermes ``<tool_call>`` blocks, ``tool`` results), rendered with the env's tools: through
the tokenizer's template when it knows tools (``apply_chat_template(..., tools=...)``, as verl's
``ToolAgentLoop`` does), else the Hermes fallback of :func:`agentflow_env.engines.openai_wire.fallback_chat`.

The conversation grows token by token: the model's tokens are kept as sampled and each env reply is the text the
template adds after them. A template that rewrites earlier turns as the chat grows (Qwen3-style templates drop the
``<think>`` block of assistant turns before the latest user message) cannot be matched that way; the codec finds
out at start-up (:func:`history_rewrites`), logs a warning naming the difference, keeps the model's tokens and
measures the reply after a fixed base turn instead (see docs/tool-calling.md).

Flow-GRPO as the paper writes it (and :mod:`agents.training.flow_grpo`) instead re-renders the planner
prompt every turn, so turn t's context is the current memory, not the chat so far. Both train
every planner turn with the trajectory's outcome; only the context of later turns differs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from agentflow_env.error import ConfigError
from agents.policies.hf_policy import format_chat

__all__ = ["ChatCodec", "env_reply", "first_prompts", "history_rewrites", "step_message", "warn_inexact"]

logger = logging.getLogger(__name__)


def first_prompts(env: Any, num_tasks: int | None = None) -> Iterator[tuple[int, str, str]]:
    """``(index, first planner prompt, task id)`` of the first ``num_tasks`` tasks of ``env``'s split:
    the rows every bridge's dataset is built from."""
    n = len(env.unwrapped.tasks)
    for index in range(n if num_tasks is None else min(n, num_tasks)):
        obs, info = env.reset(options={"index": index})
        yield index, str(obs["prompt"]), str(info["task_id"])


def step_message(info: dict[str, Any], turns_left: int | None = None) -> str:
    """The user message after a planner turn: the newest memory step, as the planner reads it next."""
    steps = info.get("memory_steps") or []
    if not steps:
        text = "(nothing was added to memory)"
    else:
        step = steps[-1]
        fields = [
            ("Tool", step.get("tool") or step.get("tool_name")),
            ("Sub-Goal", step.get("sub_goal")),
            ("Command", step.get("command")),
            ("Result", step.get("result")),
        ]
        error = step.get("error")
        if error and error not in str(step.get("result") or ""):
            fields.append(("Error", error))
        text = "\n".join(f"{name}: {value}" for name, value in fields if value not in (None, ""))
    left = info.get("turns_left") if turns_left is None else turns_left
    suffix = f"\n\nTurns left: {left}." if left is not None else ""
    return f"Step {len(steps)} result:\n{text}{suffix}"


def env_reply(info: dict[str, Any], seen: int, action: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A tool-calling turn from the env's ``info["messages"]`` (``seen`` of them known before the step): the
    assistant message as the model wrote it (its exact text, so its tokens are kept) and the env's reply
    messages after it (``tool`` results, or a ``user`` note after an invalid action)."""
    new = list(info.get("messages") or [])[seen:]
    return {"role": "assistant", "content": action}, new[1:]


class ChatCodec:
    """Token ids of the first prompt and of each env reply, through the tokenizer's chat template.

    A reply's ids are the text the template adds after the assistant's action (its end-of-turn,
    the user message, the next assistant header), so the conversation's ids equal what the template
    renders, while the model's own tokens are never re-tokenised. ``tools`` (OpenAI function schemas,
    the env's ``info["tools"]``) render a tool-calling chat (see the module docstring).
    """

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]] | None = None):
        self.tokenizer = tokenizer
        self.templated = bool(getattr(tokenizer, "chat_template", None))
        self.tools = tools
        template = getattr(tokenizer, "chat_template", None)
        self.template_knows_tools = isinstance(template, str) and "tools" in template
        eos = tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        #: what the template changes in earlier turns as the chat grows (None: nothing); said once at start-up
        self.rewrites = history_rewrites(self) if self.templated else None
        if self.rewrites:
            name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
            warn_inexact(f"the chat template of {name}", self.rewrites + _KEPT)

    def _render(self, messages: list[dict[str, Any]]) -> str:
        if self.tools is None and not self.templated:
            from agentflow_env.engines import prompt_text

            return prompt_text(messages) + "\n\nassistant: "
        return format_chat(self.tokenizer, messages, self.tools)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def start(self, prompt: str) -> list[int]:
        if not self.templated:
            return self._encode(prompt + "\n\n")
        return self._encode(self._render([{"role": "user", "content": prompt}]))

    def start_messages(self, messages: list[dict[str, Any]]) -> list[int]:
        """The first prompt's ids from a chat (a tool-calling episode's system and user messages)."""
        return self._encode(self._render(messages))

    def reply(self, messages: list[dict[str, str]], message: str, ended_with_eos: bool) -> list[int]:
        return self.reply_messages(messages, [{"role": "user", "content": message}], ended_with_eos)

    def reply_messages(
        self, messages: list[dict[str, Any]], new: list[dict[str, Any]], ended_with_eos: bool
    ) -> list[int]:
        """The ids the template adds after the assistant's last message (``messages[-1]``) for ``new``."""
        if not self.templated and self.tools is None:
            return self._encode("\n\n" + "\n\n".join(str(m["content"]) for m in new) + "\n\n")
        before = self._render(messages[:-1]) + messages[-1]["content"]
        after = self._render([*messages, *new])
        if after.startswith(before):
            delta = after[len(before) :]
        else:  # the template rewrote an earlier turn (said at start-up): what it adds after a fixed base turn
            delta = self._fixed_base_delta(new)
        eos_text = self.tokenizer.eos_token or ""
        if ended_with_eos and eos_text and delta.startswith(eos_text):
            delta = delta[len(eos_text) :]  # the model already produced the end-of-turn token
        return self._encode(delta)

    def _fixed_base_delta(self, new: list[dict[str, Any]]) -> str:
        """The text the template adds after an assistant turn for ``new``, measured after a fixed two-message
        chat (SkyRL's fixed-base approach), so no rewrite of the real history can move the boundary."""
        base = [{"role": "user", "content": "base question"}, {"role": "assistant", "content": "base answer"}]
        before = self._render(base[:-1]) + base[-1]["content"]
        after = self._render([*base, *new])
        if not after.startswith(before):
            raise ConfigError(
                "the tokenizer's chat template renders an assistant turn differently once a message follows it, so "
                "the env's reply cannot be appended token by token; use a template that keeps earlier turns"
            )
        return after[len(before) :]


_KEPT = (
    "; the bridge keeps every turn's tokens as the model produced them (token in, token out), so later turns "
    "are trained on a context that still holds them, which a server re-rendering the chat from messages would "
    "not show the model (docs/tool-calling.md, template fidelity)"
)
_PROBE_THINKING = "probe reasoning 7"
_WARNED: set[str] = set()
_WARN_LOCK = threading.Lock()


def warn_inexact(what: str, difference: str) -> None:
    """Log once per process that ``what`` cannot hand the trainer exactly the inference template's tokens."""
    message = f"{what} is not token-exact with the inference chat template: {difference}"
    with _WARN_LOCK:
        if message in _WARNED:
            return
        _WARNED.add(message)
    logger.warning(message)


def history_rewrites(codec: ChatCodec) -> str | None:
    """What ``codec``'s chat template changes in an earlier assistant turn once the chat grows (a tool result or
    a user message after it), or ``None`` when it renders earlier turns unchanged: found by rendering a probe
    chat whose assistant turn holds a ``<think>`` block (Qwen3-style templates drop it after a new user query)."""
    reply = f"<think>\n{_PROBE_THINKING}\n</think>\n\nprobe answer"
    chat = [{"role": "user", "content": "probe question"}, {"role": "assistant", "content": reply}]
    found = []
    for follow, what in (
        ({"role": "tool", "tool_call_id": "call_0", "content": "probe result"}, "a tool result"),
        ({"role": "user", "content": "probe note"}, "a user message"),
    ):
        try:
            before = codec._render(chat[:-1]) + reply
            after = codec._render([*chat, follow])
        except Exception:  # a template that refuses the probe (e.g. a tool result without a call) says nothing
            continue
        if after.startswith(before):
            continue
        if _PROBE_THINKING not in after:
            found.append(f"it drops the <think> block of earlier assistant turns once {what} follows them")
        else:
            found.append(f"it re-renders earlier assistant turns once {what} follows them")
    return "; ".join(found) or None
