"""Hostile input for Calculator_Tool: every class of size bomb and slow input comes back as a clear error line
within the call's timeout, and nothing is left computing afterwards.

Classes: power towers (bare, and inside gcd/Min/floor/Integer/Rational/...), huge factorials and binomials,
exponentials whose integer part is astronomically long, products and sums over huge ranges, derivative orders,
multinomial expansions, repeated multiplication of big numbers, big literals, and inputs that pass every size
bound yet run long (the helper process is killed). Hypothesis adds random nested expressions of all of these.
"""

from __future__ import annotations

import ast
import itertools
import math
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentflow_env.tools.calculator import tool as calculator
from agentflow_env.tools.calculator.bounds import Bound, TooLarge, _Walker
from agentflow_env.tools.calculator.tool import SYMBOLIC_TIMEOUT_S, CalculatorTool

SLACK_S = 2.0  # a call may run this much past its timeout (killing and reaping a helper, a loaded machine)


@pytest.fixture(scope="module")
def calc() -> CalculatorTool:
    tool = CalculatorTool()
    assert tool.run("sqrt(4)", 60).text == "sqrt(4) = 2"  # the helper has imported sympy before any timing
    return tool


def _helpers() -> dict[int, float]:
    """This process's calculator helpers: pid -> CPU seconds used so far (Linux /proc)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == os.getpid() and b"agentflow_env.tools.calculator.symbolic" in cmdline:
            out[int(entry.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def assert_nothing_left_computing() -> None:
    """No calculator thread in this process, and no helper process burning CPU (idle ones may stay).

    A helper that replaced a killed one imports sympy first; a plain call waits for that before measuring.
    """
    assert CalculatorTool().run("sqrt(4)", 60).text == "sqrt(4) = 2"
    computing = [t for t in threading.enumerate() if not t.name.startswith("pytest_timeout")]  # the test's timer
    assert not [t for t in computing if "calculator" in t.name or "sympy" in t.name]
    if not sys.platform.startswith("linux"):
        return
    # A replacement helper still importing sympy burns CPU for a while (over 20 s on a loaded machine); a
    # computation left running never stops (the hostile ones here run for minutes). So watch 1 s windows for up
    # to a minute: every helper must fall idle in one of them.
    busy: dict[int, float] = {}
    for _ in range(60):
        before = _helpers()
        assert len(before) <= calculator.MAX_HELPERS
        cpu_before = time.process_time()
        time.sleep(1.0)
        after = _helpers()
        assert time.process_time() - cpu_before < 0.3  # this process is idle too
        busy = {pid: used - before.get(pid, 0.0) for pid, used in after.items() if used - before.get(pid, 0.0) >= 0.3}
        if not busy:
            return
    raise AssertionError(f"helpers still computing after a minute (CPU s in the last second): {busy}")


def timed(calc: CalculatorTool, expr: str, timeout: float = 30.0) -> tuple[float, str, bool]:
    start = time.perf_counter()
    result = calc.run(expr, timeout)
    return time.perf_counter() - start, result.text, result.ok


# each class: inputs the size bounds refuse before anything is computed
BOMBS = {
    "tower": ["10**(10**8)", "9**9**9", "2^3^4^5", "(10**100)**(10**100)", "Integer(7)**Integer(7)**Integer(7)"],
    "tower_in_function": [
        "Integer(10**(10**8))",
        "gcd(10**(10**8), 7)",
        "lcm(2**(10**7), 3)",
        "floor(10**(10**8)/7)",
        "ceiling(10**(10**8)/7)",
        "Min(10**(10**8), 1)",
        "Max(1, 2, 9**(9**9))",
        "Rational(10**(10**8), 3)",
        "Abs(-(10**(10**8)))",
        "sign(10**(10**8) - 1)",
        "re(10**(10**8))",
        "sqrt(10**(10**8))",
        "log(10**(10**8))",
        "sin(10**(10**8))",
        "simplify(10**(10**8) + x)",
        "solve(x - 10**(10**8), x)",
        "Eq(10**(10**8), 1)",
        "gcd(Integer(10)**Integer(10)**Integer(8), 7)",
        "floor(Min(Max(10**(10**8), 1), 2))",
    ],
    "factorial": ["factorial(10**7)", "factorial(factorial(100))", "((((5!)!)!)!)", "100000!", "2**factorial(30)"],
    "binomial": ["binomial(10**9, 10**8)", "binomial(10**(10**8), 5)"],
    "exponential": ["floor(exp(10**6))", "ceiling(cosh(10**5))", "Integer(floor(sinh(10**7)))", "exp(exp(exp(10)))"],
    "power_of_constant": ["floor(pi**(10**8))", "floor(E**100000)", "I**(10**9)"],
    "range": ["Product(k, (k, 1, 10**6))", "Sum(2**k, (k, 1, 10**8))", "Product(k**k, (k, 1, 10**4))"],
    "derivative": ["diff(x**5, (x, 10**8))", "diff(x, x, 10**6)"],
    "symbolic": ["x**(10**8)", "(x + 1)**100000", "expand((a+b+c+d+f+g)**100)", "simplify((x + y)**5000)"],
    "repeated_product": ["*".join(["10**1000"] * 25), "gcd(" + "*".join(["99**999"] * 12) + ", 3)"],
    "big_literal": ["sqrt(" + "9" * 250 + ")**200", "floor(" + "7" * 200 + "**150)"],
    "exact_arithmetic": ["(10**999)**1000", "(9**1000)**5", "((2**1000)**1000)**1000", "1e400", "10**4000 * 10**4000"],
}


@pytest.mark.parametrize(
    ("kind", "expr"), [(kind, expr) for kind, exprs in BOMBS.items() for expr in exprs], ids=lambda v: str(v)[:40]
)
def test_size_bombs_are_refused_fast_with_a_clear_error(calc: CalculatorTool, kind: str, expr: str) -> None:
    seconds, text, ok = timed(calc, expr)
    assert not ok, text
    assert text.startswith(f"{expr} -> Error: ")
    message = text.split("-> Error: ", 1)[1]
    assert any(word in message for word in ("digits", "limit", "too large", "degree", "terms", "range")), message
    assert seconds < 1.5, f"{kind}: {seconds:.2f} s"


@pytest.mark.parametrize(
    "expr", ["'x' * 10**9", "'ab' * (10**8) * (10**8)", "(1,) * 10**9", "(x, 2) * 10**9", "sqrt('9' * 10**9)"]
)
def test_huge_repetition_is_refused_before_it_is_built(calc: CalculatorTool, expr: str) -> None:
    seconds, text, ok = timed(calc, expr)
    assert not ok and text.startswith(f"{expr} -> Error: ") and seconds < 1.5


SLOW = [  # small sizes, long computations: only the helper's kill stops them
    "integrate(exp(sin(x)) * x**7 * log(x), x)",
    "integrate(sin(x)**7/(1+cos(x)**3+x), x)",
    "factor(x**199 + 3*x**101 + 2*x**77 + 7)",
    "integrate(exp(x**3)*sin(x)**5*log(x), x)",
]


@pytest.mark.parametrize("expr", SLOW)
def test_slow_input_is_killed_at_the_timeout(calc: CalculatorTool, expr: str) -> None:
    seconds, text, ok = timed(calc, expr, timeout=1.5)
    assert seconds < 1.5 + SLACK_S
    if not ok:  # a fast machine may finish one of them: then it is simply an answer
        assert "took longer than" in text and "was stopped" in text
    assert_nothing_left_computing()


def test_the_whole_call_keeps_its_deadline(calc: CalculatorTool) -> None:
    command = "\n".join(["integrate(exp(sin(x)) * x**7 * log(x), x)"] * 5 + ["1 + 1", "sqrt(16)"])
    seconds, text, ok = timed(calc, command, timeout=4.0)
    assert seconds < 4.0 + SLACK_S
    lines = text.splitlines()
    assert len(lines) == 7 and lines[5] == "1 + 1 = 2"  # plain arithmetic never needs the helper
    assert "time limit ran out" in lines[-1] or "took longer" in lines[-1] or lines[-1] == "sqrt(16) = 4"
    assert ok
    assert_nothing_left_computing()


def test_the_host_keeps_running_while_a_helper_computes(calc: CalculatorTool) -> None:
    """The old calculator ran sympy in a thread of this process (a huge integer operation held the GIL for
    minutes); now the work happens in the helper: this process stays idle and its other threads run."""
    ticks = []
    stop = threading.Event()

    def ticker() -> None:
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.01)

    assert calc.run("sqrt(4)", 60).ok  # a helper is ready (an earlier test may have killed one)
    thread = threading.Thread(target=ticker)
    thread.start()
    cpu = time.process_time()
    try:
        seconds, text, _ = timed(calc, "integrate(exp(sin(x)) * x**7 * log(x), x)", timeout=1.5)
    finally:
        stop.set()
        thread.join()
    assert "took longer" in text and seconds >= 1.5
    assert time.process_time() - cpu < 0.5  # the computing happened elsewhere
    assert len(ticks) > 10 and max(b - a for a, b in itertools.pairwise(ticks)) < 1.0


def test_a_dead_helper_is_replaced(calc: CalculatorTool) -> None:
    import signal

    calc.run("sqrt(9)", 30)
    for pid in _helpers():
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    assert calc.run("sqrt(9)", 30).text == "sqrt(9) = 3"


def test_concurrent_calls_share_the_helpers(calc: CalculatorTool) -> None:
    """Threads calling at once get their own answers; a slow call in one does not stall the others for long.

    The per-call timeout is generous: on a busy machine a replacement helper takes longer than 10 s to import
    sympy, and a fast expression may queue behind the slow ones (each stopped after SYMBOLIC_TIMEOUT_S).
    """
    answers: dict[int, list[str]] = {}
    waits: dict[int, list[float]] = {}

    def work(i: int) -> None:
        exprs = [f"sqrt({i * i * 2})", f"factorial({i + 5})", "integrate(exp(x**3)*sin(x)**5*log(x), x)", f"{i}**2"]
        answers[i], waits[i] = [], []
        for e in exprs:
            t0 = time.perf_counter()
            answers[i].append(calc.run(e, 120).text)
            waits[i].append(round(time.perf_counter() - t0, 2))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, 5)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - start
    # four slow expressions on at most MAX_HELPERS helpers, plus a helper restart (a sympy import) after each;
    # on a loaded machine an import alone can take over 20 s, so this bounds only a stall, not the speed
    assert took < 4 * (SYMBOLIC_TIMEOUT_S + SLACK_S + 45), f"took {took:.1f} s; per call (s): {waits}"
    for i, texts in answers.items():
        assert texts[0].startswith(f"sqrt({i * i * 2}) = ") and "≈ " in texts[0], (texts, waits[i])
        value = float(texts[0].rsplit("≈ ", 1)[1].rstrip(")"))
        assert value == pytest.approx(i * 2**0.5)
        assert texts[1] == f"factorial({i + 5}) = {math.factorial(i + 5)}", (texts, waits[i])
        assert texts[3] == f"{i}**2 = {i * i}"
    assert_nothing_left_computing()


def test_a_call_takes_whichever_helper_comes_free_first(calc: CalculatorTool, monkeypatch) -> None:
    """A call waiting for a helper takes the first one free, in the order calls came, not one it started itself.

    Seen under load: each waiting call started its own helper and waited for that one to import sympy (over 10 s)
    while the first helper had long been free again; and the thread that had just given a helper back took it
    again ahead of the waiting calls.
    """
    monkeypatch.setattr(calculator, "MAX_HELPERS", calculator._POOL._count + 1)  # room for one more at most
    slow_start = threading.Event()
    real_helper = calculator._Helper

    class SlowHelper(real_helper):  # type: ignore[misc,valid-type]
        def wait_ready(self, deadline: float) -> bool:
            slow_start.wait(30)  # a new helper "imports sympy" until the test says so
            return super().wait_ready(deadline)

    monkeypatch.setattr(calculator, "_Helper", SlowHelper)
    results: list[str] = []
    try:
        threads = [threading.Thread(target=lambda: results.append(calc.run("sqrt(2)", 20).text)) for _ in range(6)]
        t0 = time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(25)
        assert len(results) == 6 and all("≈ 1.414" in r for r in results), results  # served by the ready helper
    finally:
        slow_start.set()
    cpu = time.process_time() - t0
    assert cpu < 10, f"{cpu:.1f} CPU seconds for six sqrt calls"
    deadline = time.monotonic() + 60
    while calculator._POOL._starting and time.monotonic() < deadline:
        time.sleep(0.05)
    calculator._POOL.close()  # back to at most the real MAX_HELPERS, ready for the next tests
    assert calc.run("sqrt(4)", 60).text == "sqrt(4) = 2"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_helper(calc: CalculatorTool) -> None:
    assert calc.run("sqrt(12)", 30).ok
    pid = os.fork()
    if pid == 0:  # the child: the parent's helpers are not its own
        code = 1
        try:
            ok = calc.run("sqrt(12)", 60).text == "sqrt(12) = 2*sqrt(3) (≈ 3.46410161513775)"
            code = 0 if ok and calculator._POOL._pid == os.getpid() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert calc.run("sqrt(12)", 30).ok  # the parent's helper is still in order


def test_ordinary_maths_still_answers(calc: CalculatorTool) -> None:
    cases = {
        "factorial(100) / factorial(98)": "9900",
        "binomial(10**9, 3)": "166666666166666667000000000",
        "integrate(x**2, (x, 0, 10**10))": "1000000000000000000000000000000/3 (≈ 3.333333333e+29)",
        "Sum(k, (k, 1, 10**12))": "500000000000500000000000",
        "gcd(2**100, 6**50)": str(2**50),
        "expand((x + 1)**3)": "x**3 + 3*x**2 + 3*x + 1",
        "diff(x**5, x, 3)": "60*x**2",
        "(10**100)**10 / 10**999": "10",
        "Sum(factorial(k), (k, 1, 50))": str(sum(math.factorial(k) for k in range(1, 51))),
    }
    for expr, expected in cases.items():
        assert calc.run(expr, 30).text == f"{expr} = {expected}"


# ------------------------------------------------------------------------- random nested expressions

_LEAVES = ["0", "1", "2", "7", "12", "10**8", "99999999999", "10**(10**8)", "9**9**9", "x", "y", "pi", "E", "oo"]
_UNARY = ["Integer", "floor", "ceiling", "Abs", "sqrt", "exp", "log", "factorial", "sin", "cosh", "simplify", "expand"]
_BINARY = ["gcd", "lcm", "Min", "Max", "binomial", "Rational", "root"]


def _nested(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pair = st.tuples(children, children)
    return st.one_of(
        st.tuples(children, st.sampled_from(["+", "-", "*", "/", "**"]), children).map(
            lambda t: f"({t[0]}){t[1]}({t[2]})"
        ),
        st.tuples(st.sampled_from(_UNARY), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(_BINARY), pair).map(lambda t: f"{t[0]}({t[1][0]}, {t[1][1]})"),
        children.map(lambda c: f"({c})!"),
        pair.map(lambda p: f"Sum({p[0]}, (k, 1, {p[1]}))"),
        pair.map(lambda p: f"Product({p[0]}, (k, 1, {p[1]}))"),
        pair.map(lambda p: f"integrate({p[0]}, (x, 0, {p[1]}))"),
    )


EXPRESSIONS = st.recursive(st.sampled_from(_LEAVES), _nested, max_leaves=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expr=EXPRESSIONS)
def test_random_nested_expressions_answer_within_the_timeout(calc: CalculatorTool, expr: str) -> None:
    seconds, text, _ = timed(calc, expr, timeout=2.0)
    assert seconds < 2.0 + SLACK_S, expr
    assert text.startswith(expr)


def test_nothing_is_left_computing_after_the_random_expressions(calc: CalculatorTool) -> None:
    assert_nothing_left_computing()


_SMALL = st.recursive(
    st.integers(0, 30).map(str),
    lambda c: st.one_of(
        st.tuples(c, st.sampled_from(["+", "-", "*", "/"]), c).map(lambda t: f"({t[0]}){t[1]}({t[2]})"),
        st.tuples(c, st.integers(-40, 40)).map(lambda t: f"({t[0]})**({t[1]})"),
        st.integers(0, 60).map(lambda n: f"factorial({n})"),
        st.tuples(st.integers(0, 80), st.integers(0, 80)).map(lambda t: f"binomial({t[0]}, {t[1]})"),
        st.tuples(c, st.integers(0, 12)).map(lambda t: f"binomial({t[0]}, {t[1]})"),
        st.tuples(c, st.sampled_from(["floor", "ceiling", "Abs"])).map(lambda t: f"{t[1]}({t[0]})"),
        st.tuples(st.sampled_from(["gcd", "lcm", "Max", "Min"]), c, c).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(expr=_SMALL)
def test_the_size_bound_is_never_below_the_true_size(expr: str) -> None:
    """The bounds are conservative: an exact result never has more digits (numerator and denominator) than its
    bound says."""
    sympy = pytest.importorskip("sympy")
    from sympy.parsing.sympy_parser import auto_number, stringify_expr

    from agentflow_env.tools.calculator.symbolic import _names

    code = stringify_expr(expr, {}, dict(_names()), (auto_number,))
    try:
        bound: Bound = _Walker().visit(ast.parse(code, mode="eval"))
    except TooLarge:  # refused before computing: no size claim to check (and the exact value may be huge)
        return
    try:
        value = sympy.sympify(expr)
    except (ValueError, TypeError):  # e.g. Max(0, 1/0): sympy cannot compare zoo
        return
    if not value.is_Rational:  # zoo or nan (a division by zero): nothing to measure
        return
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # the exact size of a result that may pass 4300 digits
    try:
        digits = len(str(abs(value.p))) + (len(str(value.q)) if value.q != 1 else 0)
    finally:
        sys.set_int_max_str_digits(limit)
    assert digits <= bound.digits, (expr, digits, bound.digits)


def test_symbolic_timeout_constant_is_below_the_default_tool_timeout() -> None:
    assert SYMBOLIC_TIMEOUT_S < 30.0
