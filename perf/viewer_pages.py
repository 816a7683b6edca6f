"""Size and render time of trajectory viewer pages for big runs (leaderboards.viewer).

Writes a synthetic run in the store's own format: one benchmark, ``--episodes`` episodes of ``--steps`` turns,
each turn with a planner action, a tool command, a ``--result-chars`` tool result and, in paper-flow shape,
four module calls (planner, executor, tool, verifier) with long prompts. Renders its viewer page and prints
JSON: the page's bytes, which text cut it needed to stay under the page budget, and the seconds it took.
Usage: python perf/viewer_pages.py [--episodes 500] [--steps 6] [--result-chars 3000] [--no-module-calls]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboards import viewer
from leaderboards.store import (
    TASKS_FILE,
    TRAJECTORIES_FILE,
    JsonlAppender,
    RunRecord,
    TaskOutcome,
    load_run,
    write_json_atomic,
)

ENV_ID = "agentflow/Bench-v1"
WORDS = "the of planner tool result verifier answer search python memory step value check query".split()


def _text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def write_run(root: Path, episodes: int, steps: int, result_chars: int, calls: bool) -> Path:
    rng = random.Random(0)
    run_dir = root / "perf" / "big"
    rec = RunRecord(
        name="big",
        protocol="perf",
        protocol_hash="-",
        policy="synthetic",
        benchmarks={ENV_ID: {"label": "Bench", "category": "search"}},
    )
    write_json_atomic(run_dir / "run.json", rec.to_dict())
    with JsonlAppender(run_dir / TRAJECTORIES_FILE) as traj, JsonlAppender(run_dir / TASKS_FILE) as tasks:
        for i in range(episodes):
            key = f"{ENV_ID}#{i}#s0#k0"
            turns = [
                {
                    "turn": t + 1,
                    "action": _text(rng, 400),
                    "parsed": {"sub_goal": _text(rng, 80), "tool_name": "Web_Search_Tool"},
                    "tool": "Web_Search_Tool",
                    "command": _text(rng, 150),
                    "result": _text(rng, result_chars),
                    "verifier": "CONTINUE",
                    "seconds": 1.0,
                }
                for t in range(steps)
            ]
            record = {"key": key, "question": _text(rng, 300), "trajectory": turns}
            if calls:
                record["module_calls"] = [
                    {"module": m, "step": t + 1, "prompt": _text(rng, 6000), "reply": _text(rng, 500)}
                    for t in range(steps)
                    for m in ("planner", "executor", "tool", "verifier")
                ]
            offset, length = traj.append(record)
            tasks.append(
                TaskOutcome(
                    key=key,
                    env_id=ENV_ID,
                    index=i,
                    seed=0,
                    sample=0,
                    task_id=f"t{i}",
                    score=float(i % 2),
                    answer="x",
                    gold="x",
                    turns=steps,
                    terminated=True,
                    truncated=False,
                    wall_s=1.0,
                    trajectory={"file": TRAJECTORIES_FILE, "offset": offset, "length": length},
                ).to_dict()
            )
    return run_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--result-chars", type=int, default=3000)
    ap.add_argument("--no-module-calls", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_run(Path(tmp), args.episodes, args.steps, args.result_chars, not args.no_module_calls)
        stored = (run_dir / TRAJECTORIES_FILE).stat().st_size
        run = load_run(run_dir)
        start = time.perf_counter()
        page = viewer.render_viewer(run, ENV_ID, "../../../index.html")
        seconds = time.perf_counter() - start
    note = json.loads(page.split('id="data">', 1)[1].split("</script>", 1)[0])["note"]
    print(
        json.dumps(
            {
                "episodes": args.episodes,
                "steps": args.steps,
                "result_chars": args.result_chars,
                "module_calls": not args.no_module_calls,
                "trajectories_jsonl_bytes": stored,
                "page_bytes": len(page.encode("utf-8")),
                "page_budget_bytes": viewer.PAGE_BUDGET,
                "cut": note or f"long texts are cut to {viewer.FIELD_CHARS[0]:,} characters",
                "render_s": round(seconds, 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
