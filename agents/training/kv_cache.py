"""The key/value cache across transformers versions, shared by the learner's forward and the HF sampler.

Recent transformers name the forward() keyword and the output field ``cache``; older ones ``past_key_values``.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["cache_kwarg", "output_cache"]

_CACHE_KWARG: dict[type, str] = {}


def cache_kwarg(model: Any) -> str:
    """The forward() keyword of the key/value cache: ``cache`` in recent transformers, else ``past_key_values``."""
    cls = type(model.get_base_model() if hasattr(model, "get_base_model") else model)
    if cls not in _CACHE_KWARG:
        _CACHE_KWARG[cls] = "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"
    return _CACHE_KWARG[cls]


def output_cache(out: Any) -> Any:
    """The key/value cache a forward returned."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values
