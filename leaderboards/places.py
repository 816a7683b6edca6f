"""Where the leaderboard commands read and write by default: ``./runs/leaderboard`` for one's own runs,
``./runs/site`` for the rendered board, the stored references beside them (relative to the current folder,
so an installed package or a checkout is never written by default)."""

from __future__ import annotations

from pathlib import Path

from leaderboards.store import RESULTS_DIR

__all__ = ["RUNS_DIR", "default_out", "default_results", "default_site"]

RUNS_DIR = Path("runs")  # relative: under the current directory


def default_out() -> Path:
    """``./runs/leaderboard``: evaluations never write into the installed package or the checkout by
    default (only ``pytest --leaderboard-record`` writes the stored references in leaderboards/results)."""
    return RUNS_DIR / "leaderboard"


def default_site() -> Path:
    """``./runs/site``: where ``leaderboard render`` writes unless told otherwise."""
    return RUNS_DIR / "site"


def default_results() -> list[Path]:
    """What ``leaderboard render/show`` read: the stored references, and ``./runs/leaderboard`` beside them
    when it exists (one's own runs next to the reference rows)."""
    return [RESULTS_DIR, *([default_out()] if default_out().is_dir() else [])]
