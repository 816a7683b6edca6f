"""Reduce an outside answer set's run output to the aggregate the repository keeps (no answer texts).

The answer sets are written and run outside the project (their harness's ``run.py --out FULL.json``); the committed
``perf/results/answer_set_<set>_v<N>_<commit>.json`` files are that output with totals and per-format blocks as
run and the per-id blocks reduced to ``[failures, n]`` per kind. The docs' figures (experiments/claims.toml) read
the totals.

Run:  python perf/answer_set_aggregate.py FULL.json perf/results/answer_set_<set>_v<N>_<commit>.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _counts(block: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    out = {}
    for env_id, totals in block.items():
        if isinstance(totals, dict):
            inner = totals.get("totals") or totals
            out[env_id] = {
                kind: [value["failures"], value["n"]]
                for kind, value in inner.items()
                if isinstance(value, dict) and "failures" in value
            }
    return out


def slim(full: dict[str, Any]) -> dict[str, Any]:
    """``full`` with its per-id blocks (the real ids' and the stand-in rows') reduced to counts."""
    out = dict(full)
    out["per_env"] = _counts(full.get("per_env", {}))
    standin = full.get("standin")
    if isinstance(standin, dict) and "per_env" in standin:
        out["standin"] = {**standin, "per_env": _counts(standin["per_env"])}
    out["slimmed"] = (
        "per-id blocks reduced to [failures, n] per kind (perf/results: totals and per-format blocks as run)"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    full = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    Path(args[1]).write_text(json.dumps(slim(full), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
