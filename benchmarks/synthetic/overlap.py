"""How much of one split of Gen-MultiHop or Gen-Agentic another split already shows: by question text,
by (start entity, relation chain) and by the facts a question reads.

Everything is compared as plain strings (entity names, relation names, values), not per world, so a name
two worlds happen to share would count as overlap too.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentflow_env.types import Task
from benchmarks.synthetic.multihop import Lookup, parse_question
from benchmarks.synthetic.world import RELATIONS, task_world

__all__ = ["MEASURES", "split_overlap", "task_facts", "task_lookups"]

# what ``split_overlap`` counts, per probe task
MEASURES = {
    "question": "its question text is a reference question",
    "start_chain": "one of its lookups with at least one relation has a (start entity, relation chain) of a reference",
    "start_lookup": "one of its lookups (also a bare attribute of the start) is a reference lookup",
    "any_fact": "it reads a fact (subject, relation or attribute, object or value) that a reference reads",
    "all_facts": "every fact it reads is read by some reference",
    "entity": "an entity on its path is on a reference's path",
}


def task_lookups(task: Task) -> tuple[Lookup, ...]:
    """The lookups a Gen-MultiHop or Gen-Agentic question asks for."""
    from benchmarks.synthetic.agentic import parse_agentic_question

    q = parse_question(task.question)
    if q is not None:
        return q.lookups
    parsed = parse_agentic_question(task.question)
    if parsed is None:
        raise ValueError(f"not a Gen-MultiHop or Gen-Agentic question: {task.question!r}")
    return tuple(parsed[1])


def task_facts(task: Task) -> set[tuple[str, ...]]:
    """Every fact the question's lookups read in its world."""
    world = task_world(task)
    return {f for lk in task_lookups(task) for f in world.fact_path(lk.start, lk.relations, lk.attribute)}


def _features(task: Task) -> dict[str, set]:
    lookups = task_lookups(task)
    facts = task_facts(task)
    return {
        "question": {task.question},
        "start_chain": {(lk.start, lk.relations) for lk in lookups if lk.relations},
        "start_lookup": {(lk.start, lk.relations, lk.attribute) for lk in lookups},
        "facts": facts,
        "entity": {f[0] for f in facts} | {f[2] for f in facts if f[1] in RELATIONS},
    }


def split_overlap(reference: Iterable[Task], probe: Iterable[Task]) -> dict[str, int]:
    """For each measure of ``MEASURES``, how many ``probe`` tasks overlap the ``reference`` tasks;
    ``probe_tasks`` is how many were probed."""
    seen: dict[str, set] = {key: set() for key in ("question", "start_chain", "start_lookup", "facts", "entity")}
    for task in reference:
        for key, values in _features(task).items():
            seen[key] |= values
    counts = dict.fromkeys(MEASURES, 0)
    n = 0
    for task in probe:
        n += 1
        feats = _features(task)
        for key in ("question", "start_chain", "start_lookup", "entity"):
            counts[key] += bool(feats[key] & seen[key])
        counts["any_fact"] += bool(feats["facts"] & seen["facts"])
        counts["all_facts"] += feats["facts"] <= seen["facts"]
    return {**counts, "probe_tasks": n}
