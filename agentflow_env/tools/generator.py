"""The base generator tool: answers a sub-question with an LLM engine (AgentFlow's Base_Generator_Tool).

The engine is an object with ``generate`` or a spec string resolved lazily through ``make_engine``.
"""

from __future__ import annotations

import contextvars
import os
import threading
from typing import Any

from agentflow_env.engines.base import Engine, SamplingParams
from agentflow_env.engines.ledger import generate_as
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import ToolResult

__all__ = ["GENERATOR_ENV_VAR", "BaseGeneratorTool"]

GENERATOR_ENV_VAR = "AGENTFLOW_GENERATOR_ENGINE"

DEFAULT_SYSTEM_PROMPT = (
    "You are a careful assistant. Answer the request below directly and accurately. Reason step by step when "
    "it helps, keep the answer concise, and say so plainly when you do not know."
)


class BaseGeneratorTool(BaseTool):
    """Answers a question or sub-task in plain language with an LLM engine, from its own knowledge."""

    name = "Base_Generator_Tool"
    description = (
        "A general-purpose language model: answers a question or performs a text task (summarize, "
        "explain, reason step by step) from its own knowledge. It cannot browse or run code; put any "
        "context it needs into the command."
    )
    input_spec = "a self-contained question or instruction in plain language (include the context it needs)"
    examples = (
        "Summarize in one sentence: the Treaty of Westphalia ended the Thirty Years' War in 1648.",
        "What is the chemical symbol of tungsten?",
    )
    env_var = GENERATOR_ENV_VAR

    def __init__(
        self,
        engine: Engine | str | None = None,
        *,
        sampling: SamplingParams | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_chars: int = 4000,
        name: str | None = None,
        description: str | None = None,
        **engine_kwargs: Any,
    ):
        if name is not None:
            self.name = name
        self.ledger_name = self.name  # the tool its engine calls are counted under (see engines/ledger.py)
        if description is not None:
            self.description = description
        self.sampling = sampling if sampling is not None else SamplingParams(temperature=0.0, max_tokens=1024)
        self.system_prompt = system_prompt
        self.max_chars = max(80, int(max_chars))
        self._spec: Engine | str | None = engine
        self._engine_kwargs = engine_kwargs
        self._engine: Engine | None = None
        self._engine_error: str | None = None
        self._lock = threading.Lock()

    @property
    def engine(self) -> Engine | None:
        """The engine, built from its spec (or ``$AGENTFLOW_GENERATOR_ENGINE``) on first use; None if unset."""
        with self._lock:
            if self._engine is None and self._engine_error is None:
                spec = self._spec if self._spec is not None else os.environ.get(self.env_var) or None
                if spec is None:
                    return None
                try:
                    from agentflow_env.engines import make_engine

                    self._engine = make_engine(spec, **self._engine_kwargs)
                except Exception as exc:  # reported by run(), which never raises
                    self._engine_error = f"{type(exc).__name__}: {exc}"
            return self._engine

    def attach_engine(self, engine: Engine | str) -> bool:
        """Use ``engine`` when neither ``engine=`` nor ``$AGENTFLOW_GENERATOR_ENGINE`` gave one (the env's
        engine in its LLM modes, so the tool never runs engine-less there); True when it was attached."""
        with self._lock:
            if self._spec is not None or self._engine is not None or os.environ.get(self.env_var):
                return False
            self._spec = engine
            return True

    def _messages(self, command: str) -> list[dict[str, str]]:
        chat = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return [*chat, {"role": "user", "content": command}]

    def _run(self, command: str, timeout: float) -> ToolResult:
        engine = self.engine
        if engine is None:
            if self._engine_error:
                return ToolResult(
                    text=f"Error: {self.name} could not build its engine ({self._engine_error})",
                    ok=False,
                    error=self._engine_error,
                )
            msg = (
                f"Error: {self.name} has no engine. Pass engine= (an Engine object or a spec such as "
                f"'openai:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1') or set ${self.env_var}."
            )
            return ToolResult(text=msg, ok=False, error="no engine")
        query = command.strip()
        if not query:
            return ToolResult(
                text="Error: empty command; give the question or task to answer.", ok=False, error="empty command"
            )
        answer = self._generate(engine, query, timeout)
        if isinstance(answer, ToolResult):
            return answer
        answer = answer.strip()
        if not answer:
            return ToolResult(
                text="Error: the engine returned an empty answer; rephrase the request.", ok=False, error="empty answer"
            )
        if len(answer) > self.max_chars:
            notice = f"\n... [cut: answer trimmed to {self.max_chars} of {len(answer)} characters]"
            answer = answer[: max(0, self.max_chars - len(notice))].rstrip() + notice
        return ToolResult(text=answer, ok=True)

    def _generate(self, engine: Engine, query: str, timeout: float) -> str | ToolResult:
        """One engine call in a helper thread, so a hung backend costs ``timeout`` seconds, not the episode."""
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                prompts = [self._messages(query)]
                box["out"] = generate_as(engine, prompts, self.sampling, role="tools", name=self.ledger_name)
            except Exception as exc:  # handed back to the caller's thread
                box["exc"] = exc

        # the engine call is recorded in this episode's ledger (the helper thread runs in this context)
        context = contextvars.copy_context()
        worker = threading.Thread(target=context.run, args=(call,), name=f"{self.name}-generate", daemon=True)
        worker.start()
        worker.join(timeout if timeout and timeout > 0 else None)
        if worker.is_alive():
            return ToolResult(
                text=f"Error: the engine did not answer within {timeout:g} s; try a shorter request.",
                ok=False,
                error="timeout",
            )
        if "exc" in box:
            exc = box["exc"]
            return ToolResult(text=f"Error: the engine failed: {type(exc).__name__}: {exc}", ok=False, error=str(exc))
        out = box.get("out")
        if not isinstance(out, (list, tuple)) or len(out) != 1 or not isinstance(out[0], str):
            return ToolResult(
                text="Error: the engine must return one string per prompt.", ok=False, error="bad engine output"
            )
        return out[0]
