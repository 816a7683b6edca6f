"""SkyRL-gym bridge: every ``agentflow/*`` id as a ``skyrl_gym`` text env (``BaseTextEnv``).

    import skyrl_gym
    from agents.integrations.skyrl import register_skyrl_envs

    register_skyrl_envs()                       # every registered agentflow/* id, same names
    env = skyrl_gym.make("agentflow/Gen-GameOf24-v2", env_config={"max_turns": 3},
                         extras={"task_id": "...", "split": "train"})
    messages, meta = env.init(prompt)           # the env's first planner prompt, as a chat
    out = env.step(llm_reply)                   # {"observations", "reward", "done", "metadata"}

SkyRL's generator keeps the conversation; each step's observation is one user message with what
the planner's turn added to memory (:func:`agents.integrations.chat.step_message`). The reward is the
env's verified outcome at the last step (0 before), as in the paper. ``build_skyrl_dataset`` writes
the rows SkyRL's trainer reads (``prompt``, ``env_class``, ``task_id``, ``split``).

``env_config={"tool_calling": True}`` (and ``build_skyrl_dataset(..., tool_calling=True)``) trains the native
tool-calling format: the chat starts with the env's system message, which lists its tools Hermes style (so
any chat template works, as SkyRL applies the template without ``tools=``), and the question; the model
replies with ``<tool_call>`` blocks, each step's observation is the ``<tool_response>`` user message, and
plain content without a call is the final answer.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import ConfigError, DependencyNotInstalled
from agentflow_env.registration import registered_ids
from agents.integrations.chat import first_prompts, step_message, warn_inexact

try:
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise DependencyNotInstalled("skyrl-gym", "skyrl") from exc

__all__ = ["AgentFlowSkyRLEnv", "build_skyrl_dataset", "register_skyrl_envs"]

#: why SkyRL's tool-calling tokens differ from a tools-aware template's (logged once when such an env starts)
SKYRL_TOOL_DIFFERENCE = (
    "SkyRL's generator applies the chat template without tools=, so the tools are listed Hermes style in the system "
    "message and tool results come as user messages of <tool_response> blocks; a template with its own tools "
    "section renders the system message (and, Llama 3.1 style, the tool role) differently at inference. Turn "
    "boundaries and the model's tokens are exact; a template without tools (ChatML) renders the same tokens"
)

#: ``env_config`` keys passed on to ``gymnasium.make``
_ENV_CONFIG_KEYS = (
    "max_turns",
    "num_tasks",
    "data_dir",
    "time_budget_s",
    "executor",
    "verifier",
    "generator",
    "engine",
    "mcp_servers",
)


class AgentFlowSkyRLEnv(BaseTextEnv):
    """One ``agentflow/*`` episode behind SkyRL-gym's ``init`` / ``step`` / ``close``.

    ``extras`` (the dataset row's fields) names the task: ``task_id`` (or ``index``) and ``split``.
    ``env_config`` may set the keys in ``_ENV_CONFIG_KEYS``.
    """

    def __init__(self, env_id: str, env_config: Any = None, extras: dict[str, Any] | None = None):
        super().__init__()
        extras = dict(extras or {})
        config = dict(env_config or {})
        kwargs = {k: config[k] for k in _ENV_CONFIG_KEYS if config.get(k) is not None}
        self.env_id = env_id
        self.env = gym.make(env_id, split=str(extras.get("split", "test")), **kwargs)
        self.max_turns = int(self.env.unwrapped.max_turns)
        self.task_id = extras.get("task_id")
        self.index = extras.get("index")
        self.seed = extras.get("seed")
        self.tool_calling = bool(config.get("tool_calling", False))
        if self.tool_calling and not hasattr(self.env.unwrapped, "tool_schemas"):
            self.env.close()
            raise ConfigError("tool_calling needs the env's own flow; the paper flow reads AgentFlow's text format")
        if self.tool_calling:
            warn_inexact("the SkyRL bridge (tool_calling)", SKYRL_TOOL_DIFFERENCE)
        self.info: dict[str, Any] = {}
        self._seen = 0

    def init(self, prompt: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        options: dict[str, Any] = {}
        if self.task_id is not None:
            options["task_id"] = str(self.task_id)
        elif self.index is not None:
            options["index"] = int(self.index)
        else:
            raise ConfigError("an agentflow SkyRL env needs extras with task_id or index (see build_skyrl_dataset)")
        options["tool_calling"] = self.tool_calling
        obs, info = self.env.reset(seed=self.seed, options=options)
        self.turns = 0
        self.info = info
        if self.tool_calling:
            self._seen = len(info["messages"])
            return _hermes(info["messages"], info["tools"]), {"task_id": info.get("task_id"), "tools": info["tools"]}
        return [{"role": "user", "content": obs["prompt"]}], {"task_id": info.get("task_id")}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        _, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.info = info
        done = bool(terminated or truncated)
        if done:
            observations = []
        elif self.tool_calling:  # the env's reply after the model's message, Hermes style
            new = list(info["messages"])[self._seen + 1 :]
            self._seen = len(info["messages"])
            observations = _hermes(new, None)
        else:
            observations = [{"role": "user", "content": step_message(info)}]
        metadata = {"turn": self.turns, "terminated": bool(terminated), "truncated": bool(truncated)}
        if done:
            metadata.update(answer=info.get("answer"), score=info.get("score"))
        return BaseTextEnvStepOutput(observations=observations, reward=float(reward), done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        return {"turns": self.turns, "score": float(self.info.get("score") or 0.0)}

    def close(self) -> None:
        self.env.close()


def _hermes(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[dict[str, str]]:
    from agentflow_env.engines.openai_wire import fallback_chat

    return fallback_chat(messages, tools or [])


def _creator(env_id: str) -> Any:
    def make(env_config: Any = None, extras: dict[str, Any] | None = None) -> AgentFlowSkyRLEnv:
        return AgentFlowSkyRLEnv(env_id, env_config=env_config, extras=extras)

    return make


def register_skyrl_envs(env_ids: list[str] | None = None) -> list[str]:
    """Register ``env_ids`` (default: every registered ``agentflow/*`` id) in ``skyrl_gym``; idempotent."""
    from skyrl_gym.envs.registration import register, registry

    done = []
    for env_id in env_ids or registered_ids():
        if env_id not in registry:
            register(id=env_id, entry_point=_creator(env_id))
        done.append(env_id)
    return done


def build_skyrl_dataset(
    env_id: str, split: str = "train", num_tasks: int | None = None, tool_calling: bool = False, **env_kwargs: Any
) -> list[dict]:
    """SkyRL training rows for ``env_id``: ``prompt`` (chat), ``env_class``, ``task_id``, ``split``.

    Write them with ``datasets.Dataset.from_list(rows).to_parquet(path)`` for SkyRL's trainer. With
    ``tool_calling`` the prompt is the tool-calling chat ``init`` starts (pair it with
    ``env_config={"tool_calling": True}``).
    """
    env = gym.make(env_id, split=split, **env_kwargs)
    try:
        rows = []
        for index, prompt, task_id in first_prompts(env, num_tasks):
            chat = [{"role": "user", "content": prompt}]
            if tool_calling:
                _, info = env.reset(options={"index": index, "tool_calling": True})
                chat = _hermes(info["messages"], info["tools"])
            rows.append({"prompt": chat, "env_class": env_id, "task_id": task_id, "split": split})
        return rows
    finally:
        env.close()
