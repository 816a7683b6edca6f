"""Retrieval on the record: which backends answered a run's search tools, their fingerprint, and what that means
for comparability.

- :func:`collect_retrieval` reads every benchmark env's search tools (:func:`agentflow_env.tools.backends.
  env_search_backends`) into ``run.json``'s ``retrieval``: per benchmark and tool the backend kind (online, local,
  remote, missing) and fingerprint (corpus hash, retriever kind and model, index type, top-k), the tools without
  a backend, and one short ``fingerprint_id`` over all of it.
- :func:`check_search_backends` refuses a protocol that reads AgentFlow's text (paper-v2) when a search tool has
  no backend, unless the user allowed it (``--allow-missing-tools``).
- :func:`tools_comparability` turns the protocol's label into the run's: "comparable with the reported rows"
  needs AgentFlow's prompts and judge *and* the paper's (online) search backends.
- :func:`retrieval_marks` gives the board's marks: a run without search backends, and runs whose fingerprint
  differs from the board's most common one (they are not ranked together without this mark).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from agentflow_env.error import ConfigError
from leaderboards.protocol import COMPARABLE, NOT_COMPARABLE

__all__ = [
    "MISSING_TOOLS",
    "OFFLINE_SEARCH",
    "TOOL_LABELS",
    "check_search_backends",
    "collect_retrieval",
    "describe_fingerprints",
    "fingerprint_id",
    "leak_mark",
    "retrieval_marks",
    "tools_comparability",
]

#: the comparability label of a run whose search tools had no backend (allowed with --allow-missing-tools)
MISSING_TOOLS = "search tools without a backend: not comparable with the reported rows"
#: AgentFlow's prompts and judge, but search answered by a local or remote retriever instead of the paper's services
OFFLINE_SEARCH = "AgentFlow's prompts and judge, offline search backends: not comparable with the reported rows"

#: the comparability labels about search backends -> their short board mark
TOOL_LABELS = {MISSING_TOOLS: "no search backend, not comparable", OFFLINE_SEARCH: "offline search, not comparable"}

# fingerprint fields that decide which passages come back (a server's URL or passage count do not)
_KEY_FIELDS = ("retriever", "model", "index_type", "corpus_hash", "top_k")


def _key(info: dict[str, Any]) -> dict[str, Any]:
    fp = info.get("fingerprint") or {}
    return {"backend": info.get("backend"), **{k: fp.get(k) for k in _KEY_FIELDS}, "service": info.get("service")}


def fingerprint_id(backends: dict[str, dict[str, dict[str, Any]]]) -> str | None:
    """A short id of every search tool's backend and fingerprint (``None`` when no benchmark searches)."""
    keys = sorted(
        {json.dumps({"tool": t, **_key(i)}, sort_keys=True) for tools in backends.values() for t, i in tools.items()}
    )
    if not keys:
        return None
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:12]


def collect_retrieval(envs: Iterable[tuple[str, Any]]) -> dict[str, Any] | None:
    """``run.json``'s ``retrieval`` from ``(env_id, env)`` pairs; ``None`` when no benchmark has a search tool."""
    from agentflow_env.tools.backends import env_search_backends

    backends = {env_id: env_search_backends(getattr(env, "unwrapped", env)) for env_id, env in envs}
    backends = {k: v for k, v in backends.items() if v}
    if not backends:
        return None
    missing = sorted({t for tools in backends.values() for t, i in tools.items() if i.get("backend") == "missing"})
    kinds = sorted({i.get("backend") for tools in backends.values() for i in tools.values()})
    fingerprints = {
        json.dumps(i["fingerprint"], sort_keys=True)
        for tools in backends.values()
        for i in tools.values()
        if i.get("fingerprint")
    }
    return {
        "backends": backends,
        "kinds": kinds,
        "missing": missing,
        "fingerprints": [json.loads(f) for f in sorted(fingerprints)],
        "fingerprint_id": fingerprint_id(backends),
    }


def check_search_backends(protocol: Any, retrieval: dict[str, Any] | None, allow_missing: bool) -> None:
    """Refuse a paper-v2-style run (AgentFlow's text) whose search tools have no backend, unless allowed."""
    if not getattr(protocol, "wants_agentflow_src", False) or not retrieval or not retrieval["missing"]:
        return
    if allow_missing:
        return
    raise ConfigError(
        f"protocol {protocol.name}: the search tools {', '.join(retrieval['missing'])} have no backend, so every "
        "search call would return an error. Give them one (an index: $AGENTFLOW_WIKI_INDEX; a retrieval server: "
        "$AGENTFLOW_RETRIEVER_URL; web search: SERPER_API_KEY, TAVILY_API_KEY or GOOGLE_API_KEY + GOOGLE_CSE_ID), "
        "or pass --allow-missing-tools to run anyway (the run is then marked and never labelled comparable)"
    )


def tools_comparability(label: str | None, retrieval: dict[str, Any] | None) -> str | None:
    """The run's comparability: the protocol's ``label``, lowered when its search tools lack the paper's backends."""
    if label is None or label == NOT_COMPARABLE or not retrieval:
        return label
    if retrieval["missing"]:
        return MISSING_TOOLS
    if label == COMPARABLE and set(retrieval["kinds"]) != {"online"}:
        return OFFLINE_SEARCH
    return label


def retrieval_marks(records: Iterable[Any]) -> dict[str, list[tuple[str, str]]]:
    """Run name -> ``(short, full)`` board marks: no search backend, or a retrieval fingerprint unlike the board's
    most common one (runs with different fingerprints are not ranked together without this mark)."""
    rows = [(r, r.name, getattr(r, "retrieval", None)) for r in records]
    ids = Counter(ret["fingerprint_id"] for _, _, ret in rows if ret and ret.get("fingerprint_id"))
    common = ids.most_common(1)[0][0] if ids else None
    marks: dict[str, list[tuple[str, str]]] = {}
    for rec, name, ret in rows:
        out = []
        if ret and ret.get("missing") and getattr(rec, "comparability", None) != MISSING_TOOLS:
            out.append(("no search backend", f"search tools without a backend: {', '.join(ret['missing'])}"))
        fid = (ret or {}).get("fingerprint_id")
        if fid:
            what = describe_fingerprints(ret or {})
            if common and fid != common:
                out.append((f"retrieval {fid}, differs", f"retrieval {fid} ({what}) differs from the board's {common}"))
            else:
                out.append((f"retrieval {fid}", f"retrieval {fid}: {what}"))
        if out:
            marks[name] = out
    return marks


def describe_fingerprints(retrieval: dict[str, Any]) -> str:
    """The backends of a run in words: kinds, and each retriever's model, index type, corpus hash and top-k."""
    parts = [
        f"{fp.get('retriever')} {fp.get('model') or ''} {fp.get('index_type') or ''} corpus {fp.get('corpus_hash')} "
        f"top-{fp.get('top_k')}".replace("  ", " ")
        for fp in retrieval.get("fingerprints") or []
    ]
    return "; ".join([f"backends {'/'.join(map(str, retrieval.get('kinds') or []))}", *parts])


def leak_mark(rates: dict[str, Any]) -> tuple[str, str]:
    """The board mark of a run's leak rates (:func:`leaderboards.leaks.leak_rates`)."""
    gold, copied, n = rates["gold_retrieved"], rates["query_copies_question"], rates["episodes"]
    return (
        f"leak: gold {100 * gold:.0f}%, copy {100 * copied:.0f}%",
        f"leak meter over {n} search episodes: a retrieved passage held the gold answer in {100 * gold:.0f}%, "
        f"a query copied the question in {100 * copied:.0f}%",
    )
