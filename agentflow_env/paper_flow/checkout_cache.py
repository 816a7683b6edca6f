"""What is read from an AgentFlow checkout is read once per process: parsed files, and the prompt sources and
scoring scripts built from them, kept while every file a build parsed keeps its size and mtime.

A run builds one env per episode slot, and each env reads the checkout's prompts; parsing the checkout's Python
files in every env was a fifth of an eval's CPU. A lookup re-checks only the files the build parsed (a stat
each), plus the folders whose listing it depended on (their mtime changes when a file is added or removed).
"""

from __future__ import annotations

import ast
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["cached_build", "parse_cached"]

T = TypeVar("T")

Stamp = tuple[str, int, int]  # resolved path, mtime in ns, size

_LOCK = threading.Lock()
_TREES: dict[Stamp, ast.Module] = {}
_BUILT: dict[tuple[Any, ...], tuple[Any, tuple[Stamp, ...]]] = {}
_READING = threading.local()  # the files parsed by the build running on this thread


def _stamp(path: Path) -> Stamp:
    st = path.stat()  # FileNotFoundError goes to the caller
    return str(path.resolve()), st.st_mtime_ns, st.st_size


def _unchanged(stamp: Stamp) -> bool:
    """The file at a stamp's (resolved) path still has its mtime and size: one ``stat``, not a resolve of every
    folder on the path again (that cost a paper-flow env build a third of its CPU)."""
    try:
        st = os.stat(stamp[0])
    except OSError:
        return False
    return (st.st_mtime_ns, st.st_size) == stamp[1:]


def parse_cached(path: Path) -> ast.Module:
    """``ast.parse`` of ``path``, shared while the file is unchanged (callers must not modify the tree)."""
    key = _stamp(path)
    reading = getattr(_READING, "files", None)
    if reading is not None:
        reading.append(key)
    tree = _TREES.get(key)
    if tree is None:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        with _LOCK:
            _TREES[key] = tree
    return tree


def cached_build(key: tuple[Any, ...], build: Callable[[], T], folders: Sequence[Path] = ()) -> T:
    """``build()``'s result, made once per ``key`` while every file it parsed (through :func:`parse_cached`) and
    every folder of ``folders`` is unchanged; the result must be read-only (every caller shares it)."""
    with _LOCK:
        entry = _BUILT.get(key)
    if entry is not None and all(_unchanged(s) for s in entry[1]):
        return entry[0]  # type: ignore[no-any-return]
    outer = getattr(_READING, "files", None)
    _READING.files = []
    try:
        made = build()
        files = [*_READING.files, *(_stamp(f) for f in folders)]
    finally:
        if outer is not None:
            outer.extend(_READING.files)
        _READING.files = outer
    with _LOCK:
        _BUILT[key] = (made, tuple(dict.fromkeys(files)))
    return made
