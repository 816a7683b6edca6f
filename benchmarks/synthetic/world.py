"""The generated world behind Gen-MultiHop and Gen-Agentic: people, places, organisations and their relations.

A world is a function of ``(seed, world_size, distractors, split)``; it is written as short encyclopedia passages
(the search corpus) whose fact sentences follow fixed patterns (``FACT_PATTERNS``) that writer and reader share.

Split-disjoint worlds (the default, ``world="per-split"``): train, validation and test each get their own
world, and their entity names come from disjoint thirds of the name space, so no entity, fact or chain of
one split's world exists in another's. ``world="shared"`` (``split=None`` here) is the single world of
earlier versions, whose questions are split by text only.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, cast

import numpy as np

from agentflow_env.error import ConfigError
from agentflow_env.scoring.commitment import FILLER_WORDS, read_commitment
from agentflow_env.scoring.extract import number_with_unit, same_unit
from agentflow_env.tools import make_tool
from agentflow_env.tools.base import Tool
from agentflow_env.types import Task
from benchmarks.synthetic.common import SPLITS, GeneratedTasks, _stable_int, built_once, check_split

__all__ = [
    "ATTRIBUTES",
    "NAME_RE",
    "RELATIONS",
    "WORLDS",
    "Entity",
    "World",
    "WorldAnswerScorer",
    "WorldOptions",
    "build_world",
    "find_attribute",
    "find_relation",
    "make_world_tools",
    "normalize_answer",
    "parse_chain",
    "render_chain",
    "task_world",
    "world_index",
    "world_split",
]

# Syllable pools for made-up but pronounceable names (no real person, place or firm to recall).
_FIRST_ON = tuple(
    "Al Be Ca Da E Fa Ga Ha I Jo Ka Le Ma Ne O Pe Ra Sa Ta Va Ze Bri Cla Dre Flo Gre Tri Mi Lu No".split()
)
_FIRST_MID = tuple("l n r s v m d th nd lv rn b".split())
_FIRST_END = tuple("a o en an ia el is ar ine ette us ik ora ian".split())
_SUR_PRE = tuple(
    "Vel Cor Mar Ash Bren Dal Fen Hal Kest Lor Mor Nor Ost Pell Quar Rav Strat Thal Ulm Wend Yar Zell Brask Cind "
    "Drum Garr".split()
)
_SUR_SUF = tuple("ton wick mere by ford holt ard ine oway den ley rick stead ovic ani eau sen ow".split())
_PLACE_PRE = tuple(
    "Ar Bel Cas Dor Esk Fal Gal Hav Isk Kor Lun Mer Nar Orv Pal Riv Sel Tam Ves Wyn Bast Quel Sarn Tor".split()
)
_PLACE_MID = ("a", "e", "i", "o", "", "en", "ar")
_CITY_SUF = tuple("mora dell haven port grad ria ssa lin ton vale burg stad ona mouth field".split())
_COUNTRY_SUF = tuple("ia land ovia ara onia eth andria".split())
_ORG_PRE = tuple(
    "Brigh Cald Emb Glim Hollo Ivor Jass Lum Nimb Opal Prax Sorr Tess Umbr Vant Wick Xer Yol Zeph Aur Corv Dusk Fern "
    "Kiln".split()
)
_ORG_SUF = tuple("ane ery well ix ora ent ast ique on ara".split())
_ORG_KINDS = {
    "Works": "manufacturing company",
    "Foundry": "metal foundry",
    "Textiles": "textile company",
    "Shipping": "shipping line",
    "Instruments": "instrument maker",
    "Press": "publishing house",
    "Mills": "milling company",
    "University": "university",
    "College": "college",
    "Institute": "research institute",
    "Observatory": "observatory",
    "Bank": "bank",
}
_OCCUPATIONS = (
    "engineer",
    "botanist",
    "cartographer",
    "composer",
    "chemist",
    "architect",
    "historian",
    "glassmaker",
    "astronomer",
    "economist",
    "painter",
    "physician",
    "geologist",
    "librarian",
)
_EVENTS = ("Exhibition", "Congress", "Regatta", "Fair", "Symposium", "Festival", "Conference")

NAME_RE = r"[A-Z][A-Za-z'-]*(?: [A-Z][A-Za-z'-]*)*"

# relation -> (subject kind, object kind, phrase in questions)
RELATIONS: dict[str, tuple[str, str, str]] = {
    "birthplace": ("person", "city", "the birthplace of {}"),
    "employer": ("person", "org", "the employer of {}"),
    "mentor": ("person", "person", "the mentor of {}"),
    "founder": ("org", "person", "the founder of {}"),
    "home_city": ("org", "city", "the home city of {}"),
    "country": ("city", "country", "the country of {}"),
    "mayor": ("city", "person", "the mayor of {}"),
    "capital": ("country", "city", "the capital of {}"),
}
# attribute -> subject kinds
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "born": ("person",),
    "founded": ("org", "city"),
    "population": ("city",),
}


def _fact_patterns(name: str) -> dict[str, str]:
    n = re.escape(name)
    return {
        "born": rf"(?<![\w-]){n} \(born (\d{{3,4}})\)",
        "birthplace": rf"(?<![\w-]){n} was born in ({NAME_RE})\.",
        "employer": rf"(?<![\w-]){n} joined ({NAME_RE}) in \d{{3,4}}",
        "mentor": rf"(?<![\w-]){n} studied under ({NAME_RE})\.",
        "founder": rf"(?<![\w-]){n} is an? [a-z ]+ founded in \d{{3,4}} by ({NAME_RE})\.",
        "org_founded": rf"(?<![\w-]){n} is an? [a-z ]+ founded in (\d{{3,4}})",
        "home_city": rf"(?<![\w-]){n} is headquartered in ({NAME_RE})\.",
        "country": rf"(?<![\w-]){n} is a city in ({NAME_RE}), founded in \d{{3,4}}\.",
        "city_founded": rf"(?<![\w-]){n} is a city in {NAME_RE}, founded in (\d{{3,4}})\.",
        "mayor": rf"The mayor of {n} is ({NAME_RE})\.",
        "population": rf"(?<![\w-]){n} has a population of ([\d,]+)\.",
        "capital": rf"The capital of {n} is ({NAME_RE})\.",
    }


def find_relation(text: str, subject: str, relation: str) -> str | None:
    """The object of ``relation`` for ``subject`` stated in ``text`` (any retrieved passages), or ``None``."""
    m = re.search(_fact_patterns(subject)[relation], text)
    return m.group(1) if m else None


def find_attribute(text: str, subject: str, attribute: str) -> int | None:
    """The numeric ``attribute`` (born, founded, population) of ``subject`` stated in ``text``, or ``None``."""
    patterns = _fact_patterns(subject)
    keys = {"born": ("born",), "founded": ("org_founded", "city_founded"), "population": ("population",)}[attribute]
    for key in keys:
        m = re.search(patterns[key], text)
        if m:
            return int(m.group(1).replace(",", ""))
    return None


def render_chain(relations: Sequence[str], start: str) -> str:
    """``["employer", "home_city"]`` from ``"Ada Voss"`` -> ``"the home city of the employer of Ada Voss"``."""
    phrase = start
    for rel in relations:
        phrase = RELATIONS[rel][2].format(phrase)
    return phrase


_PREFIXES = sorted(((spec[2].replace("{}", ""), rel) for rel, spec in RELATIONS.items()), key=lambda p: -len(p[0]))


def parse_chain(phrase: str) -> tuple[list[str], str]:
    """Inverse of :func:`render_chain`: ``(relations innermost first, start entity)``."""
    outer: list[str] = []
    rest = phrase.strip()
    matched = True
    while matched:
        matched = False
        for prefix, rel in _PREFIXES:
            if rest.startswith(prefix):
                outer.append(rel)
                rest = rest[len(prefix) :]
                matched = True
                break
    return outer[::-1], rest.strip()


@dataclass
class Entity:
    """One world entity: its kind, its relations (to other entity names) and numeric attributes."""

    name: str
    kind: str
    relations: dict[str, str] = field(default_factory=dict)
    attributes: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class World:
    """All entities of one generated world and the corpus of passages describing them.

    ``split`` is the split this world belongs to, or ``None`` for the shared world of all splits.
    """

    seed: int
    world_size: int
    distractors: int
    entities: dict[str, Entity]
    passages: list[dict[str, str]]
    split: str | None = None

    def of_kind(self, kind: str) -> list[Entity]:
        return [e for e in self.entities.values() if e.kind == kind]

    def follow(self, start: str, relations: Sequence[str]) -> list[str]:
        """Entity names along the chain (start first); raises ``KeyError`` where a relation is missing."""
        path = [start]
        for rel in relations:
            path.append(self.entities[path[-1]].relations[rel])
        return path

    def fact_path(self, start: str, relations: Sequence[str], attribute: str | None = None) -> list[tuple[str, ...]]:
        """The facts a lookup reads, in order: ``(subject, relation, object)`` per hop, then
        ``(entity, attribute, value)`` when ``attribute`` is set."""
        path = self.follow(start, relations)
        facts: list[tuple[str, ...]] = [(a, rel, b) for a, rel, b in zip(path, relations, path[1:])]
        if attribute is not None:
            facts.append((path[-1], attribute, str(self.entities[path[-1]].attributes[attribute])))
        return facts


def name_part(name: str, kind: str) -> str:
    """The split whose world may use ``name`` (thirds of the name space by a stable hash).

    People are keyed by surname, so a near-namesake stays in its original's part; the rest by full name.
    """
    key = name.split(" ", 1)[-1] if kind == "person" else name
    return SPLITS[_stable_int(f"gen-world-name:{key}") % len(SPLITS)]


class _Namer:
    """Draws unique made-up names; no name is a word-prefix of another (so fact patterns stay unambiguous).

    With ``split`` set, entity names are drawn only from that split's part of the name space (``name_part``).
    """

    def __init__(self, rng: np.random.Generator, split: str | None = None):
        self.rng = rng
        self.split = split
        self.used: set[str] = set()

    def _pick(self, pool: Sequence[str]) -> str:
        return pool[int(self.rng.integers(len(pool)))]

    def draw(self, make, kind: str | None = None) -> str:
        for _ in range(1000):
            name = make()
            if name in self.used or any(w.lower() in {"of", "or", "and", "the"} for w in name.split()):
                continue
            if self.split is not None and kind is not None and name_part(name, kind) != self.split:
                continue
            self.used.add(name)
            return name
        raise ConfigError("ran out of distinct names; lower world_size")

    def person(self) -> str:
        return self.draw(
            lambda: (
                f"{self._pick(_FIRST_ON)}{self._pick(_FIRST_MID)}{self._pick(_FIRST_END)} "
                f"{self._pick(_SUR_PRE)}{self._pick(_SUR_SUF)}"
            ),
            "person",
        )

    def namesake(self, name: str) -> str:
        """A different person whose name differs from ``name`` only in the ending of the first name."""
        first, last = name.split(" ", 1)
        stem = first[: max(2, len(first) - 2)]
        return self.draw(lambda: f"{stem}{self._pick(_FIRST_END)} {last}", "person")

    def city(self) -> str:
        return self.draw(lambda: f"{self._pick(_PLACE_PRE)}{self._pick(_PLACE_MID)}{self._pick(_CITY_SUF)}", "city")

    def country(self) -> str:
        return self.draw(
            lambda: f"{self._pick(_PLACE_PRE)}{self._pick(_PLACE_MID)}{self._pick(_COUNTRY_SUF)}", "country"
        )

    def org(self) -> str:
        return self.draw(lambda: f"{self._pick(_ORG_PRE)}{self._pick(_ORG_SUF)} {self._pick(tuple(_ORG_KINDS))}", "org")


def _demonym(country: str) -> str:
    stem = re.sub(r"(ia|land|ovia|ara|onia|eth|andria)$", "", country)
    return stem + {"land": "ish", "eth": "ethan"}.get(country[len(stem) :], "ian")


# the largest world a third of the name space holds (organisation names run out first)
MAX_SPLIT_WORLD_SIZE = 3000
WORLDS = ("per-split", "shared")


def world_split(world: str, split: str) -> str | None:
    """The split whose own world ``split``'s questions use: ``split`` under ``"per-split"``, ``None`` (the one
    shared world) under ``"shared"``."""
    if world not in WORLDS:
        raise ConfigError(f"world={world!r}; choose one of {', '.join(WORLDS)}")
    return check_split(split) if world == "per-split" else None


def _check_settings(world_size: int, distractors: int, split: str | None = None) -> None:
    if not 20 <= world_size <= 20_000:
        raise ConfigError(f"world_size={world_size}; use 20..20000 people")
    if split is not None and world_size > MAX_SPLIT_WORLD_SIZE:
        raise ConfigError(
            f"world_size={world_size}; a split's own world holds at most {MAX_SPLIT_WORLD_SIZE} people "
            '(its third of the name space runs out); use world="shared" for larger worlds'
        )
    if not 0 <= distractors <= 10:
        raise ConfigError(f"distractors={distractors}; use 0..10 distractor passages per person")


def build_world(seed: int = 0, world_size: int = 300, distractors: int = 2, split: str | None = None) -> World:
    """The world of ``seed``: ``world_size`` people plus proportional cities, countries and organisations.

    ``distractors`` is the number of event passages per person that mention them (and other entities
    and years) without stating any relation, so that naive name matching retrieves the wrong text; it
    also turns ``distractors * world_size / 10`` people into near-namesakes of others (same surname,
    first name differing in its ending).

    ``split`` (``train``, ``validation``, ``test``) builds that split's own world, whose entity names no
    other split's world uses; ``None`` builds the one world shared by all splits. Cached per settings.
    """
    part = None if split is None else check_split(split)
    _check_settings(int(world_size), int(distractors), part)
    return _build_world(int(seed), int(world_size), int(distractors), part)


@built_once(maxsize=16)
def _build_world(seed: int, world_size: int, distractors: int, split: str | None) -> World:
    keys = [_stable_int("gen-world"), seed, world_size, distractors]
    rng = np.random.default_rng(keys if split is None else [*keys, 1 + SPLITS.index(split)])
    namer = _Namer(rng, split)
    ents: dict[str, Entity] = {}
    n_countries, n_cities, n_orgs = max(4, world_size // 40), max(8, world_size // 6), max(8, world_size // 4)
    countries = [namer.country() for _ in range(n_countries)]
    cities = [namer.city() for _ in range(n_cities)]
    people = [namer.person() for _ in range(world_size)]
    for _ in range(distractors * world_size // 10):  # near-namesakes: "Alda Venn" next to "Aldo Venn"
        i, j = (int(k) for k in rng.choice(world_size, size=2, replace=False))
        people[j] = namer.namesake(people[i])
    orgs = [namer.org() for _ in range(n_orgs)]
    for i, name in enumerate(cities):
        country = countries[i] if i < n_countries else countries[int(rng.integers(n_countries))]
        ents[name] = Entity(
            name,
            "city",
            {"country": country},
            {"founded": int(rng.integers(1050, 1800)), "population": int(rng.integers(2_000, 2_500_000))},
        )
    for i, name in enumerate(countries):
        ents[name] = Entity(
            name, "country", {"capital": cities[i]}, details={"constitution": int(rng.integers(1700, 1950))}
        )
    births = sorted(int(y) for y in rng.integers(1760, 1995, size=world_size))
    order = rng.permutation(world_size)
    for rank, idx in enumerate(order):
        name = people[idx]
        born = births[rank]
        rel = {"birthplace": cities[int(rng.integers(n_cities))]}
        n_older = bisect.bisect_right(births, born - 12)  # people are placed in birth order
        if n_older:
            rel["mentor"] = people[order[n_older - 1 - int(rng.integers(min(n_older, 30)))]]
        ents[name] = Entity(
            name, "person", rel, {"born": born}, {"occupation": _OCCUPATIONS[int(rng.integers(len(_OCCUPATIONS)))]}
        )
    for name in orgs:
        founded = int(rng.integers(1790, 1985))
        lo, hi = bisect.bisect_left(births, founded - 70), bisect.bisect_right(births, founded - 20)
        founder = people[order[int(rng.integers(lo, hi))] if hi > lo else int(rng.integers(world_size))]
        kind = _ORG_KINDS[name.rsplit(" ", 1)[1]]
        ents[name] = Entity(
            name,
            "org",
            {"founder": founder, "home_city": cities[int(rng.integers(n_cities))]},
            {"founded": founded},
            {"kind": kind},
        )
    orgs_by_year = sorted(orgs, key=lambda o: ents[o].attributes["founded"])
    org_years = [ents[o].attributes["founded"] for o in orgs_by_year]
    for name in people:
        born = ents[name].attributes["born"]
        n_fit = bisect.bisect_right(org_years, born + 45)
        employer = orgs_by_year[int(rng.integers(n_fit))] if n_fit else orgs[int(rng.integers(n_orgs))]
        ents[name].relations["employer"] = employer
        ents[name].details["joined"] = max(born + int(rng.integers(19, 35)), ents[employer].attributes["founded"] + 1)
    mayors = rng.choice(world_size, size=n_cities, replace=False)
    for city, idx in zip(cities, mayors):
        ents[city].relations["mayor"] = people[int(idx)]
        ents[people[int(idx)]].details["mayor_of"] = city
    passages = [_passage(e, ents) for e in ents.values()]
    passages += _event_passages(rng, people, orgs, cities, distractors, namer)
    tag = f"w{seed}" if split is None else f"w{seed}-{split}"
    for i, p in enumerate(passages):
        p["id"] = f"{tag}-{i}"
    return World(seed, world_size, distractors, ents, passages, split)


def _passage(e: Entity, ents: dict[str, Entity]) -> dict[str, str]:
    r, a, d = e.relations, e.attributes, e.details
    if e.kind == "person":
        country = ents[r["birthplace"]].relations["country"]
        demonym = _demonym(country)
        art = "an" if demonym[0] in "AEIOU" else "a"
        parts = [
            f"{e.name} (born {a['born']}) is {art} {demonym} {d['occupation']}.",
            f"{e.name} was born in {r['birthplace']}.",
            f"{e.name} joined {r['employer']} in {d['joined']}.",
        ]
        if "mentor" in r:
            parts.append(f"{e.name} studied under {r['mentor']}.")
        if "mayor_of" in d:
            parts.append(f"Later {e.name.split()[0]} also served a term as mayor.")
    elif e.kind == "org":
        art = "an" if d["kind"][0] in "aeiou" else "a"
        parts = [
            f"{e.name} is {art} {d['kind']} founded in {a['founded']} by {r['founder']}.",
            f"{e.name} is headquartered in {r['home_city']}.",
        ]
    elif e.kind == "city":
        parts = [
            f"{e.name} is a city in {r['country']}, founded in {a['founded']}.",
            f"{e.name} has a population of {a['population']:,}.",
            f"The mayor of {e.name} is {r['mayor']}.",
        ]
    else:
        parts = [
            f"{e.name} is a country that adopted its constitution in {d['constitution']}.",
            f"The capital of {e.name} is {r['capital']}.",
        ]
    return {"title": e.name, "text": " ".join(parts)}


def _event_passages(
    rng: np.random.Generator, people: list[str], orgs: list[str], cities: list[str], distractors: int, namer: _Namer
) -> list[dict[str, str]]:
    out = []
    n_events = (distractors * len(people) + 1) // 2  # each event mentions two people
    for _ in range(n_events):
        p1, p2 = (people[int(i)] for i in rng.choice(len(people), size=2, replace=False))
        org, org2 = (orgs[int(i)] for i in rng.choice(len(orgs), size=2, replace=False))
        city = cities[int(rng.integers(len(cities)))]
        year = int(rng.integers(1800, 2020))
        title = namer.draw(lambda city=city, year=year: f"{year} {city} {_EVENTS[int(rng.integers(len(_EVENTS)))]}")
        text = (
            f"The {title} was held in {city} in {year}. {p1} and {p2} were among the speakers, "
            f"and {org} paid for the hall. Visitors from {org2} praised the talk {p1} gave "
            f"about work begun in {int(rng.integers(1780, 2020))}."
        )
        out.append({"title": title, "text": text})
    return out


def world_index(seed: int = 0, world_size: int = 300, distractors: int = 2, split: str | None = None) -> Any:
    """The BM25 index over the passages of ``build_world(seed, world_size, distractors, split)``, built once
    per settings per process."""
    return _world_index(int(seed), int(world_size), int(distractors), None if split is None else check_split(split))


@built_once(maxsize=16)
def _world_index(seed: int, world_size: int, distractors: int, split: str | None) -> Any:
    from agentflow_env.tools.search import BM25Index

    return BM25Index.build(build_world(seed, world_size, distractors, split).passages)


def make_world_tools(
    seed: int = 0,
    world_size: int = 300,
    distractors: int = 2,
    top_k: int = 3,
    extra_tools: Sequence[str] = ("calculator",),
    split: str | None = None,
) -> list[Tool]:
    """The search tool over the world of ``seed`` and ``split`` (``None``: the shared world; cached index)
    plus ``extra_tools`` by short name.

    ``python`` among ``extra_tools`` is skipped (with a log line) when that tool cannot be built here.
    """
    from agentflow_env.tools.search import BM25SearchTool

    part = None if split is None else check_split(split)
    _check_settings(int(world_size), int(distractors), part)
    search = BM25SearchTool(index=world_index(seed, world_size, distractors, part), top_k=int(top_k))
    tools: list[Tool] = [cast(Tool, search)]
    for name in extra_tools:
        tool = optional_tool(name)
        if tool is not None:
            tools.append(tool)
    return tools


def optional_tool(name: str) -> Tool | None:
    """``make_tool(name)``, or ``None`` (logged) for the Python tool when it is not available on this machine."""
    if name != "python":
        return make_tool(name)
    try:
        return make_tool(name)
    except Exception as exc:  # the sandboxed coder needs its module and a sandbox; math still works without it
        import logging

        logging.getLogger(__name__).warning(
            "python tool unavailable (%s: %s); continuing without it", type(exc).__name__, exc
        )
        return None


@dataclass(frozen=True)
class WorldOptions:
    """Which generated world a family's questions and tools read: the options the world families share.

    ``seed``, ``world_size`` (people; places and firms scale with it) and ``distractors`` (event passages per
    person that mention names without stating relations, and near-namesake people) make the world. ``world``
    says whose it is: ``"per-split"`` (the default) gives each split its own world with its own entity names,
    so no entity, fact or chain of a test question occurs in train; ``"shared"`` is the one world of earlier
    versions, split by question text only. Families take it as keyword options
    (``benchmarks.synthetic.common.options_as_keywords``); Gen-HopChain reads ``seed`` and ``world_size``
    (the people of its registry).
    """

    seed: int = 0
    world_size: int = 300
    distractors: int = 2
    world: str = "per-split"

    def __post_init__(self) -> None:
        for name in ("seed", "world_size", "distractors"):
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.world not in WORLDS:
            raise ConfigError(f"world={self.world!r}; choose one of {', '.join(WORLDS)}")

    def split_world(self, split: str) -> str | None:
        """The split whose own world ``split``'s questions use (``None``: the shared world)."""
        return world_split(self.world, split)

    def build(self, split: str) -> World:
        """The world ``split``'s questions use (cached per settings)."""
        return build_world(self.seed, self.world_size, self.distractors, self.split_world(split))

    def tools(self, split: str, top_k: int, extra_tools: Sequence[str]) -> list[Tool]:
        """BM25 search over the world ``split``'s questions use (index cached) plus ``extra_tools``."""
        part = self.split_world(split)
        return make_world_tools(self.seed, self.world_size, self.distractors, top_k, extra_tools, split=part)

    def tasks(
        self, family: str, split: str, make: Callable[[np.random.Generator], tuple[str, Task]], num_tasks: int
    ) -> GeneratedTasks:
        """The task source of ``split`` drawing with ``make``: per-split worlds are disjoint by their own material,
        so only the shared world splits its questions by a content hash."""
        by_hash = self.split_world(split) is None
        return GeneratedTasks(family, split, make, num_tasks=num_tasks, seed=self.seed, by_content_hash=by_hash)

    def task(
        self, prefix: str, family: str, text: str, answer: str, metadata: dict[str, Any], part: str | None
    ) -> Task:
        """A task over the world of ``part`` (``split_world(split)``; ``None``: the shared world), id'd by content
        and world; ``metadata["world"]`` names the world's split or ``"shared"``."""
        settings = (self.seed, self.world_size, self.distractors)
        meta = {"world_seed": self.seed, "world_size": self.world_size, "distractors": self.distractors}
        meta["world"] = part or "shared"
        meta.update(metadata)
        key = settings if part is None else (*settings, part)
        return Task(
            id=f"{prefix}-{Task.content_id(*key, text)}", question=text, answer=answer, family=family, metadata=meta
        )


def task_world(task: Task) -> World:
    """The world a Gen-MultiHop or Gen-Agentic task was drawn from (read from what :meth:`WorldOptions.task` wrote
    in its metadata)."""
    meta = task.metadata
    world = str(meta.get("world", "shared"))
    mode = "shared" if world == "shared" else "per-split"
    return WorldOptions(meta["world_seed"], meta["world_size"], meta["distractors"], mode).build(world)


# ---------------------------------------------------------------- scoring
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower case, digits without thousands separators, no punctuation, articles or extra spaces."""
    text = re.sub(r"(?<=\d),(?=\d{3})", "", str(text).lower())
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", text)  # periods, but not decimal points
    text = re.sub(r"(?<=\w)-|-(?!\d)", " ", text)  # hyphens, but not minus signs
    text = re.sub(r"[^\w\s/.-]", " ", text)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _as_number(text: str) -> Fraction | None:
    t = re.sub(r"(?<=\d),(?=\d{3})", "", text.strip()).rstrip(".")
    try:
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        return None


_ANSWER_WORDS = frozenset("born founded in on year".split())


class WorldAnswerScorer:
    """1.0 when the final answer names the gold entity or number (normalised exact match).

    An answer naming several candidates scores 0 (the single-commitment rule of
    :mod:`agentflow_env.scoring.commitment`: "or", lists, several numbers). A short answer sentence
    ("The answer is Velmora.", "born in 1843") also counts when the gold appears in it as whole words and
    every other word is a filler or a word of the question: no other entity, no other candidate of a
    comparison, no other number.
    """

    def __call__(self, prediction: str, task: Task) -> float:
        committed = read_commitment(prediction, [str(task.answer)], task.question)
        if committed.hedge is not None:
            return 0.0
        text = committed.value if _as_number(str(task.answer)) is not None else committed.text
        read, gold_read = number_with_unit(text), number_with_unit(str(task.answer))
        if read is not None and gold_read is not None:  # "1,879", "1 879", "1.879e3", "1879 cm^2"
            return float(read[0] == gold_read[0] and same_unit(read[1], gold_read[1]))
        pred, gold = normalize_answer(text), normalize_answer(str(task.answer))
        if not pred:
            return 0.0
        if pred == gold:
            return 1.0
        gnum, pnum = _as_number(gold), _as_number(pred)
        if gnum is not None and pnum is not None:
            return float(gnum == pnum)
        padded = f" {pred} "
        if f" {gold} " not in padded or len(pred.split()) > len(gold.split()) + 6 or " or " in padded:
            return 0.0
        others = [normalize_answer(o) for o in task.metadata.get("candidates", []) if str(o) != str(task.answer)]
        numbers = set(re.findall(r"-?\d+(?:[./]\d+)?", pred))
        if any(f" {o} " in padded for o in others) or (
            numbers and numbers != set(re.findall(r"-?\d+(?:[./]\d+)?", gold))
        ):
            return 0.0
        allowed = FILLER_WORDS | _ANSWER_WORDS | set(normalize_answer(task.question).split())
        return float(all(word in allowed for word in padded.replace(f" {gold} ", " ", 1).split()))
