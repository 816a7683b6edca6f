"""``Gen-Science``: multiple-choice quantitative physics and chemistry questions with units.

Distractors come from common mistakes (a missed unit conversion, a forgotten factor, an inverted ratio).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentflow_env.error import ConfigError
from agentflow_env.scoring.arith import evaluate
from agentflow_env.scoring.choice import ChoiceScorer, option_letters, render_options
from agentflow_env.tools.base import Tool
from agentflow_env.types import Task
from benchmarks.specs import BenchmarkSpec
from benchmarks.synthetic.common import SPLITS, GeneratedTasks, _stable_int, check_split, split_of

__all__ = [
    "SPEC",
    "TEMPLATES",
    "ScienceTemplate",
    "format_quantity",
    "load_tasks",
    "make_tools",
    "parse_options",
    "parse_quantity",
    "parse_science_question",
]

FAMILY = "Gen-Science"
Params = dict[str, Any]


@dataclass(frozen=True)
class ScienceTemplate:
    """One formula: draw values, render the stem, parse it back, the exact expression and the mistakes.

    ``expression(params)`` is the correct arithmetic (for the calculator); ``mistakes(params)`` maps a
    mistake's name to its (wrong) arithmetic.
    """

    name: str
    unit: str
    draw: Callable[[np.random.Generator, int], Params]
    stem: str  # format string over the params
    pattern: str  # regex with named groups for the params
    expression: Callable[[Params], str]
    mistakes: Callable[[Params], dict[str, str]]

    def render(self, params: Params) -> str:
        return self.stem.format(**params)

    def parse(self, text: str) -> Params | None:
        m = re.search(self.pattern, text)
        return {k: _num(v) for k, v in m.groupdict().items()} if m else None


def _num(text: str) -> int | float:
    return int(text) if re.fullmatch(r"-?\d+", text) else float(text)


def _u(rng: np.random.Generator, lo: float, hi: float, digits: int = 0) -> int | float:
    v = float(rng.uniform(lo, hi))
    return round(v) if digits == 0 else round(v, digits)


_COMPOUNDS = (
    ("sodium chloride", 58.44),
    ("glucose", 180.16),
    ("calcium carbonate", 100.09),
    ("water", 18.02),
    ("ethanol", 46.07),
    ("sulfuric acid", 98.08),
    ("ammonia", 17.03),
    ("urea", 60.06),
)


def _compound(params: Params, rng: np.random.Generator) -> Params:
    name, molar_mass = _COMPOUNDS[int(rng.integers(len(_COMPOUNDS)))]
    return {**params, "name": name, "M": molar_mass}


TEMPLATES: dict[str, ScienceTemplate] = {
    t.name: t
    for t in (
        ScienceTemplate(
            "kinetic_energy",
            "J",
            lambda rng, m: {"m": _u(rng, 1, m * 10), "v": _u(rng, 5, 150)},
            "A {m} kg cart moves at {v} km/h. What is its kinetic energy?",
            r"A (?P<m>[\d.]+) kg cart moves at (?P<v>[\d.]+) km/h\. What is its kinetic energy\?",
            lambda p: f"0.5 * {p['m']} * ({p['v']} / 3.6) ** 2",
            lambda p: {
                "no km/h conversion": f"0.5 * {p['m']} * {p['v']} ** 2",
                "forgot the 1/2": f"{p['m']} * ({p['v']} / 3.6) ** 2",
                "forgot the square": f"0.5 * {p['m']} * ({p['v']} / 3.6)",
                "multiplied by 3.6": f"0.5 * {p['m']} * ({p['v']} * 3.6) ** 2",
            },
        ),
        ScienceTemplate(
            "ideal_gas",
            "mol",
            lambda rng, m: {"V": _u(rng, 1, m), "P": _u(rng, 50, 500), "T": _u(rng, 5, 300)},
            "A {V} L container holds an ideal gas at {P} kPa and {T} °C. How many moles of gas does it hold? "
            "(R = 8.314 J/(mol·K))",
            r"A (?P<V>[\d.]+) L container holds an ideal gas at (?P<P>[\d.]+) kPa and (?P<T>[\d.]+) °C\.",
            lambda p: f"({p['P']} * 1000) * ({p['V']} / 1000) / (8.314 * ({p['T']} + 273.15))",
            lambda p: {
                "temperature left in °C": f"({p['P']} * 1000) * ({p['V']} / 1000) / (8.314 * {p['T']})",
                "kPa not converted": f"{p['P']} * ({p['V']} / 1000) / (8.314 * ({p['T']} + 273.15))",
                "litres not converted": f"({p['P']} * 1000) * {p['V']} / (8.314 * ({p['T']} + 273.15))",
                "inverted": f"(8.314 * ({p['T']} + 273.15)) / (({p['P']} * 1000) * ({p['V']} / 1000))",
            },
        ),
        ScienceTemplate(
            "moles_from_mass",
            "mol",
            lambda rng, m: _compound({"mg": _u(rng, 10, m * 500)}, rng),
            "A sample contains {mg} mg of {name} (molar mass {M} g/mol). How many moles is that?",
            r"A sample contains (?P<mg>[\d.]+) mg of [a-z ]+ \(molar mass (?P<M>[\d.]+) g/mol\)\.",
            lambda p: f"({p['mg']} / 1000) / {p['M']}",
            lambda p: {
                "mg not converted": f"{p['mg']} / {p['M']}",
                "multiplied by molar mass": f"({p['mg']} / 1000) * {p['M']}",
                "inverted": f"{p['M']} / ({p['mg']} / 1000)",
                "converted the wrong way": f"({p['mg']} * 1000) / {p['M']}",
            },
        ),
        ScienceTemplate(
            "resistor_power",
            "W",
            lambda rng, m: {"R": _u(rng, 2, m * 20), "V": _u(rng, 3, 240)},
            "A {R} Ω resistor is connected across a {V} V supply. What power does it dissipate?",
            r"A (?P<R>[\d.]+) Ω resistor is connected across a (?P<V>[\d.]+) V supply\.",
            lambda p: f"{p['V']} ** 2 / {p['R']}",
            lambda p: {
                "current instead of power": f"{p['V']} / {p['R']}",
                "multiplied by R": f"{p['V']} * {p['R']}",
                "V squared times R": f"{p['V']} ** 2 * {p['R']}",
                "doubled the current": f"{p['V']} / {p['R']} * 2",
            },
        ),
        ScienceTemplate(
            "pressure",
            "Pa",
            lambda rng, m: {"F": _u(rng, 5, m * 50), "A": _u(rng, 2, 400)},
            "A force of {F} N acts evenly on an area of {A} cm². What pressure does it exert?",
            r"A force of (?P<F>[\d.]+) N acts evenly on an area of (?P<A>[\d.]+) cm²\.",
            lambda p: f"{p['F']} / ({p['A']} / 10000)",
            lambda p: {
                "cm² not converted": f"{p['F']} / {p['A']}",
                "cm² converted as cm": f"{p['F']} / ({p['A']} / 100)",
                "inverted": f"({p['A']} / 10000) / {p['F']}",
                "multiplied by area": f"{p['F']} * ({p['A']} / 10000)",
            },
        ),
        ScienceTemplate(
            "dilution",
            "mol/L",
            lambda rng, m: {"V1": _u(rng, 5, 200), "C1": _u(rng, 0.1, 12, 2), "V2": _u(rng, 250, 250 + m * 20)},
            "{V1} mL of a {C1} mol/L solution is diluted with water to a total of {V2} mL. "
            "What is the new concentration?",
            r"(?P<V1>[\d.]+) mL of a (?P<C1>[\d.]+) mol/L solution is diluted with water "
            r"to a total of (?P<V2>[\d.]+) mL\.",
            lambda p: f"{p['C1']} * {p['V1']} / {p['V2']}",
            lambda p: {
                "inverted volume ratio": f"{p['C1']} * {p['V2']} / {p['V1']}",
                "added the volumes": f"{p['C1']} * {p['V1']} / ({p['V1']} + {p['V2']})",
                "used the water volume": f"{p['C1']} * ({p['V2']} - {p['V1']}) / {p['V2']}",
                "divided by the concentration": f"{p['V1']} / ({p['V2']} * {p['C1']})",
            },
        ),
        ScienceTemplate(
            "wave_speed",
            "m/s",
            lambda rng, m: {"f": _u(rng, 20, m * 100), "lam": _u(rng, 1, 500)},
            "A wave has a frequency of {f} Hz and a wavelength of {lam} cm. What is its speed?",
            r"A wave has a frequency of (?P<f>[\d.]+) Hz and a wavelength of (?P<lam>[\d.]+) cm\.",
            lambda p: f"{p['f']} * {p['lam']} / 100",
            lambda p: {
                "cm not converted": f"{p['f']} * {p['lam']}",
                "divided by wavelength": f"{p['f']} / ({p['lam']} / 100)",
                "divided by frequency": f"({p['lam']} / 100) / {p['f']}",
                "converted by 1000": f"{p['f']} * {p['lam']} / 1000",
            },
        ),
        ScienceTemplate(
            "potential_energy",
            "J",
            lambda rng, m: {"g": _u(rng, 20, m * 50), "h": _u(rng, 0.5, 80, 1)},
            "A {g} g ball is lifted {h} m straight up. How much gravitational potential energy does it gain? "
            "(g = 9.81 m/s²)",
            r"A (?P<g>[\d.]+) g ball is lifted (?P<h>[\d.]+) m straight up\.",
            lambda p: f"({p['g']} / 1000) * 9.81 * {p['h']}",
            lambda p: {
                "grams not converted": f"{p['g']} * 9.81 * {p['h']}",
                "forgot g": f"({p['g']} / 1000) * {p['h']}",
                "divided by height": f"({p['g']} / 1000) * 9.81 / {p['h']}",
                "half of it": f"0.5 * ({p['g']} / 1000) * 9.81 * {p['h']}",
            },
        ),
    )
}


# ---------------------------------------------------------------- quantities
def format_quantity(value: float, unit: str) -> str:
    """Three significant figures; scientific notation (``1.23 × 10^5``) outside 0.01..99999."""
    if value == 0:
        return f"0 {unit}"
    exp = math.floor(math.log10(abs(value)))
    if -2 <= exp <= 4:
        digits = max(0, 2 - exp)
        return f"{round(value, 2 - exp):.{digits}f} {unit}"
    mant = value / 10**exp
    if round(abs(mant), 2) >= 10:
        mant, exp = mant / 10, exp + 1
    return f"{mant:.2f} × 10^{exp} {unit}"


_QTY = re.compile(r"(-?\d+(?:\.\d+)?)(?:\s*×\s*10\^(-?\d+))?")


def parse_quantity(text: str) -> float | None:
    m = _QTY.search(text)
    if not m:
        return None
    return float(m.group(1)) * (10 ** int(m.group(2)) if m.group(2) else 1)


_OPTION_LINE = re.compile(r"^([A-Z])\. (.+)$", re.MULTILINE)


def parse_options(question: str) -> list[tuple[str, str]]:
    """``(letter, text)`` of each ``A. text`` option line of a question."""
    return _OPTION_LINE.findall(question)


def parse_science_question(text: str) -> tuple[ScienceTemplate, Params] | None:
    for template in TEMPLATES.values():
        params = template.parse(text)
        if params is not None:
            return template, params
    return None


def _value(expr: str) -> float:
    return float(evaluate(expr))


def _options(
    rng: np.random.Generator, template: ScienceTemplate, params: Params, distractors: int
) -> tuple[list[str], int, list[str]] | None:
    correct = _value(template.expression(params))
    if not math.isfinite(correct) or correct <= 0:
        return None
    shown = [format_quantity(correct, template.unit)]
    values, why = [correct], ["correct"]
    wrong = list(template.mistakes(params).items())
    order = rng.permutation(len(wrong))
    extra = [
        ("off by 10", correct * 10),
        ("off by 1/10", correct / 10),
        ("doubled", correct * 2),
        ("halved", correct / 2),
        ("off by 100", correct * 100),
    ]
    candidates = [(wrong[i][0], _value(wrong[i][1])) for i in order] + extra
    for name, v in candidates:
        if len(values) > distractors:
            break
        text = format_quantity(v, template.unit)
        if v <= 0 or text in shown or any(abs(v - u) / max(abs(u), 1e-300) < 0.05 for u in values):
            continue
        shown.append(text)
        values.append(v)
        why.append(name)
    if len(values) <= distractors:
        return None
    perm = [int(i) for i in rng.permutation(len(shown))]
    return [shown[i] for i in perm], perm.index(0), [why[i] for i in perm]


_QUESTION_TAIL = "\nAnswer with the letter of the correct option."


def _question(stem: str, options: Sequence[str]) -> str:
    return f"{stem}\n{render_options(options)}{_QUESTION_TAIL}"


class BalancedLetterTasks(GeneratedTasks):
    """Generated multiple-choice tasks whose correct letters are balanced in every block of
    ``n_options`` consecutive tasks (each letter exactly once per block, in a seeded random order).

    A policy that always answers one letter then scores exactly chance on any multiple of
    ``n_options`` tasks: uniform random placement alone gave "B" 32% of the first 100 test tasks, and a
    trained planner learned to answer "B" at once. The correct option trades places with the option at
    the block's letter, so the wrong options keep their random order.
    """

    def _next(self) -> Task:
        task = super()._next()
        options = list(task.metadata["options"])
        n, index = len(options), len(self._tasks)
        block = np.random.default_rng(
            [_stable_int(self.family), self.seed, SPLITS.index(self.split), 0x1E77E5, index // n]
        ).permutation(n)
        want = int(block[index % n])
        letters = option_letters(n)
        have = letters.index(str(task.answer))
        if have == want:
            return task
        options[have], options[want] = options[want], options[have]
        mistakes = list(task.metadata["mistakes"])
        mistakes[have], mistakes[want] = mistakes[want], mistakes[have]
        text = _question(task.metadata["stem"], options)
        metadata = {**task.metadata, "options": options, "mistakes": mistakes}
        return Task(
            id="gensci-" + Task.content_id(text),
            question=text,
            answer=letters[want],
            family=task.family,
            metadata=metadata,
        )


def load_tasks(
    split: str = "test",
    seed: int = 0,
    num_tasks: int = 500,
    distractors: int = 3,
    magnitude: int = 10,
    templates: Sequence[str] | None = None,
) -> GeneratedTasks:
    """Questions of ``split``. Knobs: ``distractors`` (wrong options, 1..7), ``magnitude`` (scale of the
    given quantities, 1..10000) and ``templates`` (a subset of ``TEMPLATES``)."""
    if not 1 <= distractors <= 7:
        raise ConfigError(f"distractors={distractors}; use 1..7 wrong options")
    if not 1 <= magnitude <= 10_000:
        raise ConfigError(f"magnitude={magnitude}; use 1..10000")
    names = list(templates) if templates is not None else list(TEMPLATES)
    if not names or any(n not in TEMPLATES for n in names):
        raise ConfigError(f"templates={templates!r}; choose from {', '.join(TEMPLATES)}")
    wanted = check_split(split)

    def make(rng: np.random.Generator) -> tuple[str, Task]:
        for _ in range(200):
            template = TEMPLATES[names[int(rng.integers(len(names)))]]
            params = template.draw(rng, magnitude)
            stem = template.render(params)
            if split_of(f"{FAMILY}:{stem}") != wanted:  # the source drops it anyway: skip building the options
                return stem, Task(id="", question=stem, answer=None)
            built = _options(rng, template, params, distractors)
            if built is not None:
                break
        else:
            raise ConfigError(f"{FAMILY}: could not build {distractors} distinct wrong options; lower distractors")
        options, answer, why = built
        text = _question(stem, options)
        letter = option_letters(len(options))[answer]
        return stem, Task(
            id="gensci-" + Task.content_id(text),
            question=text,
            answer=letter,
            family="science",
            metadata={
                "options": options,
                "stem": stem,
                "template": template.name,
                "mistakes": why,
                "value": float(evaluate(template.expression(params))),
            },
        )

    return BalancedLetterTasks(FAMILY, split, make, num_tasks=num_tasks, seed=seed)


def make_tools() -> list[Tool]:
    """The calculator and, where it can be built, the sandboxed Python coder."""
    from benchmarks.synthetic.world import optional_tool

    return [t for t in (optional_tool("calculator"), optional_tool("python")) if t is not None]


SPEC = BenchmarkSpec(
    name=FAMILY,
    family="science",
    load_tasks=load_tasks,
    make_scorer=ChoiceScorer,
    tools=("calculator", "python"),
    max_turns=10,
    source="generated: unbounded (num_tasks per split, default 500); distractors from common unit/factor mistakes",
    description="Multiple-choice physics and chemistry calculations with units (energy, gases, moles, circuits, ...).",
    make_tools=make_tools,
    instructions="Answer with the letter of the correct option only.",
    size=None,
)
