"""The remote env server and its ``RemoteEnv`` client, on loopback only.

Same seeded episodes locally and remotely give identical trajectories; bad requests get clear
errors; an idle episode is reaped; a killed server gives the client a clear error, not a hang.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.env_server import EnvServer
from agentflow_env.remote import RemoteEnv, RemoteEnvError
from agents.policies.scripted import scripted_planner_for

_TIMING_KEYS = {"seconds", "elapsed_s", "time_s", "wall_s"}


def _strip_timings(value):
    """Tool timings differ between any two runs; everything else must be identical."""
    if isinstance(value, dict):
        return {k: _strip_timings(v) for k, v in value.items() if k not in _TIMING_KEYS}
    if isinstance(value, list):
        return [_strip_timings(v) for v in value]
    return value


def _play(env, planner, seed: int) -> list:
    obs, info = env.reset(seed=seed)
    steps = [("reset", obs, _strip_timings(json.loads(json.dumps(info, default=str))))]
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(planner.act([obs])[0])
        done = terminated or truncated
        steps.append((obs, reward, terminated, truncated, _strip_timings(json.loads(json.dumps(info, default=str)))))
    return steps


@pytest.fixture()
def server():
    srv = EnvServer("127.0.0.1", 0, idle_timeout_s=60).start()
    yield srv
    srv.close()


@pytest.mark.parametrize("env_id", ["agentflow/Gen-GameOf24-v1", "agentflow/Gen-MultiHop-v1", "agentflow/Gen-Math-v1"])
def test_remote_episodes_equal_local_episodes(server, env_id):
    planner = scripted_planner_for(env_id)
    local = gym.make(env_id, split="test")
    remote = RemoteEnv(env_id, server.url, split="test")
    assert remote.observation_space == local.observation_space
    try:
        for seed in (0, 1, 7):
            a, b = _play(local, planner, seed), _play(remote, planner, seed)
            assert a == b
            assert a[-1][1] == 1.0  # the scripted planner solves it, remotely too
    finally:
        remote.close()
        local.close()
    assert server.health()["episodes"] == 0  # close() ended the server side


def test_tool_calling_messages_travel_as_themselves(server):
    """An OpenAI assistant message (a dict) is stepped remotely exactly as locally, info's chat included."""
    from agents.policies.tool_calling import ToolCalling

    env_id = "agentflow/Gen-GameOf24-v1"
    local = gym.make(env_id, split="test")
    remote = RemoteEnv(env_id, server.url, split="test")
    try:
        a = _play(local, ToolCalling(scripted_planner_for(env_id), "openai"), 3)
        b = _play(remote, ToolCalling(scripted_planner_for(env_id), "openai"), 3)
        assert a == b and a[-1][1] == 1.0
        assert any(m.get("tool_calls") for m in a[-1][4]["messages"])
    finally:
        remote.close()
        local.close()


def test_many_episodes_at_once_are_independent(server):
    envs = [RemoteEnv("agentflow/Gen-GameOf24-v1", server.url, split="test") for _ in range(6)]
    try:
        firsts = [env.reset(seed=i)[0]["question"] for i, env in enumerate(envs)]
        assert server.health()["episodes"] == 6
        assert firsts == [envs[i].reset(seed=i)[0]["question"] for i in range(6)]
        assert len(set(firsts)) > 1
    finally:
        for env in envs:
            env.close()


def _post(url: str, body: bytes, method: str = "POST") -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_bad_requests_get_clear_errors(server):
    url = server.url
    assert _post(f"{url}/v1/episodes", b"not json")[0] == 400
    assert _post(f"{url}/v1/episodes", b"[1, 2]")[0] == 400
    code, out = _post(f"{url}/v1/episodes", json.dumps({"env_id": "agentflow/Nope-v9"}).encode())
    assert code == 404 and "agentflow-env list" in out["error"]
    code, out = _post(f"{url}/v1/episodes", json.dumps({"env_id": "CartPole-v1"}).encode())
    assert code == 400
    # kwargs that could point an env at paths, engines or sandbox settings are not open to clients
    body = {"env_id": "agentflow/Gen-GameOf24-v1", "kwargs": {"sandbox": "none"}}
    code, out = _post(f"{url}/v1/episodes", json.dumps(body).encode())
    assert code == 403 and "--allow-client-kwargs" in out["error"]
    code, out = _post(f"{url}/v1/episodes/deadbeef/step", json.dumps({"action": "x"}).encode())
    assert code == 404 and "expired" in out["error"]
    with pytest.raises(RemoteEnvError, match="unknown env id"):
        RemoteEnv("agentflow/Nope-v9", url)
    env = RemoteEnv("agentflow/Gen-GameOf24-v1", url, split="test")
    env.reset(seed=0)
    code, out = _post(f"{url}/v1/episodes/{env.episode_id}/step", json.dumps({"action": 5}).encode())
    assert code == 400 and "string" in out["error"]
    # a malformed planner action is not an error: it costs the turn, as locally
    _, reward, terminated, truncated, info = env.step("\x00" * 1000)
    assert reward == 0.0 and not terminated
    env.close()


def test_idle_episodes_are_reaped():
    srv = EnvServer("127.0.0.1", 0, idle_timeout_s=0.3).start()
    try:
        env = RemoteEnv("agentflow/Gen-GameOf24-v1", srv.url, split="test")
        env.reset(seed=0)
        deadline = time.monotonic() + 10
        while srv.health()["episodes"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.health() | {"idle_timeout_s": None} == {
            "ok": True,
            "episodes": 0,
            "expired": 1,
            "idle_timeout_s": None,
        }
        with pytest.raises(RemoteEnvError, match="expired"):
            env.step("Final Answer: 24")
        env.close()
    finally:
        srv.close()


def test_a_killed_server_gives_a_clear_error_not_a_hang(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentflow_env.cli", "env-server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline()
        assert "env server on http://127.0.0.1:" in line, line
        url = line.split(" on ")[1].split()[0]
        env = RemoteEnv("agentflow/Gen-GameOf24-v1", url, timeout_s=20, split="test")
        env.reset(seed=0)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        started = time.monotonic()
        with pytest.raises(RemoteEnvError, match="is it running"):
            env.step("Final Answer: 24")
        assert time.monotonic() - started < 10
        env.close()  # closing after the server died is quiet
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
