"""The env server on loopback, paired with what it serves, in one run; prints JSON.

- ``one_client``: step latency of one ``RemoteEnv`` client (p50/p99), paired with the same steps played
  in-process (the HTTP hop's cost is the difference), interleaved in rounds;
- ``many_clients``: ``--clients`` keep-alive connections driven by asyncio loops in ``--async-procs``
  separate processes (raw sockets, prebuilt requests, each reply parsed and checked against the episode
  played in-process; a closed loop with no think time) for ``--seconds``: episodes/s, step latency
  p50/p99 and the server's and the clients' CPU per request, paired in ``--many-rounds`` interleaved rounds
  with the same load against a stdlib asyncio server that only replays one recorded episode's replies (what
  this machine gives without env work). ``--thread-clients`` adds the earlier load: ``RemoteEnv`` clients
  in threads of ``--client-procs`` processes, against both servers and stepping envs in-process (their own
  GIL sets that tail). With ``--batch`` also one ``RemoteEnvBatch`` of the same size stepping every
  episode per request;
- ``creation``: on a fresh server each time, one episode creation alone, then ``--clients`` creations
  at once; the ratio of the two (shared precomputes are built once, not once per thread).

    python perf/env_server.py --clients 64 --seconds 10 [--env agentflow/Gen-GameOf24-v2] [--parts one,many,creation]
        [--compare-gc]   (the many-client load also against a server with Python's GC defaults)
    python perf/env_server.py --smoke   # CI: two tiny runs in the shape of perf/results/env_server.json

Each server runs in its own process (``--port 0``, loopback only); the peers are in ``env_server_peers.py``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from env_server_peers import start_echo, start_replay, start_server, stop


def _load_summary(
    clients: int, processes: int, seconds: float, episodes: int, lat: list[float], errors: list[str]
) -> dict[str, Any]:
    """What every many-client run reports: counts, rates and step latency percentiles."""
    return {
        "clients": clients,
        "client_processes": processes,
        "clients_failed": len(errors),
        "first_error": errors[0] if errors else None,
        "seconds": seconds,
        "episodes": episodes,
        "steps": len(lat),
        "episodes_per_s": round(episodes / seconds, 1),
        "steps_per_s": round(len(lat) / seconds, 1),
        "step_latency_ms": {"p50": _pct(lat, 50), "p90": _pct(lat, 90), "p99": _pct(lat, 99)},
    }


def _pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(xs) * 1000, q)), 3) if xs else float("nan")


# ------------------------------------------------------------------ one client vs in-process
def one_client(url: str, env_id: str, rounds: int, episodes: int) -> dict[str, Any]:
    import socket

    import gymnasium as gym

    import agentflow_env  # noqa: F401
    from agentflow_env.remote.client import RemoteEnv
    from agents.policies.scripted import scripted_planner_for

    planner = scripted_planner_for(env_id)
    envs = {"remote": RemoteEnv(env_id, url, split="test", timeout_s=60), "local": gym.make(env_id, split="test")}
    lat: dict[str, list[float]] = {"remote": [], "local": [], "echo": []}
    ratios, echo_ratios, per_round = [], [], []
    echo, echo_port = start_echo()
    echo_sock = socket.create_connection(("127.0.0.1", echo_port))
    echo_sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def echo_once(payload: bytes) -> float:
        t0 = time.perf_counter()
        echo_sock.sendall(b"POST /x HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
        need, got = len(payload), b""
        while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < need:
            got += echo_sock.recv(65536)
        return time.perf_counter() - t0

    for r in range(-1, rounds):  # round -1 warms up (imports, pools, the calculator's helper) and is not kept
        medians = {}
        for name in ("remote", "local") if r % 2 else ("local", "remote"):
            env, xs = envs[name], []
            for e in range(episodes):
                obs, _ = env.reset(seed=(r + 1) * 1000 + e)
                done = False
                while not done:
                    action = planner.act([obs])[0]
                    t0 = time.perf_counter()
                    obs, _, terminated, truncated, _ = env.step(action)
                    xs.append(time.perf_counter() - t0)
                    done = terminated or truncated
            if r >= 0:
                lat[name] += xs
                medians[name] = statistics.median(xs)
        payload = json.dumps({"observation": obs, "reward": 0.0, "info": {}}).encode()  # a step reply's size
        xs = [echo_once(payload) for _ in range(len(lat["remote"]) // max(r + 1, 1) or 50)]
        if r >= 0:
            lat["echo"] += xs
            ratios.append(medians["remote"] / medians["local"])
            per_round.append(round(medians["remote"] * 1000, 3))
            echo_ratios.append(medians["remote"] / statistics.median(xs))
    for env in envs.values():
        env.close()
    echo_sock.close()
    stop(echo)
    return {
        "steps_each": len(lat["remote"]),
        "remote_step_ms": {"p50": _pct(lat["remote"], 50), "p99": _pct(lat["remote"], 99)},
        "in_process_step_ms": {"p50": _pct(lat["local"], 50), "p99": _pct(lat["local"], 99)},
        "remote_step_p50_ms_per_round": per_round,
        "stdlib_echo_ms": {"p50": _pct(lat["echo"], 50), "p99": _pct(lat["echo"], 99)},
        "http_hop_ms_p50": round(_pct(lat["remote"], 50) - _pct(lat["local"], 50), 3),
        "paired_ratio_remote_over_in_process_p50": round(statistics.median(ratios), 2),
        "paired_ratio_remote_over_stdlib_echo_p50": round(statistics.median(echo_ratios), 2),
        "goal": "remote p50 <= 2 ms",
    }


# ------------------------------------------------------------------ many clients
def _client(url: str, env_id: str, seed0: int, ready: Any, go: Any, seconds: float, out: list) -> None:
    """One client: episodes on the server at ``url``, or in this process when ``url`` is ``"in-process"``."""
    import gymnasium as gym

    from agentflow_env.remote.client import RemoteEnv
    from agents.policies.scripted import scripted_planner_for

    planner = scripted_planner_for(env_id)
    latencies: list[float] = []
    episodes, seed, error = 0, seed0, None
    try:
        if url == "in-process":
            env = gym.make(env_id, split="test")
        else:
            env = RemoteEnv(env_id, url, split="test", timeout_s=60)
    except Exception as exc:  # counted as a failed client, not hidden
        out.append((0, latencies, f"{type(exc).__name__}: {exc}"))
        ready.release()
        return
    ready.release()
    go.wait()
    stop_at = time.monotonic() + seconds
    try:
        while time.monotonic() < stop_at:
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
        error = f"{type(exc).__name__}: {exc}"
    finally:
        env.close()
    out.append((episodes, latencies, error))


def _client_proc(url: str, env_id: str, seeds: list[int], seconds: float, ready: Any, go: Any, queue: Any) -> None:
    """Clients in threads of one process: each makes its episode, says it is ready, and plays from ``go``."""
    import agentflow_env  # noqa: F401

    out: list = []
    threads = [threading.Thread(target=_client, args=(url, env_id, s, ready, go, seconds, out)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put(out)


def many_clients(url: str, env_id: str, clients: int, procs: int, seconds: float) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    queue, ready, go = ctx.Queue(), ctx.Semaphore(0), ctx.Event()
    groups = [list(range(i, clients, procs)) for i in range(procs)]
    ps = [ctx.Process(target=_client_proc, args=(url, env_id, g, seconds, ready, go, queue)) for g in groups if g]
    for p in ps:
        p.start()
    deadline = time.monotonic() + 300
    for _ in range(clients):  # every client imported, connected and holding its episode
        while not ready.acquire(timeout=1.0):
            if time.monotonic() > deadline or not all(p.is_alive() for p in ps):
                for p in ps:
                    p.kill()
                raise RuntimeError("a client process died or the clients were not ready within 300 s")
    go.set()
    out = [row for _ in ps for row in queue.get(timeout=seconds + 300)]
    for p in ps:
        p.join(30)
    episodes = sum(e for e, _, _ in out)
    lat = [x for _, xs, _ in out for x in xs]
    errors = [err for _, _, err in out if err]
    return {**_load_summary(clients, len(ps), seconds, episodes, lat, errors), "goal": "p99 <= 50 ms"}


# ------------------------------------------------------------------ many clients: asyncio load generator
def _record_plans(env_id: str, seeds: list[int]) -> list[dict[str, Any]]:
    """Each seed's episode played in-process by the scripted planner: the actions the load generator sends
    (the env is deterministic per seed, so the server's episode ends on the same step)."""
    import gymnasium as gym

    import agentflow_env  # noqa: F401
    from agents.policies.scripted import scripted_planner_for

    planner, env, plans = scripted_planner_for(env_id), gym.make(env_id, split="test"), []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        actions, done = [], False
        while not done:
            actions.append(planner.act([obs])[0])
            obs, _, terminated, truncated, _ = env.step(actions[-1])
            done = terminated or truncated
        plans.append({"seed": seed, "actions": actions})
    env.close()
    return plans


def _request(method: str, path: str, body: Any) -> bytes:
    payload = b"" if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}"
    return head.encode() + b"\r\n\r\n" + payload


async def _exchange(reader: Any, writer: Any, message: bytes) -> tuple[int, dict[str, Any]]:
    """One request on a keep-alive connection: one write, the reply read and parsed (status, JSON)."""
    writer.write(message)
    head = await reader.readuntil(b"\r\n\r\n")
    status, length = int(head[9:12]), 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    return status, json.loads(await reader.readexactly(length))


async def _async_client(url: str, env_id: str, plans: list[dict[str, Any]], gate: Any, lat: list, out: dict) -> None:
    """One client on its own keep-alive connection: create an episode, then reset and step the recorded
    episodes in turn until ``gate`` says stop; each step's latency is write to parsed reply."""
    import asyncio
    import socket

    host, port = url.split("//")[1].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    status, created = await _exchange(
        reader, writer, _request("POST", "/v1/episodes", {"env_id": env_id, "kwargs": {"split": "test"}})
    )
    if status != 200:
        raise RuntimeError(f"create answered {status}: {created}")
    base = f"/v1/episodes/{created['episode_id']}"
    episodes = [
        (
            _request("POST", f"{base}/reset", {"seed": p["seed"], "options": None}),
            [_request("POST", f"{base}/step", {"action": a}) for a in p["actions"]],
        )
        for p in plans
    ]
    gate["ready"] += 1
    await gate["go"].wait()
    clock, i = time.perf_counter, 0
    try:
        while not gate["stop"]:
            reset, steps = episodes[i % len(episodes)]
            i += 1
            status, _ = await _exchange(reader, writer, reset)
            if status != 200:
                raise RuntimeError(f"reset answered {status}")
            for k, message in enumerate(steps):
                t0 = clock()
                status, reply = await _exchange(reader, writer, message)
                lat.append(clock() - t0)
                done = reply.get("terminated") or reply.get("truncated")
                if status != 200 or bool(done) != (k == len(steps) - 1):
                    raise RuntimeError(f"step {k} answered {status}, done={done}, not as recorded in-process")
            out["episodes"] += 1
        await _exchange(reader, writer, _request("DELETE", base, None))
    finally:
        writer.close()


def _async_proc(url: str, env_id: str, plans: list, clients: int, seconds: float, ready: Any, go: Any, q: Any) -> None:
    """``clients`` asyncio clients in this one process (one thread, one loop): made and connected, then
    released together by ``go``; puts (episodes, latencies, errors, CPU seconds) on ``q``."""
    import asyncio

    async def run() -> tuple[int, list[float], list[str], float]:
        gate = {"ready": 0, "go": asyncio.Event(), "stop": False}
        lat: list[float] = []
        out = {"episodes": 0}
        per = max(1, len(plans) // clients)
        tasks = [
            asyncio.ensure_future(_async_client(url, env_id, plans[c * per : (c + 1) * per], gate, lat, out))
            for c in range(clients)
        ]
        while gate["ready"] < clients and not any(t.done() for t in tasks):
            await asyncio.sleep(0.01)
        for _ in range(gate["ready"]):
            ready.release()
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        cpu0 = time.process_time()
        gate["go"].set()
        await asyncio.sleep(seconds)
        gate["stop"] = True
        cpu = time.process_time() - cpu0
        done = await asyncio.gather(*tasks, return_exceptions=True)
        errors = [f"{type(e).__name__}: {e}" for e in done if isinstance(e, BaseException)]
        return out["episodes"], lat, errors, cpu

    q.put(asyncio.run(run()))


def _cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``), NaN where unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return float("nan")


def many_async(
    url: str, env_id: str, plans: list, clients: int, procs: int, seconds: float, server_pid: int | None = None
) -> dict[str, Any]:
    """``clients`` keep-alive connections driven by asyncio loops in ``procs`` processes (raw sockets, each
    request one prebuilt buffer, each reply parsed as JSON): a closed loop with no think time."""
    ctx = mp.get_context("spawn")
    queue, ready, go = ctx.Queue(), ctx.Semaphore(0), ctx.Event()
    counts = [clients // procs + (i < clients % procs) for i in range(procs)]
    starts = [sum(counts[:i]) for i in range(procs)]
    per = len(plans) // clients
    ps = [
        ctx.Process(
            target=_async_proc,
            args=(url, env_id, plans[s * per : (s + n) * per], n, seconds, ready, go, queue),
        )
        for s, n in zip(starts, counts)
        if n
    ]
    for p in ps:
        p.start()
    deadline = time.monotonic() + 300
    for _ in range(clients):
        while not ready.acquire(timeout=1.0):
            if time.monotonic() > deadline or not all(p.is_alive() for p in ps):
                for p in ps:
                    p.kill()
                raise RuntimeError("a client process died or the clients were not ready within 300 s")
    load0, cpu0 = _load(), _cpu_s(server_pid)
    go.set()
    rows = [queue.get(timeout=seconds + 300) for _ in ps]
    server_cpu = _cpu_s(server_pid) - cpu0  # includes the few requests after the stop (DELETEs)
    for p in ps:
        p.join(30)
    episodes = sum(r[0] for r in rows)
    lat = [x for r in rows for x in r[1]]
    errors = [e for r in rows for e in r[2]]
    return {
        **_load_summary(clients, len(ps), seconds, episodes, lat, errors),
        "client_cpu_ms_per_request": round(1000 * sum(r[3] for r in rows) / max(1, len(lat) + episodes), 4),
        "server_cpu_ms_per_request": round(1000 * server_cpu / max(1, len(lat) + episodes), 4),
        "load_average_1m_at_go": load0,
    }


def many_paired(
    url: str, replay_url: str, args: argparse.Namespace, pids: dict[str, int], default_gc_url: str | None = None
) -> dict[str, Any]:
    """The same asyncio load generator against the env server and the replay server, in interleaved rounds
    (with ``--thread-clients`` also ``RemoteEnv`` clients in threads, and in-process envs in those threads;
    with ``--compare-gc`` also an env server started with ``--no-gc-tuning``)."""
    seeds = [1000 * i for i in range(args.clients * 4)]
    plans = _record_plans(args.env, seeds)
    plans = [p for p in plans if len(p["actions"]) == len(plans[0]["actions"])]  # the replay's episode length
    kinds = {"server": url, "replay_server": replay_url}
    if default_gc_url:
        kinds["server_default_gc"] = default_gc_url
    if args.thread_clients:
        kinds.update(
            server_thread_clients=url, replay_thread_clients=replay_url, in_process_thread_clients="in-process"
        )
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    order = list(kinds)
    for r in range(args.many_rounds):
        for kind in order if r % 2 == 0 else order[::-1]:
            if "thread_clients" in kind:
                row = many_clients(kinds[kind], args.env, args.clients, args.client_procs, args.seconds)
            else:
                row = many_async(
                    kinds[kind], args.env, plans, args.clients, args.async_procs, args.seconds, pids.get(kind)
                )
            runs[kind].append(row)
    out: dict[str, Any] = {kind: _merge(rows) for kind, rows in runs.items()}
    ratios = [
        a["step_latency_ms"]["p99"] / b["step_latency_ms"]["p99"]
        for a, b in zip(runs["server"], runs["replay_server"])
        if b["step_latency_ms"]["p99"] > 0
    ]
    out["paired_ratio_p99_server_over_replay_server"] = round(statistics.median(ratios), 2) if ratios else None
    out["paired_ratio_p99_server_over_replay_server_per_round"] = [round(x, 2) for x in ratios]
    if default_gc_url:
        gc_ratios = [
            a["step_latency_ms"]["p99"] / b["step_latency_ms"]["p99"]
            for a, b in zip(runs["server"], runs["server_default_gc"])
            if b["step_latency_ms"]["p99"] > 0
        ]
        out["paired_ratio_p99_server_over_default_gc_per_round"] = [round(x, 2) for x in gc_ratios]
    out["clients_are"] = (
        f"{args.clients} keep-alive TCP connections driven by asyncio loops in {args.async_procs} separate "
        "process(es), one loop each (raw sockets, TCP_NODELAY, each request one prebuilt buffer, each reply "
        "parsed as JSON and checked against the episode played in-process), a closed loop with no think time: "
        f"{len(plans)} episodes recorded in-process by the scripted planner (seeds 0, 1000, ...), each client "
        "cycling through its own; latency is one step's write to its parsed reply (resets not timed)"
    )
    out["note"] = (
        "server and replay_server are the same load generator against the env server and against a stdlib "
        "asyncio server (one process) that replays one recorded episode's replies and does nothing else, in "
        "interleaved rounds; the generator and both servers share the machine's cores"
    )
    out["goal"] = "server p99 <= 50 ms"
    return out


def _merge(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs of one kind: the median of their figures, and each run's p99."""
    first = dict(rows[0])
    for key in ("episodes_per_s", "steps_per_s"):
        first[key] = round(statistics.median(row[key] for row in rows), 1)
    first["step_latency_ms"] = {
        q: round(statistics.median(row["step_latency_ms"][q] for row in rows), 3) for q in ("p50", "p90", "p99")
    }
    first["p99_ms_per_round"] = [row["step_latency_ms"]["p99"] for row in rows]
    first["clients_failed"] = sum(row["clients_failed"] for row in rows)
    first["first_error"] = next((row["first_error"] for row in rows if row["first_error"]), None)
    if "client_cpu_ms_per_request" in first:
        for key in ("client_cpu_ms_per_request", "server_cpu_ms_per_request"):
            first[key] = statistics.median(row[key] for row in rows)
        first["load_average_1m_per_round"] = [row["load_average_1m_at_go"] for row in rows]
    for key in ("episodes", "steps", "goal", "load_average_1m_at_go"):
        first.pop(key, None)
    first["rounds"] = len(rows)
    return first


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def batched(url: str, env_id: str, clients: int, seconds: float) -> dict[str, Any]:
    from agentflow_env.remote.client import RemoteEnvBatch
    from agents.policies.scripted import scripted_planner_for

    planner = scripted_planner_for(env_id)
    batch = RemoteEnvBatch(env_id, url, clients, split="test", timeout_s=120)
    steps, lat, episodes, r = 0, [], 0, 0
    stop_at = time.monotonic() + seconds
    try:
        while time.monotonic() < stop_at:
            obs = [o for o, _ in batch.reset(seeds=[r * clients + i for i in range(clients)])]
            r += 1
            alive = [True] * clients
            while any(alive) and time.monotonic() < stop_at:
                t0 = time.perf_counter()
                out = batch.step(planner.act(obs))  # a finished episode is stepped again: counted, not timed
                lat.append(time.perf_counter() - t0)
                steps += sum(alive)
                for i, (o, _, term, trunc, _) in enumerate(out):
                    obs[i] = o
                    if alive[i] and (term or trunc):
                        alive[i] = False
                        episodes += 1
    finally:
        batch.close()
    return {
        "episodes_in_one_batch": clients,
        "episode_steps_per_s": round(steps / seconds, 1),
        "episodes_per_s": round(episodes / seconds, 1),
        "request_latency_ms": {"p50": _pct(lat, 50), "p99": _pct(lat, 99)},
    }


# ------------------------------------------------------------------ creations on a fresh server
def _create(url: str, env_id: str, n: int) -> float:
    """Seconds until ``n`` episodes created at once on the server all exist."""
    from agentflow_env.remote.client import RemoteEnv

    made: list[Any] = []
    lock = threading.Lock()

    def one() -> None:
        env = RemoteEnv(env_id, url, split="test", timeout_s=120)
        with lock:
            made.append(env)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if len(made) != n:
        raise RuntimeError(f"{n - len(made)} of {n} creations failed")
    for env in made:
        env.close()
    return elapsed


def creation(env_id: str, clients: int, rounds: int) -> dict[str, Any]:
    one, many = [], []
    for r in range(rounds):
        for n in (1, clients) if r % 2 == 0 else (clients, 1):
            server, url = start_server()
            try:
                (one if n == 1 else many).append(_create(url, env_id, n))
            finally:
                stop(server)
    ratios = [m / o for o, m in zip(one, many)]
    return {
        "fresh_server_rounds": rounds,
        "one_creation_s": round(statistics.median(one), 3),
        f"{clients}_creations_at_once_s": round(statistics.median(many), 3),
        "paired_ratio_many_over_one": round(statistics.median(ratios), 2),
        "goal": "ratio <= 2",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--async-procs", type=int, default=2, help="processes of the asyncio load generator")
    ap.add_argument(
        "--thread-clients", action="store_true", help="also RemoteEnv clients in threads (--client-procs processes)"
    )
    ap.add_argument("--client-procs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--env", default="agentflow/Gen-GameOf24-v2")
    ap.add_argument("--rounds", type=int, default=4, help="interleaved rounds of the paired measurements")
    ap.add_argument("--many-rounds", type=int, default=2, help="interleaved rounds of the many-client runs")
    ap.add_argument("--batch", action="store_true", help="also step every episode in one RemoteEnvBatch")
    ap.add_argument("--parts", default="one,many,creation", help="which measurements (comma-separated)")
    ap.add_argument(
        "--compare-gc",
        action="store_true",
        help="also run the many-client load against a server started with --no-gc-tuning (Python's GC defaults)",
    )
    ap.add_argument("--out", default="")
    ap.add_argument(
        "--smoke", action="store_true", help="two runs of tiny counts (one and many clients), as the results file"
    )
    args = ap.parse_args()
    if args.smoke:
        from smoke_runs import runs_in_fresh_processes, smoke_envelope

        tiny = "--clients 4 --seconds 0.5 --rounds 1 --many-rounds 1 --async-procs 1 --client-procs 1 --parts one,many"
        runs = runs_in_fresh_processes(__file__, [*tiny.split(), "--env", args.env])
        text = json.dumps(smoke_envelope("env_server", "python perf/env_server.py --smoke", runs), indent=2)
        print(text)
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(text + "\n")
        return

    result: dict[str, Any] = {"benchmark": "env_server", "env_id": args.env, "load_average_1m_at_start": _load()}
    parts = set(args.parts.split(","))
    server, url = start_server()
    try:
        if "one" in parts:
            result["one_client"] = one_client(url, args.env, args.rounds, episodes=50)
        with tempfile.TemporaryDirectory() as folder:
            replay, replay_url = start_replay(url, args.env, folder)
            plain, plain_url = start_server("--no-gc-tuning") if args.compare_gc else (None, None)
            try:
                if "many" in parts:
                    pids = {"server": server.pid, "replay_server": replay.pid}
                    if plain is not None:
                        pids["server_default_gc"] = plain.pid
                    result["many_clients"] = many_paired(url, replay_url, args, pids, plain_url)
            finally:
                stop(replay)
                if plain is not None:
                    stop(plain)
        if args.batch:
            result["one_batch"] = batched(url, args.env, args.clients, args.seconds)
    finally:
        stop(server)
    if "creation" in parts:
        result["creation"] = creation(args.env, args.clients, args.rounds)
    result.update(cpus=os.cpu_count(), load_average_1m=_load(), python=platform.python_version())
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
