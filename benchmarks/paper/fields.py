"""Reading one record's fields: its question text, gold answers, metadata and option texts."""

from __future__ import annotations

import math
import re
from typing import Any

from agentflow_env.error import DataError
from benchmarks.paper.catalog import PaperBenchmark

# the output-format instruction AgentFlow appends to some questions; the env gives its own instructions
_ANSWER_TAG_INSTRUCTION = re.compile(r"\s*When ready, output the final answer enclosed in <answer>.*\Z", re.DOTALL)


def _agentflow_query(rec: dict[str, Any]) -> str | None:
    """The text AgentFlow's solver sends for a record: its ``query`` field as it is, else its ``question``."""
    for key in ("query", "question"):
        text = rec.get(key)
        if isinstance(text, str) and text.strip():
            return text
    return None


def _question_text(bench: PaperBenchmark, rec: dict[str, Any], origin: str, keep_instructions: bool) -> str:
    verbatim = rec.get("_verbatim")
    if isinstance(verbatim, str):
        return verbatim  # the paper mode: byte for byte what AgentFlow sends, blanks included
    q = rec.get("question")
    if not isinstance(q, str) or not q.strip():
        raise DataError(
            f"{origin}: record {rec['_row']} has no question text (got {type(q).__name__}); "
            "map the question column with columns={'question': ...}"
        )
    return q.strip() if keep_instructions else _ANSWER_TAG_INSTRUCTION.sub("", q).strip()


def _meta(rec: dict[str, Any], origin: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"source": origin, "row": rec["_row"]}
    if rec.get("id") not in (None, ""):
        meta["source_id"] = str(rec["id"])
    if rec.get("level") not in (None, ""):
        meta["level"] = str(rec["level"])
    return meta


def _gold_values(value: Any, origin: str, row: int) -> list[str]:
    """A gold answer as alias strings; missing, empty, non-finite (NaN) or nested golds are a :class:`DataError`."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    golds = []
    for item in items:
        if item is None or (isinstance(item, str) and not item.strip()):
            continue
        if isinstance(item, float) and item.is_integer():
            item = int(item)
        golds.append(_text(item, origin, row, "gold answer").strip())
    if not golds:
        raise DataError(
            f"{origin}: record {row} has a missing or empty gold answer (got {value!r:.60}); fill in its answer field"
        )
    return golds


def _text(value: Any, origin: str, row: int, what: str) -> str:
    """An option or gold text: strings and finite numbers only (a NaN or a nested object is a broken row)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DataError(f"{origin}: record {row} {what} is a {type(value).__name__}, not text; fix that field")
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(f"{origin}: record {row} {what} is {value!r}; give the option's text")
    return str(value)
