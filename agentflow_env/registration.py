"""Env ids ``agentflow/<Name>-v<N>``, registered from a table of string entry points.

Registering imports nothing heavy: ``benchmarks.specs:make_env`` is only imported by ``make``.
Third-party packages add envs through the entry-point group ``agentflow_env.envs`` (a callable
that calls :func:`register`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

logger = logging.getLogger(__name__)

NAMESPACE = "agentflow"
ENTRY_POINT_GROUP = "agentflow_env.envs"
_ENTRY = "benchmarks.specs:make_env"


@dataclass(frozen=True)
class EnvEntry:
    """One row of the registry table."""

    name: str
    version: int = 0
    entry_point: str = _ENTRY
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def env_id(self) -> str:
        return f"{NAMESPACE}/{self.name}-v{self.version}"


# The built-in table: the paper's ten benchmarks and the offline generated families, each at every
# version still served. Bump a version whenever scores stop being comparable; Gymnasium warns when an
# older version is made while a newer one exists.
# v1 (this release): answers that commit to more than one candidate score 0; multiple choice reads
#     free-form letters; the generated search/agentic families draw each split from its own world;
#     the paper loaders shuffle GPQA/MedQA options per seed. v0 ids build the same envs (kept so old
#     code runs), but scores measured under v0 are not comparable with v1.
# v2: every rule scorer reads one answer span (agentflow_env/scoring/extract.py): an explanation after the
#     answer no longer zeroes it, units, thousands separators, scientific notation, quotes and filler
#     phrases read as the value, a negated alternative is not a candidate; two-candidate LaTeX answers
#     (\text{ ou }, \mbox{ oder }), \lor, ‖, | and look-alike letters are hedges; math passes only when
#     every parse agrees; the LLM judge reads the same span. v0 and v1 ids build the same envs as v2
#     (Gymnasium warns that they are out of date); scores measured under them are not comparable with v2.
# v3: the answer grammar (agentflow_env/scoring/grammar.py, docs/rewards.md) reads every final answer first:
#     presentation (Markdown, LaTeX wrappers, citations, quotes, confidence and verification trailers) is
#     stripped, the last self-correction wins over earlier drafts, a remark naming a rival ("34 in some
#     sources", "; if not, 34", "second choice: B") is a hedge, and dates, names, lists and units compare by
#     the gold's type. The v3 ids pass ``grammar=3`` to the scorer; v0-v2 ids keep today's verdicts (grammar 2).
# v4: answer grammar 4 (agentflow_env/scoring/sentence.py, docs/rewards.md): a sentence that restates the
#     question commits to the one value of the gold's type it states (two differing ones are a rival; the
#     question's own quantities are not), reasoning followed by a conclusion ("So ..", "Therefore, ..") is
#     read at the conclusion, and weaker cues ("also", "instead", "some say", "lists ..") name a rival when the
#     new candidate has the answer's type. The v4 ids pass ``grammar=4``; v3 ids keep their verdicts.
# v5: answer grammar 5 (docs/rewards.md): a self-correction reads the last committed value after any
#     correction or negation cue (and a revision that is itself uncertain is a hedge), code fences and JSON
#     objects with one answer key are presentation, a frame of common words around one value of the gold's
#     type commits to it, and more renderings compare by type (number words, mixed numbers, glosses that
#     restate the value, SI units, dates, bulleted lists); a second value under any cue of alternativeness,
#     or side by side with no commitment, is a rival. The v5 ids pass ``grammar=5``; v4 ids keep their verdicts.
# v6: answer grammar 6 (docs/rewards.md): a candidate named only to be rejected ("33 (rather than 23)", "I can
#     rule out 23.") is no candidate, a revision commits at its first commitment however far after the cue,
#     more presentation (pictographs, horizontal rules, <final_answer> elements, reference entries, code and its
#     output, labels and "or" in other languages, list literals), and more ways of keeping two candidates (a JSON
#     key such as "alternative", "can't be ruled out", probabilities over candidates, both alternatives the
#     question offers). The v6 ids pass ``grammar=6``; v5 ids keep their verdicts.
# v7: answer grammar 7 (agentflow_env/scoring/grammar7.py, docs/rewards.md): the action is read with headers first (a
#     JSON object after a "Tool Name:", "Command:" or "Final Answer:" header is part of that field's value, and two
#     "Final Answer:" headers hand both answers to the grammar), and the answer grammar reads chat-template debris
#     and HTML formatting as presentation, labels in more layouts, drops remarks that trail the answer and name no
#     candidate, reads more rejections ("Not X — Y", "(I previously wrote X by mistake)") and repeats, and scores
#     more hedges 0 ("X? Y?", "soit X, soit Y"). The v7 ids pass ``grammar=7``; v6 ids keep their verdicts.
# v8: answer grammar 8 (agentflow_env/scoring/grammar8.py, docs/rewards.md): a retraction is read by its structure
#     (after the last asserted marker that a value was wrong or is replaced, one committed value is the answer, in
#     nine languages), diff blocks, struck <s> values and a JSON revision key beside "answer" read as revisions.
#     The v8 ids pass ``grammar=8``; v7 ids keep their verdicts.
# v9: answer grammar 9 (agentflow_env/scoring/grammar9.py, docs/rewards.md): a value the answer itself marks as not
#     its answer (negated in a contrast, withdrawn, changed from, a draft before a final label, eliminated) is no
#     candidate, in nine languages; ReAct's Finish[..], role headers, localized yes/no, dates and digit groups.
#     The v9 ids pass ``grammar=9``; v8 ids keep their verdicts.
# v10: answer grammar 10 (agentflow_env/scoring/grammar10.py, docs/rewards.md): the answer after a reasoning block,
#     an agent's final_answer(..) code action, drafts reported with more verbs, "shows otherwise", a check against a
#     second source, foreign answer labels before yes/no, headers alone on a line; option lines only are a hedge.
#     The v10 ids pass ``grammar=10``; v9 ids keep their verdicts.
# v11: answer grammar 11 (agentflow_env/scoring/grammar11.py, docs/rewards.md): an agent's JSON final-answer action,
#     a revision after an arrow, drafts reported in eight other languages, a rival named as a distractor, and a
#     tentative draft ("That would suggest 35.") before a revision. The v11 ids pass ``grammar=11``; v10 ids keep
#     their verdicts.
# v12: answer grammar 12 (agentflow_env/scoring/grammar12.py, docs/rewards.md): grammar 11 with the surname-first
#     rule kept to names, so a comma-joined list gold's items in the other order ("Germany, Oranienburg") are not
#     read as the gold. The v12 ids pass ``grammar=12``; v9 to v11 ids keep their verdicts.
_BENCHMARKS = (
    # the paper's ten benchmarks
    "Bamboogle",
    "TwoWiki",
    "HotpotQA",
    "Musique",
    "GAIA",
    "AIME24",
    "AMC23",
    "GameOf24",
    "GPQA",
    "MedQA",
    # the offline generated families
    "Gen-GameOf24",
    "Gen-MultiHop",
    "Gen-Math",
    "Gen-Science",
    "Gen-Agentic",
    "Gen-HopChain",
)
# the answer grammar each id version reads with (agentflow_env/scoring/versioned.py); versions not named
# here read with grammar 2. A new grammar is one more entry (and LATEST_VERSION).
GRAMMAR_OF_VERSION = {3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 10: 10, 11: 11, 12: 12}
LATEST_VERSION = 12
GRAMMAR_FROM_VERSION = min(GRAMMAR_OF_VERSION)  # ids from this version on read answers through a grammar


def _entry_kwargs(name: str, version: int) -> dict[str, Any]:
    grammar = GRAMMAR_OF_VERSION.get(version)
    return {"benchmark": name, **({"grammar": grammar} if grammar is not None else {})}


BUILTIN: tuple[EnvEntry, ...] = tuple(
    EnvEntry(name, version=version, kwargs=_entry_kwargs(name, version))
    for name in _BENCHMARKS
    for version in range(LATEST_VERSION + 1)
)


def register(entry: EnvEntry) -> None:
    """Register one entry (idempotent)."""
    if entry.env_id in gym.registry:
        return
    kwargs = dict(entry.kwargs)
    gym.register(id=entry.env_id, entry_point=entry.entry_point, kwargs=kwargs)


def register_envs() -> None:
    """Register the built-in table, then every plugin in the ``agentflow_env.envs`` group."""
    for entry in BUILTIN:
        register(entry)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()()
        except Exception:  # a broken plugin must not break the built-ins
            logger.exception("env plugin %s failed to register", ep.name)


def registered_ids(latest_only: bool = False) -> list[str]:
    """All agentflow env ids currently in Gymnasium's registry, sorted (``latest_only``: the newest
    version of each name)."""
    ids = sorted(k for k in gym.registry if k.startswith(f"{NAMESPACE}/"))
    if not latest_only:
        return ids
    newest: dict[str, tuple[int, str]] = {}
    for env_id in ids:
        spec = gym.spec(env_id)
        key = f"{spec.namespace}/{spec.name}"
        if key not in newest or (spec.version or 0) > newest[key][0]:
            newest[key] = (spec.version or 0, env_id)
    return sorted(v[1] for v in newest.values())
