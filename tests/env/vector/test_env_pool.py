"""``EnvPool``: envs reused by (id, kwargs), bounded, closed on shutdown, safe across threads."""

from __future__ import annotations

import threading

import pytest

from agentflow_env.error import ConfigError
from agentflow_env.vector import EnvPool


class FakeEnv:
    def __init__(self, env_id: str, **kwargs: object):
        self.env_id, self.kwargs, self.closed = env_id, kwargs, 0

    def close(self) -> None:
        self.closed += 1


def test_envs_are_reused_by_id_and_kwargs_and_closed_on_shutdown():
    made: list[FakeEnv] = []
    pool = EnvPool(lambda env_id, **kw: made.append(FakeEnv(env_id, **kw)) or made[-1], max_idle=1)
    a = pool.borrow("x", max_turns=3)
    pool.give_back(a)
    assert pool.borrow("x", max_turns=3) is a  # the same key: reused
    b = pool.borrow("x", max_turns=4)  # other kwargs: a new env
    c = pool.borrow("x", max_turns=3)  # a is out: a new env
    assert len({id(a), id(b), id(c)}) == 3 and b.kwargs == {"max_turns": 4}
    pool.give_back(a)
    pool.give_back(c)  # beyond max_idle=1 for this key: closed
    assert (a.closed, c.closed) == (0, 1)
    with pytest.raises(ConfigError, match="not borrowed"):
        pool.give_back(c)
    assert pool.counts() == {"idle": 1, "borrowed": 1, "live": 2}
    with pool:
        pass  # close(): the idle env closes, the borrowed one when it comes back
    assert a.closed == 1 and b.closed == 0
    pool.give_back(b)
    assert b.closed == 1 and pool.counts() == {"idle": 0, "borrowed": 0, "live": 0}
    with pytest.raises(ConfigError, match="after close"):
        pool.borrow("x")


def test_a_broken_env_is_not_reused_and_close_env_id_closes_one_benchmark():
    pool = EnvPool(FakeEnv)
    with pytest.raises(RuntimeError), pool.env("x") as env:
        raise RuntimeError("episode failed")
    assert env.closed == 1 and pool.borrow("x") is not env
    out, idle_y = pool.borrow("x", k=1), pool.borrow("y")
    pool.give_back(idle_y)
    kept = pool.borrow("x")
    pool.give_back(kept)
    pool.close_env_id("x")
    assert kept.closed == 1 and idle_y.closed == 0 and out.closed == 0
    pool.give_back(out)  # borrowed when its id was closed: closed on return
    assert out.closed == 1 and pool.borrow("y") is idle_y


def test_max_envs_bounds_live_envs_makes_room_and_times_out():
    pool = EnvPool(FakeEnv, max_envs=2, timeout_s=0.2)
    a, b = pool.borrow("x"), pool.borrow("y")
    with pytest.raises(ConfigError, match="max_envs"):
        pool.borrow("z")
    pool.give_back(b)
    c = pool.borrow("z")  # y's idle env is closed to make room
    assert b.closed == 1 and c.env_id == "z" and pool.counts()["live"] == 2
    got: list[FakeEnv] = []
    waiter = threading.Thread(target=lambda: got.append(pool.borrow("x")))
    pool.timeout_s = 5.0
    waiter.start()
    pool.give_back(a)  # the waiting borrower takes it
    waiter.join(5)
    assert got == [a]


def test_borrow_and_give_back_from_many_threads():
    made = []
    lock = threading.Lock()

    def make(env_id: str, **kw: object) -> FakeEnv:
        with lock:
            made.append(FakeEnv(env_id, **kw))
            return made[-1]

    pool = EnvPool(make, max_envs=4, timeout_s=10)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            for i in range(200):
                env = pool.borrow("x", k=(seed + i) % 3)
                assert env.kwargs == {"k": (seed + i) % 3} and env.closed == 0
                pool.give_back(env)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and pool.counts()["borrowed"] == 0 and pool.counts()["live"] <= 4
    pool.close()
    assert all(env.closed == 1 for env in made)


def test_the_default_make_is_gymnasium_make():
    with EnvPool() as pool, pool.env("agentflow/Gen-GameOf24-v3", max_turns=2) as env:
        obs, _ = env.reset(seed=0)
        assert "question" in obs
