"""``Gen-HopChain``: follow 1–3 links through a fictional registry whose facts only the registry tool returns.

A world (one per seed and split) links each of its people (named by the numbers 100, 101, ...) to three
others (``mentor``, ``rival``, ``friend``), drawn at random. A question names a start person and an ordered
list of links ("Start at person 117 and follow: mentor, then rival. Which person do you reach?"). The answer
is the number of the person reached; it appears nowhere in the question, and the links are random, so the
only way to it is to call the registry once per link and put the number each reply returns into the next
query. Episodes are 2–4 planner turns (one lookup per link, then the answer).

Splits: every split has the same people but its own random links (train, validation and test worlds share
no fact beyond chance: a link agrees between two worlds with probability 1/(people - 1)), and question texts
are dealt to splits by a hash of their content, so no test question is a train question. What training can
teach is therefore how to follow a chain through the replies, never where a chain leads: a policy that
memorised the train world answers test questions at chance.

Built for the CPU learning proof (``experiments/learning_proof.py --family hopchain``, issue 31).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentflow_env.error import ConfigError
from agentflow_env.tools.base import BaseTool, Tool
from agentflow_env.types import Task, ToolResult
from benchmarks.specs import BenchmarkSpec
from benchmarks.synthetic.common import SPLITS, GeneratedTasks, built_once, check_split, options_as_keywords
from benchmarks.synthetic.world import WorldAnswerScorer, WorldOptions

__all__ = [
    "LINKS",
    "SPEC",
    "ChainQuestion",
    "HopChainScorer",
    "RegistryTool",
    "build_registry",
    "load_tasks",
    "make_tools",
    "parse_question",
    "parse_reply",
    "render_question",
]

FAMILY = "Gen-HopChain"
LINKS = ("mentor", "rival", "friend")
TOOL_NAME = "Registry_Tool"
PEOPLE = 300  # the people of every world: the numbers 100..399


@dataclass(frozen=True)
class ChainQuestion:
    start: str
    links: tuple[str, ...]

    @property
    def hops(self) -> int:
        return len(self.links)


def render_question(q: ChainQuestion) -> str:
    return f"Start at person {q.start} and follow: {', then '.join(q.links)}. Which person do you reach?"


_QUESTION_RE = re.compile(r"^Start at person (\d{3}) and follow: (.+)\. Which person do you reach\?$")


def parse_question(text: str) -> ChainQuestion | None:
    m = _QUESTION_RE.match(text.strip())
    if not m:
        return None
    links = tuple(part.strip() for part in m.group(2).split(", then "))
    if not links or any(link not in LINKS for link in links):
        return None
    return ChainQuestion(m.group(1), links)


_REPLY_RE = re.compile(r"^(mentor|rival|friend) of (\d{3}): (\d{3})$")


def parse_reply(text: str) -> tuple[str, str, str] | None:
    """``(link, subject, person)`` of a registry reply, or ``None`` when ``text`` is not one."""
    m = _REPLY_RE.match(text.strip())
    return (m.group(1), m.group(2), m.group(3)) if m else None


@built_once(maxsize=16)
def build_registry(seed: int, split: str, world_size: int = PEOPLE) -> dict[str, dict[str, str]]:
    """``person -> {link: person}`` of the world of ``seed`` and ``split``: the people ``100..99+world_size``,
    each linked to three distinct others at random (the split's own draw)."""
    part = check_split(split)
    if not 4 <= world_size <= 900:
        raise ConfigError(f"world_size={world_size}; give 4..900")
    people = [str(100 + k) for k in range(world_size)]
    rng = np.random.default_rng([int(seed), SPLITS.index(part), 77])
    registry: dict[str, dict[str, str]] = {}
    for k, person in enumerate(people):
        others = [j for j in range(world_size) if j != k]
        picks = rng.choice(others, size=len(LINKS), replace=False)
        registry[person] = {link: people[int(j)] for link, j in zip(LINKS, picks)}
    return registry


def follow(registry: dict[str, dict[str, str]], q: ChainQuestion) -> list[str]:
    path = [q.start]
    for link in q.links:
        path.append(registry[path[-1]][link])
    return path


class RegistryTool(BaseTool):
    """Looks up one link of one person in the world of ``seed`` and ``split``."""

    name = TOOL_NAME
    description = "Looks up one link (mentor, rival or friend) of one person in the registry."
    input_spec = "a link and a person number, as: <link> of <number>"
    examples: Sequence[str] = ("mentor of 100",)  # person 100 exists in every world

    def __init__(self, seed: int = 0, split: str = "test", world_size: int = PEOPLE) -> None:
        self.registry = build_registry(int(seed), check_split(split), int(world_size))

    def _run(self, command: str, timeout: float) -> ToolResult:
        m = re.fullmatch(r"\s*(\w+) of (?:person )?(\d+)\s*\.?\s*", command)
        if not m:
            return ToolResult(text="Error: write <link> of <number>, e.g. mentor of 100", ok=False, error="format")
        link, person = m.group(1).lower(), m.group(2)
        if link not in LINKS:
            return ToolResult(text=f"Error: unknown link {link}; links: {', '.join(LINKS)}", ok=False, error="link")
        if person not in self.registry:
            return ToolResult(text=f"Error: no person {person} in the registry", ok=False, error="person")
        return ToolResult(text=f"{link} of {person}: {self.registry[person][link]}")


class HopChainScorer(WorldAnswerScorer):
    """The generated worlds' scorer (one answer span, hedges score 0): 1.0 when the final answer is the reached
    person's number ("566", "The answer is 566.")."""


def _scorer() -> HopChainScorer:
    return HopChainScorer()


# the world options a registry reads: its seed and its number of people
_registry_options = options_as_keywords(
    "world_options", WorldOptions, names=("seed", "world_size"), defaults={"world_size": PEOPLE}
)


@_registry_options
def load_tasks(
    split: str = "test",
    num_tasks: int | None = None,
    hops: tuple[int, int] | list[int] = (1, 3),
    links: Sequence[str] | None = None,
    *,
    world_options: WorldOptions,
) -> GeneratedTasks:
    """Questions over the world of ``split`` (keywords ``seed`` and ``world_size``) with a uniform number of
    links in ``hops`` (``(lo, hi)`` inclusive, or a list); the reached person is never the start nor on the way.
    ``num_tasks`` defaults to 4000 for train and 600 for validation and test (about half of the distinct test
    questions).
    ``links`` limits the chains to some link kinds (e.g. ``["mentor"]``: the question's only variable is then
    its length; the registry still answers every kind)."""
    kinds = tuple(LINKS if links is None else links)
    if not kinds or any(k not in LINKS for k in kinds):
        raise ConfigError(f"links={links!r}; choose among {', '.join(LINKS)}")
    if num_tasks is None:
        num_tasks = 4000 if check_split(split) == "train" else 600
    choices = list(range(int(hops[0]), int(hops[1]) + 1)) if isinstance(hops, tuple) else [int(h) for h in hops]
    if not choices or any(not 1 <= h <= 6 for h in choices):
        raise ConfigError(f"hops={hops!r}; give a (lo, hi) range or a list within 1..6")
    # one source per setting, shared by every env of the process (it is thread-safe and grows lazily)
    seed, people = world_options.seed, world_options.world_size
    return _source(check_split(split), seed, int(num_tasks), tuple(choices), people, kinds)


@built_once(maxsize=32)
def _source(
    part: str, seed: int, num_tasks: int, choices: tuple[int, ...], world_size: int, kinds: tuple[str, ...]
) -> GeneratedTasks:
    registry = build_registry(seed, part, world_size)
    people = sorted(registry)

    def make(rng: np.random.Generator) -> tuple[str, Task]:
        for _ in range(100):
            h = choices[int(rng.integers(len(choices)))]
            q = ChainQuestion(people[int(rng.integers(len(people)))], tuple(rng.choice(kinds, size=h).tolist()))
            path = follow(registry, q)
            if len(set(path)) < len(path):
                continue  # a cycle: the answer would equal a person already named
            text = render_question(q)
            meta: dict[str, Any] = {"hops": h, "path": path, "world_seed": int(seed), "world": part}
            tid = f"hop-{Task.content_id(seed, part, text)}"
            return text, Task(id=tid, question=text, answer=path[-1], family="search", metadata=meta)
        raise ConfigError(f"{FAMILY}: no chain without cycles found; raise world_size")

    return GeneratedTasks(FAMILY, part, make, num_tasks=num_tasks, seed=seed)  # question texts split by hash


@_registry_options
def make_tools(split: str = "test", *, world_options: WorldOptions) -> list[Tool]:
    return [RegistryTool(world_options.seed, split, world_options.world_size)]


INSTRUCTIONS = (
    "The registry tool holds every link; look each link up, in the order given, starting from the named "
    "person and then from the person each reply names. Give the final answer as the person's number only."
)

SPEC = BenchmarkSpec(
    name=FAMILY,
    family="search",
    load_tasks=load_tasks,
    make_scorer=_scorer,
    tools=(TOOL_NAME,),
    max_turns=4,
    source="generated: 4000 train / 600 validation / 600 test tasks; 300 people, each split's own links per seed",
    description="Follow 1-3 links through a fictional registry; only the registry tool returns each link.",
    make_tools=make_tools,
    instructions=INSTRUCTIONS,
    size=None,
)
