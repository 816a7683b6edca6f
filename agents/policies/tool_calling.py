"""``ToolCalling``: any text-format planner as a tool-calling one (OpenAI messages or Hermes blocks); and
:func:`set_tool_mode`, which puts the env a tool-calling planner plays in tool mode.

It reads each of the wrapped planner's actions with the env's own parser and re-emits it as a native tool
call, so a scripted planner can drive an env through the tool-calling interface (and a test can check
the scores match), or a tool-calling model's demonstrations can be built from scripted ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.turn.parsing import parse_action
from agentflow_env.turn.tool_calls import FINAL_ANSWER, function_name
from agents.policies.policy import Observation, Policy, as_obs_list

__all__ = ["ToolCalling", "as_tool_call", "set_tool_mode"]

FORMATS = ("openai", "openai-json", "hermes")


def as_tool_call(action: str, fmt: str = "openai", final: str = "call", call_id: str = "call_0") -> Any:
    """A text-format action as a tool call: an assistant message dict (``openai``), its JSON
    (``openai-json``) or Hermes text (``hermes``). ``final="call"`` answers through ``final_answer``,
    ``final="content"`` as plain content. An action without a tool or answer passes through unchanged."""
    if fmt not in FORMATS:
        raise ConfigError(f"format={fmt!r}; choose one of {', '.join(FORMATS)}")
    parsed = parse_action(action)
    if parsed.is_final:
        name, args = FINAL_ANSWER, {"answer": parsed.final_answer}
    elif parsed.tool_name:
        name, args = function_name(parsed.tool_name), {"command": parsed.command}
    else:
        return action
    content = parsed.justification or None
    if fmt == "hermes":
        if name == FINAL_ANSWER and final == "content":
            return str(parsed.final_answer)
        block = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
        return f"{content}\n<tool_call>\n{block}\n</tool_call>" if content else f"<tool_call>\n{block}\n</tool_call>"
    if name == FINAL_ANSWER and final == "content":
        message: dict[str, Any] = {"role": "assistant", "content": parsed.final_answer}
    else:
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        message = {"role": "assistant", "content": content, "tool_calls": [call]}
    return json.dumps(message, ensure_ascii=False) if fmt == "openai-json" else message


class ToolCalling:
    """Wraps a text-format ``policy``; its actions come out as native tool calls in ``format``."""

    def __init__(self, policy: Policy, format: str = "openai", final: str = "call"):
        if format not in FORMATS:
            raise ConfigError(f"format={format!r}; choose one of {', '.join(FORMATS)}")
        if final not in ("call", "content"):
            raise ConfigError(f"final={final!r}; choose 'call' (final_answer) or 'content' (plain content)")
        self.policy, self.format, self.final = policy, format, final
        self.calls = 0

    def act(self, observations: Sequence[Observation] | Any) -> list[Any]:
        obs = as_obs_list(observations)
        actions = self.policy.act(obs)
        self.calls += 1
        return [as_tool_call(a, self.format, self.final, f"call_{self.calls}_{i}") for i, a in enumerate(actions)]


def set_tool_mode(env: Any) -> Any:
    """Put ``env`` (a gym env around an ``AgentFlowEnv``) in tool mode; a ConfigError for a flow without tools
    as function schemas (the paper flow reads AgentFlow's text format only)."""
    base = getattr(env, "unwrapped", env)
    if not hasattr(base, "tool_schemas"):
        env.close()
        raise ConfigError(
            f"tool calling needs the env's own flow ({type(base).__name__} has no tool schemas; the paper flow reads "
            "AgentFlow's text format)"
        )
    base.tool_calling = True
    return env
