"""Budgets count the CPU time of the checked work, not waiting time: a math-verify check that needs under
a second of CPU passes its 3 s budget while three busy threads of the same process hold the GIL three
quarters of the time (it takes several seconds of wall time then). With thread isolation the budget was
wall time, so the same check overran and a correct answer scored 0."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("math_verify")
sympy = pytest.importorskip("sympy")

from agentflow_env.scoring.math import MathScorer, math_equal  # noqa: E402

BUDGET_S = 3.0


def _expanded(n: int) -> str:
    x, y = sympy.symbols("x y")
    return sympy.latex(sympy.expand((x + y + 1) ** n))


def test_a_thread_checks_budget_counts_its_cpu_time_not_its_wait_for_the_gil() -> None:
    math_equal("x", ["x"])  # math-verify imported and warm
    scorer = MathScorer(timeout_s=BUDGET_S, isolation="thread")
    gold = _expanded(10)  # about 0.8 s of CPU to decide
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            sum(range(1000))

    hogs = [threading.Thread(target=busy, daemon=True) for _ in range(3)]
    for hog in hogs:
        hog.start()
    try:
        assert scorer.equal("(x+y+1)^{10}", [gold])
    finally:
        stop.set()
        for hog in hogs:
            hog.join()
    assert scorer.overruns == 0  # decided, not cut off


def test_a_thread_check_over_its_cpu_budget_is_still_cut_off() -> None:
    math_equal("x", ["x"])
    scorer = MathScorer(timeout_s=0.3, isolation="thread")
    assert not scorer.equal("(x+y+1)^{14}", [_expanded(14)])  # about 1.6 s of CPU: over the budget
    assert scorer.overruns == 1
