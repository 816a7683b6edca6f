"""Planner policies, rollouts, SFT warm-start and the Flow-GRPO learner."""

from agents.policy import Policy, as_obs_list

__all__ = ["Policy", "as_obs_list"]
