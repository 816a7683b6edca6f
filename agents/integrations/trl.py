"""TRL bridge: multi-turn ``agentflow/*`` episodes inside TRL's ``GRPOTrainer`` (``rollout_func``).

    from trl import GRPOConfig, GRPOTrainer
    from agents.integrations.trl import AgentFlowTRL

    bridge = AgentFlowTRL("agentflow/Gen-GameOf24-v2", env_kwargs={"max_turns": 3})
    trainer = GRPOTrainer(model=..., processing_class=tokenizer, args=GRPOConfig(...),
                          train_dataset=bridge.dataset(), reward_funcs=bridge.reward_func,
                          rollout_func=bridge.rollout_func)

Each dataset row is one task; TRL repeats it ``num_generations`` times, and ``rollout_func`` plays
every row's episode to the end with the trainer's own model, all rows batched per turn. The planner
writes the env's text format (``Tool Name: ... / Command: ...``), so no tool-calling chat template
is needed. One row's sample is the whole conversation (:mod:`agents.integrations.chat`): the first
planner prompt, then each planner turn's tokens (trained, ``env_mask`` 1) and the env's reply
tokens (not trained, ``env_mask`` 0). The reward is the env's verified outcome, so TRL's group
advantage reaches every planner turn of the trajectory: Flow-GRPO's broadcast.

``tool_calling=True`` trains the native tool-calling format instead: the conversation is the env's
``info["messages"]`` (system, the question, then the planner's Hermes ``<tool_call>`` replies and the
``tool`` results), rendered with the env's tool schemas through the tokenizer's chat template (or the Hermes
fallback where the template knows no tools); plain content without a call is the final answer.

Generated tokens are kept exactly as sampled (no re-tokenisation of the model's own text); only
the env's reply is tokenised, and the model conditions on exactly those ids when it continues.
An episode that would run past ``max_completion_length`` stops there and scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import ConfigError
from agents.integrations.chat import ChatCodec, env_reply, first_prompts, step_message

__all__ = ["AgentFlowTRL"]


class AgentFlowTRL:
    """A dataset, a ``rollout_func`` and a reward function for ``trl.GRPOTrainer`` on one env id."""

    def __init__(
        self,
        env_id: str,
        *,
        split: str = "train",
        env_kwargs: dict[str, Any] | None = None,
        num_tasks: int | None = None,
        max_new_tokens: int | None = None,
        seed: int = 0,
        tool_calling: bool = False,
    ):
        self.env_id = env_id
        self.tool_calling = bool(tool_calling)
        self.split = split
        self.env_kwargs = dict(env_kwargs or {})
        self.num_tasks = num_tasks
        self.max_new_tokens = max_new_tokens
        self.seed = int(seed)
        self._envs: list[Any] = []
        self._task_of_prompt: dict[str, str] = {}
        self._calls = 0
        self.last_turns: list[int] = []  # planner turns of each row of the latest rollout (for tests and logs)

    # ------------------------------------------------------------------ data
    def _env(self, i: int) -> Any:
        while len(self._envs) <= i:
            env = gym.make(self.env_id, split=self.split, **self.env_kwargs)
            if self.tool_calling and not hasattr(env.unwrapped, "tool_schemas"):
                env.close()
                raise ConfigError("tool_calling needs the env's own flow; the paper flow reads AgentFlow's text format")
            self._envs.append(env)
        return self._envs[i]

    def dataset(self) -> Any:
        """A ``datasets.Dataset`` with one row per task: ``prompt`` (the env's first planner prompt) and ``task_id``."""
        from datasets import Dataset

        rows = []
        env = self._env(0)
        for index, prompt, task_id in first_prompts(env, self.num_tasks):
            if self.tool_calling:  # the chat a tool-calling model starts from: system and question
                _, info = env.reset(options={"index": index})
                chat = [dict(m) for m in info["messages"][:2]]
                self._task_of_prompt[str(chat[-1]["content"])] = task_id
                rows.append({"prompt": chat, "task_id": task_id})
                continue
            self._task_of_prompt[prompt] = task_id
            rows.append({"prompt": prompt, "task_id": task_id})
        return Dataset.from_list(rows)

    def reward_func(
        self, completions: Sequence[Any], env_reward: Sequence[float] | None = None, **_: Any
    ) -> list[float]:
        """TRL reward function: the env's verified outcome of each row's episode (from ``rollout_func``)."""
        if env_reward is None:
            raise ConfigError("agentflow reward needs the rollout_func of the same AgentFlowTRL bridge")
        return [float(r) for r in env_reward]

    reward_func.__name__ = "agentflow_env_reward"  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ rollouts
    def rollout_func(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per prompt row with ``trainer``'s model; returns TRL's rollout dict."""
        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        args = trainer.args
        budget = int(getattr(args, "max_completion_length", 256) or 256)
        per_turn = int(self.max_new_tokens or budget)
        chat = ChatCodec(tokenizer, tools=self._env(0).unwrapped.tool_schemas if self.tool_calling else None)
        self._calls += 1

        rows = []
        for r, prompt in enumerate(prompts):
            text = _prompt_text(prompt)
            task_id = self._task_of_prompt.get(text)
            if task_id is None:
                raise ConfigError(
                    "a prompt row is not one of this bridge's dataset rows; build the dataset with .dataset()"
                )
            env = self._env(r)
            options = {"task_id": task_id, "tool_calling": self.tool_calling}
            obs, info = env.reset(seed=_seed(self.seed, self._calls, r), options=options)
            if self.tool_calling:
                messages = [dict(m) for m in info["messages"]]
                rows.append(_Row(env=env, messages=messages, prompt_ids=chat.start_messages(messages)))
                rows[-1].seen = len(messages)
                continue
            rows.append(
                _Row(
                    env=env, messages=[{"role": "user", "content": obs["prompt"]}], prompt_ids=chat.start(obs["prompt"])
                )
            )

        while True:
            active = [row for row in rows if not row.done]
            if not active:
                break
            room = [budget - len(row.completion_ids) for row in active]
            max_new = max(1, min(per_turn, max(room)))
            samples = _generate(
                model, tokenizer, [row.prompt_ids + row.completion_ids for row in active], args, max_new
            )
            for row, (ids, logps), left in zip(active, samples, room):
                if len(ids) > left:  # ran past the completion budget: the episode ends unfinished
                    ids, logps = ids[:left], logps[:left]
                    row.add(ids, logps, trained=True)
                    row.done = True
                    continue
                row.add(ids, logps, trained=True)
                action = tokenizer.decode(ids, skip_special_tokens=True)
                _, reward, terminated, truncated, info = row.env.step(action)
                row.turns += 1
                if terminated or truncated:
                    row.messages.append({"role": "assistant", "content": action})
                    row.reward, row.done = float(reward), True
                    continue
                ended = bool(ids) and ids[-1] in chat.eos_ids
                if self.tool_calling:
                    assistant, new = env_reply(info, row.seen, action)
                    row.seen = len(info["messages"])
                    row.messages.append(assistant)
                    reply = chat.reply_messages(row.messages, new, ended_with_eos=ended)
                    row.messages.extend(new)
                else:
                    message = step_message(info)
                    row.messages.append({"role": "assistant", "content": action})
                    reply = chat.reply(row.messages, message, ended_with_eos=ended)
                    row.messages.append({"role": "user", "content": message})
                if len(row.completion_ids) + len(reply) >= budget:
                    row.done = True  # no room for another turn
                    continue
                row.add(reply, [0.0] * len(reply), trained=False)

        self.last_turns = [row.turns for row in rows]
        return {
            "prompt_ids": [row.prompt_ids for row in rows],
            "completion_ids": [row.completion_ids for row in rows],
            "logprobs": [row.logprobs for row in rows],
            "env_mask": [row.env_mask for row in rows],
            "env_reward": [row.reward for row in rows],
            "num_turns": [row.turns for row in rows],
        }

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs = []


class _Row:
    def __init__(self, env: Any, messages: list[dict[str, str]], prompt_ids: list[int]):
        self.env = env
        self.messages = messages
        self.prompt_ids = prompt_ids
        self.completion_ids: list[int] = []
        self.logprobs: list[float] = []
        self.env_mask: list[int] = []
        self.reward = 0.0
        self.turns = 0
        self.done = False
        self.seen = 0  # tool calling: how many of the env's info["messages"] the chat holds

    def add(self, ids: Sequence[int], logps: Sequence[float], trained: bool) -> None:
        self.completion_ids.extend(int(i) for i in ids)
        self.logprobs.extend(float(x) for x in logps)
        self.env_mask.extend([1 if trained else 0] * len(ids))


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):  # conversational rows
        return str(prompt[-1].get("content", ""))
    raise ConfigError(f"unsupported prompt row type {type(prompt).__name__}; use AgentFlowTRL.dataset()")


def _seed(seed: int, call: int, row: int) -> int:
    return (seed * 1_000_003 + call * 10_007 + row) % (2**31)


def _generate(
    model: Any, tokenizer: Any, contexts: list[list[int]], args: Any, max_new: int
) -> list[tuple[list[int], list[float]]]:
    """Sample one continuation per context (left-padded batch); token ids and their sampling log-probs."""
    import torch

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(c) for c in contexts)
    ids = torch.full((len(contexts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, c in enumerate(contexts):
        ids[i, width - len(c) :] = torch.tensor(c, dtype=torch.long)
        mask[i, width - len(c) :] = 1
    device = next(model.parameters()).device
    temperature = float(getattr(args, "temperature", 1.0) or 1.0)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                do_sample=True,
                temperature=temperature,
                top_p=float(getattr(args, "top_p", 1.0) or 1.0),
                top_k=0,
                max_new_tokens=max_new,
                pad_token_id=pad,
                eos_token_id=tokenizer.eos_token_id,
                output_scores=True,
                return_dict_in_generate=True,
            )
            scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    finally:
        model.train(was_training)
    new = out.sequences[:, width:].tolist()
    eos = tokenizer.eos_token_id
    results = []
    for i, row in enumerate(new):
        n = len(row)
        if eos in row:
            n = row.index(eos) + 1  # keep the end-of-turn token: the model learns to stop
        results.append((row[:n], scores[i, :n].float().tolist()))
    return results
