"""Gen-MultiHop and Gen-Agentic splits are disjoint by content, by chain and by fact: each split has its own world.

Overlap is measured between train and test, train and validation, validation and test, by question text,
by (start entity, relation chain), by the facts a question reads and by the entities on its path. The old
shared world stays available as ``world="shared"``, and there the same measures do find overlap.
"""

from __future__ import annotations

import re

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import ConfigError
from benchmarks.specs import make_env
from benchmarks.synthetic import agentic, multihop
from benchmarks.synthetic.overlap import MEASURES, split_overlap, task_facts, task_lookups
from benchmarks.synthetic.world import MAX_SPLIT_WORLD_SIZE, build_world, name_part, task_world

WORLD_FAMILIES = {"Gen-MultiHop": multihop, "Gen-Agentic": agentic}
PAIRS = (("train", "test"), ("train", "validation"), ("validation", "test"))


def _tasks(name: str, split: str, n: int, **kwargs):
    return list(WORLD_FAMILIES[name].load_tasks(split, seed=0, num_tasks=n, **kwargs))


@pytest.mark.parametrize("name", sorted(WORLD_FAMILIES))
def test_splits_share_no_question_chain_fact_or_entity(name):
    tasks = {"train": _tasks(name, "train", 1500), "validation": _tasks(name, "validation", 300)}
    tasks["test"] = _tasks(name, "test", 500)
    for reference, probe in PAIRS:
        counts = split_overlap(tasks[reference], tasks[probe])
        assert counts["probe_tasks"] == len(tasks[probe])
        assert {k: counts[k] for k in MEASURES} == dict.fromkeys(MEASURES, 0), (reference, probe, counts)
    for split, ts in tasks.items():
        assert {t.metadata["world"] for t in ts} == {split}


def test_one_familys_train_split_shows_nothing_of_the_others_test_split():
    """Both families read the same per-split worlds, so training on one and testing on the other stays disjoint."""
    for train_family, test_family in (("Gen-MultiHop", "Gen-Agentic"), ("Gen-Agentic", "Gen-MultiHop")):
        counts = split_overlap(_tasks(train_family, "train", 800), _tasks(test_family, "test", 300))
        assert {k: counts[k] for k in MEASURES} == dict.fromkeys(MEASURES, 0), (train_family, test_family)
    same_world = split_overlap(_tasks("Gen-MultiHop", "test", 300), _tasks("Gen-Agentic", "test", 300))
    assert same_world["any_fact"] > 100  # the same test world: the measure does see shared facts


@pytest.mark.parametrize("name", sorted(WORLD_FAMILIES))
def test_the_shared_world_option_overlaps_and_the_measure_sees_it(name):
    """The old single world: questions still differ by text, but chains and facts repeat across splits."""
    train, test = _tasks(name, "train", 500, world="shared"), _tasks(name, "test", 500, world="shared")
    counts = split_overlap(train, test)
    assert counts["question"] == 0
    assert counts["start_chain"] > 20 and counts["any_fact"] > 400 and counts["all_facts"] > 100
    shared = build_world(0, 300, 2)
    assert all(task_world(t) is shared and t.metadata["world"] == "shared" for t in train + test)


def test_overlap_measure_counts_a_repeated_fact_chain_and_question():
    """The measure on hand-picked tasks: one shared fact, one shared chain, one identical question."""
    tasks = _tasks("Gen-MultiHop", "test", 200, hops=2, comparison=0.0)
    first = tasks[0]
    assert split_overlap([first], [first]) == {
        "question": 1,
        "start_chain": 1,
        "start_lookup": 1,
        "any_fact": 1,
        "all_facts": 1,
        "entity": 1,
        "probe_tasks": 1,
    }
    facts = task_facts(first)
    sharing = [t for t in tasks[1:] if task_facts(t) & facts]
    assert sharing, "a 300-person world repeats some fact within 200 two-hop questions"
    assert split_overlap([first], sharing)["any_fact"] == len(sharing)
    lookups = task_lookups(first)
    assert all(f in facts for lk in lookups for f in task_world(first).fact_path(lk.start, lk.relations))


@pytest.mark.parametrize(("seed", "size", "distractors"), [(0, 300, 2), (3, 120, 6), (7, 2000, 0)])
def test_split_worlds_use_disjoint_names(seed, size, distractors):
    worlds = {split: build_world(seed, size, distractors, split) for split in ("train", "validation", "test")}
    names = {split: set(w.entities) for split, w in worlds.items()}
    assert not names["train"] & names["validation"]
    assert not names["train"] & names["test"]
    assert not names["validation"] & names["test"]
    for split, world in worlds.items():
        assert world.split == split and len(world.entities) == len(build_world(seed, size, distractors).entities)
        assert all(name_part(e.name, e.kind) == split for e in world.entities.values())
        assert all(p["id"].startswith(f"w{seed}-{split}-") for p in world.passages)
    shared = set(build_world(seed, size, distractors).entities)
    assert len(shared - names["test"]) > len(shared) // 2  # the shared world is another world


@pytest.mark.parametrize("name", sorted(WORLD_FAMILIES))
def test_each_split_searches_its_own_world(name):
    """The env's search corpus is the world of its split: train finds train entities and no test entity."""
    test_task = _tasks(name, "test", 1)[0]
    test_start = task_lookups(test_task)[0].start
    for split in ("train", "validation", "test"):
        env = gym.make(f"agentflow/{name}-v1", split=split, num_tasks=3).unwrapped
        try:
            search = env.tools[0]
            task = env.tasks[0]
            start = task_lookups(task)[0].start
            hit = search.run(start, 5.0)
            assert hit.ok and start in hit.text
            probe = search.run(test_start, 5.0)
            found = re.search(rf"(?<![\w-]){re.escape(test_start)}(?![\w-])", probe.text) is not None
            assert found == (split == "test"), (split, test_start)
        finally:
            env.close()


def test_split_aliases_and_tasks_given_with_a_split_use_that_world():
    env = make_env("Gen-MultiHop", split="val", num_tasks=2)
    try:
        assert env.tasks[0].metadata["world"] == "validation"
        start = task_lookups(env.tasks[0])[0].start
        assert start in env.tools[0].run(start, 5.0).text
    finally:
        env.close()
    train_tasks = _tasks("Gen-Agentic", "train", 2)
    env = make_env("Gen-Agentic", split="train", tasks=train_tasks)
    try:
        start = task_lookups(train_tasks[0])[0].start
        assert start in env.tools[0].run(start, 5.0).text
    finally:
        env.close()


def test_world_knob_is_checked():
    for family in WORLD_FAMILIES.values():
        with pytest.raises(ConfigError, match="world="):
            family.load_tasks("test", world="mixed")
        with pytest.raises(ConfigError, match="world="):
            family.make_tools(world="mixed")
        with pytest.raises(ConfigError, match="shared"):
            family.load_tasks("test", world_size=MAX_SPLIT_WORLD_SIZE + 1)
        with pytest.raises(ConfigError, match="split"):
            family.make_tools(split="dev-2")
    assert len(multihop.load_tasks("test", num_tasks=3, world="shared", world_size=4000)) == 3
