"""Tool-calling SFT: demonstrations whose actions are Hermes ``<tool_call>`` blocks and whose prompts are the
tool-calling chat :class:`~agents.policies.hf_policy.HFPlanner` renders with ``tool_calling=True`` (the env's tools
through the model's own chat template), so ``agentflow-env sft --tool-calling`` trains what the planner then sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentflow_env.turn.parsing import parse_action
from agentflow_env.turn.tool_calls import hermes_tool_calls
from agents.policies.policy import Observation, Policy, as_obs_list

__all__ = ["ObservationRecorder", "tokenize_tool_demonstrations", "tool_action", "well_formed"]


class ObservationRecorder:
    """Wraps a text-format planner and keeps each observation it answered, by prompt (a demonstration's prompt
    is the observation's, so the tool-calling prompt can be rendered from the whole observation later)."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.concurrent_act = bool(getattr(policy, "concurrent_act", False))
        self.seen: dict[str, dict[str, Any]] = {}

    def act(self, observations: Sequence[Observation] | Any) -> list[str]:
        obs = as_obs_list(observations)
        for o in obs:
            self.seen[str(o.get("prompt", ""))] = {k: str(v) for k, v in o.items()}
        return list(self.policy.act(obs))


def tool_action(action: str) -> str:
    """A text-format action as the Hermes call a tool-calling model writes (a final answer as plain content)."""
    from agents.policies.tool_calling import as_tool_call

    return str(as_tool_call(action, "hermes", final="content"))


def tokenize_tool_demonstrations(
    tokenizer: Any, demos: Sequence[Any], max_prompt_tokens: int = 4096
) -> list[tuple[list[int], list[int]]]:
    """``(prompt_ids, response_ids)`` per demonstration (with its ``observation``), encoded exactly as
    ``HFPlanner(tool_calling=True)`` acts; the response ends with the EOS token."""
    from agents.policies.hf_policy import HFPlanner
    from agents.training.backends import _NoModel

    encoder = HFPlanner(_NoModel(), tokenizer, max_prompt_tokens=max_prompt_tokens, tool_calling=True)
    eos = int(tokenizer.eos_token_id)
    out = []
    for d in demos:
        prompt_ids, _ = encoder.encode_prompt(d.observation)
        out.append((prompt_ids, list(tokenizer(d.action, add_special_tokens=False)["input_ids"]) + [eos]))
    return out


def well_formed(action: str, tool_calling: bool) -> bool:
    """Whether an action reads as a tool call or an answer: Hermes calls or plain content (tool calling), else the
    text format's fields."""
    if tool_calling:
        calls, content, problems = hermes_tool_calls(action)
        return not problems and bool(calls or content)
    parsed = parse_action(action)
    return not parsed.problems and (parsed.is_final or bool(parsed.tool_name))
