"""What is read from an AgentFlow checkout is read once per process: parsed files and built prompt sources,
keyed by the file's (or the checkout's) path and the size and mtime of every file read.

A run builds one env per episode slot, and each env reads the checkout's prompts; parsing the checkout's Python
files in every env was a fifth of an eval's CPU. An edited file (another mtime or size) is read afresh.
"""

from __future__ import annotations

import ast
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["cached_build", "checkout_stamp", "parse_cached"]

T = TypeVar("T")

_LOCK = threading.Lock()
_TREES: dict[tuple[str, int, int], ast.Module] = {}
_BUILT: dict[tuple[Any, ...], Any] = {}


def _stamp(path: Path) -> tuple[str, int, int]:
    st = path.stat()  # FileNotFoundError goes to the caller
    return str(path.resolve()), st.st_mtime_ns, st.st_size


def parse_cached(path: Path) -> ast.Module:
    """``ast.parse`` of ``path``, shared while the file is unchanged (callers must not modify the tree)."""
    key = _stamp(path)
    tree = _TREES.get(key)
    if tree is None:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        with _LOCK:
            _TREES[key] = tree
    return tree


def checkout_stamp(root: Path) -> tuple[tuple[str, int, int], ...]:
    """Path, mtime and size of every ``.py`` file under ``root`` (a checkout's package folder)."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                found.append((os.path.join(folder, name), st.st_mtime_ns, st.st_size))
    return tuple(found)


def cached_build(key: tuple[Any, ...], build: Callable[[], T]) -> T:
    """``build()``'s result, made once per ``key`` (a key holds a checkout stamp: an edit makes a new one)."""
    with _LOCK:
        if key in _BUILT:
            return _BUILT[key]  # type: ignore[no-any-return]
    made = build()
    with _LOCK:
        return _BUILT.setdefault(key, made)  # type: ignore[no-any-return]
