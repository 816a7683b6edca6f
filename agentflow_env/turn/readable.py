"""Any action object made safe to read: a plain copy the parsers can take, its text, or why it cannot be read.

``env.step`` must not raise whatever it is given: dicts nested thousands deep, ``str``/``dict`` subclasses
whose methods raise, objects whose ``__str__`` or ``__repr__`` raise, values JSON cannot hold. This module
never calls a method of the action's own classes: strings are copied with ``str.__str__``, dicts and lists
are walked with the base types' own methods, to at most :data:`MAX_DEPTH` levels.
"""

from __future__ import annotations

import json
import reprlib
from typing import Any

__all__ = ["MAX_DEPTH", "readable_action", "safe_repr"]

MAX_DEPTH = 64  # nesting levels of a message dict the env reads (an OpenAI message has 5)

_SCALARS = (bool, int, float, type(None))
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 200


class _Unreadable(ValueError):
    pass


def _plain(value: Any, depth: int) -> Any:
    """A copy of ``value`` made of exact JSON types (iterative over width, bounded in depth)."""
    if depth > MAX_DEPTH:
        raise _Unreadable(f"it is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        return str.__str__(value)
    if type(value) in _SCALARS:
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in dict.items(value):
            if not isinstance(key, str):
                raise _Unreadable(f"it has a key of type {type(key).__name__} (JSON keys are strings)")
            out[str.__str__(key)] = _plain(item, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        items = list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)
        return [_plain(item, depth + 1) for item in items]
    raise _Unreadable(f"it holds a value of type {type(value).__name__}, which JSON cannot hold")


def safe_repr(value: Any) -> str:
    """A short ``repr`` of anything; a placeholder when the object's own ``repr`` raises."""
    try:
        return _REPR.repr(value)
    except Exception:
        return f"<a {type(value).__name__} whose repr() raises>"


def readable_action(action: Any) -> tuple[Any, str, str | None]:
    """``(action to read, its text, problem)``.

    A ``str`` (or subclass) comes back as a plain ``str``; a ``dict`` (or subclass) as a plain JSON copy, with
    its JSON as the text; anything else as itself with a short ``repr`` (the parsers report its type). The
    problem is ``None``, or why the action cannot be read (the turn is spent and memory says so).
    """
    if type(action) is str:
        return action, action, None
    if isinstance(action, str):
        plain = str.__str__(action)
        return plain, plain, None
    if isinstance(action, dict):
        try:
            copy = _plain(action, 0)
            return copy, json.dumps(copy, ensure_ascii=False), None
        except (_Unreadable, RecursionError, ValueError) as exc:
            problem = f"the action dict cannot be read: {exc}; send a string or an OpenAI assistant message"
            return None, f"<an unreadable {type(action).__name__} action>", problem
    return action, safe_repr(action), None
