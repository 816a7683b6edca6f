"""``Gen-MultiHop``: 2–6-hop bridge and comparison questions over the generated world, answered by retrieval.

Holds the question grammar (render and parse) that the generator and the scripted planner share.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from agentflow_env.error import ConfigError
from agentflow_env.tools.base import Tool
from agentflow_env.types import Task
from benchmarks.specs import BenchmarkSpec
from benchmarks.synthetic.common import GeneratedTasks, options_as_keywords
from benchmarks.synthetic.world import ATTRIBUTES, World, WorldAnswerScorer, WorldOptions, parse_chain, render_chain

__all__ = [
    "SPEC",
    "HopQuestion",
    "Lookup",
    "hop_choices",
    "load_tasks",
    "make_tools",
    "parse_question",
    "random_lookup",
]

FAMILY = "Gen-MultiHop"


@dataclass(frozen=True)
class Lookup:
    """Follow ``relations`` (innermost first) from ``start``; then read ``attribute`` when it is set."""

    relations: tuple[str, ...]
    start: str
    attribute: str | None = None

    @property
    def hops(self) -> int:
        return len(self.relations) + (self.attribute is not None)

    def phrase(self) -> str:
        return render_chain(self.relations, self.start)


@dataclass(frozen=True)
class HopQuestion:
    """A parsed question: one lookup (bridge) or two compared by ``attribute`` (``earlier`` or ``larger``)."""

    kind: str  # "bridge" or "comparison"
    lookups: tuple[Lookup, ...]
    compare: str | None = None
    metadata: dict = field(default_factory=dict, compare=False)


_COMPARE_STEMS = {
    "born": ("Who was born earlier: {} or {}?", "earlier"),
    "founded": ("Which was founded earlier: {} or {}?", "earlier"),
    "population": ("Which has the larger population: {} or {}?", "larger"),
}
_ATTR_STEMS = {
    "born": "In what year was {} born?",
    "founded": "In what year was {} founded?",
    "population": "What is the population of {}?",
}


def render_question(q: HopQuestion, final_kind: str | None = None) -> str:
    if q.kind == "comparison":
        attr = q.lookups[0].attribute
        assert attr is not None
        return _COMPARE_STEMS[attr][0].format(q.lookups[0].phrase(), q.lookups[1].phrase())
    (lk,) = q.lookups
    if lk.attribute is not None:
        return _ATTR_STEMS[lk.attribute].format(lk.phrase())
    stem = {"person": "Who is {}?", "org": "Which organisation is {}?"}.get(final_kind or "", "What is {}?")
    return stem.format(lk.phrase())


def _stem_regex(stem: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(stem).replace(re.escape("{}"), "(.+?)") + "$")


_COMPARE_RES = {attr: _stem_regex(stem) for attr, (stem, _) in _COMPARE_STEMS.items()}
_ATTR_RES = {attr: _stem_regex(stem) for attr, stem in _ATTR_STEMS.items()}
_ENTITY_RE = re.compile(r"^(?:Who is|What is|Which organisation is) (.+?)\?$")


def parse_question(text: str) -> HopQuestion | None:
    """The lookups a Gen-MultiHop question asks for, or ``None`` when ``text`` is not one."""
    text = text.strip()
    for attr, rx in _COMPARE_RES.items():
        m = rx.match(text)
        if m:
            lks = tuple(Lookup(*_chain(m.group(i)), attribute=attr) for i in (1, 2))
            return HopQuestion("comparison", lks, _COMPARE_STEMS[attr][1])
    for attr, rx in _ATTR_RES.items():
        m = rx.match(text)
        if m:
            return HopQuestion("bridge", (Lookup(*_chain(m.group(1)), attribute=attr),))
    m = _ENTITY_RE.match(text)
    if m:
        relations, start = _chain(m.group(1))
        if relations:
            return HopQuestion("bridge", (Lookup(relations, start),))
    return None


def _chain(phrase: str) -> tuple[tuple[str, ...], str]:
    relations, start = parse_chain(phrase)
    return tuple(relations), start


def random_lookup(
    world: World, rng: np.random.Generator, n_relations: int, attribute: str | None, avoid: Sequence[str] = ()
) -> tuple[Lookup, list[str]] | None:
    """A random chain of ``n_relations`` distinct-entity steps (ending where ``attribute`` applies), with its path."""
    kinds = ATTRIBUTES[attribute] if attribute else None
    names = list(world.entities)
    for _ in range(50):
        start = names[int(rng.integers(len(names)))]
        if start in avoid:
            continue
        path, rels = [start], []
        for _step in range(n_relations):
            ent = world.entities[path[-1]]
            options = [r for r, obj in ent.relations.items() if obj not in path and obj not in avoid]
            if not options:
                break
            rel = options[int(rng.integers(len(options)))]
            rels.append(rel)
            path.append(ent.relations[rel])
        if len(rels) < n_relations:
            continue
        if kinds is not None and world.entities[path[-1]].kind not in kinds:
            continue
        return Lookup(tuple(rels), start, attribute), path
    return None


def _value(world: World, lookup: Lookup) -> tuple[str, int | None]:
    final = world.follow(lookup.start, lookup.relations)[-1]
    return final, (world.entities[final].attributes[lookup.attribute] if lookup.attribute else None)


def hop_choices(hops: int | Sequence[int]) -> list[int]:
    """``hops`` as a list: an int, a ``(lo, hi)`` range (inclusive) or an explicit list."""
    if isinstance(hops, int):
        choices = [hops]
    elif isinstance(hops, tuple) and len(hops) == 2:
        choices = list(range(int(hops[0]), int(hops[1]) + 1))
    else:
        choices = [int(h) for h in hops]
    if not choices or any(not 1 <= h <= 8 for h in choices):
        raise ConfigError(f"hops={hops!r}; give an int, a (lo, hi) range or a list within 1..8")
    return choices


def draw_question(
    world: World, rng: np.random.Generator, hops: list[int], comparison: float
) -> tuple[HopQuestion, str, str] | None:
    """One question ``(parsed form, text, gold answer)`` or ``None`` when this draw found no valid chain."""
    h = hops[int(rng.integers(len(hops)))]
    if h >= 4 and rng.random() < comparison:
        attr = ("born", "founded", "population")[int(rng.integers(3))]
        a = int(rng.integers(1, h - 2))
        first = random_lookup(world, rng, a, attr)
        if first is None:
            return None
        second = random_lookup(world, rng, h - 2 - a, attr, avoid=first[1])
        if second is None:
            return None
        (na, va), (nb, vb) = _value(world, first[0]), _value(world, second[0])
        if va == vb or na == nb:
            return None
        q = HopQuestion("comparison", (first[0], second[0]), _COMPARE_STEMS[attr][1], {"candidates": [na, nb]})
        pick_first = (va < vb) if q.compare == "earlier" else (va > vb)  # type: ignore[operator]
        answer = na if pick_first else nb
    else:
        attribute = None if rng.random() < 0.5 else ("born", "founded", "population")[int(rng.integers(3))]
        found = random_lookup(world, rng, h - (attribute is not None), attribute)
        if found is None:
            return None
        final, value = _value(world, found[0])
        q = HopQuestion("bridge", (found[0],), None, {"candidates": [final]})
        answer = final if value is None else str(value)
    final_kind = world.entities[world.follow(q.lookups[0].start, q.lookups[0].relations)[-1]].kind
    text = render_question(q, final_kind)
    if re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", text):
        return None  # answerable from the question text: never emit it
    return q, text, answer


@options_as_keywords("world_options", WorldOptions)
def load_tasks(
    split: str = "test",
    num_tasks: int = 500,
    hops: int | Sequence[int] = (2, 4),
    comparison: float = 0.3,
    *,
    world_options: WorldOptions,
) -> GeneratedTasks:
    """Questions over the world of ``split`` (the :class:`~benchmarks.synthetic.world.WorldOptions` keywords
    ``seed``, ``world_size``, ``distractors`` and ``world`` choose it).

    Knobs: ``hops`` (passages to read per question) and ``comparison`` (share of comparison questions
    among those with 4 or more hops).
    """
    choices = hop_choices(hops)
    if not 0.0 <= comparison <= 1.0:
        raise ConfigError(f"comparison={comparison}; give a share in [0, 1]")
    part = world_options.split_world(split)
    the_world = world_options.build(split)

    def make(rng: np.random.Generator) -> tuple[str, Task]:
        for _ in range(200):
            drawn = draw_question(the_world, rng, choices, comparison)
            if drawn is None:
                continue
            q, text, answer = drawn
            meta = {"hops": sum(lk.hops for lk in q.lookups), "kind": q.kind, **q.metadata}
            return text, world_options.task("genmh", "search", text, answer, meta, part)
        raise ConfigError(f"{FAMILY}: no question with hops={hops} fits this world; raise world_size")

    return world_options.tasks(FAMILY, split, make, num_tasks)


@options_as_keywords("world_options", WorldOptions)
def make_tools(split: str = "test", top_k: int = 3, *, world_options: WorldOptions) -> list[Tool]:
    """BM25 search over the passages of the world ``split``'s questions use (index cached) and the calculator."""
    return world_options.tools(split, top_k, extra_tools=("calculator",))


INSTRUCTIONS = (
    "The questions are about a fictional world described only in the search tool's encyclopedia; "
    "look every fact up. Give the final answer as the entity name or number only."
)

SPEC = BenchmarkSpec(
    name=FAMILY,
    family="search",
    load_tasks=load_tasks,
    make_scorer=WorldAnswerScorer,
    tools=("search", "calculator"),
    max_turns=10,
    source="generated: unbounded (num_tasks per split, default 500); a fictional world per seed and split",
    description="Multi-hop bridge and comparison questions over a generated encyclopedia; BM25 search tool.",
    make_tools=make_tools,
    instructions=INSTRUCTIONS,
    size=None,
)
