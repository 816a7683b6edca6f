"""LLM engines: OpenAI-compatible HTTP, transformers and vLLM in-process, and a scripted engine.

``make_engine(spec)`` builds one from a spec string; backends import only when used (never torch here).

Spec grammar (``BACKEND:TARGET[?key=value&key=value...]``)::

    openai:MODEL[@BASE_URL]   OpenAI-compatible HTTP (vLLM serve, SGLang, OpenAI, Ollama).
                              BASE_URL defaults to $OPENAI_BASE_URL, else http://localhost:8000/v1;
                              the key is $OPENAI_API_KEY, else "EMPTY".
                              e.g. openai:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1
    hf:PATH_OR_ID             transformers in-process (alias: transformers:), e.g. hf:runs/tiny-lm;
                              hf:tiny (and vllm:tiny) is the project's tiny offline LM, found through the
                              ``agentflow_env.models`` entry points (a local folder of that name wins)
    vllm:MODEL                vLLM in-process (pip install 'agentflow-env[vllm]')
    scripted:FILE.json        replies from a JSON list (cycled) or a {regex: reply} object
    scripted:MODULE:ATTR      replies from a Python callable ``f(prompt) -> str`` (or an Engine factory)
    scripted:echo             replies with the last message of the prompt

The options after ``?`` go to the engine's constructor; values are parsed as JSON when they can be
(``?mode=completion&concurrency=16&timeout=30``, ``?batch_size=8&device=cpu``).
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING, Any

from agentflow_env.engines.base import Engine, Prompt, SamplingParams, as_chat, prompt_text
from agentflow_env.error import ConfigError

if TYPE_CHECKING:
    from agentflow_env.engines.openai_engine import OpenAIEngine
    from agentflow_env.engines.scripted import ScriptedEngine
    from agentflow_env.engines.server import EngineServer, HTTPFault
    from agentflow_env.engines.transformers_engine import TransformersEngine
    from agentflow_env.engines.vllm_engine import VLLMEngine

__all__ = [
    "BACKENDS",
    "Engine",
    "EngineServer",
    "HTTPFault",
    "OpenAIEngine",
    "Prompt",
    "SamplingParams",
    "ScriptedEngine",
    "TransformersEngine",
    "VLLMEngine",
    "as_chat",
    "make_engine",
    "parse_spec",
    "prompt_text",
    "resolve_model",
]

# backend prefix -> "module:class"; imported only when a spec names it
BACKENDS: dict[str, str] = {
    "openai": "agentflow_env.engines.openai_engine:OpenAIEngine",
    "hf": "agentflow_env.engines.transformers_engine:TransformersEngine",
    "transformers": "agentflow_env.engines.transformers_engine:TransformersEngine",
    "vllm": "agentflow_env.engines.vllm_engine:VLLMEngine",
    "scripted": "agentflow_env.engines.scripted:ScriptedEngine",
}

_LAZY = {
    "OpenAIEngine": "agentflow_env.engines.openai_engine",
    "TransformersEngine": "agentflow_env.engines.transformers_engine",
    "VLLMEngine": "agentflow_env.engines.vllm_engine",
    "ScriptedEngine": "agentflow_env.engines.scripted",
    "EngineServer": "agentflow_env.engines.server",
    "HTTPFault": "agentflow_env.engines.server",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agentflow_env.engines' has no attribute {name!r}")


def _option_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def parse_spec(spec: str) -> tuple[str, str, dict[str, Any]]:
    """``"backend:target?k=v"`` -> ``(backend, target, options)``; raises ``ConfigError`` when malformed."""
    backend, sep, rest = spec.strip().partition(":")
    backend = backend.strip().lower()
    if not sep or backend not in BACKENDS:
        raise ConfigError(
            f"engine spec {spec!r} has no known backend; write BACKEND:TARGET with BACKEND one of "
            f"{', '.join(sorted(BACKENDS))} (e.g. openai:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1)"
        )
    target, options = rest, {}
    if "?" in rest:
        target, _, query = rest.rpartition("?")
        for item in filter(None, query.split("&")):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise ConfigError(f"engine option {item!r} in {spec!r} is not key=value")
            options[key.strip()] = _option_value(value)
    target = target.strip()
    if not target:
        raise ConfigError(f"engine spec {spec!r} names no model/target after '{backend}:'")
    return backend, target, options


MODEL_ENTRY_POINT_GROUP = "agentflow_env.models"  # name -> callable(backend) returning a model folder
_MODEL_BACKENDS = ("hf", "transformers", "vllm")


def resolve_model(backend: str, target: str) -> str:
    """A named model (``tiny``) as its folder, through the ``agentflow_env.models`` entry points; other
    targets (paths, hub ids, a local folder that happens to carry the name) come back unchanged."""
    import os
    from importlib.metadata import entry_points

    if backend not in _MODEL_BACKENDS or "/" in target or os.path.exists(target):
        return target
    found = [ep for ep in entry_points(group=MODEL_ENTRY_POINT_GROUP) if ep.name == target]
    if found:
        return str(found[0].load()(backend))
    if target == "tiny":
        raise ConfigError(
            f"{backend}:tiny names the tiny offline LM, but no {MODEL_ENTRY_POINT_GROUP!r} entry point provides it; "
            "(re)install agentflow-env (pip install -e . in a clone), or pass the folder from `agentflow-env tiny-lm`"
        )
    return target


def make_engine(spec: str | Engine, **kwargs: Any) -> Engine:
    """Build an engine from a spec string (see the module docstring); an Engine passes through.

    ``kwargs`` are added to the options parsed from the spec (they win on conflicts).
    """
    if not isinstance(spec, str):
        if isinstance(spec, Engine):
            return spec
        raise ConfigError(f"engine must be a spec string or an object with generate(); got {type(spec).__name__}")
    backend, target, options = parse_spec(spec)
    target = resolve_model(backend, target)
    options.update(kwargs)
    module, _, cls_name = BACKENDS[backend].partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    engine = cls.from_spec(target, **options)
    if not kwargs and getattr(engine, "spec", None) is None:
        try:  # the spec rebuilds this engine in another process (training configs carry specs, not objects)
            engine.spec = spec
        except AttributeError:  # a class with __slots__ or a read-only property
            pass
    return engine
