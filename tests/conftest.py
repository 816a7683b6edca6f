"""Shared fixtures: the AgentFlow test-set folder (skips cleanly when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# xdist runs one worker per core: one math thread each is fastest for the tiny models and leaves
# no oversubscription (set before torch is first imported in the worker).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

_DEFAULT_TESTSETS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "agentflow-testsets"
TESTSETS = Path(os.environ.get("AGENTFLOW_TESTSETS", _DEFAULT_TESTSETS))


@pytest.fixture(scope="session")
def testsets_dir() -> Path:
    """``../shared/data/agentflow-testsets`` (or ``$AGENTFLOW_TESTSETS``); skips when missing."""
    if not TESTSETS.is_dir():
        pytest.skip(f"AgentFlow test sets not found at {TESTSETS} (set AGENTFLOW_TESTSETS to run these tests)")
    return TESTSETS
