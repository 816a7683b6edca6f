"""LLM engines: OpenAI-compatible HTTP, transformers and vLLM in-process, and a scripted engine."""

from agentflow_env.engines.base import Engine, Prompt, SamplingParams, as_chat

__all__ = ["Engine", "Prompt", "SamplingParams", "as_chat"]
