"""The observation space: each env gets text spaces of its own (copies of one prototype), equal to a fresh
``UnicodeText()``, accepting any string, each with its own random generator."""

from __future__ import annotations

import numpy as np

from agentflow_env.spaces import UnicodeText, observation_space, text_space


def test_each_observation_space_is_its_own_and_equals_a_fresh_one() -> None:
    one, two = observation_space(), observation_space()
    assert set(one.spaces) == {"question", "memory", "tools", "prompt"}
    for key, space in one.spaces.items():
        fresh = UnicodeText()
        assert space == fresh and space is not two.spaces[key]
        assert space.character_list == fresh.character_list and space.max_length == fresh.max_length
        assert space.contains("any text — π ≈ 3.14 中文 \x00") and not space.contains(b"bytes")
    assert one.contains({"question": "q", "memory": "", "tools": "t", "prompt": "p"})


def test_seeding_one_space_leaves_the_others_alone() -> None:
    one, two, three = observation_space(), observation_space(), observation_space()
    one.seed(7)
    two.seed(7)
    first = one.spaces["memory"].sample()
    assert two.spaces["memory"].sample() == first  # the same seed, the same draw
    three.seed(8)
    assert one.spaces["memory"].np_random is not three.spaces["memory"].np_random
    unseeded = observation_space().spaces["memory"]
    assert isinstance(unseeded.np_random, np.random.Generator)
    assert unseeded.np_random is not one.spaces["memory"].np_random


def test_an_envs_spaces_are_its_own() -> None:
    import gymnasium as gym

    import agentflow_env  # noqa: F401 - registers the ids

    assert text_space() == UnicodeText() and text_space() is not text_space()
    one, two = gym.make("agentflow/Gen-Math-v5"), gym.make("agentflow/Gen-Math-v5")
    try:
        assert one.action_space == two.action_space == UnicodeText() and one.action_space is not two.action_space
        one.action_space.seed(3)
        two.action_space.seed(4)
        assert one.action_space.np_random is not two.action_space.np_random
        assert one.observation_space.spaces["memory"] is not two.observation_space.spaces["memory"]
        obs, _ = one.reset(seed=0)
        assert one.observation_space.contains(obs)
    finally:
        one.close()
        two.close()
