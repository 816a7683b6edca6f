"""Env wrappers: the Stable-Baselines3 bridge (numeric observations, discrete actions)."""

from agentflow_env.wrappers.sb3 import CandidateActionWrapper, ToolChoiceWrapper, TurnFeatures

__all__ = ["CandidateActionWrapper", "ToolChoiceWrapper", "TurnFeatures"]
