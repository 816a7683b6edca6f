"""``Gen-GameOf24``: every solvable 4-number puzzle over 1..max_number, split by content.

Also holds the exact solver the generator and the scripted planner share.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from functools import cache
from pathlib import Path

from agentflow_env.scoring.game24 import Game24Scorer
from agentflow_env.types import Task
from benchmarks.specs import BenchmarkSpec
from benchmarks.synthetic.common import FixedPoolTasks, built_once

__all__ = ["SPEC", "count_solutions", "load_tasks", "puzzle_question", "solvable_puzzles", "solve_24"]

_OPS = ("+", "-", "*", "/")


def _combine(a: Fraction, b: Fraction) -> list[tuple[str, Fraction]]:
    out = [("+", a + b), ("-", a - b), ("*", a * b)]
    if b != 0:
        out.append(("/", a / b))
    return out


def _solve(items: tuple[tuple[Fraction, str], ...], target: Fraction, find_all: bool, found: list[str]) -> None:
    if len(items) == 1:
        if items[0][0] == target:
            found.append(items[0][1])
        return
    n = len(items)
    for i, j in itertools.permutations(range(n), 2):
        rest = tuple(items[k] for k in range(n) if k not in (i, j))
        (a, ea), (b, eb) = items[i], items[j]
        for op, value in _combine(a, b):
            if op in "+*" and i > j:  # commutative: try each unordered pair once
                continue
            _solve(rest + ((value, f"({ea}{op}{eb})"),), target, find_all, found)
            if found and not find_all:
                return


def _strip_outer(expr: str) -> str:
    if expr.startswith("(") and expr.endswith(")"):
        depth = 0
        for k, ch in enumerate(expr):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and k < len(expr) - 1:
                return expr
        return expr[1:-1]
    return expr


def solve_24(numbers: tuple[int, ...] | list[int], target: int = 24) -> str | None:
    """One expression over ``numbers`` equal to ``target`` (``*`` and ``/`` for operators), or ``None``."""
    found: list[str] = []
    _solve(tuple((Fraction(n), str(n)) for n in numbers), Fraction(target), False, found)
    return _strip_outer(found[0]) if found else None


@cache
def _reachable(nums: tuple[Fraction, ...]) -> frozenset[Fraction]:
    if len(nums) == 1:
        return frozenset(nums)
    out: set[Fraction] = set()
    n = len(nums)
    # split the multiset into two non-empty parts
    for r in range(1, n // 2 + 1):
        for left_idx in itertools.combinations(range(n), r):
            left = tuple(nums[k] for k in left_idx)
            right = tuple(nums[k] for k in range(n) if k not in left_idx)
            for a in _reachable(left):
                for b in _reachable(right):
                    out.update((a + b, a - b, b - a, a * b))
                    if b:
                        out.add(a / b)
                    if a:
                        out.add(b / a)
    return frozenset(out)


def _partners(a: Fraction, t: Fraction) -> set[Fraction]:
    """Every ``b`` with ``a op b == t`` or ``b op a == t`` for some ``op`` in + - * /."""
    out = {t - a, a - t, t + a}
    if a != 0:
        out.update((t / a, t * a))  # a * b == t, b / a == t
        if t != 0:
            out.add(a / t)  # a / b == t (b is non-zero because a is)
    return out


def is_solvable(numbers: tuple[int, ...], target: int = 24) -> bool:
    """Exact: splits the multiset in two and asks, for each value of one side, whether a partner
    value is reachable by the other side (reachable sets of the small sides are memoised)."""
    nums = tuple(sorted(Fraction(n) for n in numbers))
    t = Fraction(target)
    if len(nums) == 1:
        return nums[0] == t
    n = len(nums)
    for r in range(1, n // 2 + 1):
        for left_idx in itertools.combinations(range(n), r):
            left = _reachable(tuple(nums[k] for k in left_idx))
            right = _reachable(tuple(nums[k] for k in range(n) if k not in left_idx))
            small, big = (left, right) if len(left) <= len(right) else (right, left)
            if any(not _partners(a, t).isdisjoint(big) for a in small):
                return True
    return False


def count_solutions(numbers: tuple[int, ...] | list[int], target: int = 24) -> int:
    """Number of distinct expression trees that reach ``target`` (a difficulty proxy); cached.

    The counts of the standard pool (1..13, target 24) ship precomputed in ``game24_solution_counts.json``
    (``python -m benchmarks.synthetic.game24`` rewrites it; a test checks it against the solver), so a
    difficulty filter costs nothing instead of ~30 s of enumeration per process.
    """
    key = tuple(sorted(int(n) for n in numbers))
    if target == 24:
        table = _shipped_counts()
        if key in table:
            return table[key]
    return _count_solutions(key, target)


_COUNTS_FILE = Path(__file__).with_name("game24_solution_counts.json")


@built_once(maxsize=1)
def _shipped_counts() -> dict[tuple[int, ...], int]:
    try:
        rows = json.loads(_COUNTS_FILE.read_text(encoding="utf-8"))
        return {tuple(int(n) for n in k.split(",")): int(v) for k, v in rows.items()}
    except (OSError, ValueError, AttributeError):  # missing or damaged: fall back to counting
        return {}


def write_counts_table(path: Path = _COUNTS_FILE, max_number: int = 13) -> int:
    """Recompute the shipped solution counts of every solvable puzzle over ``1..max_number`` (target 24)."""
    rows = {",".join(map(str, c)): _count_solutions(c, 24) for c in solvable_puzzles(max_number)}
    path.write_text(json.dumps(rows, separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
    return len(rows)


@cache
def _count_solutions(numbers: tuple[int, ...], target: int) -> int:
    found: list[str] = []
    _solve(tuple((Fraction(n), str(n)) for n in numbers), Fraction(target), True, found)
    return len(set(found))


@built_once(maxsize=8)
def solvable_puzzles(max_number: int = 13, target: int = 24) -> tuple[tuple[int, ...], ...]:
    """All sorted 4-number multisets over ``1..max_number`` that reach ``target``."""
    return tuple(
        c for c in itertools.combinations_with_replacement(range(1, max_number + 1), 4) if is_solvable(c, target)
    )


def puzzle_question(numbers: tuple[int, ...] | list[int], target: int = 24) -> str:
    nums = ", ".join(str(n) for n in numbers)
    return (
        f"Using the numbers [{nums}], write an arithmetic expression that equals {target}. "
        "Use each number exactly once, with only + - * / and parentheses."
    )


def _task(numbers: tuple[int, ...], target: int) -> tuple[str, Task]:
    key = ",".join(map(str, numbers)) + f"->{target}"
    return key, Task(
        id=f"gen24-{'-'.join(map(str, numbers))}" + ("" if target == 24 else f"-t{target}"),
        question=puzzle_question(numbers, target),
        answer=None,
        family="math",
        metadata={"numbers": list(numbers), "target": target},
    )


def load_tasks(
    split: str = "test",
    seed: int = 0,
    num_tasks: int | None = None,
    max_number: int = 13,
    min_solutions: int = 1,
    max_solutions: int | None = None,
) -> FixedPoolTasks:
    """The puzzles of ``split``. Difficulty knobs: ``max_number`` (magnitudes) and the range of
    ``min_solutions``..``max_solutions`` distinct solutions (fewer solutions is harder)."""
    pool = _pool(int(max_number), int(min_solutions), None if max_solutions is None else int(max_solutions))
    return FixedPoolTasks("Gen-GameOf24", split, pool, seed=seed, num_tasks=num_tasks)


@built_once(maxsize=8)
def _pool(max_number: int, min_solutions: int, max_solutions: int | None) -> tuple[tuple[str, Task], ...]:
    """The (key, task) pool of these settings, built once per process and shared (tasks are frozen)."""
    pool = []
    for numbers in solvable_puzzles(max_number):
        if min_solutions > 1 or max_solutions is not None:
            n = count_solutions(numbers)
            if n < min_solutions or (max_solutions is not None and n > max_solutions):
                continue
        pool.append(_task(numbers, 24))
    return tuple(pool)


def _make_scorer() -> Game24Scorer:
    return Game24Scorer()


SPEC = BenchmarkSpec(
    name="Gen-GameOf24",
    family="math",
    load_tasks=load_tasks,
    make_scorer=_make_scorer,
    tools=("calculator",),
    max_turns=10,
    source="generated: all solvable 4-number multisets over 1..13",
    description="Game of 24 over every solvable puzzle; exact checker, calculator tool.",
    size=lambda: len(solvable_puzzles(13)),
)


if __name__ == "__main__":
    print(f"wrote {write_counts_table()} counts to {_COUNTS_FILE}")
