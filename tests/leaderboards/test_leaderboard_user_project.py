"""The score guard as a new user drives it: their own policy module in their own folder, the real
``agentflow-env`` and ``pytest`` console scripts, references kept in their project, and the clone untouched."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).resolve().parents[2]

PROTOCOL = """
name = "my-guard"
max_turns = 6
seeds = [0]
fast_tasks = 8
[env]
executor = "direct"
verifier = "rule"
generator = "planner"
[[benchmarks]]
env_id = "agentflow/Gen-GameOf24-v1"
label = "G24"
category = "math"
num_tasks = 24
[[benchmarks]]
env_id = "agentflow/Gen-Science-v1"
label = "Science"
category = "science"
num_tasks = 24
"""

POLICY = """
from agents.policies.scripted import scripted_planner_for

BROKEN = {broken!r}  # benchmarks this version of the policy gets wrong


class Planner:
    def __init__(self, env_id):
        self.env_id = env_id
        self.inner = scripted_planner_for(env_id)

    def act(self, observations):
        if any(name in self.env_id for name in BROKEN):
            return ["Final Answer: I do not know"] * len(observations)
        return self.inner.act(observations)
"""

GUARD = """
import pytest

@pytest.mark.leaderboard(policy="my_policy:Planner", protocol="my-guard.toml", reference="mine")
def test_my_policy_holds_its_score(leaderboard):
    leaderboard.check()
"""


def _tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.skip(f"the {name} console script is not installed")
        return found
    return str(path)


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(GIT_AUTHOR_NAME="u", GIT_AUTHOR_EMAIL="u@u", GIT_COMMITTER_NAME="u", GIT_COMMITTER_EMAIL="u@u")
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _git_status(folder: Path) -> str:
    out = subprocess.run(["git", "status", "--porcelain"], cwd=folder, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else "not a checkout"


def test_a_new_user_records_and_guards_their_own_policy(tmp_path: Path) -> None:
    clone_before = _git_status(CHECKOUT)
    proj = tmp_path / "my-project"
    proj.mkdir()
    (proj / "my-guard.toml").write_text(PROTOCOL)
    (proj / "my_policy.py").write_text(POLICY.format(broken=()))
    (proj / "tests").mkdir()  # tests in their own folder: pytest puts tests/, not the project, on sys.path
    (proj / "tests" / "test_guard.py").write_text(GUARD)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "my policy"]):
        subprocess.run(["git", *args], cwd=proj, check=True, capture_output=True, env={**os.environ, **_ids()})

    # 1. evaluate it as the README says: results land in ./runs/leaderboard of the project
    ev = _run([_tool("agentflow-env"), "eval", "--policy", "my_policy:Planner", "--protocol", "my-guard.toml"], proj)
    assert ev.returncode == 0, ev.stdout + ev.stderr
    assert (proj / "runs" / "leaderboard" / "my-guard").is_dir()

    # 2. record the reference with the `pytest` console script (not python -m pytest) from that folder
    pytest_cmd = [_tool("pytest"), "-p", "no:cacheprovider", "-p", "no:xdist", "tests"]
    rec = _run([*pytest_cmd, "--leaderboard-record"], proj)
    assert rec.returncode == 0, rec.stdout + rec.stderr
    run_json = proj / "leaderboard-refs" / "my-guard" / "mine" / "run.json"
    assert run_json.is_file(), rec.stdout
    import json

    record = json.loads(run_json.read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=proj, capture_output=True, text=True).stdout.strip()
    assert record["git_commit"] == head and record["git_dirty"] is False  # the user's code, not agentflow-env's
    assert record["policy_source"]["module"] == "my_policy" and len(record["policy_source"]["sha256"]) == 64
    assert str(tmp_path) not in run_json.read_text()  # no absolute paths in what is stored

    # 3. the guard passes on the same code, and says what it could detect
    ok = _run(pytest_cmd, proj)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "80% power" in ok.stdout and "PASS" in ok.stdout

    # 4. a regression on one benchmark fails with a table naming it
    (proj / "my_policy.py").write_text(POLICY.format(broken=("Science",)))
    bad = _run(pytest_cmd, proj)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL" in bad.stdout and any("Science" in ln and "OUTSIDE" in ln for ln in bad.stdout.splitlines())
    assert not any("G24" in ln and "OUTSIDE" in ln for ln in bad.stdout.splitlines())

    # 5. nothing was written into the agentflow-env checkout
    assert _git_status(CHECKOUT) == clone_before


def _ids() -> dict[str, str]:
    return {"GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@u", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@u"}
