"""Evaluation and rollout throughput against a loopback LLM server that answers after a fixed latency L.

The replies (``classify``, ``default_reply``) answer every call of both flows: the planner, the paper flow's
query analysis, executor, generalist tool, verifier and final output, the llm modes' executor, verifier and
generator, and the judge; each episode takes two tool steps (paper-v2, on AgentFlow's own prompts, one). The
measurement serves them from a process of its own (:mod:`perf.latency_process`, aiohttp), so the eval's CPU is
this process's alone; :class:`LatencyServer` serves them in-process for the tests.

With C episodes in flight and k LLM calls per episode, each taking L, no runner can finish more than
C/(k*L) episodes per second (``ratio``: the rate over that bound, ``steady_ratio`` without the ramp-up and
the last wave), nor more than C/L requests per second (``ratio_active``: over the active window, first request
in to last reply out). Each row also gives ``eval_cpu_ms_per_request`` (this process's CPU, every thread, per
request; ``_active``: within the active window; ``_steady``: within the steady window of ``steady_ratio``), the
load average before and after, and ``floor``: the same request bodies sent again from one asyncio loop with a
bare aiohttp session, at the same C.

    python perf/eval_throughput.py --data-dir TESTSETS --agentflow-src CHECKOUT   # C = 64, L = 0.1 and 0.5
    python perf/eval_throughput.py --latency 0.5 --concurrency 16 64 --cases offline_llm paper rollouts

Cases: ``offline_llm`` (offline-v1 with the llm modes, up to 100 tasks per family), ``paper_v2`` (paper-v2
``--fast`` with ``--agentflow-src``), ``paper`` (paper-v1 ``--fast``), ``rollouts`` (``collect_group_rollouts``,
G = 4 on Gen-Math), each about ``--waves`` episodes per slot. Prints one JSON object; ``--out FILE`` also writes
it. The paper cases need the AgentFlow test sets (``--data-dir`` or $AGENTFLOW_DATA_DIR) and paper-v2 the
checkout (``--agentflow-src`` or $AGENTFLOW_SRC); without them a case is skipped and the output says so.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PAPER_PLAN = (
    "Justification: one generalist call.\nContext: nothing yet\nSub-Goal: Answer the question directly.\n"
    "Tool Name: Generalist_Solution_Generator_Tool"
)
PAPER_COMMAND = 'Generated Command:\n```python\nexecution = tool.execute(query="Answer the question directly.")\n```'
_TOOLS_RE = re.compile(r"^- ([A-Za-z0-9_]+):", re.MULTILINE)
_EXAMPLE_RE = re.compile(r"^  Example command: (.*)$", re.MULTILINE)


def classify(body: dict[str, Any]) -> str:
    """Which call a request is: by the model name (planner, judge), then by the prompt's opening."""
    if body.get("model") in ("planner", "judge"):
        return str(body["model"])
    user = str(body["messages"][-1]["content"]).lstrip()
    for opening, kind in (
        ("Job: study the query", "query_analysis"),
        ("Job: write the exact command", "executor"),
        ("Job: decide whether", "verifier"),
        ("Job: write a concise final answer", "final_output"),
        ("The team's planner has picked a tool", "llm_executor"),
        ("You review the team's progress", "llm_verifier"),
        ("Write the final answer to the question", "llm_generator"),
    ):
        if user.startswith(opening):
            return kind
    return "tool"  # the paper flow's generalist tool


def default_reply(kind: str, body: dict[str, Any], steps: int = 2) -> str:
    """A valid reply for every call; an episode takes ``steps`` tool steps, then the verifier says STOP."""
    user = str(body["messages"][-1]["content"])
    if kind == "planner":
        if "Generalist_Solution_Generator_Tool" in user:  # the paper flow's planner
            return PAPER_PLAN
        tools = _TOOLS_RE.findall(user)
        examples = _EXAMPLE_RE.findall(user)
        if not tools:
            return "Final Answer: 42"
        return f"Tool Name: {tools[0]}\nSub-Goal: Work it out.\nCommand: {examples[0] if examples else '1+1'}"
    if kind == "verifier":
        return "Conclusion: STOP" if f"'Action Step {steps}'" in user else "More is needed.\nConclusion: CONTINUE"
    if kind == "llm_verifier":
        return "Conclusion: STOP" if f"Step {steps}:" in user else "Conclusion: CONTINUE"
    if kind == "llm_executor":
        found = re.search(r"Example command: (.*)", user)
        return f"Command: {found.group(1) if found else '1+1'}"
    if kind == "judge":
        return "VERDICT: CORRECT" if "42" in user else "VERDICT: INCORRECT"
    return {
        "query_analysis": "The query needs one fact; the generalist tool can give it.",
        "executor": PAPER_COMMAND,
        "tool": "The generalist says 42.",
        "final_output": "Process summary: the generalist answered.\nAnswer: 42",
        "llm_generator": "Final Answer: 42",
    }[kind]


class LatencyServer:
    """An OpenAI-compatible ``/chat/completions`` on 127.0.0.1 that answers every request after ``latency_s``.

    ``latency_for(kind, body)`` and ``reply_for(kind, body)`` override the latency and the reply per call
    (``None``: the default). Replies depend only on the request, so runs are deterministic.
    """

    def __init__(
        self,
        latency_s: float,
        *,
        steps: int = 2,
        latency_for: Callable[[str, dict[str, Any]], float | None] | None = None,
        reply_for: Callable[[str, dict[str, Any]], str | None] | None = None,
    ):
        self.latency_s, self.steps = latency_s, steps
        self.latency_for, self.reply_for = latency_for, reply_for
        self.kinds: Counter[str] = Counter()
        self.finished: dict[str, list[float]] = {}  # per kind: when each request was answered
        self._lock = threading.Lock()
        self._in_flight = 0
        self.peak = 0
        self._area = 0.0
        self._last = self._t0 = time.monotonic()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: one connection per client thread
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server._enter()
                try:
                    kind = classify(body)
                    delay = server.latency_for(kind, body) if server.latency_for else None
                    time.sleep(server.latency_s if delay is None else delay)
                    text = server.reply_for(kind, body) if server.reply_for else None
                    text = default_reply(kind, body, server.steps) if text is None else text
                finally:
                    server._leave(kind if "kind" in locals() else "unknown")
                message = {"role": "assistant", "content": text}
                payload = {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", ""),
                    "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                }
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 512

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _advance(self) -> None:
        now = time.monotonic()
        self._area += self._in_flight * (now - self._last)
        self._last = now

    def _enter(self) -> None:
        with self._lock:
            self._advance()
            self._in_flight += 1
            self.peak = max(self.peak, self._in_flight)

    def _leave(self, kind: str) -> None:
        with self._lock:
            self._advance()
            self._in_flight -= 1
            self.kinds[kind] += 1
            self.finished.setdefault(kind, []).append(self._last)

    def reset_counters(self) -> None:
        with self._lock:
            self.kinds.clear()
            self.finished.clear()
            self.peak = self._in_flight
            self._area = 0.0
            self._last = self._t0 = time.monotonic()

    def counters(self) -> dict[str, Any]:
        with self._lock:
            self._advance()
            span = max(self._last - self._t0, 1e-9)
            return {
                "requests": sum(self.kinds.values()),
                "by_kind": dict(self.kinds),
                "finished": {k: list(v) for k, v in self.finished.items()},
                "mean_in_flight": self._area / span,
                "peak_in_flight": self.peak,
            }

    def __enter__(self) -> LatencyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def offline_llm_protocol(url: str, folder: Path, fast_tasks: int = 8) -> Path:
    """offline-v1 with the llm executor, verifier and generator on the loopback server (a new name: not a board)."""
    from leaderboards.protocol import PROTOCOL_DIR

    text = (PROTOCOL_DIR / "offline-v1.toml").read_text(encoding="utf-8")
    text = text.replace('name = "offline-v1"', 'name = "offline-v1-llm-modes-perf"')
    text = re.sub(r"fast_tasks = \d+", f"fast_tasks = {fast_tasks}", text)
    text = text.replace(
        'executor = "direct"\nverifier = "rule"\ngenerator = "planner"',
        f'executor = "llm"\nverifier = "llm"\ngenerator = "llm"\nengine = "openai:modules@{url}"',
    )
    path = folder / "offline-llm.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _measure(server: Any, latency: float, concurrency: int, run: Callable[[], int], floor: bool) -> dict[str, Any]:
    """One case against ``server`` (a :class:`perf.latency_process.ServerProcess`): the eval's rates and CPU,
    then, with ``floor``, the same request bodies replayed from one asyncio loop with bare aiohttp."""
    from perf.latency_process import load_now, replay_floor

    server.reset()
    load0 = load_now()
    sampler = _CpuSampler()
    cpu0, t0 = time.process_time(), time.perf_counter()
    episodes = run()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0  # every thread of this process (the server runs in another)
    sampler.stop()
    load1 = load_now()
    counts = server.stats()
    requests = counts["requests"]
    k = requests / max(episodes, 1)
    rate = episodes / wall
    bound = concurrency / (k * latency) if k else float("nan")
    window = counts["active_window_s"]
    # steady state: from the first episode's end to the end of episode N - C (after it, slots fall idle)
    ends = sorted(counts["finished"].get("judge") or counts["finished"].get("llm_generator") or [])
    steady = steady_cpu = None
    if len(ends) == episodes and episodes > concurrency + 1:
        last = ends[episodes - concurrency - 1]
        steady = (episodes - concurrency - 1) / (last - ends[0]) if last > ends[0] else None
        # the CPU per request in the same window: the first wave's set-up (imports, JIT loads, the first envs)
        # and the last wave's tail left out, as a long run would amortise them
        done = sum(ends[0] < t <= last for times in counts["finished"].values() for t in times)
        steady_cpu = 1000 * sampler.between(ends[0], last) / done if steady and done else None
    row = {
        "latency_s": latency,
        "concurrency": concurrency,
        "episodes": episodes,
        "requests": requests,
        "calls_per_episode": round(k, 2),
        "calls_by_kind": counts["by_kind"],
        # requests per second over the active window (first request in to last reply out) over C/L
        "ratio_active": round(requests / window / (concurrency / latency), 3) if window > 0 else None,
        "mean_requests_in_flight": round(counts["mean_in_flight_active"], 2),
        "peak_requests_in_flight": counts["peak_in_flight"],
        "eval_cpu_ms_per_request": round(1000 * cpu / max(requests, 1), 3),
        # only the CPU spent between the first request and the last reply (imports, task generation and the
        # run's set-up before its first request left out; the envs built while it runs are in)
        "eval_cpu_ms_per_request_active": round(
            1000 * sampler.between(counts["first_start"], counts["last_end"]) / max(requests, 1), 3
        )
        if window > 0
        else None,
        "eval_cpu_ms_per_request_steady": round(steady_cpu, 3) if steady_cpu else None,
        "episodes_per_s": round(rate, 3),
        "bound_episodes_per_s": round(bound, 3),
        "ratio": round(rate / bound, 3),
        "steady_episodes_per_s": round(steady, 3) if steady else None,
        "steady_ratio": round(steady / bound, 3) if steady else None,  # without the ramp-up and the last wave
        "wall_s": round(wall, 2),
        "active_window_s": round(window, 2),
        "client_cpu_s": round(cpu, 2),
        "client_cpu_share": round(cpu / wall, 2),  # CPU seconds of this process per wall second (cores busy)
        "load_before": load0,
        "load_after": load1,
    }
    if floor:
        bodies = server.bodies()
        server.reset()
        fcpu, fwall = replay_floor(server.url, bodies, concurrency)
        fcounts = server.stats()
        fwindow = fcounts["active_window_s"]
        row["floor"] = {
            "requests": len(bodies),
            "cpu_ms_per_request": round(1000 * fcpu / max(len(bodies), 1), 3),
            "ratio_active": round(len(bodies) / fwindow / (concurrency / latency), 3) if fwindow > 0 else None,
            "wall_s": round(fwall, 2),
            "load_after": load_now(),
        }
        row["cpu_over_floor"] = round(row["eval_cpu_ms_per_request"] / max(row["floor"]["cpu_ms_per_request"], 1e-9), 2)
    return row


class _CpuSampler:
    """This process's CPU time (all threads), sampled every 20 ms on the monotonic clock the server's times use."""

    def __init__(self, every_s: float = 0.02):
        self.samples: list[tuple[float, float]] = [(time.monotonic(), time.process_time())]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)
        self._thread.start()

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.samples.append((time.monotonic(), time.process_time()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.monotonic(), time.process_time()))

    def at(self, when: float) -> float:
        """CPU seconds at monotonic time ``when`` (linear between the samples around it)."""
        import bisect

        times = [t for t, _ in self.samples]
        i = min(max(bisect.bisect_left(times, when), 1), len(times) - 1)
        (ta, ca), (tb, cb) = self.samples[i - 1], self.samples[i]
        return ca + (cb - ca) * min(max((when - ta) / (tb - ta), 0.0), 1.0) if tb > ta else cb

    def between(self, start: float, end: float) -> float:
        return self.at(end) - self.at(start)


def run_eval(
    protocol: str, url: str, concurrency: int, data_dir: str | None, tasks: int, agentflow_src: str | None = None
) -> int:
    """``tasks`` tasks of each benchmark (a --fast run sized so that many waves of C episodes run)."""
    from leaderboards.protocol import load_protocol
    from leaderboards.runner import EvalConfig, evaluate

    fast_tasks = {env_id: tasks for env_id in load_protocol(protocol).env_ids}
    with tempfile.TemporaryDirectory() as out:
        result = evaluate(
            EvalConfig(
                policy=f"openai:planner@{url}",
                protocol=protocol,
                out=Path(out),
                data_dir=data_dir,
                engine=f"openai:modules@{url}",
                judge_engine=f"openai:judge@{url}",
                concurrency=concurrency,
                fast=True,
                fast_tasks=fast_tasks,
                progress=False,
                agentflow_src=agentflow_src,
                allow_missing_tools=agentflow_src is not None,  # paper-v2's search tools have no backend here
            )
        )
        return len(result.outcomes)


def run_rollouts(url: str, concurrency: int, groups: int, group_size: int) -> int:
    import gymnasium as gym

    import agentflow_env  # noqa: F401  (registers the envs)
    from agentflow_env.engines import make_engine
    from agentflow_env.engines.base import SamplingParams
    from agentflow_env.vector.threaded import ThreadedVectorEnv
    from agents.policies.llm_planner import LLMPlanner
    from agents.training.rollout import collect_group_rollouts

    engine = make_engine(f"openai:modules@{url}?concurrency={concurrency}")  # one HTTP client for every env
    kwargs = {"executor": "llm", "verifier": "llm", "generator": "llm", "engine": engine}
    env_id = "agentflow/Gen-Math-v2"
    first = gym.make(env_id, split="train", **kwargs)
    tasks = first.unwrapped.tasks
    ids = [tasks[i].id for i in range(groups)]
    fns = [lambda: gym.make(env_id, split="train", tasks=tasks, **kwargs) for _ in range(concurrency)]
    planner = LLMPlanner(
        f"openai:planner@{url}?concurrency={concurrency}", SamplingParams(temperature=0.0, max_tokens=64)
    )
    with ThreadedVectorEnv(fns, autoreset_mode="disabled") as vec:
        out = collect_group_rollouts(vec, planner, ids, group_size=group_size, seed=0, env_id=env_id)
    first.close()
    engine.close()
    return sum(len(g) for g in out)


def _case(case: str, url: str, concurrency: int, offline: Path, args: argparse.Namespace) -> int:
    waves = args.waves  # about this many episodes per slot, so the ramp-up and the last wave weigh little
    if case == "paper":  # 10 benchmarks x 3 trials
        return run_eval("paper-v1", url, concurrency, args.data_dir, max(5, -(-waves * concurrency // 30)))
    if case == "paper_v2":  # paper-v2 with AgentFlow's prompts and judge read from --agentflow-src
        tasks = max(5, -(-waves * concurrency // 30))
        return run_eval("paper-v2", url, concurrency, args.data_dir, tasks, agentflow_src=args.agentflow_src)
    if case == "offline_llm":  # 5 benchmarks
        return run_eval(str(offline), url, concurrency, None, min(100, max(8, -(-waves * concurrency // 5))))
    return run_rollouts(url, concurrency, max(8, -(-waves * concurrency // 4)), 4)  # G = 4


def main(argv: list[str] | None = None) -> int:
    from perf.latency_process import ServerProcess, load_now

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, nargs="+", default=[0.1, 0.5])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64])
    parser.add_argument("--cases", nargs="+", default=["offline_llm", "paper_v2", "paper", "rollouts"])
    parser.add_argument("--data-dir", default=os.environ.get("AGENTFLOW_DATA_DIR"))
    parser.add_argument("--agentflow-src", default=os.environ.get("AGENTFLOW_SRC"))
    parser.add_argument("--waves", type=int, default=8, help="episodes per slot: N = waves x C per case")
    parser.add_argument("--no-floor", action="store_true", help="skip the bare-aiohttp replay of each case")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    import logging

    logging.disable(logging.WARNING)
    results: list[dict[str, Any]] = []
    report: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "nice": os.nice(0),
        "load_at_start": load_now(),
        "server": "aiohttp in a child process (its CPU is not the eval's)",
        "code_version": _code_version(),
        "results": results,
    }
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for latency in args.latency:
            for case in args.cases:
                if case in ("paper", "paper_v2") and not args.data_dir:
                    skipped[case] = "no --data-dir / $AGENTFLOW_DATA_DIR (the AgentFlow test sets)"
                    continue
                if case == "paper_v2" and not args.agentflow_src:
                    skipped[case] = "no --agentflow-src / $AGENTFLOW_SRC (the AgentFlow checkout)"
                    continue
                with ServerProcess(latency, "paper_v2" if case == "paper_v2" else "default") as server:
                    offline = offline_llm_protocol(server.url, Path(tmp))
                    for c in args.concurrency:
                        run = functools.partial(_case, case, server.url, c, offline, args)
                        row = {"case": case, **_measure(server, latency, c, run, not args.no_floor)}
                        results.append(row)
                        print(json.dumps({k: v for k, v in row.items() if k != "calls_by_kind"}), file=sys.stderr)
    if skipped:
        report["skipped"] = skipped
    report["load_at_end"] = load_now()
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


def _code_version() -> dict[str, Any]:
    """The commit measured (and whether the tree had changes beside it)."""
    import subprocess

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return out.stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD") or None,
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def question_hash(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


if __name__ == "__main__":
    raise SystemExit(main())
