"""Python tool calls through ``agentflow-env sandbox-server`` against the local sandbox, 64 clients at once, one run.

Two ways of running the same cells, interleaved round by round so both see the same machine load:

- ``local``: ``--clients`` threads, each with its own ``PythonCoderTool`` (the local sandbox, in this process);
- ``remote``: the same threads, each with ``PythonCoderTool(sandbox="remote:URL")`` against a sandbox server
  started here as a subprocess (``--concurrency`` cells at once, ``--queue`` waiting; busy answers are retried).

Each client plays ``--episodes`` episodes of ``--calls`` calls (a reset, then cells that build on the episode's
state), starting together once every client has its tool. Reported per way: calls per second (all clients
together, wall clock from that start), per-call latency p50/p99/mean (ms; an episode's first call includes its
fresh worker: forked ahead locally, at that call on the server),
CPU seconds of this process and of its waited children (the server, its zygote and workers, or the local zygote
and workers) per round, the busy answers, and the load average before and after. Prints JSON; ``--out`` writes it.

Usage: python perf/remote_sandbox.py [--clients 64] [--episodes 2] [--calls 5] [--rounds 2] [--concurrency 16]
       [--queue 64] [--out perf/results/remote_sandbox.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agentflow_env.tools.python.tool import PythonCoderTool

REPO = Path(__file__).resolve().parent.parent
CELLS = (
    "import math\nmath.seen = [n * n for n in range(200)]\nprint(len(math.seen))",
    "import math\nsum(math.seen)",
    "import sympy\nsympy.factor(sympy.Symbol('x') ** 2 - 5 * sympy.Symbol('x') + 6)",
    "import math\nmath.seen.append(-1)\nmath.seen[-3:]",
    "import math\nlen(math.seen)",
)
SERVER = """
import signal, sys, threading
from agentflow_env.remote.sandbox_server import SandboxServer
server = SandboxServer(port=0, concurrency=int(sys.argv[1]), queue=int(sys.argv[2]), max_sessions=200)
signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=server.close).start())
print(server.url, flush=True)
server.serve_forever()
"""


def _cpu() -> dict[str, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"self": me.ru_utime + me.ru_stime, "children": kids.ru_utime + kids.ru_stime}


def _client(
    sandbox: str, episodes: int, calls: int, latencies: list[float], errors: list[str], ready: threading.Barrier
) -> None:
    tool = PythonCoderTool(sandbox=sandbox)
    try:
        tool.warm_up()  # the local zygote's start is not a call's time
        ready.wait()
        for _ in range(episodes):
            tool.reset()
            for i in range(calls):
                start = time.perf_counter()
                result = tool.run(CELLS[i % len(CELLS)], 30)
                latencies.append(time.perf_counter() - start)
                if not result.ok:
                    errors.append(result.text[:200])
    finally:
        tool.close()


def run_way(sandbox: str, args: argparse.Namespace) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    ready = threading.Barrier(args.clients + 1)
    threads = [
        threading.Thread(target=_client, args=(sandbox, args.episodes, args.calls, latencies, errors, ready))
        for _ in range(args.clients)
    ]
    for thread in threads:
        thread.start()
    ready.wait()  # every client has its tool: the clock starts with the first episode
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {
        "calls": len(latencies),
        "wall_s": round(wall, 3),
        "calls_per_s": round(len(latencies) / wall, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "mean_ms": round(1000 * statistics.fmean(latencies), 2),
        "errors": len(errors),
        "first_errors": errors[:3],
    }


def start_server(concurrency: int, queue: int) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(concurrency), str(queue)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise SystemExit("the sandbox server did not start")
    return proc, url


def health(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url + "/v1/health", timeout=10) as reply:
        return json.loads(reply.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--queue", type=int, default=64)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    load_before = os.getloadavg()
    rounds: list[dict[str, Any]] = []
    sandbox_mode = None
    for number in range(args.rounds):
        for way in ("local", "remote") if number % 2 == 0 else ("remote", "local"):
            cpu = _cpu()
            load = os.getloadavg()
            if way == "local":
                result = run_way("auto", args)
                probe = PythonCoderTool(prestart=False)
                sandbox_mode = probe.sandbox_info.mode
                probe.close()
                busy = None
            else:
                proc, url = start_server(args.concurrency, args.queue)
                try:
                    result = run_way(f"remote:{url}", args)
                    busy = health(url)["busy_refusals"]
                finally:
                    proc.send_signal(signal.SIGTERM)  # the server closes its sessions and its zygote, then exits
                    proc.wait(60)
            after = _cpu()
            result.update(
                way=way,
                round=number,
                busy_refusals=busy,
                load_avg_before=[round(x, 2) for x in load],
                load_avg_after=[round(x, 2) for x in os.getloadavg()],
                cpu_s={k: round(after[k] - cpu[k], 2) for k in cpu},
            )
            rounds.append(result)
            print(json.dumps(result), file=sys.stderr, flush=True)

    def summary(way: str) -> dict[str, Any]:
        mine = [r for r in rounds if r["way"] == way]
        return {
            key: [r[key] for r in mine] for key in ("calls_per_s", "p50_ms", "p99_ms", "mean_ms", "errors", "cpu_s")
        }

    out = {
        "benchmark": "remote_sandbox",
        "command": " ".join(["python", "perf/remote_sandbox.py", *sys.argv[1:]]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_before": [round(x, 2) for x in load_before],
            "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "local_sandbox": sandbox_mode,
        "settings": {k: getattr(args, k) for k in ("clients", "episodes", "calls", "rounds", "concurrency", "queue")},
        "cells": list(CELLS),
        "summary": {way: summary(way) for way in ("local", "remote")},
        "rounds": rounds,
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
