"""The episode scheduler's parts: the episode clock, the planner batcher (a window, never a barrier) and
``run_episodes`` (every job once, errors stop the run)."""

from __future__ import annotations

import threading
import time

import pytest

from agentflow_env.clock import EpisodeClock
from agentflow_env.error import ConfigError
from agentflow_env.vector.scheduler import PlannerBatcher, run_episodes


def test_the_clock_counts_only_while_running_plus_charges() -> None:
    clock = EpisodeClock()
    clock.start()
    clock.pause()
    frozen = clock.elapsed()
    time.sleep(0.05)
    assert clock.elapsed() == frozen and not clock.running
    clock.charge(2.0)
    assert clock.elapsed() == pytest.approx(frozen + 2.0)
    clock.resume()
    time.sleep(0.02)
    assert clock.elapsed() > frozen + 2.0
    clock.start()
    assert clock.elapsed() < 1.0


def test_a_batch_gathers_the_ready_observations_and_never_waits_for_a_call_in_flight() -> None:
    calls: list[list[int]] = []

    def act(batch: list[int]) -> list[int]:
        calls.append(list(batch))
        time.sleep(0.5)
        return [x * 10 for x in batch]

    batcher = PlannerBatcher(act, window_s=0.05, max_batch=8, parallel=4)
    for _ in range(4):
        batcher.enter()
    out: dict[int, tuple[int, float]] = {}

    def ask(x: int, delay: float) -> None:
        time.sleep(delay)
        t0 = time.monotonic()
        item, _ = batcher.ask(x)
        out[x] = (item, time.monotonic() - t0)

    threads = [threading.Thread(target=ask, args=(x, d)) for x, d in ((1, 0.0), (2, 0.0), (3, 0.2), (4, 0.2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    assert {x: v[0] for x, v in out.items()} == {1: 10, 2: 20, 3: 30, 4: 40}
    assert sorted(map(sorted, calls)) == [[1, 2], [3, 4]], "each pair came ready within the window"
    # 3 and 4 did not wait for the first call (0.5 s) to finish: their own call started at once
    assert max(out[3][1], out[4][1]) < 0.5 + 0.4


def test_run_episodes_plays_every_job_once_and_stops_on_an_error() -> None:
    class Env:
        def __init__(self) -> None:
            self.n = 0

        def reset(self) -> int:
            self.n = 0
            return 0

        def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
            self.n += 1
            return self.n, 1.0, self.n >= 3, False, {"action": action}

    batcher = PlannerBatcher(lambda batch: [b + 100 for b in batch], window_s=0.001, max_batch=4, parallel=2)
    done: list[int] = []

    def start(job: int, slot: int) -> tuple[Env, int]:
        env = Env()
        return env, env.reset()

    run_episodes(
        range(10),
        concurrency=4,
        start=start,
        batcher_for=lambda job: batcher,
        action_of=lambda item: item,
        finish=lambda ep: None,
        on_done=lambda ep: done.append(ep.job) or ep.turns == 3 or pytest.fail("three turns"),
    )
    assert sorted(done) == list(range(10))

    def failing_start(job: int, slot: int) -> tuple[Env, int]:
        if job == 5:
            raise RuntimeError("reset failed")
        return start(job, slot)

    with pytest.raises(RuntimeError, match="reset failed"):
        run_episodes(
            range(50),
            concurrency=4,
            start=failing_start,
            batcher_for=lambda job: batcher,
            action_of=lambda item: item,
            finish=lambda ep: None,
            on_done=lambda ep: None,
        )
    with pytest.raises(ConfigError):
        run_episodes([], concurrency=0, start=start, batcher_for=None, action_of=None, finish=None, on_done=None)
    batcher.close()


def test_a_direct_batcher_asks_on_the_callers_thread_one_observation_at_a_time() -> None:
    calls: list[tuple[list[int], str]] = []

    def act(batch: list[int]) -> list[int]:
        calls.append((list(batch), threading.current_thread().name))
        if batch == [13]:
            raise ValueError("unlucky")
        return [x * 10 for x in batch]

    before = {t.name for t in threading.enumerate()}
    batcher = PlannerBatcher(act, window_s=30.0, max_batch=8, parallel=8, direct=True)
    assert not {t.name for t in threading.enumerate()} - before  # no dispatcher, no pool
    answers: dict[int, int] = {}

    def episode(x: int) -> None:
        threading.current_thread().name = f"episode-{x}"
        answers[x], _seconds = batcher.ask(x)

    threads = [threading.Thread(target=episode, args=(x,)) for x in range(6)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - started < 10  # the 30 s window is never waited for
    assert answers == {x: x * 10 for x in range(6)}
    assert sorted(calls) == [([x], f"episode-{x}") for x in range(6)]  # one call per ask, on the asking thread
    assert batcher.stats.act_calls == 6 and batcher.stats.batch_items == 6
    with pytest.raises(ValueError, match="unlucky"):  # the policy's error reaches the episode that asked
        batcher.ask(13)
    batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher.ask(1)
