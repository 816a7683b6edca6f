"""SkyRL-gym bridge: every ``agentflow/*`` id as a ``skyrl_gym`` text env (``BaseTextEnv``).

    import skyrl_gym
    from agents.integrations.skyrl import register_skyrl_envs

    register_skyrl_envs()                       # every registered agentflow/* id, same names
    env = skyrl_gym.make("agentflow/Gen-GameOf24-v1", env_config={"max_turns": 3},
                         extras={"task_id": "...", "split": "train"})
    messages, meta = env.init(prompt)           # the env's first planner prompt, as a chat
    out = env.step(llm_reply)                   # {"observations", "reward", "done", "metadata"}

SkyRL's generator keeps the conversation; each step's observation is one user message with what
the planner's turn added to memory (:func:`agents.integrations.chat.step_message`). The reward is the
env's verified outcome at the last step (0 before), as in the paper. ``build_skyrl_dataset`` writes
the rows SkyRL's trainer reads (``prompt``, ``env_class``, ``task_id``, ``split``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import ConfigError, DependencyNotInstalled
from agentflow_env.registration import registered_ids
from agents.integrations.chat import first_prompts, step_message

try:
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise DependencyNotInstalled("skyrl-gym", "skyrl") from exc

__all__ = ["AgentFlowSkyRLEnv", "build_skyrl_dataset", "register_skyrl_envs"]

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
        self.info: dict[str, Any] = {}

    def init(self, prompt: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        options: dict[str, Any] = {}
        if self.task_id is not None:
            options["task_id"] = str(self.task_id)
        elif self.index is not None:
            options["index"] = int(self.index)
        else:
            raise ConfigError("an agentflow SkyRL env needs extras with task_id or index (see build_skyrl_dataset)")
        obs, info = self.env.reset(seed=self.seed, options=options)
        self.turns = 0
        self.info = info
        return [{"role": "user", "content": obs["prompt"]}], {"task_id": info.get("task_id")}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        _, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.info = info
        done = bool(terminated or truncated)
        observations = [] if done else [{"role": "user", "content": step_message(info)}]
        metadata = {"turn": self.turns, "terminated": bool(terminated), "truncated": bool(truncated)}
        if done:
            metadata.update(answer=info.get("answer"), score=info.get("score"))
        return BaseTextEnvStepOutput(observations=observations, reward=float(reward), done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        return {"turns": self.turns, "score": float(self.info.get("score") or 0.0)}

    def close(self) -> None:
        self.env.close()


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
    env_id: str, split: str = "train", num_tasks: int | None = None, **env_kwargs: Any
) -> list[dict]:
    """SkyRL training rows for ``env_id``: ``prompt`` (chat), ``env_class``, ``task_id``, ``split``.

    Write them with ``datasets.Dataset.from_list(rows).to_parquet(path)`` for SkyRL's trainer.
    """
    env = gym.make(env_id, split=split, **env_kwargs)
    try:
        return [
            {"prompt": [{"role": "user", "content": prompt}], "env_class": env_id, "task_id": task_id, "split": split}
            for _, prompt, task_id in first_prompts(env, num_tasks)
        ]
    finally:
        env.close()
