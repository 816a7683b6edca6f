"""The generated world families make the same tasks as before the WorldOptions refactor (issue 36).

Each case draws a few tasks of one family, split and option set, through the env id's own loader route
(``make_env``'s option routing) or the family's ``load_tasks``, and hashes their content (id, question,
answer, family, metadata). The digests were recorded from the code before ``WorldOptions``; a change in
any generated task (a seed, a draw, an id, a metadata field) changes a digest.
"""

from __future__ import annotations

import hashlib
import json
import warnings

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import ConfigError
from agentflow_env.registration import LATEST_VERSION
from benchmarks.specs import get_spec
from benchmarks.synthetic import hopchain, multihop
from benchmarks.synthetic.world import WorldOptions

OPTION_SETS = {
    "Gen-MultiHop": ({}, {"seed": 3, "world_size": 120, "distractors": 5, "hops": (3, 6)}, {"world": "shared"}),
    "Gen-Agentic": ({}, {"seed": 2, "world_size": 90, "distractors": 0, "magnitude": 1000}, {"world": "shared"}),
    "Gen-HopChain": ({}, {"seed": 4, "world_size": 40, "hops": [2, 3]}, {"links": ["mentor"], "num_tasks": 50}),
}
SPLITS = ("train", "validation", "test")
N = 6


def _digest(tasks) -> str:
    rows = [
        {"id": t.id, "question": t.question, "answer": t.answer, "family": t.family, "metadata": t.metadata}
        for t in (tasks[i] for i in range(N))
    ]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()[:16]


def task_digest(family: str, split: str, options: dict) -> str:
    spec = get_spec(family)
    return _digest(spec.load_tasks(split=split, **spec.loader_kwargs({"num_tasks": 20, **options})))


def _cases() -> list[tuple[str, str, int]]:
    return [(family, split, k) for family, sets in OPTION_SETS.items() for split in SPLITS for k in range(len(sets))]


@pytest.mark.parametrize(("family", "split", "k"), _cases())
def test_generated_tasks_are_unchanged(family, split, k):
    options = OPTION_SETS[family][k]
    assert task_digest(family, split, options) == PINNED[f"{family}/{split}/{k}"]


@pytest.mark.parametrize("family", sorted(OPTION_SETS))
def test_every_env_id_serves_the_pinned_tasks(family):
    """Every version of the family's env id routes its options to the same loader: the same test tasks."""
    for version in range(LATEST_VERSION + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # older versions warn that they are out of date
            env = gym.make(f"agentflow/{family}-v{version}", split="test", **OPTION_SETS[family][1])
        try:
            assert _digest(env.unwrapped.tasks) == PINNED[f"{family}/test/1"], version
        finally:
            env.close()


PINNED: dict[str, str] = {
    "Gen-MultiHop/train/0": "55d6d8ae28f8bfa8",
    "Gen-MultiHop/train/1": "b7e5559c9880658d",
    "Gen-MultiHop/train/2": "b17d8a8a84203d38",
    "Gen-MultiHop/validation/0": "3c3023de4c52200b",
    "Gen-MultiHop/validation/1": "92d1dc40ddeee83f",
    "Gen-MultiHop/validation/2": "edd50ea210e0c109",
    "Gen-MultiHop/test/0": "a9e639b26eccd8f8",
    "Gen-MultiHop/test/1": "464081f5e2dbec66",
    "Gen-MultiHop/test/2": "8b5523d5ab1c05c8",
    "Gen-Agentic/train/0": "4a7a1150886567ff",
    "Gen-Agentic/train/1": "46d9c200cc304634",
    "Gen-Agentic/train/2": "001602798d2cf12b",
    "Gen-Agentic/validation/0": "98a2656ac34b444a",
    "Gen-Agentic/validation/1": "ce925e5b8a8c8dc2",
    "Gen-Agentic/validation/2": "a5cc8fe34516c89d",
    "Gen-Agentic/test/0": "41d040ea38005bdd",
    "Gen-Agentic/test/1": "6b3495cb77444219",
    "Gen-Agentic/test/2": "47d7e9289035fe8e",
    "Gen-HopChain/train/0": "be1d69cd73c7d7db",
    "Gen-HopChain/train/1": "fa7fe2b8b14445ea",
    "Gen-HopChain/train/2": "e234c16ae17fe0e9",
    "Gen-HopChain/validation/0": "7bd2efb5864a4983",
    "Gen-HopChain/validation/1": "5a1fd8670c2e14fb",
    "Gen-HopChain/validation/2": "fb769344a1ac4938",
    "Gen-HopChain/test/0": "4564def9b01bdbf0",
    "Gen-HopChain/test/1": "294013bd315e0b09",
    "Gen-HopChain/test/2": "2ea8ee7af31dc179",
}


def test_the_families_take_the_world_options_as_keywords():
    """WorldOptions reaches make_env as the keywords it always took; Gen-HopChain takes only seed and world_size."""
    world = {"seed", "world_size", "distractors", "world"}
    assert get_spec("Gen-MultiHop").loader_options == {"split", "num_tasks", "hops", "comparison", *world}
    assert get_spec("Gen-Agentic").loader_options == {"split", "num_tasks", "hops", "magnitude", "templates", *world}
    assert get_spec("Gen-HopChain").loader_options == {"split", "num_tasks", "hops", "links", "seed", "world_size"}
    for family in ("Gen-MultiHop", "Gen-Agentic"):
        assert get_spec(family).tool_options == {"split", "top_k", *world}
    assert get_spec("Gen-HopChain").tool_options == {"split", "seed", "world_size"}
    assert WorldOptions(seed="3", world_size=50.0) == WorldOptions(3, 50)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="world='mixed'"):
        multihop.load_tasks("test", world="mixed")
    with pytest.raises(TypeError, match="distractors"):
        hopchain.load_tasks("test", distractors=1)
