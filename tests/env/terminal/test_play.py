"""``agentflow-env play``: driven with scripted stdin, and in tmux when it is installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid

import pytest

from benchmarks.synthetic.game24 import load_tasks, solve_24


def _task():
    task = load_tasks(split="test")[0]
    return task, solve_24(task.metadata["numbers"])


def _cmd(task_id):
    return [
        sys.executable,
        "-m",
        "agentflow_env.cli",
        "play",
        "agentflow/Gen-GameOf24-v1",
        "--task-id",
        task_id,
        "--no-color",
    ]


def test_play_with_scripted_stdin():
    task, solution = _task()
    script = (
        f"Tool Name: Calculator_Tool\nCommand: {solution}\n\n"  # a multi-line action ended by an empty line
        "/tool Nope_Tool 1+1\n"  # an unknown tool costs the turn and says why
        f"/answer {solution}\n"
    )
    out = subprocess.run(_cmd(task.id), input=script, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "Using the numbers" in out and task.id in out
    assert f"{solution} = 24" in out  # the tool result was shown
    assert "unknown tool 'Nope_Tool'" in out
    assert "correct" in out and "Total reward: 1.00" in out


def test_play_quits_cleanly_on_end_of_input():
    task, _ = _task()
    done = subprocess.run(_cmd(task.id), input="", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "bye" in done.stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
def test_play_in_tmux():
    task, solution = _task()
    session = f"afplay-{uuid.uuid4().hex[:8]}"
    # keep the pane after the program exits, so its last screen can still be read
    cmd = " ".join(_cmd(task.id)) + "; sleep 60"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "60", cmd], check=True)
    try:

        def screen() -> str:
            return subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session, "-S", "-200"], capture_output=True, text=True
            ).stdout

        deadline = time.time() + 30
        while "turn 1" not in screen() and time.time() < deadline:
            time.sleep(0.2)
        subprocess.run(["tmux", "send-keys", "-t", session, f"/answer {solution}", "Enter"], check=True)
        while "Total reward" not in screen() and time.time() < deadline:
            time.sleep(0.2)
        assert "Total reward: 1.00" in screen()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
