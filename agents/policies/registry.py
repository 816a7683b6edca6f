"""Policy specs -> planner policies: ``random``, ``scripted``, ``hf:PATH`` (``hf:tiny``: the tiny offline LM),
``engine:SPEC``, ``openai:...``, ``module:attr``.

Backends import only when their spec is used: ``random`` and ``scripted`` never load torch. ``module:attr``
imports MODULE from ``sys.path``; the ``agentflow-env`` command adds the current directory, as ``python -m`` does.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Iterable, Mapping
from typing import Any

from agentflow_env.error import ConfigError
from agents.policies.policy import Policy

__all__ = [
    "POLICY_SPECS",
    "TINY_MODEL",
    "is_env_specific",
    "make_policies",
    "make_policy",
    "policy_source",
    "tiny_model_path",
]

POLICY_SPECS = {
    "random[:SEED]": "uniformly random well-formed actions (agents.policies.baselines.RandomPlanner)",
    "scripted": "the env's scripted planner (agents.policies.scripted.scripted_planner_for)",
    "hf:PATH": "a Hugging Face checkpoint as planner (agents.policies.hf_policy.HFPlanner.from_pretrained); "
    "hf:tiny is the tiny offline LM (agentflow-env tiny-lm)",
    "engine:ENGINE_SPEC": "any engine as planner "
    "(agents.policies.llm_planner.LLMPlanner, agentflow_env.engines.make_engine)",
    "openai:MODEL[@URL]": "shorthand for engine:openai:MODEL[@URL] (likewise vllm:MODEL)",
    "module:attr": "your own policy: an object with act(), or a class/factory (called with env_id if it takes one); "
    "MODULE is imported from the current directory or PYTHONPATH",
}

TINY_MODEL = "tiny"  # hf:tiny / vllm:tiny / engine:hf:tiny name the tiny offline LM


def tiny_model_path(backend: str = "hf") -> str:
    """The tiny offline LM's folder (built and cached on first use); ``vllm`` gets the head shape vLLM takes.

    This is the ``tiny`` entry of the ``agentflow_env.models`` entry-point group, through which engine specs
    (``hf:tiny``, ``vllm:tiny``) find it without ``agentflow_env`` importing ``agents``.
    """
    from agents.tiny_lm import VLLM_MODEL_KWARGS, tiny_lm_path

    return str(tiny_lm_path(**(VLLM_MODEL_KWARGS if backend == "vllm" else {})))


_ENGINE_PREFIXES = ("openai:", "vllm:")


def is_env_specific(spec: str) -> bool:
    """Whether the spec builds a different policy per env id (so one instance cannot serve all envs):
    ``scripted``, and ``module:attr`` factories that take an ``env_id`` argument."""
    spec = spec.strip()
    if spec == "scripted":
        return True
    module_name, sep, attr = spec.partition(":")
    if not sep or spec.startswith(("random:", "hf:", "engine:", *_ENGINE_PREFIXES)):
        return False
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return callable(obj) and "env_id" in inspect.signature(obj).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return False  # make_policy reports the problem with a clear message


def make_policy(
    spec: str,
    env_id: str | None = None,
    sampling: Mapping[str, Any] | None = None,
    *,
    extra_body: Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
    tool_calling: bool = False,
) -> Policy:
    """Build the planner policy named by ``spec`` (see ``POLICY_SPECS``); ``env_id`` picks scripted planners.

    ``tool_calling``: the planner calls tools natively (:func:`_tool_calling`).

    ``sampling`` (temperature, top_p, max_tokens, seed, ...) goes to LLM-backed planners; so do
    ``extra_body`` (request fields such as the paper flow's ``frequency_penalty``) and ``system_prompt``
    (the paper flow's planner system prompt). Engine planners that cannot send ``extra_body`` are a
    :class:`ConfigError`; ``hf:`` planners apply neither and say so in a warning.
    """
    spec = spec.strip()
    if tool_calling:
        return _tool_calling(spec, env_id, sampling, extra_body, system_prompt)
    if not spec:
        raise ConfigError("empty policy spec; use one of: " + ", ".join(POLICY_SPECS))
    if spec == "random" or spec.startswith("random:"):
        return _random(spec)
    if spec == "scripted":
        return _scripted(env_id)
    if spec.startswith("hf:"):
        if extra_body or system_prompt:
            import logging

            logging.getLogger(__name__).warning(
                "%s: the hf: planner sends no system prompt and no %s; AgentFlow's planner does. Serve the "
                "checkpoint with vLLM and use openai:MODEL@URL to send them",
                spec,
                ", ".join(extra_body or {}) or "extra fields",
            )
        return _hf(spec[3:], sampling)
    if spec.startswith("engine:"):
        return _engine(spec[len("engine:") :], sampling, extra_body, system_prompt)
    if spec.startswith(_ENGINE_PREFIXES):
        return _engine(spec, sampling, extra_body, system_prompt)
    if ":" in spec:
        return _user(spec, env_id)
    raise ConfigError(f"unknown policy spec {spec!r}; use one of: " + ", ".join(POLICY_SPECS))


def make_policies(
    spec: str,
    env_ids: Iterable[str],
    sampling: Mapping[str, Any] | None = None,
    *,
    extra_body: Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
    tool_calling: bool = False,
) -> dict[str, Policy]:
    """One policy per env id; env-independent specs share a single instance, so batches can span envs.

    ``extra_body`` and ``system_prompt`` go to LLM-backed planners (see :func:`make_policy`).
    """
    ids = list(env_ids)
    kwargs: dict[str, Any] = {"extra_body": extra_body, "system_prompt": system_prompt, "tool_calling": tool_calling}
    if is_env_specific(spec):
        return {env_id: make_policy(spec, env_id, sampling, **kwargs) for env_id in ids}
    shared = make_policy(spec, None, sampling, **kwargs)
    return dict.fromkeys(ids, shared)


def _tool_calling(
    spec: str,
    env_id: str | None,
    sampling: Mapping[str, Any] | None,
    extra_body: Mapping[str, Any] | None,
    system_prompt: str | None,
) -> Policy:
    """The planner of ``spec`` calling tools natively: ``hf:`` renders the env's tools with the model's own chat
    template (``HFPlanner(tool_calling=True)``), engine planners send them as ``tools=`` (``LLMPlanner``),
    ``scripted`` emits its actions as Hermes calls, ``module:attr`` is used as it is (it writes its own calls)."""
    if spec.startswith("hf:"):
        policy = make_policy(spec, env_id, sampling)
        policy.tool_calling = True  # type: ignore[attr-defined]
        return policy
    if spec.startswith("engine:") or spec.startswith(_ENGINE_PREFIXES):
        from agents.policies.llm_planner import LLMPlanner

        engine = spec[len("engine:") :] if spec.startswith("engine:") else spec
        return LLMPlanner(
            engine, _sampling(sampling), system_prompt=system_prompt, extra_body=extra_body, tool_calling=True
        )
    if spec == "scripted":
        from agents.policies.tool_calling import ToolCalling

        return ToolCalling(make_policy(spec, env_id, sampling), format="hermes", final="content")
    if spec == "random" or spec.startswith("random:") or ":" not in spec:
        raise ConfigError(
            f"policy {spec!r} cannot call tools natively; --tool-calling takes hf:, engine:, openai:, vllm:, "
            "scripted or a module:attr policy that writes its own tool calls"
        )
    return make_policy(spec, env_id, sampling)


def _random(spec: str) -> Policy:
    from agents.policies.baselines import RandomPlanner

    _, _, seed = spec.partition(":")
    try:
        return RandomPlanner(seed=int(seed) if seed else 0)
    except ValueError:
        raise ConfigError(f"random policy seed must be an integer, got {seed!r} (e.g. random:3)") from None


def _scripted(env_id: str | None) -> Policy:
    if env_id is None:
        raise ConfigError("the scripted policy is per env: pass env_id (e.g. agentflow/Gen-GameOf24-v2)")
    name = env_id.split("/")[-1].rsplit("-v", 1)[0]
    try:
        scripted = importlib.import_module("agents.policies.scripted")
    except ImportError:
        scripted = None
    if scripted is not None and hasattr(scripted, "scripted_planner_for"):
        try:
            return scripted.scripted_planner_for(env_id)
        except (KeyError, ValueError, ConfigError):
            if name != "Gen-GameOf24":
                raise
    if name == "Gen-GameOf24":
        from agents.policies.baselines import ScriptedGameOf24Planner

        return ScriptedGameOf24Planner()
    raise ConfigError(f"no scripted planner for {env_id}; scripted planners exist for the generated families")


def _sampling(sampling: Mapping[str, Any] | None) -> Any:
    from agentflow_env.engines.base import SamplingParams

    known = {f for f in SamplingParams.__dataclass_fields__}
    return SamplingParams(**{k: v for k, v in (sampling or {}).items() if k in known})


def _hf(path: str, sampling: Mapping[str, Any] | None) -> Policy:
    if not path:
        raise ConfigError("hf: needs a path, e.g. hf:runs/sft-tiny or hf:tiny (the tiny offline LM)")
    if path == TINY_MODEL and not os.path.exists(path):  # a folder named "tiny" here would win
        path = tiny_model_path("hf")
    try:
        from agents.policies.hf_policy import HFPlanner
    except ImportError as exc:
        from agentflow_env.error import DependencyNotInstalled

        raise DependencyNotInstalled(exc.name or "transformers", "train") from exc
    # the protocol's sampling (greedy for the leaderboards) replaces the planner's training default
    return HFPlanner.from_pretrained(path, **({"sampling": _sampling(sampling)} if sampling else {}))


def _engine(
    engine_spec: str,
    sampling: Mapping[str, Any] | None,
    extra_body: Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
) -> Policy:
    from agents.policies.llm_planner import LLMPlanner

    return LLMPlanner(engine_spec, _sampling(sampling), system_prompt=system_prompt, extra_body=extra_body)


def _import_hint(spec: str, module_name: str, exc: ImportError) -> str:
    """Why ``module_name`` did not import, and the fix that fits where the user is."""
    import sys
    from pathlib import Path

    rel = module_name.replace(".", "/")
    here = Path.cwd()
    searched = {str(Path(p or ".").resolve()) for p in sys.path}
    if (here / f"{rel}.py").is_file() or (here / rel / "__init__.py").is_file():
        if str(here.resolve()) not in searched:
            fix = (
                f"{rel}.py is in the current folder, but the current folder is not on sys.path (the `pytest` "
                "console script does not add it; `python -m pytest` and `agentflow-env` do): add "
                '`pythonpath = ["."]` to your pytest config, or run `python -m pytest`'
            )
        else:
            fix = f"{rel}.py is in the current folder and on sys.path, so the import itself failed: {exc}"
    else:
        fix = (
            f"no {rel}.py in the current folder ({here.name}/): run from the folder that holds it, or add that "
            "folder to PYTHONPATH"
        )
    return (
        f"policy spec {spec!r}: cannot import module {module_name!r} ({exc}); MODULE:ATTR imports MODULE from the "
        f"current folder or PYTHONPATH. {fix}. Built-in specs are: {', '.join(POLICY_SPECS)}"
    )


def _user(spec: str, env_id: str | None) -> Policy:
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name != module_name and not module_name.startswith(f"{exc.name}."):
            raise  # the module exists but one of its own imports failed: show that error as it is
        raise ConfigError(_import_hint(spec, module_name, exc)) from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            where = getattr(importlib.import_module(module_name), "__file__", None) or module_name
            raise ConfigError(f"policy spec {spec!r}: {module_name} ({where}) has no attribute {attr!r}")
        obj = getattr(obj, part)
    if callable(getattr(obj, "act", None)) and not inspect.isclass(obj):
        return obj
    if not callable(obj):
        raise ConfigError(f"policy spec {spec!r} is neither a policy (with act()) nor a callable that makes one")
    try:
        takes_env_id = "env_id" in inspect.signature(obj).parameters
    except (TypeError, ValueError):
        takes_env_id = False
    policy = obj(env_id=env_id) if takes_env_id else obj()
    if not callable(getattr(policy, "act", None)):
        raise ConfigError(f"policy spec {spec!r} made {type(policy).__name__}, which has no act(observations)")
    return policy


def policy_source(spec: str) -> dict[str, str] | None:
    """A content fingerprint of the code or weights a policy spec names, so a stored reference says which
    version of a user's policy produced it: ``module:attr`` hashes the module's file, ``hf:PATH`` the files
    of a local checkpoint. Built-in planners and remote engines give ``None``. Never records a path.
    """
    import hashlib
    import importlib.util
    from pathlib import Path

    spec = spec.strip()
    if spec.startswith("hf:"):
        folder = Path(spec[3:])
        if not folder.is_dir():
            return None
        digest = hashlib.sha256()
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
        return {"checkpoint": folder.name, "sha256": digest.hexdigest()}
    module_name, sep, _ = spec.partition(":")
    if not sep or spec.startswith(("random:", "engine:", *_ENGINE_PREFIXES)):
        return None
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    origin = getattr(found, "origin", None)
    if not origin or not Path(origin).is_file():
        return None
    data = Path(origin).read_bytes()
    return {"module": module_name, "file": Path(origin).name, "sha256": hashlib.sha256(data).hexdigest()}
