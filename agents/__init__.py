"""Planner policies, rollouts, SFT warm-start and the Flow-GRPO learner, in rooms:

- ``agents.policies``: baselines, scripted, LLM and Hugging Face planners, the policy registry;
- ``agents.training``: the Flow-GRPO learner, its config and backends, rollouts, SFT, the train command;
- ``agents.integrations``: bridges to TRL, SkyRL and verl;
- ``agents.tiny_lm``: the tiny offline LM; ``agents.sb3_baseline``: the Stable-Baselines3 PPO baseline.

The name ``agents`` is shared with the openai-agents wheel, which installs a top-level ``agents`` package
too. ``__agentflow_env__`` marks this one; importing it when the other wheel's files sit in the same folder
fails here with a message that says what to do (``agentflow-env`` checks the marker before its commands).
"""

from agents._clash import check_no_foreign_agents

__agentflow_env__ = True

check_no_foreign_agents(__file__)

from agents.policies.policy import Policy, as_obs_list  # noqa: E402  (after the clash check: a mixed folder fails first)

__all__ = ["Policy", "as_obs_list"]
