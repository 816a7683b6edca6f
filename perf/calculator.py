"""Latency of Calculator_Tool per call: plain arithmetic, symbolic (sympy) cells, the first call, hostile input.

Prints JSON: median milliseconds per call for each kind of expression, the first symbolic call of a fresh process
(sympy is imported then) and the time a size-guarded bomb takes to come back as an error.
Usage: python perf/calculator.py [--calls 200] [--module path/to/calculator.py] [--compare path/to/calculator.py]
(``--module`` times another copy of the tool, e.g. ``git show REV:agentflow_env/tools/calculator/tool.py > old.py``;
``--compare`` times that copy too, call for call alternating with this one, so both see the same machine load.)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

CELLS = {
    "arithmetic": "(13 - 1) * (8 / 4)",
    "arithmetic_power": "2**100 / 3**20 + 7",
    "symbolic_sqrt": "sqrt(8)",
    "symbolic_simplify": "simplify(sin(x)**2 + cos(x)**2)",
    "symbolic_integrate": "integrate(x**2, (x, 0, 3))",
    "symbolic_solve": "solve(x**2 - 4, x)",
}
HOSTILE = ["gcd(10**(10**8), 7)", "factorial(10**7)", "Integer(9**9**9)"]


def _tool_class(module_path: str | None) -> Any:
    if module_path is None:
        from agentflow_env.tools.calculator.tool import CalculatorTool

        return CalculatorTool
    spec = importlib.util.spec_from_file_location("calculator_under_test", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CalculatorTool


def _median_ms(fn: Any, calls: int) -> float:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 3)


def _compare(tool: Any, other: Any, calls: int) -> dict[str, dict[str, float]]:
    """Medians of both tools, calls alternating, and the ratio this/other."""
    out = {}
    for name, expr in CELLS.items():
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(calls):
            for t, samples in ((tool, ours), (other, theirs)):
                start = time.perf_counter()
                t.run(expr, 30)
                samples.append((time.perf_counter() - start) * 1000)
        a, b = statistics.median(ours), statistics.median(theirs)
        out[name] = {"this_ms": round(a, 3), "other_ms": round(b, 3), "ratio": round(a / b, 2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per expression")
    parser.add_argument("--module", default=None, help="time the CalculatorTool of this file instead")
    parser.add_argument("--hostile", nargs="*", default=HOSTILE, help="bombs to time (each must fail)")
    parser.add_argument("--compare", default=None, help="also time the CalculatorTool of this file, alternating")
    args = parser.parse_args()

    tool = _tool_class(args.module)()
    start = time.perf_counter()
    first = tool.run(CELLS["symbolic_sqrt"], 30)
    first_ms = (time.perf_counter() - start) * 1000
    assert first.ok, first.text
    medians: dict[str, float] = {}
    for name, expr in CELLS.items():
        result = tool.run(expr, 30)
        assert result.ok, f"{name}: {result.text}"
        medians[name] = _median_ms(lambda expr=expr: tool.run(expr, 30), args.calls)
    hostile_ms = {}
    for expr in args.hostile:
        start = time.perf_counter()
        result = tool.run(expr, 30)
        hostile_ms[expr] = round((time.perf_counter() - start) * 1000, 1)
        assert not result.ok, result.text
    compared = None
    if args.compare:
        other = _tool_class(args.compare)()
        assert other.run(CELLS["symbolic_sqrt"], 30).ok
        compared = {"other_module": args.compare, "cells": _compare(tool, other, args.calls)}
        other.close()
    tool.close()
    out = {
        "benchmark": "calculator_latency",
        "module": args.module or "agentflow_env.tools.calculator.tool",
        "calls": args.calls,
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "first_symbolic_call_ms": round(first_ms, 1),
        "median_ms": medians,
        "hostile_ms": hostile_ms,
        "compared": compared,
    }
    sys.stdout.write(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
