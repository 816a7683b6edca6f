"""``serve hf:tiny`` under concurrent ``openai`` clients, as JSON: replies per second with real batches
(one left-padded ``generate`` per batch) against one request at a time (``max_batch=1``), and what is left
queued after impatient clients give up.

Usage: ``python perf/serve_load.py [--clients 32] [--requests 4] [--max-tokens 32]``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time


def _run_clients(url: str, clients: int, requests: int, max_tokens: int, timeout: float) -> dict[str, float]:
    import openai

    outcomes: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def one(k: int) -> None:
        client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0, timeout=timeout)
        barrier.wait()
        for r in range(requests):
            try:
                client.chat.completions.create(
                    model="tiny",
                    messages=[{"role": "user", "content": f"Solve {k} {r} 3 4 to make 24"}],
                    max_tokens=max_tokens,
                    temperature=0,
                )
                outcome = "ok"
            except openai.APITimeoutError:
                outcome = "timeout"
            except openai.APIStatusError as exc:
                outcome = str(exc.status_code)
            with lock:
                outcomes.append(outcome)
        client.close()

    threads = [threading.Thread(target=one, args=(k,)) for k in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    ok = outcomes.count("ok")
    return {
        "seconds": round(seconds, 2),
        "ok": ok,
        "failed": len(outcomes) - ok,
        "replies_per_s": round(ok / seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=4, help="requests per client, one after another")
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()

    from agentflow_env.engines.server import EngineServer
    from agentflow_env.engines.transformers_engine import TransformersEngine
    from agents.tiny_lm import tiny_lm_path

    engine = TransformersEngine(str(tiny_lm_path()), device="cpu", threads=1)
    out: dict[str, object] = {
        "clients": args.clients,
        "requests_per_client": args.requests,
        "max_tokens": args.max_tokens,
    }
    for label, max_batch in (("batched", 64), ("one_at_a_time", 1)):
        with EngineServer(engine, model_name="tiny", max_batch=max_batch, batch_window_s=0.005) as srv:
            out[label] = _run_clients(srv.url, args.clients, args.requests, args.max_tokens, timeout=600)
    ratio = out["batched"]["replies_per_s"] / max(out["one_at_a_time"]["replies_per_s"], 1e-9)  # type: ignore[index]
    out["batched_speedup"] = round(ratio, 2)
    # impatient clients: 64 at once with a 1 s timeout, far more work than 1 s holds
    with EngineServer(engine, model_name="tiny", max_queue=32) as srv:
        impatient = _run_clients(srv.url, 64, 1, 256, timeout=1.0)
        deadline = time.monotonic() + 60
        while srv.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        drained = time.monotonic() - (deadline - 60)
        out["impatient"] = {**impatient, **srv.stats, "seconds_to_drain_after": round(drained, 2)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
