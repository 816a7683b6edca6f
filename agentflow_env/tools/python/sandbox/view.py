"""The filesystem a sandboxed zygote sees: the interpreter, its standard library and the allowed packages, nothing else.

A view is a list of mount steps, turned into bubblewrap arguments or carried out by ``rootfs.py`` when bubblewrap
is missing. Not in it: the project checkout, its data and caches, HOME, the host's ``/tmp``, ``/var`` and ``/run``
(unix sockets), ``/etc`` beyond the dynamic linker's cache and the time zone, and every site-packages directory
(the project's editable install puts the checkout on ``sys.path`` through one).
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import re
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SANDBOX_DIR = "/opt/agentflow"  # the zygote's scripts, inside the sandbox
SITE_DIR = SANDBOX_DIR + "/site"  # the allowed packages, inside the sandbox
SCRIPTS = ("zygote.py", "wire.py", "nslib.py")
DEFAULT_PACKAGES = ("numpy", "sympy", "mpmath")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime")

Step = dict[str, Any]


def interpreter() -> str:
    """The real interpreter binary (a venv's ``python`` is a link to it; the venv itself stays outside)."""
    return os.path.realpath(sys.executable)


def with_dependencies(names: Sequence[str]) -> list[str]:
    """``names`` plus the top-level modules of the packages they require (not extras), transitively (worked out
    once per process and list of names: reading every installed package's metadata costs tens of ms, and each
    sandbox start asked again)."""
    return list(_with_dependencies(tuple(names)))


@functools.lru_cache(maxsize=32)
def _with_dependencies(names: tuple[str, ...]) -> tuple[str, ...]:
    import importlib.metadata as md

    try:
        owners = md.packages_distributions()
    except Exception:  # broken metadata: the names as given
        return tuple(dict.fromkeys(names))
    provides: dict[str, list[str]] = {}
    for module, dists in owners.items():
        for dist in dists:
            provides.setdefault(dist.lower().replace("_", "-"), []).append(module)
    found = dict.fromkeys(n.split(".")[0] for n in names)
    todo = list(found)
    seen_dists: set[str] = set()
    while todo:
        for dist in owners.get(todo.pop(), ()):
            key = dist.lower().replace("_", "-")
            if key in seen_dists:
                continue
            seen_dists.add(key)
            try:
                requires = md.requires(dist) or []
            except md.PackageNotFoundError:
                continue
            for req in requires:
                if "extra ==" in req.replace("extra==", "extra =="):
                    continue
                match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
                for module in provides.get(match.group(0).lower().replace("_", "-"), []) if match else []:
                    if module not in found and not module.startswith("_"):
                        found[module] = None
                        todo.append(module)
    return tuple(found)


def _package_paths(names: Sequence[str]) -> list[tuple[str, str]]:
    """(host path, name inside SITE_DIR) for each importable top-level package, with its bundled ``.libs``."""
    found: list[tuple[str, str]] = []
    for name in with_dependencies(names):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.origin in (None, "built-in", "frozen"):
            continue
        locations = list(spec.submodule_search_locations or [])
        path = locations[0] if locations else str(spec.origin)
        path = os.path.realpath(path)
        if _is_stdlib(path):
            continue
        found.append((path, os.path.basename(path)))
        libs = os.path.join(os.path.dirname(path), name + ".libs")
        if os.path.isdir(libs):
            found.append((os.path.realpath(libs), name + ".libs"))
    return found


def _stdlib_dirs() -> list[str]:
    paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    return sorted({os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if k in paths})


def _is_stdlib(path: str) -> bool:
    purelib = _site_dirs()
    return any(path.startswith(d + "/") for d in _stdlib_dirs()) and not any(path.startswith(s + "/") for s in purelib)


def _site_dirs() -> list[str]:
    """Every site-packages / dist-packages directory of the base interpreter and the system."""
    dirs: set[str] = set()
    for scheme_vars in ({"base": sys.base_prefix, "platbase": sys.base_exec_prefix},):
        paths = sysconfig.get_paths(vars=scheme_vars)
        dirs.update(paths[k] for k in ("purelib", "platlib") if k in paths)
    for pattern in ("/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages"):
        dirs.update(glob.glob(pattern))
    return sorted({os.path.realpath(d) for d in dirs if os.path.isdir(d)})


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def build_view(packages: Sequence[str], tmp_bytes: int) -> list[Step]:
    """The mount steps of the sandbox's filesystem (in order; later steps may cover earlier ones)."""
    steps: list[Step] = []
    made: set[str] = {"/"}

    def parents(path: str) -> None:
        for parent in reversed(Path(path).parents):
            p = str(parent)
            if p not in made:
                made.add(p)
                steps.append({"op": "dir", "dst": p})

    bound: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            steps.append({"op": "symlink", "target": os.readlink(d), "dst": d})
        elif os.path.isdir(d):
            steps.append({"op": "ro", "src": d, "dst": d})
            bound.append(d)
        made.add(d)
    steps.append({"op": "dir", "dst": "/etc"})
    made.add("/etc")
    for f in _ETC_FILES:
        if os.path.isfile(f):
            steps.append({"op": "ro", "src": os.path.realpath(f), "dst": f})
    exe = interpreter()
    prefixes = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)})
    prefixes.append(os.path.dirname(exe))
    for p in prefixes:
        if not _under(p, bound) and os.path.isdir(p):
            parents(p)
            steps.append({"op": "ro", "src": p, "dst": p})
            bound.append(p)
            made.add(p)
    for site in _site_dirs():  # masked: the allowed packages are bound on their own below
        if _under(site, bound):
            steps.append({"op": "tmpfs", "dst": site, "size": 4096})
    parents(SITE_DIR + "/x")
    here = os.path.dirname(os.path.abspath(__file__))
    for script in SCRIPTS:
        steps.append({"op": "ro", "src": os.path.join(here, script), "dst": f"{SANDBOX_DIR}/{script}"})
    for src, name in _package_paths(packages):
        steps.append({"op": "ro", "src": src, "dst": f"{SITE_DIR}/{name}"})
    steps += [
        {"op": "dev", "dst": "/dev"},
        {"op": "proc", "dst": "/proc"},
        {"op": "tmpfs", "dst": "/tmp", "size": tmp_bytes},
        {"op": "remount_ro", "dst": "/"},
    ]
    return steps


def bwrap_args(steps: Sequence[Step]) -> list[str]:
    """The same view as bubblewrap options (bubblewrap's root is an empty tmpfs)."""
    args: list[str] = []
    for s in steps:
        op, dst = s["op"], s["dst"]
        if op == "ro":
            args += ["--ro-bind", s["src"], dst]
        elif op == "symlink":
            args += ["--symlink", s["target"], dst]
        elif op == "dir":
            args += ["--perms", "0755", "--dir", dst]
        elif op == "tmpfs":
            args += ["--perms", "0755", "--size", str(s["size"]), "--tmpfs", dst]
        elif op == "dev":
            args += ["--dev", dst]
        elif op == "proc":
            args += ["--proc", dst]
        elif op == "remount_ro":
            args += ["--remount-ro", dst]
        else:
            raise ValueError(f"unknown view step {op!r}")
    return args
