"""Detects the openai-agents wheel, which installs a top-level ``agents`` package like this project's.

Two installs of one package name cannot both work: pip writes both into ``site-packages/agents`` (a mix
of files where neither package imports correctly), or one folder shadows the other depending on
``sys.path``. A mixed folder raises ``ImportError``; a shadowed other copy warns once.
"""

from __future__ import annotations

import warnings
from importlib import metadata
from pathlib import Path

__all__ = ["FOREIGN_DISTRIBUTIONS", "check_no_foreign_agents", "clash_advice"]

# distributions known to install a top-level ``agents`` package
FOREIGN_DISTRIBUTIONS = ("openai-agents",)


def clash_advice(dist: str) -> str:
    return (
        f"the {dist} wheel also installs a top-level `agents` package, which clashes with agentflow-env's; "
        f"uninstall it (pip uninstall {dist}) or keep it in another virtual environment, then reinstall "
        "agentflow-env (pip install --force-reinstall --no-deps agentflow-env, or pip install -e . in a clone)"
    )


def check_no_foreign_agents(init_file: str) -> None:
    """Raise ``ImportError`` when a foreign distribution's ``agents`` files share this package's folder."""
    here = Path(init_file).resolve().parent
    for name in FOREIGN_DISTRIBUTIONS:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if not any(f.parts and f.parts[0] == "agents" for f in dist.files or ()):
            continue
        folder = Path(str(dist.locate_file("agents"))).resolve()
        if folder == here:
            raise ImportError(f"{here} mixes two packages: {clash_advice(name)}")
        warnings.warn(
            f"{name} is installed too ({folder}); `import agents` picks one of the two by sys.path order: "
            + clash_advice(name),
            RuntimeWarning,
            stacklevel=3,
        )
