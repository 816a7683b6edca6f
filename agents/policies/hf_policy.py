"""The trainable planner: a Hugging Face causal LM that acts on ``obs["prompt"]`` and returns token ids and log-probs.

The token maths it shares with training (padding, :func:`~agents.lm.sequence_logprobs`) is in :mod:`agents.lm`.

Log-prob convention (read this before computing PPO ratios): ``PolicySample.logprobs`` are the
log-probabilities of the sampled tokens under the model's *raw* next-token distribution, i.e.
``log_softmax(logits)`` at temperature 1 with no top-p cut, whatever ``SamplingParams`` the
tokens were drawn with. That is exactly what ``sequence_logprobs(model, ...)`` returns with its
default ``temperature=1.0``, so ``exp(new - old)`` is a ratio of like with like. A learner that
wants the tempered behaviour distribution instead passes ``temperature=sample.temperature`` to
``sequence_logprobs`` for both the old and the new policy (and sets ``logprob_source="forward"``
here with ``logprob_temperature``), never mixing the two.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentflow_env.engines.base import SamplingParams
from agentflow_env.engines.transformers_engine import stop_criteria
from agentflow_env.error import ConfigError, DependencyNotInstalled
from agents.lm import model_device, pad_left, sequence_logprobs
from agents.policies.policy import Observation

__all__ = [
    "HFPlanner",
    "PolicySample",
    "SamplingParams",
    "format_chat",
    "format_prompt",
]

logger = logging.getLogger(__name__)

_OMITTED = "[... older memory steps omitted to fit the context ...]\n"


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise DependencyNotInstalled("torch", "train") from exc
    return torch


@dataclass
class PolicySample:
    """One planner turn as the learner needs it.

    ``logprobs[i]`` is ``log pi(response_ids[i] | prompt_ids + response_ids[:i])`` under the raw
    (temperature 1, no top-p) distribution unless ``logprob_temperature`` says otherwise.
    ``response_ids`` end with the EOS token when ``finished`` (the model chose to stop), so the
    learner also trains the decision to stop; ``text`` is the decoded response without special tokens.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    text: str
    finished: bool = True
    prompt_truncated: bool = False
    temperature: float = 1.0
    logprob_temperature: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def format_prompt(tokenizer: Any, prompt: str) -> str:
    """The planner prompt as the model sees it: one user message through the tokenizer's chat template.

    A tokenizer without a chat template gets the bare prompt followed by a blank line; SFT and
    generation both go through this function, so training and acting always agree.
    """
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
    return prompt + "\n\n"


def format_chat(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    add_generation_prompt: bool = True,
) -> str:
    """A (tool-calling) chat as the model sees it: with ``tools`` (OpenAI function schemas), the template's own
    tools section (``apply_chat_template(..., tools=...)``) when the template knows tools, else the Hermes chat of
    :func:`~agentflow_env.engines.openai_wire.fallback_chat` through the template (as ``agentflow-env serve``
    renders it); a tokenizer without a template gets the chat as ``role: content`` blocks."""
    from agentflow_env.engines.openai_wire import _template_knows_tools, fallback_chat

    if tools is not None and _template_knows_tools(tokenizer):
        return str(
            tokenizer.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt
            )
        )
    chat: list[dict[str, Any]] = fallback_chat(messages, tools) if tools is not None else messages
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=add_generation_prompt))
    from agentflow_env.engines import prompt_text

    return prompt_text(chat) + ("\n\nassistant: " if add_generation_prompt else "")


@dataclass
class _Encoded:
    ids: list[int]
    truncated: bool


@dataclass(eq=False, repr=False)
class HFPlanner:
    """A planner policy over an in-process Hugging Face causal LM (the trainable policy of Flow-GRPO).

    ``act(observations)`` returns one action string per observation with a single batched
    ``generate`` call (left padding); ``act_with_samples`` also returns token ids and log-probs
    (see the module docstring for the log-prob convention). ``sampling`` is applied for real:
    temperature 0 is greedy, otherwise temperature and top-p, and nothing from the model's own
    ``generation_config`` (top-k, repetition penalty, ...) sneaks in. ``seed`` in ``sampling``
    makes calls reproducible without touching the global RNG.

    Prompts longer than ``max_prompt_tokens`` are shortened by dropping the *oldest* part of the
    memory section (the question, tool cards and format stay); if that is not enough, tokens are
    cut from the left as a last resort. ``batch_size`` caps the rows of one generate call
    (``None``: all observations at once).

    ``tool_calling``: the planner calls tools natively. Each turn's prompt is the tool-calling chat that
    ``LLMPlanner`` sends (``agents.policies.llm_planner``: the system prompt, then the question, the memory so
    far and the turns left), rendered with the env's tools as OpenAI function schemas by :func:`format_chat` (the
    model's own template with ``tools=`` when it knows tools); the model answers with Hermes ``<tool_call>``
    blocks, or plain content as the final answer (play the env in tool mode: ``reset(options={"tool_calling": True})``).
    The tools come from the observation's tool cards (``agentflow_env.turn.tool_calls.schemas_from_cards``).
    """

    model: Any
    tokenizer: Any
    sampling: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=1.0, max_tokens=256))
    max_prompt_tokens: int = 4096
    device: Any = None
    batch_size: int | None = None
    logprob_source: str = "generate"
    logprob_temperature: float = 1.0
    tool_calling: bool = False

    def __post_init__(self) -> None:
        if self.logprob_source not in ("generate", "forward"):
            raise ConfigError(f"logprob_source={self.logprob_source!r}; choose 'generate' or 'forward'")
        if self.logprob_source == "generate" and self.logprob_temperature != 1.0:
            raise ConfigError("logprob_temperature != 1 needs logprob_source='forward'")
        if self.max_prompt_tokens < 16:
            raise ConfigError(f"max_prompt_tokens={self.max_prompt_tokens} is too small; use at least 16")
        if self.sampling.max_tokens < 1:
            raise ConfigError(f"sampling.max_tokens must be at least 1, got {self.sampling.max_tokens}")
        if self.sampling.temperature < 0 or not 0 < self.sampling.top_p <= 1:
            raise ConfigError("sampling needs temperature >= 0 and 0 < top_p <= 1")
        if self.device is not None:
            self.model.to(self.device)
        if self.tokenizer.pad_token_id is None and self.tokenizer.eos_token_id is None:
            raise ConfigError("the tokenizer has neither a pad nor an EOS token; set tokenizer.pad_token")
        self._calls = 0

    def __repr__(self) -> str:
        name = getattr(getattr(self.model, "config", None), "_name_or_path", "") or type(self.model).__name__
        return f"HFPlanner(model={name!r}, sampling={self.sampling}, max_prompt_tokens={self.max_prompt_tokens})"

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_pretrained(cls, path: str | Path, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> HFPlanner:
        """Load a model and tokenizer saved with ``save_pretrained`` (a local folder or a hub id)."""
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise DependencyNotInstalled("transformers", "train") from exc
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model_kwargs = {"dtype": dtype} if dtype is not None else {}
        model = AutoModelForCausalLM.from_pretrained(str(path), **model_kwargs)
        model.eval()
        return cls(model, tokenizer, device=device, **kwargs)

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    @property
    def eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id if getattr(self.model, "generation_config", None) else None
        found = [ids] if isinstance(ids, int) else list(ids or [])
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in found:
            found.append(int(self.tokenizer.eos_token_id))
        return found

    # ------------------------------------------------------------------ policy API
    def act(self, observations: Sequence[Observation]) -> list[str]:
        """One action per observation (one batched generate call per ``batch_size`` rows)."""
        return [s.text for s in self._run(observations, with_logprobs=False)]

    def act_with_samples(self, observations: Sequence[Observation]) -> list[PolicySample]:
        """Like :meth:`act`, with prompt/response token ids and per-token log-probs per observation."""
        return self._run(observations, with_logprobs=True)

    def encode_prompt(self, obs: Observation | str) -> tuple[list[int], bool]:
        """Token ids of one observation's prompt (chat template applied) and whether it was shortened."""
        enc = self._encode(obs)
        return enc.ids, enc.truncated

    # ------------------------------------------------------------------ internals
    def _encode_text(self, prompt: str, tools: list[dict[str, Any]] | None = None) -> list[int]:
        if tools is not None:  # tool calling: ``prompt`` is the user message of the tool-calling chat
            from agents.policies.llm_planner import tool_system_prompt

            chat = [{"role": "system", "content": tool_system_prompt()}, {"role": "user", "content": prompt}]
            text = format_chat(self.tokenizer, chat, tools)
        else:
            text = format_prompt(self.tokenizer, prompt)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _encode(self, obs: Observation | str) -> _Encoded:
        tools = None
        if self.tool_calling and not isinstance(obs, str):
            from agents.policies.llm_planner import card_schemas, tool_user_content

            prompt, tools = tool_user_content(obs), card_schemas(obs)
        else:
            prompt = obs if isinstance(obs, str) else str(obs["prompt"])
        ids = self._encode_text(prompt, tools)
        limit = self.max_prompt_tokens
        if len(ids) <= limit:
            return _Encoded(ids, False)
        memory = "" if isinstance(obs, str) else str(obs.get("memory", ""))
        if memory and memory in prompt:
            head, _, tail = prompt.partition(memory)
            # cut points: the start of each memory step (or of each line when steps are not marked);
            # binary search for the earliest cut that fits, so the newest steps are kept
            cuts = [m.start() for m in re.finditer(r"^Step \d+", memory, re.MULTILINE)][1:]
            cuts = cuts or [m.end() for m in re.finditer(r"\n", memory)]
            cuts.append(len(memory))
            lo, hi = 0, len(cuts) - 1
            best = self._encode_text(head + _OMITTED + tail, tools)
            while lo <= hi:
                mid = (lo + hi) // 2
                trial = self._encode_text(head + _OMITTED + memory[cuts[mid] :] + tail, tools)
                if len(trial) <= limit:
                    best, hi = trial, mid - 1
                else:
                    lo = mid + 1
            ids = best
        if len(ids) > limit:
            logger.warning("prompt still has %d tokens after dropping memory; keeping the last %d", len(ids), limit)
            ids = ids[-limit:]
        return _Encoded(ids, True)

    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        torch = _torch()
        was_training = bool(getattr(self.model, "training", False))
        self.model.eval()
        seed = self.sampling.seed
        try:
            with torch.no_grad():
                if seed is None:
                    yield
                else:
                    with torch.random.fork_rng(devices=[]):
                        torch.manual_seed(int(seed) + self._calls)
                        yield
        finally:
            self._calls += 1
            if was_training:
                self.model.train()

    def _generation_kwargs(self, with_logprobs: bool) -> dict[str, Any]:
        from transformers import GenerationConfig

        s = self.sampling
        greedy = s.temperature == 0
        config = GenerationConfig(
            do_sample=not greedy,
            temperature=1.0 if greedy else float(s.temperature),
            top_p=1.0 if greedy else float(s.top_p),
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            num_beams=1,
            max_new_tokens=int(s.max_tokens),
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
            output_logits=with_logprobs and self.logprob_source == "generate",
        )
        if not greedy:
            # explicit neutral values: unset ones would be filled from the model's generation_config
            config.update(top_k=0, typical_p=1.0, min_p=None)
        return {"generation_config": config}

    def _run(self, observations: Sequence[Observation], with_logprobs: bool) -> list[PolicySample]:
        observations = list(observations)
        if not observations:
            return []
        for i, obs in enumerate(observations):
            if not isinstance(obs, Mapping) or "prompt" not in obs:
                raise ValueError(f"observation {i} has no 'prompt'; pass the env's observation dicts")
        encoded = [self._encode(obs) for obs in observations]
        # similar lengths share a batch, so left padding wastes little
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        step = self.batch_size or len(order)
        results: list[PolicySample | None] = [None] * len(encoded)
        with self._inference():
            for start in range(0, len(order), step):
                chunk = order[start : start + step]
                for i, sample in zip(chunk, self._generate([encoded[i] for i in chunk], with_logprobs)):
                    results[i] = sample
        return [r for r in results if r is not None]

    def _generate(self, encoded: list[_Encoded], with_logprobs: bool) -> list[PolicySample]:
        torch = _torch()
        device = model_device(self.model)
        ids, mask = pad_left([e.ids for e in encoded], self.pad_id)
        kwargs = self._generation_kwargs(with_logprobs)
        if self.sampling.stop:  # matched in the completion only (generate's stop_strings also match the prompt's end)
            kwargs["stopping_criteria"] = stop_criteria(self.tokenizer, self.sampling.stop, ids.shape[1])
        out = self.model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), **kwargs)
        new_tokens = out.sequences[:, ids.shape[1] :].cpu()
        eos = set(self.eos_ids)
        responses: list[list[int]] = []
        finished: list[bool] = []
        for row in new_tokens.tolist():
            cut = next((k for k, t in enumerate(row) if t in eos), None)
            if cut is not None:
                row = row[: cut + 1]
            elif self.sampling.stop:
                # a row ended by a stop string is padded (not EOS-terminated) after it
                while row and row[-1] == self.pad_id:
                    row = row[:-1]
            responses.append(row)
            finished.append(cut is not None)
        logprobs: list[list[float]] = [[] for _ in encoded]
        if with_logprobs and self.logprob_source == "generate":
            steps = torch.stack([step_logits.float() for step_logits in out.logits], dim=1).cpu()
            for b, resp in enumerate(responses):
                if resp:
                    lp = torch.log_softmax(steps[b, : len(resp)], dim=-1)
                    logprobs[b] = lp.gather(-1, torch.tensor(resp).unsqueeze(-1)).squeeze(-1).tolist()
        elif with_logprobs:
            recomputed = sequence_logprobs(
                self.model, [e.ids for e in encoded], responses, self.pad_id, temperature=self.logprob_temperature
            )
            logprobs = [t.float().cpu().tolist() for t in recomputed]
        samples = []
        for e, resp, fin, lp in zip(encoded, responses, finished, logprobs):
            text = self.tokenizer.decode(resp, skip_special_tokens=True)
            cut_text = self._cut_stop(text)
            samples.append(
                PolicySample(
                    prompt_ids=e.ids,
                    response_ids=resp,
                    logprobs=lp,
                    text=cut_text,
                    finished=fin or cut_text != text,
                    prompt_truncated=e.truncated,
                    temperature=float(self.sampling.temperature),
                    logprob_temperature=float(self.logprob_temperature),
                )
            )
        return samples

    def _cut_stop(self, text: str) -> str:
        cuts = [text.find(s) for s in self.sampling.stop if s and s in text]
        return text[: min(cuts)] if cuts else text
