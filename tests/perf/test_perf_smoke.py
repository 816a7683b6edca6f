"""The perf scripts behind registered speed figures still produce every value those figures read.

Each script's ``--smoke`` mode runs its measurement with tiny counts and prints JSON in the shape of its committed
results file. Speed does not repeat, so the values are not compared: every value path that a claim of
``experiments/claims.toml`` reads from the committed file must resolve in the smoke output too (with the claims
checker's own ``resolve``) and give a finite number. perf/eval_throughput.py is left out: its figures select
latencies of 100 and 500 ms at 16 and 64 episodes in flight, minutes of wall even with few episodes.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from experiments import check_claims as cc

ROOT = Path(__file__).resolve().parents[2]

# script -> the committed results file whose claims its smoke output must still serve
SMOKE_SCRIPTS = {
    "perf/env_server.py": "perf/results/env_server.json",
    "perf/env_step.py": "perf/results/env_step_paired.json",
    "perf/python_tool.py": "perf/results/python_tool.json",
    "perf/rollout.py": "perf/results/rollout.json",
}
# per script, one claimed field: removed from (or nulled in) the smoke output, the same comparison must fail
DROP = {
    "perf/env_server.py": ("runs", 1, "many_clients", "server", "step_latency_ms", "p99"),
    "perf/env_step.py": ("runs", 2, "paired_ratio_median", "agentflow_over_minimal"),
    "perf/python_tool.py": ("runs", 0, "median_ms_reset_plus_first_call", "ratio_new_over_old"),
    "perf/rollout.py": ("env_share_of_wall_batched",),
}


def smoke_claims(output: str) -> list[cc.Claim]:
    """The claims read from ``output`` whose structure CI reruns (``rerun = "smoke"``)."""
    return [c for c in cc.load_registry() if c.output == output and c.rerun == "smoke"]


def missing_values(claims: list[cc.Claim], data: Any) -> list[str]:
    """What of ``claims``' value paths does not resolve in ``data``, or does not give a finite number."""
    problems = []
    for claim in claims:
        for group, path in claim.values.items():
            try:
                value = cc.resolve(data, path)
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
                problems.append(f"{claim.id}.{group}: {path} does not resolve ({type(exc).__name__}: {exc})")
                continue
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not math.isfinite(value):
                problems.append(f"{claim.id}.{group}: {path} gives {value!r}, not a finite number")
    return problems


def _has_revision(rev: str) -> bool:
    """Whether this checkout's git history holds ``rev`` (a shallow clone or an sdist may not)."""
    proc = subprocess.run(
        ["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True, check=False
    )  # fmt: skip
    return proc.returncode == 0


def run_smoke(script: str) -> Any:
    if script == "perf/python_tool.py":
        from perf.python_tool import BEFORE_REV

        if not _has_revision(BEFORE_REV):
            pytest.skip(f"perf/python_tool.py times the sandbox of {BEFORE_REV}, which this checkout's history lacks")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / script), "--smoke"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, f"{script} --smoke exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


def without(data: Any, keys: tuple[Any, ...], replace_with_none: bool = False) -> Any:
    """A copy of ``data`` with the field at ``keys`` removed (or set to None)."""
    changed = copy.deepcopy(data)
    node = changed
    for key in keys[:-1]:
        node = node[key]
    if replace_with_none:
        node[keys[-1]] = None
    else:
        del node[keys[-1]]
    return changed


@pytest.mark.parametrize("script", sorted(SMOKE_SCRIPTS))
def test_the_smoke_run_produces_every_value_the_documented_figures_read(script):
    output = SMOKE_SCRIPTS[script]
    claims = smoke_claims(output)
    assert claims, f"no claim of {output} is registered with rerun = 'smoke'"
    committed = json.loads((ROOT / output).read_text(encoding="utf-8"))
    assert not missing_values(claims, committed), "the committed output itself lacks a claimed value"
    smoke = run_smoke(script)
    problems = missing_values(claims, smoke)
    assert not problems, f"{script} --smoke no longer produces what the docs' figures read:\n" + "\n".join(problems)
    # the same comparison fails once the script stops producing a claimed field, or produces a non-number
    gone = missing_values(claims, without(smoke, DROP[script]))
    assert any(str(DROP[script][-1]) in p and "does not resolve" in p for p in gone), gone
    nulled = missing_values(claims, without(smoke, DROP[script], replace_with_none=True))
    assert any(str(DROP[script][-1]) in p for p in nulled), nulled


def test_every_claim_marked_smoke_has_its_script_here():
    outputs = {c.output for c in cc.load_registry() if c.rerun == "smoke"}
    assert outputs <= set(SMOKE_SCRIPTS.values()), f"rerun = 'smoke' without a smoke script: {outputs}"
