"""Digests that pin a grammar's verdicts and readings (used by the tests of the grammar after it): the reward of
every answer style through ``env.step`` (one "1"/"0" per answer, rotating formats), and the scorer's reading
(text, whether it hedges, its score) of a larger sample. Moved here from ``test_answer_grammar_v5.py`` (test files
never import each other, tests/test_layers.py); the digests it recorded are unchanged."""

from __future__ import annotations

import hashlib
import warnings

import gymnasium as gym

from tests.answer_styles import FORMATS, HALVES, action, task_styles
from tests.reward_cases import golds_of, kind_of, spread


def make(env_id: str, data_dir: object = None) -> gym.Env:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gym.make(env_id, **({"data_dir": str(data_dir)} if data_dir else {}))


def verdicts(env_id: str) -> str:
    env = make(env_id)
    base = env.unwrapped
    kind = kind_of(base.scorer)
    pool = [g for i in spread(len(base.tasks), 60) for g in golds_of(base.tasks[i])]
    bits, n = [], 0
    for index in spread(len(base.tasks), 4):
        for half in HALVES:
            for style in task_styles(base.tasks[index], kind, pool, half, per_kind=8, seed=5):
                env.reset(options={"index": index})
                bits.append("1" if env.step(action(style.answer, FORMATS[n % 3]))[1] >= 1 else "0")
                n += 1
    return hashlib.sha256("".join(bits).encode()).hexdigest()[:16] + f":{len(bits)}"


def readings(env_id: str, data_dir: object = None) -> str:
    base = make(env_id, data_dir).unwrapped
    kind = kind_of(base.scorer)
    pool = [g for i in spread(len(base.tasks), 60) for g in golds_of(base.tasks[i])]
    digest, n = hashlib.sha256(), 0
    for index in spread(len(base.tasks), 6):
        task = base.tasks[index]
        for half in HALVES:
            for style in task_styles(task, kind, pool, half, per_kind=10, seed=11):
                text, hedge = base.scorer.read(style.answer, task)
                digest.update(f"{text}\x00{hedge is None}\x00{base.scorer(style.answer, task)}\x01".encode())
                n += 1
    return digest.hexdigest()[:16] + f":{n}"
