"""The math-verify helper under CPU load: correct answers still score 1, and a hostile answer costs one
bounded call without zeroing the next check.

Eight busy processes (each stops by itself after 90 s, and is killed by pid when the test ends)
compete for the cores while the scorer runs with its default 5 s budget. Before issue 25 the helper's
cold start (about 4.5 s) counted against that budget and every overrun restarted it cold, so under load
correct answers scored 0; now the helper starts warm when the scorer is built, the budget counts the check
only, and an overrun starts a fresh helper at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("math_verify")

from agentflow_env.scoring.math import WALL_CAP, MathScorer
from agentflow_env.types import Task

BUSY = "import time\nend = time.time() + 90\nwhile time.time() < end:\n    pass\n"
# answers that math-verify must decide (no plain-number shortcut), with their golds
CORRECT = [
    ("\\sqrt{12}", "2\\sqrt{3}"),
    ("\\frac{\\pi}{2}", "\\pi/2"),
    ("(x+1)^2", "x^2+2x+1"),
    ("\\dfrac{3}{\\sqrt{2}}", "\\frac{3\\sqrt{2}}{2}"),
    ("2^{10}", "1024"),
]
HOSTILE = "(x+1)^{100000}"  # expanding this takes minutes: the check must be cut off


@pytest.fixture
def cpu_load():
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(8)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:  # by pid, only the processes this test started
            p.kill()
        for p in procs:
            p.wait()


def test_math_checks_score_correct_answers_under_cpu_load(cpu_load):
    assert len(cpu_load) == 8 and all(pid != os.getpid() for pid in cpu_load)
    scorer = MathScorer(timeout_s=5.0, isolation="process")  # the default budget; the helper starts now
    for pred, gold in CORRECT:
        assert scorer(pred, Task("m", "q", gold)) == 1.0, (pred, gold)
    # a hostile answer (here with a 1 s budget, to keep the test short) costs one bounded call: the
    # helper's CPU time, and at most WALL_CAP times the budget in wall time on a saturated machine
    hostile = MathScorer(timeout_s=1.0, isolation="process")
    start = time.monotonic()
    assert hostile(HOSTILE, Task("m", "q", "(x+1)^{2}")) == 0.0
    assert time.monotonic() - start < WALL_CAP * 1.0 + 10.0
    assert hostile.overruns == 1
    # the next episode's checks find a fresh helper (its start is not on their clock): still 1
    for pred, gold in CORRECT:
        assert scorer(pred, Task("m", "q", gold)) == 1.0, (pred, gold)
    assert scorer.overruns == 0
