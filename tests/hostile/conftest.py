"""Fixtures of the hostile sandbox suites: one isolation mode per module run, and tools started in it."""

from __future__ import annotations

import os
import shutil

import pytest

from agentflow_env.tools.python.sandbox import launcher
from tests.hostile.sandbox_common import HIDDEN, MODES, _start


@pytest.fixture(scope="module", params=MODES)
def mode(request):
    if request.param != HIDDEN:
        yield request.param
        return
    real_which = shutil.which

    def which(cmd, *args, **kwargs):
        return None if os.path.basename(str(cmd)) == "bwrap" else real_which(cmd, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:  # for the whole module: a restarted zygote must not find it either
        mp.setattr(launcher.shutil, "which", which)
        mp.delenv("AGENTFLOW_SANDBOX", raising=False)
        mp.setattr(launcher, "_UNAVAILABLE", {})
        yield request.param


@pytest.fixture(scope="module")
def tool(mode):
    t = _start(mode)
    yield t
    t.close()


@pytest.fixture(scope="module")
def other(mode):
    """A second tool of the same mode: another episode running at the same time."""
    t = _start(mode)
    yield t
    t.close()
