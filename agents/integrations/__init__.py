"""Bridges that let other RL stacks train on the ``agentflow/*`` envs unchanged.

- :mod:`agents.integrations.chat` - a multi-turn episode as one growing chat (shared by the bridges);
- :mod:`agents.integrations.trl` - a ``rollout_func`` and reward function for TRL's ``GRPOTrainer``;
- :mod:`agents.integrations.skyrl` - every id as a ``skyrl_gym`` text env;
- :mod:`agents.integrations.trajectory` - one episode as one token sequence (verl's trajectory mode, verl-free);
- :mod:`agents.integrations.template_fidelity` - whether a bridge's tokens are the inference template's render.

Each imports its stack lazily, so importing this package pulls in none of them.
"""
