"""The results store: one folder per run with ``run.json``, ``tasks.jsonl`` and ``trajectories.jsonl``
(stored references keep their task lines packed as ``tasks.jsonl.gz`` and no trajectories).

Task lines are appended one per finished episode (an eval commits them in groups, trajectories first:
:mod:`leaderboards.group_commit`), so an interrupted run resumes from what is on disk; a torn last line (a crash
mid-write) is dropped and cut off on reopen.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentflow_env.error import ConfigError
from leaderboards.stats import BenchmarkScore, category_averages

__all__ = [
    "LOCK_SUFFIX",
    "PACKED_TASKS_FILE",
    "RESULTS_DIR",
    "RUN_FILE",
    "TASKS_FILE",
    "TRAJECTORIES_FILE",
    "EvalResult",
    "JsonlAppender",
    "RunFolderBusy",
    "RunRecord",
    "TaskOutcome",
    "git_state",
    "iter_runs",
    "load_run",
    "lock_run_dir",
    "pack_run",
    "read_jsonl",
    "read_tasks",
    "read_trajectory",
    "run_name_for",
    "validate_run_name",
    "write_json_atomic",
]

logger = logging.getLogger(__name__)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RUN_FILE = "run.json"
TASKS_FILE = "tasks.jsonl"
PACKED_TASKS_FILE = "tasks.jsonl.gz"  # a stored reference's task lines, packed (see pack_run)
TRAJECTORIES_FILE = "trajectories.jsonl"
LOCK_SUFFIX = ".lock"  # ".<run name>.lock" beside the run folder (it survives --overwrite)


class RunFolderBusy(ConfigError):
    """Another process holds the run folder's lock."""


@contextlib.contextmanager
def lock_run_dir(run_dir: Path) -> Iterator[Path]:
    """Hold an exclusive ``flock`` on ``run_dir``'s lock file for the block; fail fast when another process has it.

    The lock file sits beside the folder (``.<name>.lock``) and holds the owner's pid, command and start
    time; the kernel drops the lock when its owner exits, however it exits, so a stale file never blocks.
    """
    import fcntl

    run_dir = Path(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    path = run_dir.parent / f".{run_dir.name}{LOCK_SUFFIX}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "pid unknown"
            raise RunFolderBusy(
                f"{run_dir} is being written by another eval ({holder}); wait for it to finish, or pass "
                "--name NEW / --output-dir DIR for a separate run"
            ) from None
        stamp = f"pid {os.getpid()}, started {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: {_command()}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, stamp.encode("utf-8"), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)  # the lock itself goes with the descriptor
    finally:
        os.close(fd)


def _command() -> str:
    import sys

    return " ".join(sys.argv)[:300] or "python"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temporary file, fsync it, then rename over ``path`` (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)  # keep field and benchmark order
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_jsonl(path: Path, repair: bool = False) -> list[dict[str, Any]]:
    """Records of a JSONL file. A last line without its newline, or that does not parse, is torn:
    it is skipped, and with ``repair`` cut off the file so later appends start on a clean line."""
    if not path.exists():
        return []
    data = path.read_bytes()
    records: list[dict[str, Any]] = []
    good_end = 0
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:  # no newline: a torn final write
            break
        line = data[pos:nl]
        try:
            if line.strip():
                records.append(json.loads(line))
            good_end = nl + 1
        except ValueError:
            if data.find(b"\n", nl + 1) >= 0:  # a bad line in the middle: keep going, say so
                logger.warning("%s: skipping an unreadable line at byte %d", path, pos)
                good_end = nl + 1
            else:
                break
        pos = nl + 1
    if repair and good_end < len(data):
        logger.warning("%s: dropping a torn last line (%d bytes)", path, len(data) - good_end)
        with open(path, "r+b") as fh:
            fh.truncate(good_end)
            fh.flush()
            os.fsync(fh.fileno())
    return records


class JsonlAppender:
    """Appends JSON lines durably: each ``append`` writes the whole line unbuffered, then fsyncs.

    A crash can leave at most a torn last line, which readers skip and the next appender cuts off.
    """

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        read_jsonl(path, repair=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, record: dict[str, Any]) -> tuple[int, int]:
        """Write one record; returns its ``(byte offset, byte length)`` in the file."""
        line = (json.dumps(record, ensure_ascii=False, sort_keys=True, default=str) + "\n").encode("utf-8")
        offset = os.lseek(self._fd, 0, os.SEEK_END)
        view = memoryview(line)
        while view:  # a regular file takes it in one write; loop in case a signal splits it
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)
        return offset, len(line)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class TaskOutcome:
    """One finished episode: what was asked, what came back, its score and where its trajectory is."""

    key: str
    env_id: str
    index: int
    seed: int
    sample: int
    task_id: str
    score: float
    answer: str
    gold: Any
    turns: int
    terminated: bool
    truncated: bool
    wall_s: float
    tokens: dict[str, int] | None = None
    trajectory: dict[str, Any] | None = None  # {"file", "offset", "length"} in trajectories.jsonl
    error: str | None = None
    episode_seed: int | None = None  # the env.reset seed (derived from key, so resumes replay it exactly)
    # search benchmarks: {"searches", "gold_retrieved", "query_copies_question"} (leaderboards.leaks)
    leak: dict[str, Any] | None = None
    budget_cut: bool | None = None  # the time budget stopped something in the episode (None: older records)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskOutcome:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class RunRecord:
    """``run.json``: what was run, by which code, and (for ``kind="reported"``) the published numbers."""

    name: str
    protocol: str
    protocol_hash: str
    policy: str
    # the code behind a user's policy spec: {"module", "file", "sha256"} (or a checkpoint's files), never a path
    policy_source: dict[str, str] | None = None
    kind: str = "measured"  # "measured" (tasks.jsonl beside) or "reported" (published numbers)
    fast: bool = False
    package_version: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    seeds: list[int] = field(default_factory=list)
    samples_per_task: int = 1
    max_turns: int | None = None
    env: dict[str, Any] = field(default_factory=dict)  # modes and engine specs as run
    sampling: dict[str, Any] = field(default_factory=dict)
    benchmarks: dict[str, dict[str, Any]] = field(default_factory=dict)  # env_id -> {label, category, split}
    started_at: str | None = None
    updated_at: str | None = None
    wall_s: float = 0.0
    sessions: int = 0
    complete: bool = False
    reported: dict[str, float | None] = field(default_factory=dict)  # env_id -> accuracy in [0, 1]
    source: str | None = None
    notes: str = ""
    # env_id -> how it was scored: "judge:<engine spec>" or "rule:<scorer>" (empty in records older than this field)
    scorers: dict[str, str] = field(default_factory=dict)
    judge_engine: str | None = None
    trial_seed_option: str | None = None  # the loader option that received each trial's seed
    # the paper flow's settings as run (prompt source, toolbox and tools, sampling presets, planner system prompt)
    paper_settings: dict[str, Any] | None = None
    # protocols reading AgentFlow's text (paper-v2): "comparable: ..." or "own wording: not comparable ..."
    comparability: str | None = None
    # the AgentFlow checkout, prompt and judge fingerprints of such a run
    agentflow: dict[str, Any] | None = None
    # LLM calls, tokens and seconds by benchmark and role (leaderboards/ledger.py); None in older records
    ledger: dict[str, Any] | None = None
    # a policy-only control run (eval --control-engine): the fixed engine and what it replaced
    control: dict[str, Any] | None = None
    # env_id -> the judge's fingerprint (engine spec, model, prompt hash) for judged benchmarks
    judges: dict[str, Any] = field(default_factory=dict)
    # the search tools' backends and retrieval fingerprint (leaderboards.retrieval.collect_retrieval)
    retrieval: dict[str, Any] | None = None
    # the time budget's clock, budget and rates (leaderboards.budgets.clock_record); None in older records
    clock: dict[str, Any] | None = None
    # env_id -> episodes the time budget cut (leaderboards.budgets.budget_cut_counts); None in older records
    budget_cut: dict[str, int] | None = None

    @property
    def scoring(self) -> str:
        """``"judge"`` when every benchmark was judged by an LLM, ``"rule"`` when none was, ``"mixed"``,
        or ``"unknown"`` (a measured record older than the ``scorers`` field). Reported rows: ``"paper"``."""
        if self.kind == "reported":
            return "paper"
        kinds = {v.split(":", 1)[0] for v in self.scorers.values()}
        if not self.scorers or not kinds <= {"judge", "rule"}:
            return "unknown"
        return kinds.pop() if len(kinds) == 1 else "mixed"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class EvalResult:
    """A run's record with its outcomes, and the leaderboard numbers computed from them."""

    record: RunRecord
    outcomes: list[TaskOutcome] = field(default_factory=list)
    path: Path | None = None

    def scores(self, keys: set[str] | None = None) -> dict[str, BenchmarkScore]:
        """Per-benchmark scores over the outcomes (only ``keys`` when given), in the protocol's order."""
        by_env: dict[str, list[float]] = {env_id: [] for env_id in self.record.benchmarks}
        for o in self.outcomes:
            if keys is None or o.key in keys:
                by_env.setdefault(o.env_id, []).append(o.score)
        return {e: BenchmarkScore(n=len(v), total=float(sum(v))) for e, v in by_env.items()}

    def accuracies(self) -> dict[str, float | None]:
        if self.record.kind == "reported":
            return {e: self.record.reported.get(e) for e in self.record.benchmarks}
        return {e: (s.accuracy if s.n else None) for e, s in self.scores().items()}

    def categories(self) -> dict[str, float]:
        cats = {e: b.get("category", "") for e, b in self.record.benchmarks.items()}
        return category_averages(self.accuracies(), cats)

    def overall(self) -> float | None:
        """Mean accuracy over all benchmarks; ``None`` while any benchmark has no number."""
        vals = list(self.accuracies().values())
        if not vals or any(a is None for a in vals):
            return None
        return sum(vals) / len(vals)  # type: ignore[arg-type]

    def tokens(self) -> dict[str, int] | None:
        """Summed token counts, or ``None`` when any episode lacks them (the policy did not report)."""
        if not self.outcomes or any(o.tokens is None for o in self.outcomes):
            return None
        total: dict[str, int] = {}
        for o in self.outcomes:
            for k, v in (o.tokens or {}).items():
                total[k] = total.get(k, 0) + int(v)
        return total

    def summary(self) -> dict[str, Any]:
        bench: dict[str, dict[str, Any]] = {}
        if self.record.kind == "reported":
            for e, acc in self.accuracies().items():
                bench[e] = {"accuracy": acc, "n": None, "ci95": None}
        else:
            for e, s in self.scores().items():
                bench[e] = {
                    "accuracy": s.accuracy if s.n else None,
                    "n": s.n,
                    "ci95": list(s.interval) if s.n else None,
                }
        return {
            "benchmarks": bench,
            "categories": self.categories(),
            "overall": self.overall(),
            "tokens": self.tokens(),
            "wall_s": self.record.wall_s,
            "episodes": len(self.outcomes),
            "clock": (self.record.clock or {}).get("clock", "wall"),
            "budget_cut": sum(1 for o in self.outcomes if o.budget_cut),
        }


def read_tasks(run_dir: Path, repair: bool = False) -> list[dict[str, Any]]:
    """A run folder's task lines: the packed ``tasks.jsonl.gz`` of a stored reference (see :func:`pack_run`),
    then ``tasks.jsonl`` (``repair`` cuts a torn last line off the plain file only)."""
    import gzip

    packed = Path(run_dir) / PACKED_TASKS_FILE
    records: list[dict[str, Any]] = []
    if packed.exists():
        with gzip.open(packed, "rt", encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh if line.strip()]
    return records + read_jsonl(Path(run_dir) / TASKS_FILE, repair=repair)


def pack_run(run_dir: Path) -> Path:
    """Pack a finished run's task lines into ``tasks.jsonl.gz`` (about 9x smaller; byte-stable: no name or time
    in the gzip header) and remove ``tasks.jsonl``; trajectories stay as they are. Stored references are kept
    packed, so the committed results stay small; every reader goes through :func:`read_tasks`."""
    import gzip

    run_dir = Path(run_dir)
    lines = [json.dumps(d, ensure_ascii=False, sort_keys=True, default=str) + "\n" for d in read_tasks(run_dir)]
    packed = run_dir / PACKED_TASKS_FILE
    tmp = packed.with_name(f".{packed.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as fh:
        fh.write("".join(lines).encode("utf-8"))
    os.replace(tmp, packed)
    (run_dir / TASKS_FILE).unlink(missing_ok=True)
    return packed


def load_run(run_dir: Path) -> EvalResult:
    """A run folder's record and outcomes (a torn last task line is ignored, never repaired here)."""
    record = RunRecord.from_dict(json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8")))
    outcomes = []
    seen: set[str] = set()
    for d in read_tasks(run_dir):
        o = TaskOutcome.from_dict(d)
        if o.key not in seen:  # a unit re-run after a crash between its two writes counts once
            seen.add(o.key)
            outcomes.append(o)
    return EvalResult(record=record, outcomes=outcomes, path=run_dir)


def iter_runs(results_dir: Path = RESULTS_DIR) -> Iterator[EvalResult]:
    """Every run under ``results_dir`` (any depth), sorted by path."""
    for run_file in sorted(Path(results_dir).rglob(RUN_FILE)):
        try:
            yield load_run(run_file.parent)
        except (ValueError, TypeError, KeyError) as exc:
            logger.warning("skipping %s: %s", run_file, exc)


def read_trajectory(run_dir: Path, ref: dict[str, Any]) -> dict[str, Any]:
    """The trajectory record that a task outcome's ``trajectory`` reference points at."""
    with open(run_dir / ref["file"], "rb") as fh:
        fh.seek(int(ref["offset"]))
        return json.loads(fh.read(int(ref["length"])))


def git_state(path: Path | None = None) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the checkout holding ``path`` (default: the package); ``(None, None)`` outside git."""
    cwd = Path(path or Path(__file__).resolve().parents[1])
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")


def validate_run_name(name: Any) -> str:
    """``name`` if it is a safe run folder name (letters, digits, ``.``, ``_``, ``-``; at most 80; not starting
    with ``.`` or ``-``), else a ``ConfigError`` saying so: it becomes a path, so ``../x``, ``/abs`` or ``a/b``
    would write outside the results folder."""
    if not isinstance(name, str) or not _RUN_NAME.fullmatch(name) or name.endswith((".lock", ".tmp")):
        shown = repr(name)[:100]
        raise ConfigError(
            f"run name {shown} is not allowed: use 1-80 letters, digits, '.', '_' or '-', starting with a letter "
            f"or digit (no '/', no '..'), e.g. tiny-lm-sft"
        )
    return name


def run_name_for(policy: str) -> str:
    """A folder-safe run name from a policy spec (``hf:runs/x`` -> ``hf-runs-x``)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", policy.strip()).strip("-.")
    return name[:80] or "run"
