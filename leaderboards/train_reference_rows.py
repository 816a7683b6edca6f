"""The learned reference rows of offline-v2, ``tiny-sft`` and ``tiny-flow-grpo``, by one command.

Every phase is one ``agentflow-env`` command (printed, logged and stored in ``reference_rows.json``):

1. ``sft``: the tiny LM (``hf:tiny``) on scripted demonstrations of all five offline-v2 families at once
   (train splits, one ``--env-id`` per family), so one model plays every benchmark;
2. ``train``: Flow-GRPO from that model on ``agentflow/Gen-Science-v2`` (train split). The learner trains on one
   env id; Gen-Science is the only family where the SFT model earns any reward (multiple-choice letters), and a
   group whose rollouts all score 0 has a zero advantage, so it is where Flow-GRPO can help;
3. ``eval --protocol offline-v2`` of both models, runs named ``tiny-sft`` and ``tiny-flow-grpo``.

Training phases have a wall-clock budget (``--max-minutes``), so on another machine they may stop at another step
and the scores move. The models behind the committed rows are not committed (size); ``--from-checkpoints``
evaluates models placed in ``agents/checkpoints/`` (greedy decoding: the same scores on any CPU).

Run:  python -m leaderboards.train_reference_rows                      (about 30 minutes on 2 busy cores)
      python -m leaderboards.train_reference_rows --from-checkpoints   (evaluation only, a few minutes)
Results go to OUTPUT_DIR/offline-v2/{tiny-sft,tiny-flow-grpo} (default ./runs/leaderboard, as ``eval`` writes),
models and logs to WORK (default ./runs/reference-rows). Phases already done are skipped; runs resume.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROTOCOL = "offline-v2"
RL_ENV_ID = "agentflow/Gen-Science-v2"
SEED = 0
CHECKPOINTS = Path(__file__).resolve().parents[1] / "agents" / "checkpoints"
ROWS = ("tiny-sft", "tiny-flow-grpo")

# the settings of the committed rows; --smoke shrinks only the budgets so a test can run every phase
SFT_SETTINGS = ["--episodes", "200", "--epochs", "6", "--batch-size", "16", "--lr", "2e-3", "--max-minutes", "12"]
TRAIN_SETTINGS = [
    *("--steps", "80", "--questions-per-step", "8", "--group-size", "8", "--max-new-tokens", "64"),
    *("--temperature", "1.0", "--learning-rate", "5e-4", "--minibatch-size", "32"),
    *("--eval-every", "20", "--eval-on-start", "true", "--eval-tasks", "50", "--eval-split", "validation"),
    *("--checkpoint-every", "20", "--keep-checkpoints", "1", "--tensorboard", "false", "--max-minutes", "10"),
]
SMOKE_SFT = ["--episodes", "1", "--epochs", "1", "--batch-size", "4", "--max-steps", "1"]
SMOKE_TRAIN = [
    *("--steps", "1", "--questions-per-step", "2", "--group-size", "2", "--max-new-tokens", "16"),
    *("--eval-every", "0", "--checkpoint-every", "0", "--tensorboard", "false"),
]


def _cli() -> list[str]:
    return [sys.executable, "-m", "agentflow_env.cli"]


def _shown(cmd: list[str]) -> str:
    return shlex.join(["agentflow-env", *cmd[3:]] if cmd[:3] == _cli() else cmd)


def _short(path: Path) -> str:
    """``path`` relative to the current directory when it lies under it (the run records a portable policy)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def protocol_env_ids() -> list[str]:
    """The benchmarks of the protocol, in its order: the SFT run learns from every one of them."""
    from leaderboards.protocol import load_protocol

    return [b.env_id for b in load_protocol(PROTOCOL).benchmarks]


def phases(work: Path, output_dir: Path, *, threads: int, smoke: bool, from_checkpoints: bool) -> list[dict[str, Any]]:
    """The commands in order, each with a ``done`` file whose presence means the phase can be skipped."""
    sft_dir, rl_dir = work / "tiny-sft", work / "tiny-flow-grpo"
    models = {"tiny-sft": sft_dir, "tiny-flow-grpo": rl_dir / "final"}
    out: list[dict[str, Any]] = []
    if from_checkpoints:
        models = {name: CHECKPOINTS / name for name in ROWS}
    else:
        sft = [*_cli(), "sft", *(a for e in protocol_env_ids() for a in ("--env-id", e))]
        sft += [*(SMOKE_SFT if smoke else SFT_SETTINGS), "--seed", str(SEED), "--threads", str(threads)]
        sft += ["--output-dir", str(sft_dir), "--no-progress", "--json"]
        out.append({"phase": "sft", "cmd": sft, "done": sft_dir / "sft_metrics.json"})
        train = [*_cli(), "train", "--env-id", RL_ENV_ID, "--init-from", str(sft_dir)]
        train += [*(SMOKE_TRAIN if smoke else TRAIN_SETTINGS), "--seed", str(SEED), "--threads", str(threads)]
        train += ["--output-dir", str(rl_dir), "--progress", "false", "--json"]
        out.append({"phase": "train", "cmd": train, "done": rl_dir / "final" / "config.json"})
    for name, model in models.items():
        ev = [*_cli(), "eval", "--protocol", PROTOCOL, "--policy", f"hf:{_short(model)}", "--name", name]
        ev += ["--output-dir", str(output_dir), "--no-progress", "--json", *(["--fast"] if smoke else [])]
        if from_checkpoints:
            ev.append("--overwrite")  # a run of another model under the same name must not be resumed
        out.append({"phase": f"eval/{name}", "cmd": ev, "done": None})
    return out


def _run(phase: dict[str, Any], log: Path, threads: int) -> dict[str, Any]:
    shown = _shown(phase["cmd"])
    sys.stderr.write(f"$ {shown}\n")
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false", "NO_COLOR": "1"}
    started = time.perf_counter()
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {shown}\n")
        fh.flush()
        proc = subprocess.run(phase["cmd"], stdout=subprocess.PIPE, stderr=fh, text=True, env=env)
        fh.write(proc.stdout)
    record: dict[str, Any] = {"command": shown, "seconds": round(time.perf_counter() - started, 1)}
    if proc.returncode:
        raise SystemExit(f"error: phase {phase['phase']} failed (exit {proc.returncode}); see {log}")
    try:
        record["summary"] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        record["stdout"] = proc.stdout[-2000:]
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("runs/reference-rows"), help="models, logs, the record")
    parser.add_argument("--output-dir", type=Path, default=Path("runs/leaderboard"), help="results folder of eval")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every phase")
    parser.add_argument("--from-checkpoints", action="store_true", help="only evaluate agents/checkpoints/*")
    parser.add_argument("--smoke", action="store_true", help="tiny budgets and --fast evaluation (tests)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    if args.from_checkpoints and not all((CHECKPOINTS / name / "config.json").is_file() for name in ROWS):
        parser.error(f"--from-checkpoints: no shipped models under {CHECKPOINTS}; run without it to train them")
    todo = phases(
        args.work.resolve(),
        args.output_dir.resolve(),
        threads=args.threads,
        smoke=args.smoke,
        from_checkpoints=args.from_checkpoints,
    )
    if args.dry_run:
        sys.stdout.write("\n".join(_shown(p["cmd"]) for p in todo) + "\n")
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    record_path = args.work / "reference_rows.json"
    record: dict[str, Any] = json.loads(record_path.read_text()) if record_path.is_file() else {}
    record.update(protocol=PROTOCOL, seed=SEED, threads=args.threads, smoke=args.smoke)
    record.setdefault("phases", {})
    for phase in todo:
        if phase["done"] is not None and phase["done"].is_file():
            sys.stderr.write(f"skip {phase['phase']}: {phase['done']} exists\n")
            continue
        record["phases"][phase["phase"]] = _run(
            phase, args.work / f"{phase['phase'].replace('/', '-')}.log", args.threads
        )
        record_path.write_text(json.dumps(record, indent=2) + "\n")
    rows = {}
    for name in ROWS:
        summary = record["phases"].get(f"eval/{name}", {}).get("summary", {})
        rows[name] = {
            "run": summary.get("run"),
            "overall": summary.get("overall"),
            **{env_id: [b["accuracy"], *b["ci95"]] for env_id, b in summary.get("benchmarks", {}).items()},
        }
    sys.stdout.write(json.dumps({"record": str(record_path), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
