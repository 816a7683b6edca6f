"""Training the planner: the Flow-GRPO learner (``flow_grpo``), its config, rollout backends and rollouts,
data parallelism, the SFT warm-start and the ``agentflow-env train`` command. Importing this package imports
no torch; the modules import it where they need it."""
