"""The trajectory viewer: one static HTML page per run and benchmark, opened from the board's cells.

Each page embeds its episodes as JSON (no server, no ``fetch``: it works from ``file://``) and reads
them turn by turn: the planner's action, the tool and its command, the tool's result, the verifier's
verdict, the final answer and the score, with filters for solved and failed episodes. Long texts are
clipped in the page (head and tail kept, the cut said in place) so a 500-episode benchmark stays a few MB;
the full text is in the run's ``trajectories.jsonl``.
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from leaderboards.store import EvalResult, TaskOutcome

__all__ = ["FIELD_CHARS", "PAGE_BUDGET", "episode_views", "render_viewer", "viewer_href", "viewer_pages"]

logger = logging.getLogger(__name__)

# tried in turn until the page fits PAGE_BUDGET: the characters kept per long text, and what is kept of the paper
# flow's module calls (prompts and replies, replies, none: they repeat what the turns show, so they go first)
FIELD_CHARS = (4000, 1500, 1500, 1500, 600, 250)
CALL_DETAIL = ("prompts", "prompts", "replies", "none", "none", "none")
PAGE_BUDGET = 6_000_000  # bytes of embedded JSON per page
VIEWER_DIR = "trajectories"
GENERATOR_MARK = '<meta name="generator" content="agentflow-env trajectory viewer">'  # in every page

# the step fields the page shows in their own rows; any other field is listed after them
_STEP_KEYS = ("turn", "action", "tool", "command", "result", "verifier", "error", "seconds", "parsed")
_PARSED_KEYS = ("sub_goal", "context", "tool_name", "final_answer")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def viewer_href(protocol: str, run_name: str, label: str) -> str:
    """The viewer page of one run and benchmark, relative to the site folder."""
    return f"{VIEWER_DIR}/{_slug(protocol)}/{_slug(run_name)}/{_slug(label)}.html"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def _clip(value: Any, limit: int) -> str:
    """``value`` as text; past ``limit`` characters the head and tail are kept and the cut is said in place."""
    text = _text(value)
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    cut = len(text) - head - tail
    note = f"… [{cut:,} characters cut here; the run's trajectories.jsonl has the full text] …"
    return f"{text[:head]}\n{note}\n{text[-tail:]}"


def _step_view(step: dict[str, Any], limit: int) -> dict[str, Any]:
    parsed = step.get("parsed")
    if not isinstance(parsed, dict):
        parsed = {}
    view: dict[str, Any] = {
        "turn": step.get("turn"),
        "action": _clip(step.get("action"), limit),
        "tool": step.get("tool"),
        "command": _clip(step.get("command"), limit),
        "result": _clip(step.get("result"), limit),
        "verifier": _clip(step.get("verifier"), 200),
        "error": _clip(step.get("error"), limit),
        "seconds": round(float(step["seconds"]), 4) if isinstance(step.get("seconds"), int | float) else None,
    }
    for key in _PARSED_KEYS:
        value = parsed.get(key)
        if value not in (None, "", "none") and not (key == "tool_name" and value == step.get("tool")):
            view[key] = _clip(value, limit)
    extra = [[k, _clip(v, limit)] for k, v in sorted(step.items()) if k not in _STEP_KEYS and v not in (None, "")]
    if extra:
        view["extra"] = extra
    return view


def _call_view(call: dict[str, Any], limit: int, prompts: bool) -> dict[str, Any]:
    usage = (call.get("tokens") or {}).get("usage") if isinstance(call.get("tokens"), dict) else None
    return {
        "module": str(call.get("module", "?")),
        "step": call.get("step"),
        "tool": call.get("tool"),
        "reply": _clip(call.get("reply"), limit),
        "prompt": _clip(call.get("prompt"), limit // 3) if prompts else "",  # prompts repeat the memory
        "error": call.get("error"),
        "seconds": call.get("seconds"),
        "usage": (
            f"{usage.get('prompt_tokens', '?')} + {usage.get('completion_tokens', '?')}"
            if isinstance(usage, dict)
            else None
        ),
    }


def _episode_view(
    outcome: TaskOutcome, record: dict[str, Any] | None, limit: int, calls_detail: str = "prompts"
) -> dict[str, Any]:
    view: dict[str, Any] = {
        "key": outcome.key,
        "index": outcome.index,
        "seed": outcome.seed,
        "sample": outcome.sample,
        "task_id": outcome.task_id,
        "score": outcome.score,
        "answer": _clip(outcome.answer, max(limit, 1000)),
        "gold": _clip(outcome.gold, max(limit, 1000)),
        "turns": outcome.turns,
        "truncated": outcome.truncated,
        "wall_s": outcome.wall_s,
        "tokens": outcome.tokens,
        "error": outcome.error,
        "question": "",
        "steps": [],
    }
    if record is None:
        view["missing"] = "this episode's trajectory is not in the run folder (only its outcome line is)"
        return view
    view["question"] = _clip(record.get("question"), max(limit, 2000))
    steps = record.get("trajectory") or []
    view["steps"] = [_step_view(s, limit) for s in steps if isinstance(s, dict)]
    calls = [c for c in record.get("module_calls") or [] if isinstance(c, dict)]
    if calls and calls_detail != "none":
        view["calls"] = [_call_view(c, limit, calls_detail == "prompts") for c in calls]
    elif calls:
        view["calls_left_out"] = len(calls)
    return view


def _trajectories(run: EvalResult, outcomes: Iterable[TaskOutcome]) -> dict[str, dict[str, Any] | None]:
    """Each outcome's trajectory record (``None`` where the file, its offset or its line is missing or bad)."""
    found: dict[str, dict[str, Any] | None] = {}
    blobs: dict[str, bytes | None] = {}
    for o in outcomes:
        ref = o.trajectory or {}
        found[o.key] = None
        name = str(ref.get("file", ""))
        if run.path is None or not name or "/" in name or name.startswith("."):
            continue
        if name not in blobs:
            path = run.path / name
            blobs[name] = path.read_bytes() if path.is_file() else None
        blob = blobs[name]
        try:
            offset, length = int(ref["offset"]), int(ref["length"])
            record = json.loads(blob[offset : offset + length]) if blob is not None else None
        except (KeyError, TypeError, ValueError):
            logger.warning("%s: the trajectory of %s is unreadable", run.path, o.key)
            continue
        if isinstance(record, dict) and record.get("key", o.key) == o.key:
            found[o.key] = record
    return found


def episode_views(
    run: EvalResult,
    env_id: str,
    limit: int = FIELD_CHARS[0],
    records: dict[str, dict[str, Any] | None] | None = None,
    calls_detail: str = "prompts",
) -> list[dict[str, Any]]:
    """The episodes of ``env_id`` in ``run`` as the viewer shows them, in task, trial and sample order."""
    outcomes = sorted((o for o in run.outcomes if o.env_id == env_id), key=lambda o: (o.index, o.seed, o.sample))
    if records is None:
        records = _trajectories(run, outcomes)
    return [_episode_view(o, records.get(o.key), limit, calls_detail) for o in outcomes]


def _cut_note(limit: int, detail: str) -> str:
    """What a page over budget left out, said in its header."""
    if (limit, detail) == (FIELD_CHARS[0], CALL_DETAIL[0]):
        return ""
    left = {"prompts": "", "replies": "; module call prompts left out", "none": "; module calls left out"}[detail]
    return f"long texts are cut to {limit:,} characters{left} (the page would be too big; trajectories.jsonl has all)"


def _embed(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">`` (no ``</script>``, no ``<!--``)."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


ASSETS = ("viewer.css", "viewer.js")  # shared by every page, written once under VIEWER_DIR


def _template(name: str = "viewer.html") -> str:
    return resources.files("leaderboards").joinpath(f"templates/{name}").read_text(encoding="utf-8")


def render_viewer(
    run: EvalResult, env_id: str, board_href: str, records: dict[str, dict[str, Any] | None] | None = None
) -> str:
    """The viewer page of ``run`` on ``env_id``; ``board_href`` links back to the board."""
    rec = run.record
    if records is None:
        records = _trajectories(run, [o for o in run.outcomes if o.env_id == env_id])
    meta = rec.benchmarks.get(env_id, {})
    label, category = str(meta.get("label", env_id)), str(meta.get("category", ""))
    payload = ""
    for limit, detail in zip(FIELD_CHARS, CALL_DETAIL):
        data = {
            "protocol": rec.protocol,
            "run": rec.name,
            "policy": rec.policy,
            "env_id": env_id,
            "label": label,
            "category": category,
            "scoring": rec.scorers.get(env_id, ""),
            "board": board_href,
            "note": _cut_note(limit, detail),
            "episodes": episode_views(run, env_id, limit, records, detail),
        }
        payload = _embed(data)
        if len(payload.encode("utf-8")) <= PAGE_BUDGET:
            break
    head, sep, tail = _template().partition("__DATA__")
    if not sep:
        raise RuntimeError("the viewer template has no __DATA__ slot")
    title = html.escape(f"{rec.name} on {label} ({rec.protocol}) - agentflow-env trajectories")
    assets = board_href[: -len("index.html")] + VIEWER_DIR + "/" if board_href.endswith("index.html") else ""
    return head.replace("__TITLE__", title).replace("__ASSETS__", assets) + payload + tail.replace("__ASSETS__", assets)


def viewer_pages(run: EvalResult) -> dict[str, str]:
    """``{href: page}`` for each benchmark of a measured run that has episodes (reported runs have none)."""
    if run.record.kind != "measured" or not run.outcomes:
        return {}
    pages = {}
    present = {o.env_id for o in run.outcomes}
    records = _trajectories(run, run.outcomes)  # the trajectories file is read once per run
    for env_id, meta in run.record.benchmarks.items():
        if env_id not in present:
            continue
        href = viewer_href(run.record.protocol, run.record.name, str(meta.get("label", env_id)))
        board = "../" * href.count("/") + "index.html"
        pages[href] = render_viewer(run, env_id, board, records)
    return pages


def write_viewers(runs: Iterable[EvalResult], out_dir: Path, write: Any) -> list[Path]:
    """Write every run's viewer pages under ``out_dir`` with ``write(path, text)``; returns their paths.

    Viewer pages left from runs that are gone are removed (only files this module wrote: they carry
    :data:`GENERATOR_MARK`), so the site holds what its board links to and nothing else is touched.
    """
    written = [write(Path(out_dir) / href, page) for run in runs for href, page in viewer_pages(run).items()]
    if written:  # the script and style every page loads by a relative path (works from file://)
        written += [write(Path(out_dir) / VIEWER_DIR / name, _template(name)) for name in ASSETS]
    keep = {p.resolve() for p in written}
    root = Path(out_dir) / VIEWER_DIR
    for old in sorted(root.rglob("*.html")) if root.is_dir() else []:
        if old.resolve() not in keep and GENERATOR_MARK in old.read_text(encoding="utf-8", errors="replace")[:2000]:
            old.unlink()
    return written
