"""The paper mode: AgentFlow's solver, module by module (query analysis, planner, executor, tool, verifier,
final output), as a Gymnasium env whose agent is the planner. See :class:`PaperFlowEnv`."""

from agentflow_env.paper_flow.env import (
    READING_PRESETS,
    TOOLBOX_PRESETS,
    PaperFlowEnv,
    planner_system_prompt,
    prompt_fingerprint,
    resolve_prompts,
)
from agentflow_env.paper_flow.memory import RESULT_LIMIT, ActionMemory, cut_result
from agentflow_env.paper_flow.sampling import SAMPLING_PRESETS, ModuleSampling, planner_sampling
from agentflow_env.paper_flow.templates import BuiltinPrompts, PromptSource
from agentflow_env.paper_flow.toolbox import STAND_INS, STATED_TOOLS

__all__ = [
    "READING_PRESETS",
    "RESULT_LIMIT",
    "SAMPLING_PRESETS",
    "STAND_INS",
    "STATED_TOOLS",
    "TOOLBOX_PRESETS",
    "ActionMemory",
    "BuiltinPrompts",
    "ModuleSampling",
    "PaperFlowEnv",
    "PromptSource",
    "cut_result",
    "planner_sampling",
    "planner_system_prompt",
    "prompt_fingerprint",
    "resolve_prompts",
]
