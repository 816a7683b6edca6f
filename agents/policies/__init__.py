"""Planners that act in the envs: random and scripted baselines, LLM and Hugging Face planners, and the registry
that builds one from a spec (``random``, ``scripted``, ``hf:PATH``, ``engine:SPEC``, ``module:factory``)."""

from agents.policies.policy import Policy, as_obs_list

__all__ = ["Policy", "as_obs_list"]
