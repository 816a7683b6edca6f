"""A multi-turn env episode as one growing chat: the first user message is the env's planner
prompt; after each planner turn, a user message carries what that turn added to memory (the tool's
result, or what was wrong with the action). The chat stacks (TRL, SkyRL, verl) generate each turn
with the whole conversation as context, so this is the view they train on.

Flow-GRPO as the paper writes it (and :mod:`agents.training.flow_grpo`) instead re-renders the planner
prompt every turn, so turn t's context is the current memory, not the chat so far. Both train
every planner turn with the trajectory's outcome; only the context of later turns differs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentflow_env.error import ConfigError

__all__ = ["ChatCodec", "first_prompts", "step_message"]


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


class ChatCodec:
    """Token ids of the first prompt and of each env reply, through the tokenizer's chat template.

    A reply's ids are the text the template adds after the assistant's action (its end-of-turn,
    the user message, the next assistant header), so the conversation's ids equal what the template
    renders, while the model's own tokens are never re-tokenised.
    """

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.templated = bool(getattr(tokenizer, "chat_template", None))
        eos = tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}

    def _render(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def start(self, prompt: str) -> list[int]:
        if not self.templated:
            return self._encode(prompt + "\n\n")
        return self._encode(self._render([{"role": "user", "content": prompt}]))

    def reply(self, messages: list[dict[str, str]], message: str, ended_with_eos: bool) -> list[int]:
        if not self.templated:
            return self._encode("\n\n" + message + "\n\n")
        before = self._render(messages[:-1]) + messages[-1]["content"]
        after = self._render([*messages, {"role": "user", "content": message}])
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
