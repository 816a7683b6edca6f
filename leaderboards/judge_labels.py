"""The judge's labelled set: candidate answers with what a sound judge must say of them, built from tasks.

For each task (the first few of each benchmark) the builder writes candidates of four kinds:

- ``gold``: the reference answer as an answer line; ``gold-variant``: the same answer worded otherwise (a
  sentence, other capitalisation, ``\\boxed{}``, the option's letter with its text): both MUST PASS;
- ``hedge``: the reference and a wrong answer together (``X or Y``, two letters): MUST FAIL;
- ``near-miss``: a wrong answer close to the reference (the number off by one, another option's letter, a
  multi-word name cut to its first word, another task's answer of the same benchmark, a Game-of-24
  expression of the right numbers with the wrong value): MUST FAIL.

The tasks come from the AgentFlow test sets (``--data-dir``; their licence is not stated, so a set built from
them is written where the user says and never committed) or, without them, from this project's generated
families. Run ``python -m leaderboards.judge_labels --data-dir DIR --out FILE`` to write one as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentflow_env.types import Task

__all__ = [
    "GENERATED_BENCHMARKS",
    "PAPER_BENCHMARKS",
    "LabelledAnswer",
    "build_labelled_set",
    "candidates_for",
    "read_labelled_set",
    "write_labelled_set",
]

PAPER_BENCHMARKS = (
    "agentflow/Bamboogle-v2",
    "agentflow/TwoWiki-v2",
    "agentflow/HotpotQA-v2",
    "agentflow/Musique-v2",
    "agentflow/GAIA-v2",
    "agentflow/AIME24-v2",
    "agentflow/AMC23-v2",
    "agentflow/GameOf24-v2",
    "agentflow/GPQA-v2",
    "agentflow/MedQA-v2",
)
GENERATED_BENCHMARKS = (
    "agentflow/Gen-MultiHop-v2",
    "agentflow/Gen-Math-v2",
    "agentflow/Gen-GameOf24-v2",
    "agentflow/Gen-Science-v2",
)
MUST_PASS = ("gold", "gold-variant")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class LabelledAnswer:
    """One candidate answer to ``task`` of ``env_id``, with its ``label`` (True: must pass) and ``kind``."""

    env_id: str
    task: Task
    candidate: str
    label: bool
    kind: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "task": self.task.to_dict(),
            "candidate": self.candidate,
            "label": self.label,
            "kind": self.kind,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LabelledAnswer:
        return cls(str(d["env_id"]), Task(**d["task"]), str(d["candidate"]), bool(d["label"]), str(d["kind"]))


def _golds(task: Task) -> list[str]:
    from agentflow_env.scoring.qa import gold_aliases

    return [g for g in gold_aliases(task.answer) if str(g).strip()]


def _choice(task: Task, options: Sequence[str]) -> Iterator[tuple[str, bool, str]]:
    letter = str(task.answer).strip().upper()
    index = ord(letter) - ord("A")
    if not (len(letter) == 1 and 0 <= index < len(options)):
        return
    wrong = chr(ord("A") + (index + 1) % len(options))
    yield f"Answer: {letter}", True, "gold"
    yield f"The correct option is ({letter}) {options[index]}.", True, "gold-variant"
    yield f"Answer: {letter} or {wrong}", False, "hedge"
    yield f"Answer: {wrong}", False, "near-miss"


def _game24(task: Task) -> Iterator[tuple[str, bool, str]]:
    from agentflow_env.scoring.game24 import check_24

    numbers = [int(n) if float(n).is_integer() else n for n in task.metadata["numbers"]]
    target = int(task.metadata.get("target", 24))
    solutions = [s for s in _golds(task) if check_24(s, numbers, target)[0]]
    if solutions:
        yield f"Answer: {solutions[0]}", True, "gold"
        yield f"The expression is \\boxed{{{solutions[0]}}}", True, "gold-variant"
    wrong = "+".join(str(n) for n in numbers)
    if not check_24(wrong, numbers, target)[0]:
        yield f"Answer: {wrong}", False, "near-miss"
        if solutions:
            yield f"Answer: {solutions[0]} or {wrong}", False, "hedge"


def _number(gold: str) -> float | None:
    text = gold.strip().replace(",", "")
    return float(text) if _NUMBER.fullmatch(text) else None


def candidates_for(task: Task, other: str | None) -> list[tuple[str, bool, str]]:
    """(candidate, must pass, kind) for one task; ``other`` is another task's answer of the same benchmark."""
    options = task.metadata.get("options")
    if options:
        return list(_choice(task, list(options)))
    if task.metadata.get("numbers") is not None and task.metadata.get("target") is not None:
        return list(_game24(task))
    golds = _golds(task)
    if not golds:
        return []
    gold = golds[0]
    out = [(f"Answer: {gold}", True, "gold")]
    value = _number(gold)
    if value is not None:
        off = value + 1
        shown = str(int(off)) if off.is_integer() else str(off)
        out.append((f"The final answer is \\boxed{{{gold}}}.", True, "gold-variant"))
        out.append((f"Answer: {gold} or {shown}", False, "hedge"))
        out.append((f"Answer: {shown}", False, "near-miss"))
        return out
    out.append((f"After checking the sources, the answer is {gold.upper()}.", True, "gold-variant"))
    if other and other.strip().lower() not in {g.strip().lower() for g in golds}:
        out.append((f"Answer: {gold} or {other}", False, "hedge"))
        out.append((f"Answer: {other}", False, "near-miss"))
    words = gold.split()
    if len(words) >= 2 and words[0].lower() not in {g.strip().lower() for g in golds} and len(words[0]) > 2:
        out.append((f"Answer: {words[0]}", False, "near-miss"))
    return out


def build_labelled_set(
    data_dir: str | Path | None = None, tasks_per_benchmark: int = 3, benchmarks: Sequence[str] | None = None
) -> list[LabelledAnswer]:
    """The labelled set from the first tasks of each benchmark: the AgentFlow test sets in ``data_dir``, or
    (``None``) this project's generated families."""
    import gymnasium as gym

    import agentflow_env  # noqa: F401  (registers the env ids)

    chosen = benchmarks or (PAPER_BENCHMARKS if data_dir is not None else GENERATED_BENCHMARKS)
    out: list[LabelledAnswer] = []
    for env_id in chosen:
        kwargs: dict[str, Any] = {"data_dir": str(data_dir)} if data_dir is not None and "Gen-" not in env_id else {}
        env = gym.make(env_id, disable_env_checker=True, **kwargs)
        try:
            tasks = env.unwrapped.tasks  # type: ignore[attr-defined]
            count = min(tasks_per_benchmark, len(tasks))
            for i in range(count):
                task = tasks[i]
                neighbour = _golds(tasks[(i + 1) % len(tasks)]) if len(tasks) > 1 else []
                for candidate, label, kind in candidates_for(task, neighbour[0] if neighbour else None):
                    out.append(LabelledAnswer(env_id, task, candidate, label, kind))
        finally:
            env.close()
    return out


def write_labelled_set(items: Sequence[LabelledAnswer], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps(item.to_dict(), ensure_ascii=False, default=str) + "\n")


def read_labelled_set(path: Path) -> list[LabelledAnswer]:
    from agentflow_env.error import ConfigError

    items = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(LabelledAnswer.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{n} is not a labelled answer ({type(exc).__name__}: {exc})") from None
    if not items:
        raise ConfigError(f"{path} holds no labelled answers")
    return items


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data-dir", default=None, help="the AgentFlow test sets (default: the generated families)")
    parser.add_argument("--tasks-per-benchmark", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True, help="JSON-lines file to write")
    args = parser.parse_args(argv)
    items = build_labelled_set(args.data_dir, args.tasks_per_benchmark)
    write_labelled_set(items, args.out)
    sys.stdout.write(f"wrote {len(items)} labelled answers to {args.out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
