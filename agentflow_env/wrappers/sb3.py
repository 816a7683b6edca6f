"""Stable-Baselines3 bridge: numeric observations and ``Discrete`` actions over an AgentFlow env.

``CandidateActionWrapper`` lets a classic RL agent choose among K candidate planner actions that a
proposer writes each turn; ``ToolChoiceWrapper`` lets it choose which tool to call (or to answer).
Both observe :class:`TurnFeatures`, a fixed-size float vector in [0, 1]. SB3 itself is not imported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agentflow_env.tools.base import normalize_tool_name
from agentflow_env.turn.parsing import parse_action

__all__ = ["CandidateActionWrapper", "Proposer", "ToolChoiceWrapper", "TurnFeatures"]

# (observation, info, rng) -> candidate actions (strings)
Proposer = Callable[[dict[str, str], dict[str, Any], np.random.Generator], Sequence[str]]

_NUM_RE = re.compile(r"\d+(?:\.\d+)?")
_WORD_RE = re.compile(r"[a-z0-9]+")


def _overlap(a: list[str], b: list[str]) -> float:
    """Share of ``a``'s items (as a multiset) found in ``b``."""
    if not a:
        return 0.0
    pool: dict[str, int] = {}
    for x in b:
        pool[x] = pool.get(x, 0) + 1
    hit = 0
    for x in a:
        if pool.get(x, 0) > 0:
            pool[x] -= 1
            hit += 1
    return hit / len(a)


class TurnFeatures:
    """Numeric features of one turn: the episode's state plus, optionally, each candidate action.

    Episode features (6): turn progress, turns left, steps so far, share of failed steps, whether the
    last step worked, whether memory is empty. Candidate features (8 each): is a final answer, names a
    known tool, has a command, was already run, its earlier run worked, the answer appears in memory,
    share of its numbers found in the question, share of its words found in the question.
    """

    EPISODE_DIM = 6
    CANDIDATE_DIM = 8

    def __init__(self, tool_names: Sequence[str], max_turns: int):
        self.tool_keys = {normalize_tool_name(t) for t in tool_names}
        self.max_turns = max(int(max_turns), 1)

    def episode(self, info: dict[str, Any]) -> np.ndarray:
        steps = info.get("memory_steps") or []
        failed = sum(1 for s in steps if not s.get("ok", True))
        turn = int(info.get("turn", 0))
        return np.array(
            [
                min(turn / self.max_turns, 1.0),
                min(int(info.get("turns_left", 0)) / self.max_turns, 1.0),
                min(len(steps) / self.max_turns, 1.0),
                failed / len(steps) if steps else 0.0,
                float(bool(steps) and steps[-1].get("ok", False)),
                float(not steps),
            ],
            dtype=np.float32,
        )

    def candidate(self, action: str, obs: dict[str, str], info: dict[str, Any]) -> np.ndarray:
        parsed = parse_action(action)
        steps = info.get("memory_steps") or []
        command = parsed.command.strip()
        runs = [s for s in steps if command and s.get("command", "").strip() == command]
        question = obs.get("question", "")
        text = parsed.final_answer if parsed.is_final else command
        text = text or ""
        grounded = bool(parsed.is_final and text.strip() and any(text.strip() in s.get("command", "") for s in steps))
        return np.array(
            [
                float(parsed.is_final),
                float(normalize_tool_name(parsed.tool_name) in self.tool_keys) if parsed.tool_name else 0.0,
                float(bool(command)),
                float(bool(runs)),
                float(any(s.get("ok", False) for s in runs)),
                float(grounded),
                _overlap(_NUM_RE.findall(text), _NUM_RE.findall(question)),
                _overlap(_WORD_RE.findall(text.lower()), _WORD_RE.findall(question.lower())),
            ],
            dtype=np.float32,
        )


class _FeatureWrapper(gym.Wrapper):
    def __init__(self, env: gym.Env, dim: int):
        super().__init__(env)
        base = env.unwrapped
        self.features = TurnFeatures(getattr(base, "tool_names", []), getattr(base, "max_turns", 10))
        self.observation_space = spaces.Box(0.0, 1.0, shape=(dim,), dtype=np.float32)
        self._obs: dict[str, str] = {}
        self._info: dict[str, Any] = {}


class CandidateActionWrapper(_FeatureWrapper):
    """``Discrete(k)``: pick one of ``k`` candidate actions written by ``proposer`` each turn.

    Candidates are shuffled with the env's RNG, so an index carries no meaning of its own; short
    lists are padded with a copy of their first action. The chosen text goes to ``env.step``.
    """

    def __init__(self, env: gym.Env, proposer: Proposer, k: int = 4, shuffle: bool = True):
        if k < 2:
            raise ValueError(f"k={k}: give at least 2 candidates per turn")
        super().__init__(env, TurnFeatures.EPISODE_DIM + k * TurnFeatures.CANDIDATE_DIM)
        self.proposer, self.k, self.shuffle = proposer, k, shuffle
        self.action_space = spaces.Discrete(k)
        self.candidates: list[str] = []

    def _features(self) -> np.ndarray:
        cands = list(self.proposer(self._obs, self._info, self.np_random))[: self.k]
        if not cands:
            cands = ["Final Answer: unknown"]
        cands += [cands[0]] * (self.k - len(cands))
        if self.shuffle:
            cands = [cands[i] for i in self.np_random.permutation(self.k)]
        self.candidates = cands
        parts = [self.features.episode(self._info)]
        parts += [self.features.candidate(c, self._obs, self._info) for c in cands]
        return np.concatenate(parts)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        self._obs, self._info = self.env.reset(**kwargs)
        return self._features(), self._info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        text = self.candidates[int(action)]
        self._obs, reward, terminated, truncated, self._info = self.env.step(text)
        self._info["action_text"] = text
        return self._features(), float(reward), terminated, truncated, self._info


class ToolChoiceWrapper(_FeatureWrapper):
    """``Discrete(n_tools + 1)``: call tool ``i`` with ``command_fn(obs, tool_name)``, or (last) answer with
    ``answer_fn(obs)``."""

    def __init__(
        self, env: gym.Env, command_fn: Callable[[dict[str, str], str], str], answer_fn: Callable[[dict[str, str]], str]
    ):
        super().__init__(env, TurnFeatures.EPISODE_DIM)
        self.tool_names = list(getattr(env.unwrapped, "tool_names", []))
        self.command_fn, self.answer_fn = command_fn, answer_fn
        self.action_space = spaces.Discrete(len(self.tool_names) + 1)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        self._obs, self._info = self.env.reset(**kwargs)
        return self.features.episode(self._info), self._info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = int(action)
        if a == len(self.tool_names):
            text = f"Final Answer: {self.answer_fn(self._obs)}"
        else:
            tool = self.tool_names[a]
            text = f"Sub-Goal: use {tool}\nTool Name: {tool}\nCommand: {self.command_fn(self._obs, tool)}"
        self._obs, reward, terminated, truncated, self._info = self.env.step(text)
        self._info["action_text"] = text
        return self.features.episode(self._info), float(reward), terminated, truncated, self._info
