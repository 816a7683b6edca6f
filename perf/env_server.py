"""Load test of ``agentflow-env env-server`` on loopback: N concurrent ``RemoteEnv`` clients play
scripted episodes for a bounded time; prints episodes/s and step latency percentiles as JSON.

    python perf/env_server.py --clients 64 --seconds 20 [--env agentflow/Gen-GameOf24-v1] [--out FILE]

The server runs in its own process (``--port 0``, loopback only); requests stop at the time limit
or at ``--max-episodes``, whichever comes first. Also reports the same episodes played in-process by
one client, for the overhead of the HTTP hop.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time

import numpy as np

import agentflow_env  # noqa: F401
from agentflow_env.remote import RemoteEnv
from agents.policies.scripted import scripted_planner_for


def _client(url: str, env_id: str, seed0: int, stop_at: float, budget: list[int], lock: threading.Lock, out: dict):
    planner = scripted_planner_for(env_id)
    latencies: list[float] = []
    episodes, seed = 0, seed0
    try:
        env = RemoteEnv(env_id, url, split="test", timeout_s=60)
    except Exception as exc:  # counted as a failed client, not hidden
        out[seed0] = (0, latencies, f"{type(exc).__name__}: {exc}")
        return
    try:
        while time.monotonic() < stop_at:
            with lock:
                if budget[0] <= 0:
                    break
                budget[0] -= 1
            obs, _ = env.reset(seed=seed)
            seed += 1000
            done = False
            while not done:
                action = planner.act([obs])[0]
                t0 = time.perf_counter()
                obs, _, terminated, truncated, _ = env.step(action)
                latencies.append(time.perf_counter() - t0)
                done = terminated or truncated
            episodes += 1
    except Exception as exc:
        out[seed0] = (episodes, latencies, f"{type(exc).__name__}: {exc}")
        return
    finally:
        env.close()
    out[seed0] = (episodes, latencies, None)


def _local_rate(env_id: str, seconds: float) -> float:
    import gymnasium as gym

    planner = scripted_planner_for(env_id)
    env = gym.make(env_id, split="test")
    stop_at, n = time.monotonic() + seconds, 0
    while time.monotonic() < stop_at:
        obs, _ = env.reset(seed=n)
        done = False
        while not done:
            obs, _, terminated, truncated, _ = env.step(planner.act([obs])[0])
            done = terminated or truncated
        n += 1
    return n / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--max-episodes", type=int, default=20_000)
    ap.add_argument("--env", default="agentflow/Gen-GameOf24-v1")
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    server = subprocess.Popen(
        [sys.executable, "-m", "agentflow_env.cli", "env-server", "--port", "0", "--max-episodes", "4096"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        line = server.stdout.readline()
        url = line.split(" on ")[1].split()[0]
        out: dict = {}
        lock = threading.Lock()
        budget = [args.max_episodes]
        started = time.monotonic()
        stop_at = started + args.seconds
        threads = [
            threading.Thread(target=_client, args=(url, args.env, i, stop_at, budget, lock, out))
            for i in range(args.clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(args.seconds + 120)
        wall = time.monotonic() - started
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    episodes = sum(e for e, _, _ in out.values())
    lat = np.array([x for _, xs, _ in out.values() for x in xs]) * 1000
    errors = [err for _, _, err in out.values() if err]
    result = {
        "env_id": args.env,
        "clients": args.clients,
        "clients_failed": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": round(wall, 2),
        "episodes": episodes,
        "steps": int(lat.size),
        "episodes_per_s": round(episodes / wall, 1),
        "steps_per_s": round(lat.size / wall, 1),
        "step_latency_ms": {
            q: round(float(np.percentile(lat, p)), 2) for q, p in (("p50", 50), ("p90", 90), ("p99", 99))
        }
        if lat.size
        else {},
        "local_in_process_episodes_per_s": round(_local_rate(args.env, min(args.seconds, 5.0)), 1),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
