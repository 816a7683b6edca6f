"""The turn machinery behind ``AgentFlowEnv.step``: reading an action, tool calls, memory, prompts, turn rewards."""
