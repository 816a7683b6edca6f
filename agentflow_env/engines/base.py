"""The engine protocol: batched text generation behind one interface, whatever the backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Union, runtime_checkable

# A prompt is either raw text or a chat (a list of {"role", "content"} messages).
Message = dict[str, str]
Prompt = Union[str, list[Message]]


@dataclass
class SamplingParams:
    """Sampling settings every backend must honour (temperature 0 means greedy)."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    n: int = 1
    # a structured-output request (OpenAI's ``response_format``, e.g. a JSON schema); sent by the
    # OpenAI-compatible engine, ignored by engines without structured output (the caller validates replies)
    response_format: dict[str, Any] | None = None


@runtime_checkable
class Engine(Protocol):
    """``generate(prompts, sampling) -> completions``, one completion per prompt (batched)."""

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingParams | None = None) -> list[str]: ...


def as_chat(prompt: Prompt) -> list[Message]:
    """Turn a bare string prompt into a one-message chat."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return list(prompt)


def prompt_text(prompt: Prompt) -> str:
    """A prompt as plain text: the string itself, or a chat's contents as ``role: content`` blocks."""
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(f"{m.get('role', 'user')}: {m.get('content') or ''}" for m in prompt)
