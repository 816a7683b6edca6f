"""Shared fixtures: the AgentFlow test-set folder (skips cleanly when absent)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# xdist runs one worker per core: one math thread each is fastest for the tiny models and leaves
# no oversubscription (set before torch is first imported in the worker).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

_DEFAULT_TESTSETS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "agentflow-testsets"
TESTSETS = Path(os.environ.get("AGENTFLOW_TESTSETS", _DEFAULT_TESTSETS))


def pytest_report_header(config: pytest.Config) -> str:
    """Say at the top of every run whether the test sets were found: without them every paper-benchmark test skips,
    and a run in a clone that is not beside ``shared/`` passes without having read one of them."""
    found = "found" if TESTSETS.is_dir() else "NOT FOUND, so the tests that read them skip"
    return f"AgentFlow test sets: {TESTSETS} ({found}; set AGENTFLOW_TESTSETS to point elsewhere)"


@pytest.fixture(scope="session")
def testsets_dir() -> Path:
    """``../shared/data/agentflow-testsets`` (or ``$AGENTFLOW_TESTSETS``); skips when missing."""
    if not TESTSETS.is_dir():
        pytest.skip(f"AgentFlow test sets not found at {TESTSETS} (set AGENTFLOW_TESTSETS to run these tests)")
    return TESTSETS


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every test runs in an empty folder of its own, so nothing under the checkout's ./runs (a README job's
    results, a training run) changes what a test sees, and nothing a test writes by default lands there."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    try:
        yield
    finally:
        os.chdir(before)
