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
from agentflow_env.remote.client import RemoteEnv, RemoteEnvError
from agentflow_env.remote.server import EnvServer
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


@pytest.fixture()
def open_server():
    """A server that reveals golds (a trusted client), so whole infos can be compared."""
    srv = EnvServer("127.0.0.1", 0, idle_timeout_s=60, reveal_gold=True).start()
    yield srv
    srv.close()


@pytest.mark.parametrize("env_id", ["agentflow/Gen-GameOf24-v1", "agentflow/Gen-MultiHop-v1", "agentflow/Gen-Math-v1"])
def test_remote_episodes_equal_local_episodes(open_server, env_id):
    server = open_server
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


def test_tool_calling_messages_travel_as_themselves(open_server):
    """An OpenAI assistant message (a dict) is stepped remotely exactly as locally, info's chat included."""
    from agents.policies.tool_calling import ToolCalling

    env_id = "agentflow/Gen-GameOf24-v1"
    local = gym.make(env_id, split="test")
    remote = RemoteEnv(env_id, open_server.url, split="test")
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
        health = srv.health()
        assert (health["ok"], health["episodes"], health["expired"]) == (True, 0, 1)
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


def _cli_server_health(*flags: str) -> dict:
    """Start ``agentflow-env env-server`` in its own process, read ``/v1/health``, stop it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentflow_env.cli", "env-server", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        url = proc.stdout.readline().split(" on ")[1].split()[0]
        with urllib.request.urlopen(f"{url}/v1/health", timeout=20) as reply:
            return json.loads(reply.read())
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_the_server_process_freezes_its_start_up_heap_and_collects_less_often():
    from agentflow_env.remote.server import SERVING_GC_THRESHOLD

    tuned = _cli_server_health()["gc"]
    assert tuned["threshold"] == list(SERVING_GC_THRESHOLD)
    assert tuned["frozen"] > 10_000  # modules, the registry: never scanned by a full collection again
    python_defaults = subprocess.run(
        [sys.executable, "-c", "import gc, json; print(json.dumps(list(gc.get_threshold())))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    default = _cli_server_health("--no-gc-tuning")["gc"]
    assert default == {"frozen": 0, "threshold": json.loads(python_defaults)}  # this Python's own defaults
    import gc

    before = {"frozen": gc.get_freeze_count(), "threshold": list(gc.get_threshold())}
    srv = EnvServer("127.0.0.1", 0).start()  # inside another program: its collector is left alone
    try:
        assert srv.health()["gc"] == before
    finally:
        srv.close()


def _without_gold(steps: list) -> list:
    return [(*s[:-1], {k: v for k, v in s[-1].items() if k not in ("gold", "task")}) for s in steps]


def test_golds_and_task_records_stay_on_the_server_unless_revealed(server):
    env_id = "agentflow/Gen-MultiHop-v1"
    planner = scripted_planner_for(env_id)
    local = gym.make(env_id, split="test")
    remote = RemoteEnv(env_id, server.url, split="test")
    try:
        a, b = _play(local, planner, 3), _play(remote, planner, 3)
        assert "gold" in a[-1][-1] and "task" in a[-1][-1]
        assert "gold" not in b[-1][-1] and "task" not in b[-1][-1]
        assert b == _without_gold(a)  # nothing else is left out
        assert not any("gold" in step[-1] for step in b)
    finally:
        remote.close()
        local.close()


def test_a_token_is_required_beyond_loopback_and_checked_when_set(monkeypatch):
    from agentflow_env.error import ConfigError

    with pytest.raises(ConfigError, match="token"):
        EnvServer("0.0.0.0", 0)
    with pytest.raises(ConfigError, match="16 characters"):
        EnvServer("127.0.0.1", 0, token="short")
    token = "t" * 32
    srv = EnvServer("127.0.0.1", 0, token=token).start()
    try:
        code, out = _post(f"{srv.url}/v1/episodes", json.dumps({"env_id": "agentflow/Gen-GameOf24-v1"}).encode())
        assert code == 401 and "Bearer" in out["error"]
        with pytest.raises(RemoteEnvError, match="401"):
            RemoteEnv("agentflow/Gen-GameOf24-v1", srv.url, token="x" * 32, split="test")
        env = RemoteEnv("agentflow/Gen-GameOf24-v1", srv.url, token=token, split="test")
        assert env.reset(seed=0)[0]["question"]
        env.close()
        monkeypatch.setenv("AGENTFLOW_ENV_SERVER_TOKEN", token)
        env = RemoteEnv("agentflow/Gen-GameOf24-v1", srv.url, split="test")  # the token from the environment
        env.close()
        assert srv.health()["episodes"] == 0
    finally:
        srv.close()


def test_step_many_equals_one_step_at_a_time(open_server):
    from agentflow_env.remote.client import RemoteEnvBatch

    env_id = "agentflow/Gen-GameOf24-v1"
    planner = scripted_planner_for(env_id)
    singles = [RemoteEnv(env_id, open_server.url, split="test") for _ in range(4)]
    batch = RemoteEnvBatch(env_id, open_server.url, 4, split="test")
    try:
        obs_b = [o for o, _ in batch.reset(seeds=[0, 1, 2, 3])]
        obs_s = [env.reset(seed=i)[0] for i, env in enumerate(singles)]
        assert obs_b == obs_s
        for _ in range(2):
            actions = planner.act(obs_b)
            out_b = batch.step(actions)
            out_s = [env.step(a) for env, a in zip(singles, actions)]
            assert _strip_timings(json.loads(json.dumps(out_b))) == _strip_timings(json.loads(json.dumps(out_s)))
            obs_b = [o[0] for o in out_b]
        with pytest.raises(RemoteEnvError, match="one of actions per episode"):
            batch.step(["x"])
        # one bad episode answers for itself; the others still ran
        code, out = _post(
            f"{open_server.url}/v1/step_many",
            json.dumps(
                {"steps": [{"episode_id": "nope", "action": "x"}, {"episode_id": batch.episode_ids[0]}]}
            ).encode(),
        )
        assert code == 200 and [r["status"] for r in out["results"]] == [404, 400]
    finally:
        batch.close()
        for env in singles:
            env.close()
    assert open_server.health()["episodes"] == 0


def _raw(url: str, data: bytes, read_for: float = 5.0) -> bytes:
    """Send raw bytes on a fresh connection; everything the server sends back until it closes."""
    import socket as socket_mod
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket_mod.create_connection((parts.hostname, parts.port), timeout=read_for) as sock:
        try:
            sock.sendall(data)
        except OSError:
            pass
        chunks = []
        deadline = time.monotonic() + read_for
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, OSError):
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_bad_lengths_are_refused_and_the_connection_closed(server):
    health = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
    for length in (b"-1", b"+5", b"1e3", b"0x10", b" ", b"99999999999999999999"):
        out = _raw(server.url, b"POST /v1/episodes HTTP/1.1\r\nContent-Length: " + length + b"\r\n\r\n" + health)
        assert out.startswith(b"HTTP/1.1 400"), (length, out[:80])
        assert out.count(b"HTTP/1.1") == 1  # what followed was not read as a request
    # over the limit: 413 at once, and the "body" (here a valid request) is never parsed as the next request
    big = b"POST /v1/episodes HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (64 * 1024 * 1024)
    out = _raw(server.url, big + health)
    assert out.startswith(b"HTTP/1.1 413") and out.count(b"HTTP/1.1") == 1 and b"Connection: close" in out
    # any 4xx closes: a pipelined request after a 404 gets no answer
    out = _raw(server.url, b"GET /nope HTTP/1.1\r\n\r\n" + health)
    assert out.startswith(b"HTTP/1.1 404") and out.count(b"HTTP/1.1") == 1
    # chunked bodies and repeated lengths are refused too
    out = _raw(server.url, b"POST /v1/episodes HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 411")
    out = _raw(server.url, b"POST /v1/episodes HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 0\r\n\r\n{}")
    assert out.startswith(b"HTTP/1.1 400")
    # keep-alive: two good requests on one connection get two answers
    out = _raw(server.url, health + health, read_for=1.0)
    assert out.count(b"HTTP/1.1 200") == 2
    assert server.health()["ok"]


def test_an_idle_keep_alive_connection_closed_by_the_server_is_reopened_before_a_step():
    srv = EnvServer("127.0.0.1", 0, idle_connection_s=0.2).start()
    try:
        env = RemoteEnv("agentflow/Gen-GameOf24-v1", srv.url, split="test")
        env.reset(seed=0)
        time.sleep(0.6)  # the server has closed the idle connection
        _, _, terminated, _, _ = env.step("Final Answer: 24")
        assert terminated
        env.close()
    finally:
        srv.close()
