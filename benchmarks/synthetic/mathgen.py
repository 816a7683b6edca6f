"""``Gen-Math``: arithmetic and algebra word problems with exact (sympy) answers; some need the Python tool.

Each template renders, parses and solves its own questions; the scripted planner reuses the parsers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from agentflow_env.error import ConfigError
from agentflow_env.scoring.arith import ArithmeticError_, evaluate
from agentflow_env.scoring.commitment import read_commitment
from agentflow_env.scoring.extract import number_with_unit
from agentflow_env.tools.base import Tool
from agentflow_env.types import Task
from benchmarks.specs import BenchmarkSpec
from benchmarks.synthetic.common import GeneratedTasks, built_once, check_split, split_of

__all__ = [
    "SPEC",
    "TEMPLATES",
    "ExactNumberScorer",
    "MathTemplate",
    "format_number",
    "load_tasks",
    "make_tools",
    "parse_math_question",
    "parse_number",
]

FAMILY = "Gen-Math"
Params = dict[str, Any]


# ---------------------------------------------------------------- exact answers and scoring
def format_number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
_FRAC = re.compile(r"\\d?frac\{([^{}]+)\}\{([^{}]+)\}")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:\s*/\s*-?\d+(?:\.\d+)?)?")


def parse_number(text: str) -> Fraction | None:
    """The exact number an answer states: ``\\boxed{}``, LaTeX fractions, ``x = 7/3``, ``1,234``, ``2.5``;
    else the last number in the text. ``None`` when there is none."""
    t = str(text).strip()
    boxed = _BOXED.findall(t)
    if boxed:
        t = boxed[-1]
    t = _FRAC.sub(r"(\1)/(\2)", t).replace("$", "").replace("\\(", "").replace("\\)", "")
    t = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", t)
    if "=" in t:
        t = t.rsplit("=", 1)[1]
    t = t.strip().rstrip(".")
    try:
        return evaluate(t)
    except (ArithmeticError_, ValueError, ZeroDivisionError):
        pass
    found = _NUMBER.findall(t)
    if not found:
        return None
    try:
        return Fraction(found[-1].replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        return None


class ExactNumberScorer:
    """1.0 when the final answer commits to one number and it equals the gold number exactly
    (``5/2`` = ``2.5`` = ``\\frac{5}{2}``).

    "7 or 12", "1, 2, 3, 12" and every other answer naming several values score 0: the single-commitment
    rule of :mod:`agentflow_env.scoring.commitment` runs before the number is read.
    """

    def __call__(self, prediction: str, task: Task) -> float:
        gold = parse_number(str(task.answer))
        committed = read_commitment(prediction, [str(task.answer)], task.question)
        if gold is None or committed.hedge is not None:
            return 0.0
        read = number_with_unit(committed.value)
        if read is not None and read[1] not in ("%", "\\%"):  # "1 234", "1.234e3", "22 cm^2"
            return float(read[0] == gold)
        pred = parse_number(committed.text)
        return float(pred is not None and gold == pred)


# ---------------------------------------------------------------- templates
@dataclass(frozen=True)
class MathTemplate:
    """One problem type: draw parameters, render/parse the text, solve with sympy, and a tool command.

    ``calculator(params)`` is an arithmetic expression for the calculator tool (``None`` when only the
    Python tool can compute it); ``python(params)`` is a program that prints the answer.
    """

    name: str
    draw: Callable[[np.random.Generator, int, int], Params]
    render: Callable[[Params], str]
    parse: Callable[[str], Params | None]
    solve: Callable[[Params], Fraction]
    calculator: Callable[[Params], str | None]
    python: Callable[[Params], str]
    needs_python: bool = False


def _ri(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi + 1))


def _p(n: int | Fraction) -> str:
    return f"({n})" if n < 0 else str(n)


def _sym(expr: str) -> Fraction:
    """Evaluate with sympy (independently of the calculator the planner uses) and return an exact Fraction."""
    import sympy

    return _to_fraction(sympy.sympify(expr, rational=True))


def _to_fraction(value: Any) -> Fraction:
    if not value.is_rational:
        raise ValueError(f"{value} is not rational")
    return Fraction(str(value))


# -- 1. stock chain (steps)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_GOODS = (
    ("warehouse", "crates", "jars"),
    ("library", "boxes", "books"),
    ("bakery", "trays", "rolls"),
    ("harbour", "containers", "barrels"),
    ("nursery", "racks", "seedlings"),
)


def _stock_draw(rng: np.random.Generator, magnitude: int, steps: int) -> Params:
    initial = _ri(rng, magnitude // 2 + 1, magnitude * 5)
    stock, events = initial, []
    for day in range(steps):
        kind = ("arrive", "leave", "times")[_ri(rng, 0, 2)]
        if kind == "leave" and stock > 1:
            n = _ri(rng, 1, stock - 1)
            stock -= n
        elif kind == "times":
            n = _ri(rng, 2, 4)
            stock *= n
        else:
            kind, n = "arrive", _ri(rng, 1, magnitude * 2)
            stock += n
        events.append((_DAYS[day % 7], kind, n))
    return {"place": _ri(rng, 0, len(_GOODS) - 1), "initial": initial, "events": events, "per": _ri(rng, 2, magnitude)}


def _stock_render(p: Params) -> str:
    place, unit, item = _GOODS[p["place"]]
    lines = [f"A {place} starts the week with {p['initial']} {unit}."]
    for day, kind, n in p["events"]:
        if kind == "arrive":
            lines.append(f"On {day}, {n} {unit} arrive.")
        elif kind == "leave":
            lines.append(f"On {day}, {n} {unit} are sent away.")
        else:
            lines.append(f"On {day}, the number of {unit} is multiplied by {n}.")
    lines.append(f"Each of the {unit} holds {p['per']} {item}. How many {item} are in the {place} at the end?")
    return " ".join(lines)


_STOCK_START = re.compile(r"^A (\w+) starts the week with (\d+) (\w+)\.")
_STOCK_EVENT = re.compile(r"On (\w+), (?:(\d+) \w+ (arrive|are sent away)|the number of \w+ is multiplied by (\d+))\.")
_STOCK_END = re.compile(r"Each of the \w+ holds (\d+) (\w+)\. How many")


def _stock_parse(text: str) -> Params | None:
    m, end = _STOCK_START.match(text), _STOCK_END.search(text)
    if not m or not end:
        return None
    events = []
    for day, n, verb, factor in _STOCK_EVENT.findall(text):
        if factor:
            events.append((day, "times", int(factor)))
        else:
            events.append((day, "arrive" if verb == "arrive" else "leave", int(n)))
    places = [g[0] for g in _GOODS]
    place = places.index(m.group(1)) if m.group(1) in places else 0
    return {"place": place, "initial": int(m.group(2)), "events": events, "per": int(end.group(1))}


def _stock_expr(p: Params) -> str:
    expr = str(p["initial"])
    for _day, kind, n in p["events"]:
        expr = f"({expr} + {n})" if kind == "arrive" else f"({expr} - {n})" if kind == "leave" else f"{expr} * {n}"
    return f"({expr}) * {p['per']}"


# -- 2. fractions of a quantity
def _share_draw(rng: np.random.Generator, magnitude: int, steps: int) -> Params:
    q, s = _ri(rng, 2, 9), _ri(rng, 2, 9)
    return {"amount": _ri(rng, 2, magnitude * 3), "p": _ri(rng, 1, q - 1), "q": q, "r": _ri(rng, 1, s - 1), "s": s}


def _share_render(p: Params) -> str:
    return (
        f"A tank holds {p['amount']} litres of water. First {p['p']}/{p['q']} of the water is drained, then "
        f"{p['r']}/{p['s']} of what remains is used for cleaning. How many litres are left? "
        "Give the exact value (a fraction if needed)."
    )


_SHARE = re.compile(
    r"A tank holds (\d+) litres of water\. First (\d+)/(\d+) of the water is drained, then "
    r"(\d+)/(\d+) of what remains"
)


def _share_parse(text: str) -> Params | None:
    m = _SHARE.match(text)
    return dict(zip(("amount", "p", "q", "r", "s"), map(int, m.groups()))) if m else None


def _share_expr(p: Params) -> str:
    return f"{p['amount']} * (1 - {p['p']}/{p['q']}) * (1 - {p['r']}/{p['s']})"


# -- 3. one linear equation
def _lin_draw(rng: np.random.Generator, magnitude: int, steps: int) -> Params:
    m = max(3, magnitude // 4)
    a = _ri(rng, 2, m)
    d = _ri(rng, -m, m)
    while d == a:
        d = _ri(rng, -m, m)
    return {
        "a": a,
        "b": _ri(rng, -m, m),
        "c": _ri(rng, -magnitude, magnitude),
        "d": d,
        "e": _ri(rng, -magnitude, magnitude),
    }


def _signed(n: int, first: bool = False) -> str:
    if first:
        return str(n)
    return f"+ {n}" if n >= 0 else f"- {-n}"


def _signed_ints(pattern: re.Pattern[str], text: str) -> list[int] | None:
    """The integers ``pattern`` captures; a ``[+-]`` group signs the number group after it."""
    m = pattern.match(text)
    if not m:
        return None
    out, sign = [], 1
    for group in m.groups():
        if group in ("+", "-"):
            sign = -1 if group == "-" else 1
        else:
            out.append(sign * int(group))
            sign = 1
    return out


def _lin_render(p: Params) -> str:
    return (
        f"Solve for x: {p['a']}(x {_signed(p['b'] * -1)}) {_signed(p['c'])} = {p['d']}x {_signed(p['e'])}. "
        "Give x exactly."
    )


_LIN = re.compile(r"Solve for x: (\d+)\(x ([+-]) (\d+)\) ([+-]) (\d+) = (-?\d+)x ([+-]) (\d+)\.")


def _lin_parse(text: str) -> Params | None:
    ints = _signed_ints(_LIN, text)
    if ints is None:
        return None
    a, minus_b, c, d, e = ints
    return {"a": a, "b": -minus_b, "c": c, "d": d, "e": e}


def _lin_solve(p: Params) -> Fraction:
    import sympy

    x = sympy.Symbol("x")
    slope, offset = sympy.Poly(p["a"] * (x - p["b"]) + p["c"] - (p["d"] * x + p["e"]), x).all_coeffs()
    return _to_fraction(sympy.Rational(-offset, slope))


def _lin_expr(p: Params) -> str:
    return f"({_p(p['e'])} - {_p(p['c'])} + {p['a']} * {_p(p['b'])}) / ({p['a']} - {_p(p['d'])})"


# -- 4. two linear equations (x + y)
def _sys_draw(rng: np.random.Generator, magnitude: int, steps: int) -> Params:
    m = max(3, magnitude // 5)
    while True:
        a, b, d, e = (_ri(rng, -m, m) or 1 for _ in range(4))
        if a * e - b * d != 0:
            break
    x, y = _ri(rng, -magnitude, magnitude), _ri(rng, -magnitude, magnitude)
    return {"a": a, "b": b, "c": a * x + b * y + _ri(rng, 0, 1), "d": d, "e": e, "f": d * x + e * y}


def _sys_render(p: Params) -> str:
    return (
        f"Find x + y if {p['a']}x {_signed(p['b'])}y = {p['c']} and {p['d']}x {_signed(p['e'])}y = {p['f']}. "
        "Give the exact value."
    )


_SYS = re.compile(r"Find x \+ y if (-?\d+)x ([+-]) (\d+)y = (-?\d+) and (-?\d+)x ([+-]) (\d+)y = (-?\d+)\.")


def _sys_parse(text: str) -> Params | None:
    ints = _signed_ints(_SYS, text)
    return dict(zip("abcdef", ints)) if ints is not None else None


def _sys_solve(p: Params) -> Fraction:
    import sympy

    sol = sympy.Matrix([[p["a"], p["b"]], [p["d"], p["e"]]]).LUsolve(sympy.Matrix([p["c"], p["f"]]))
    return _to_fraction(sympy.Rational(sol[0] + sol[1]))


def _sys_expr(p: Params) -> str:
    a, b, c, d, e, f = (_p(p[k]) for k in "abcdef")
    det = f"({a} * {e} - {b} * {d})"
    return f"({c} * {e} - {b} * {f}) / {det} + ({a} * {f} - {c} * {d}) / {det}"


def _sys_python(p: Params) -> str:
    return (
        f"from fractions import Fraction as F\na, b, c, d, e, f = {p['a']}, {p['b']}, {p['c']}, {p['d']}, "
        f"{p['e']}, {p['f']}\ndet = a * e - b * d\nprint(F(c * e - b * f, det) + F(a * f - c * d, det))"
    )


# -- 5. sums of powers (big numbers)
def _pow_draw(rng: np.random.Generator, magnitude: int, steps: int) -> Params:
    return {"power": _ri(rng, 2, 5), "n": _ri(rng, magnitude, magnitude * 40)}


def _pow_render(p: Params) -> str:
    return f"Compute the sum of k^{p['power']} for every whole number k from 1 to {p['n']}."


_POW = re.compile(r"Compute the sum of k\^(\d+) for every whole number k from 1 to (\d+)\.")


def _pow_parse(text: str) -> Params | None:
    m = _POW.match(text)
    return {"power": int(m.group(1)), "n": int(m.group(2))} if m else None


@built_once(maxsize=8)
def _power_sum_formula(power: int) -> Any:
    """sympy's closed form of 1^p + ... + N^p, a polynomial in the symbol ``n`` (so large N cost nothing)."""
    import sympy

    k, n = sympy.symbols("k n", integer=True, positive=True)
    return n, sympy.summation(k**power, (k, 1, n))


def _pow_solve(p: Params) -> Fraction:
    n, formula = _power_sum_formula(p["power"])
    return _to_fraction(formula.subs(n, p["n"]))


_FAULHABER = {  # closed forms the calculator can evaluate
    2: "{n} * ({n} + 1) * (2 * {n} + 1) / 6",
    3: "({n} * ({n} + 1) / 2) ** 2",
    4: "{n} * ({n} + 1) * (2 * {n} + 1) * (3 * {n} ** 2 + 3 * {n} - 1) / 30",
    5: "{n} ** 2 * ({n} + 1) ** 2 * (2 * {n} ** 2 + 2 * {n} - 1) / 12",
}


def _pow_expr(p: Params) -> str | None:
    form = _FAULHABER.get(p["power"])
    return form.format(n=p["n"]) if form else None


# -- 6. modular powers (Python only)
def _mod_draw(rng: np.random.Generator, magnitude: int, steps: int) -> Params:
    return {
        "base": _ri(rng, 2, magnitude * 5),
        "exp": _ri(rng, magnitude * 10, magnitude * 1000),
        "mod": _ri(rng, 7, magnitude * 100),
    }


def _mod_render(p: Params) -> str:
    return f"What is the remainder when {p['base']}^{p['exp']} is divided by {p['mod']}?"


_MOD = re.compile(r"What is the remainder when (\d+)\^(\d+) is divided by (\d+)\?")


def _mod_parse(text: str) -> Params | None:
    m = _MOD.match(text)
    return {"base": int(m.group(1)), "exp": int(m.group(2)), "mod": int(m.group(3))} if m else None


def _mod_solve(p: Params) -> Fraction:
    return Fraction(pow(p["base"], p["exp"], p["mod"]))  # three-argument pow: exact modular exponentiation


TEMPLATES: dict[str, MathTemplate] = {
    t.name: t
    for t in (
        MathTemplate(
            "stock",
            _stock_draw,
            _stock_render,
            _stock_parse,
            lambda p: _sym(_stock_expr(p)),
            _stock_expr,
            lambda p: f"print({_stock_expr(p)})",
        ),
        MathTemplate(
            "share",
            _share_draw,
            _share_render,
            _share_parse,
            lambda p: _sym(_share_expr(p)),
            _share_expr,
            lambda p: f"from fractions import Fraction as F\nprint({_share_expr(p)})",
        ),
        MathTemplate(
            "linear",
            _lin_draw,
            _lin_render,
            _lin_parse,
            _lin_solve,
            _lin_expr,
            lambda p: f"from fractions import Fraction\nprint(Fraction({_lin_expr(p).replace(' / ', ', ')}))",
        ),
        MathTemplate("system", _sys_draw, _sys_render, _sys_parse, _sys_solve, _sys_expr, _sys_python),
        MathTemplate(
            "power_sum",
            _pow_draw,
            _pow_render,
            _pow_parse,
            _pow_solve,
            _pow_expr,
            lambda p: f"print(sum(k ** {p['power']} for k in range(1, {p['n']} + 1)))",
            needs_python=True,
        ),
        MathTemplate(
            "modpow",
            _mod_draw,
            _mod_render,
            _mod_parse,
            _mod_solve,
            lambda p: None,
            lambda p: f"print(pow({p['base']}, {p['exp']}, {p['mod']}))",
            needs_python=True,
        ),
    )
}


def parse_math_question(text: str) -> tuple[MathTemplate, Params] | None:
    """The template and parameters of a Gen-Math question, or ``None``."""
    for template in TEMPLATES.values():
        params = template.parse(text.strip())
        if params is not None:
            return template, params
    return None


def _range(value: int | Sequence[int], name: str, lo: int, hi: int) -> tuple[int, int]:
    pair = (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[-1]))
    if not lo <= pair[0] <= pair[1] <= hi:
        raise ConfigError(f"{name}={value!r}; give an int or a (lo, hi) range within {lo}..{hi}")
    return pair


def load_tasks(
    split: str = "test",
    seed: int = 0,
    num_tasks: int = 500,
    magnitude: int = 100,
    steps: int | Sequence[int] = (2, 5),
    templates: Sequence[str] | None = None,
) -> GeneratedTasks:
    """Word problems of ``split``. Knobs: ``magnitude`` (size of the numbers, 10..10^6), ``steps``
    (operations in the stock problems) and ``templates`` (a subset of ``TEMPLATES``)."""
    if not 10 <= magnitude <= 1_000_000:
        raise ConfigError(f"magnitude={magnitude}; use 10..1000000")
    lo, hi = _range(steps, "steps", 1, 30)
    wanted = check_split(split)
    names = list(templates) if templates is not None else list(TEMPLATES)
    unknown = [n for n in names if n not in TEMPLATES]
    if unknown or not names:
        raise ConfigError(f"templates={templates!r}; choose from {', '.join(TEMPLATES)}")

    def make(rng: np.random.Generator) -> tuple[str, Task]:
        template = TEMPLATES[names[int(rng.integers(len(names)))]]
        params = template.draw(rng, magnitude, _ri(rng, lo, hi))
        text = template.render(params)
        if split_of(f"{FAMILY}:{text}") != wanted:  # the source drops it anyway: skip the exact solve
            return text, Task(id="", question=text, answer=None)
        answer = format_number(template.solve(params))
        task = Task(
            id="genmath-" + Task.content_id(text),
            question=text,
            answer=answer,
            family="math",
            metadata={"template": template.name, "needs_python": template.needs_python},
        )
        return text, task

    return GeneratedTasks(FAMILY, split, make, num_tasks=num_tasks, seed=seed)


def make_tools() -> list[Tool]:
    """The calculator and, where it can be built, the sandboxed Python coder."""
    from benchmarks.synthetic.world import optional_tool

    return [t for t in (optional_tool("calculator"), optional_tool("python")) if t is not None]


SPEC = BenchmarkSpec(
    name=FAMILY,
    family="math",
    load_tasks=load_tasks,
    make_scorer=ExactNumberScorer,
    tools=("calculator", "python"),
    max_turns=10,
    source="generated: unbounded (num_tasks per split, default 500); exact answers by sympy",
    description="Arithmetic and algebra word problems (stock chains, fractions, equations, big sums, modular powers).",
    make_tools=make_tools,
    instructions="Give the final answer as an exact number: an integer or a reduced fraction such as 7/3.",
    size=None,
)
