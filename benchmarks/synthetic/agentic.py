"""``Gen-Agentic``: questions that need facts retrieved from the generated world and then a computation.

Each template names its operands (world lookups), its constants and the arithmetic that combines them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from agentflow_env.error import ConfigError
from agentflow_env.scoring.arith import evaluate
from agentflow_env.tools.base import Tool
from agentflow_env.types import Task
from benchmarks.specs import BenchmarkSpec
from benchmarks.synthetic.common import GeneratedTasks, options_as_keywords
from benchmarks.synthetic.mathgen import ExactNumberScorer, format_number
from benchmarks.synthetic.multihop import Lookup, hop_choices, random_lookup
from benchmarks.synthetic.world import World, WorldOptions, parse_chain

__all__ = ["SPEC", "TEMPLATES", "AgenticTemplate", "load_tasks", "make_tools", "parse_agentic_question"]

FAMILY = "Gen-Agentic"


@dataclass(frozen=True)
class AgenticTemplate:
    """A question shape: operand attributes, constants' ranges, the text, and the arithmetic.

    ``expression(values, constants)`` is what the calculator evaluates (values in operand order).
    """

    name: str
    attributes: tuple[str, ...]
    constants: tuple[tuple[int, int], ...]  # (lo, hi) per constant, scaled by ``magnitude`` when hi < 0
    text: Callable[[Sequence[str], Sequence[int]], str]
    pattern: str
    expression: Callable[[Sequence[int], Sequence[int]], str]
    valid: Callable[[Sequence[int]], bool] = lambda values: True


def _years_apart(first: str) -> AgenticTemplate:
    """Years between the ``first`` event of one entity and the birth of another, times a constant."""
    event = {"born": "birth", "founded": "founding"}[first]
    return AgenticTemplate(
        f"years_apart_{first}_born",
        (first, "born"),
        ((2, -1),),
        lambda ph, c: (
            f"How many years lie between the {event} of {ph[0]} and the birth of {ph[1]}? "
            f"Multiply that number of years by {c[0]} and give the result."
        ),
        rf"^How many years lie between the {event} of (.+?) and the birth of (.+?)\? Multiply that number of "
        r"years by (\d+) and give the result\.$",
        lambda v, c: f"({max(v)} - {min(v)}) * {c[0]}",
        lambda v: v[0] != v[1],
    )


TEMPLATES: dict[str, AgenticTemplate] = {
    t.name: t
    for t in (
        _years_apart("founded"),
        _years_apart("born"),
        AgenticTemplate(
            "combined_population",
            ("population", "population"),
            (),
            lambda ph, c: f"What is the combined population of {ph[0]} and {ph[1]}?",
            r"^What is the combined population of (.+?) and (.+?)\?$",
            lambda v, c: f"{v[0]} + {v[1]}",
        ),
        AgenticTemplate(
            "age_at_founding",
            ("born", "founded"),
            (),
            lambda ph, c: f"How many years after the birth of {ph[0]} was {ph[1]} founded?",
            r"^How many years after the birth of (.+?) was (.+?) founded\?$",
            lambda v, c: f"{v[1]} - {v[0]}",
            lambda v: 0 < v[1] - v[0] < 110,
        ),
        AgenticTemplate(
            "population_growth",
            ("population",),
            ((10, -100), (2, 60)),
            lambda ph, c: (
                f"Suppose the population of {ph[0]} grew by {c[0]} people every year for {c[1]} years. "
                "What would the population be then?"
            ),
            r"^Suppose the population of (.+?) grew by (\d+) people every year for (\d+) years\. "
            r"What would the population be then\?$",
            lambda v, c: f"{v[0]} + {c[0]} * {c[1]}",
        ),
        AgenticTemplate(
            "population_per_year",
            ("population", "founded"),
            ((1990, 2030),),
            lambda ph, c: (
                f"Divide the population of {ph[0]} by the number of years from the founding of {ph[1]} to {c[0]}. "
                "Give the exact value (a fraction if needed)."
            ),
            r"^Divide the population of (.+?) by the number of years from the founding of (.+?) to (\d+)\. "
            r"Give the exact value \(a fraction if needed\)\.$",
            lambda v, c: f"{v[0]} / ({c[0]} - {v[1]})",
        ),
    )
}


def parse_agentic_question(text: str) -> tuple[AgenticTemplate, list[Lookup], list[int]] | None:
    """The template, operand lookups and constants of a Gen-Agentic question, or ``None``."""
    for template in TEMPLATES.values():
        m = re.match(template.pattern, text.strip())
        if not m:
            continue
        groups = m.groups()
        n = len(template.attributes)
        lookups = []
        for phrase, attr in zip(groups[:n], template.attributes):
            relations, start = parse_chain(phrase)
            lookups.append(Lookup(tuple(relations), start, attr))
        return template, lookups, [int(g) for g in groups[n:]]
    return None


def _draw(
    world: World, rng: np.random.Generator, template: AgenticTemplate, hops: int, magnitude: int
) -> tuple[str, str, int] | None:
    n = len(template.attributes)
    extra = max(hops - n, 0)
    cuts = sorted(int(c) for c in rng.integers(0, extra + 1, size=n - 1))
    rels = [b - a for a, b in zip([0, *cuts], [*cuts, extra])]
    lookups: list[Lookup] = []
    avoid: list[str] = []
    values: list[int] = []
    for attr, k in zip(template.attributes, rels):
        found = random_lookup(world, rng, k, attr, avoid=avoid)
        if found is None:
            return None
        lookup, path = found
        lookups.append(lookup)
        avoid.extend(path)
        values.append(world.entities[path[-1]].attributes[attr])
    if not template.valid(values):
        return None
    consts = [int(rng.integers(lo, (hi if hi > 0 else -hi * magnitude) + 1)) for lo, hi in template.constants]
    text = template.text([lk.phrase() for lk in lookups], consts)
    value: Fraction = evaluate(template.expression(values, consts))
    return text, format_number(value), sum(lk.hops for lk in lookups)


@options_as_keywords("world_options", WorldOptions)
def load_tasks(
    split: str = "test",
    num_tasks: int = 500,
    hops: int | Sequence[int] = (2, 4),
    magnitude: int = 10,
    templates: Sequence[str] | None = None,
    *,
    world_options: WorldOptions,
) -> GeneratedTasks:
    """Retrieval-plus-arithmetic questions over the world of ``split`` (the
    :class:`~benchmarks.synthetic.world.WorldOptions` keywords ``seed``, ``world_size``, ``distractors`` and
    ``world`` choose it).

    Knobs: ``hops`` (passages to read, at least one per operand), ``magnitude`` (size of the constants) and
    ``templates`` (a subset of ``TEMPLATES``).
    """
    choices = hop_choices(hops)
    if not 1 <= magnitude <= 100_000:
        raise ConfigError(f"magnitude={magnitude}; use 1..100000")
    names = list(templates) if templates is not None else list(TEMPLATES)
    if not names or any(n not in TEMPLATES for n in names):
        raise ConfigError(f"templates={templates!r}; choose from {', '.join(TEMPLATES)}")
    part = world_options.split_world(split)
    the_world = world_options.build(split)

    def make(rng: np.random.Generator) -> tuple[str, Task]:
        for _ in range(200):
            template = TEMPLATES[names[int(rng.integers(len(names)))]]
            drawn = _draw(the_world, rng, template, choices[int(rng.integers(len(choices)))], magnitude)
            if drawn is None:
                continue
            text, answer, n_hops = drawn
            meta = {"hops": n_hops, "template": template.name}
            return text, world_options.task("genag", "agentic", text, answer, meta, part)
        raise ConfigError(f"{FAMILY}: no question fits hops={hops} in this world; raise world_size or hops")

    return world_options.tasks(FAMILY, split, make, num_tasks)


@options_as_keywords("world_options", WorldOptions)
def make_tools(split: str = "test", top_k: int = 3, *, world_options: WorldOptions) -> list[Tool]:
    """BM25 search over the passages of the world ``split``'s questions use (index cached), the calculator
    and the Python coder."""
    return world_options.tools(split, top_k, extra_tools=("calculator", "python"))


SPEC = BenchmarkSpec(
    name=FAMILY,
    family="agentic",
    load_tasks=load_tasks,
    make_scorer=ExactNumberScorer,
    tools=("search", "calculator", "python"),
    max_turns=10,
    source="generated: unbounded (num_tasks per split, default 500); a fictional world per seed and split; arithmetic",
    description="Look facts up in a generated encyclopedia, then compute with them (years apart, populations, rates).",
    make_tools=make_tools,
    instructions=(
        "The facts are about a fictional world described only in the search tool's encyclopedia; look them up, "
        "then compute. Give the final answer as an exact number."
    ),
    size=None,
)
