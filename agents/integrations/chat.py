"""A multi-turn env episode as one growing chat: the first user message is the env's planner
prompt; after each planner turn, a user message carries what that turn added to memory (the tool's
result, or what was wrong with the action). The chat stacks (TRL, SkyRL, verl) generate each turn
with the whole conversation as context, so this is the view they train on.

With ``tool_calling`` the chat is the env's own ``info["messages"]`` instead (system, the question, the
planner's replies with Hermes ``<tool_call>`` blocks, ``tool`` results), rendered with the env's tools: through
the tokenizer's template when it knows tools (``apply_chat_template(..., tools=...)``, as verl's
``ToolAgentLoop`` does), else the Hermes fallback of :func:`agentflow_env.engines.openai_wire.fallback_chat`.

Flow-GRPO as the paper writes it (and :mod:`agents.training.flow_grpo`) instead re-renders the planner
prompt every turn, so turn t's context is the current memory, not the chat so far. Both train
every planner turn with the trajectory's outcome; only the context of later turns differs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentflow_env.error import ConfigError

__all__ = ["ChatCodec", "env_reply", "first_prompts", "step_message"]


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

    def _render(self, messages: list[dict[str, Any]]) -> str:
        if self.tools is not None:
            if self.template_knows_tools:
                return self.tokenizer.apply_chat_template(
                    messages, tools=self.tools, tokenize=False, add_generation_prompt=True
                )
            from agentflow_env.engines.openai_wire import fallback_chat

            messages = fallback_chat(messages, self.tools)
            if not self.templated:
                from agentflow_env.engines import prompt_text

                return prompt_text(messages) + "\n\nassistant: "
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

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
        if not after.startswith(before):
            raise ConfigError(
                "the tokenizer's chat template rewrites earlier turns (e.g. drops reasoning), so a multi-turn "
                "conversation cannot grow token by token; use a template that renders earlier turns unchanged"
            )
        delta = after[len(before) :]
        eos_text = self.tokenizer.eos_token or ""
        if ended_with_eos and eos_text and delta.startswith(eos_text):
            delta = delta[len(eos_text) :]  # the model already produced the end-of-turn token
        return self._encode(delta)
