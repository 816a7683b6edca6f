"""perf/answer_set_aggregate.py keeps an answer set's totals as run and reduces its per-id blocks to counts."""

from __future__ import annotations

import json

from perf.answer_set_aggregate import main


def test_totals_stay_and_per_id_blocks_become_counts(tmp_path):
    kind = {"n": 10, "failures": 2, "pct": 20.0, "meaning": "scored 0"}
    full = {
        "commit": "abc",
        "totals": {"correct": kind},
        "per_env": {"agentflow/X-v7": {"correct": kind, "gold_kinds": {"int": 3}, "errors": 0}},
        "standin": {"note": "rows", "totals": {"correct": kind}, "per_env": {"agentflow/Y-v7": {"correct": kind}}},
    }
    src, dst = tmp_path / "full.json", tmp_path / "slim.json"
    src.write_text(json.dumps(full), encoding="utf-8")
    assert main([str(src), str(dst)]) == 0
    out = json.loads(dst.read_text(encoding="utf-8"))
    assert out["totals"] == full["totals"] and out["commit"] == "abc"
    assert out["per_env"] == {"agentflow/X-v7": {"correct": [2, 10]}}
    assert out["standin"]["per_env"] == {"agentflow/Y-v7": {"correct": [2, 10]}}
    assert out["standin"]["totals"] == full["standin"]["totals"]
    assert main([str(src)]) == 2  # usage
