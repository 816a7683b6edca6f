"""``RemoteEnv``: a ``gym.Env`` whose episodes run in an ``agentflow-env env-server`` (see
:mod:`agentflow_env.env_server`), with the same spaces, observations, rewards and ``info`` as the
local env.

One keep-alive HTTP connection per env. Every request has a timeout, so a dead or killed server
gives a :class:`RemoteEnvError` naming the server, never a hang. ``step`` is not retried (it is not
idempotent); creating the episode and closing it are.
"""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any
from urllib.parse import urlsplit

import gymnasium as gym

from agentflow_env.error import AgentFlowError
from agentflow_env.spaces import UnicodeText, observation_space

__all__ = ["RemoteEnv", "RemoteEnvError"]


class RemoteEnvError(AgentFlowError):
    """The env server could not be reached, or refused a request; the message says which and why."""


class RemoteEnv(gym.Env[dict, str]):
    """An ``agentflow/*`` env served by ``agentflow-env env-server`` at ``url``.

    ``kwargs`` go to ``gymnasium.make`` on the server (by default it accepts ``split``, ``max_turns``
    and ``num_tasks`` from clients). ``timeout_s`` bounds each request, a step's tool calls included.
    """

    metadata = {"render_modes": []}

    def __init__(self, env_id: str, url: str = "http://127.0.0.1:8765", *, timeout_s: float = 300.0, **kwargs: Any):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise RemoteEnvError(f"env server url {url!r}: expected http://HOST:PORT")
        self.url = f"http://{parts.hostname}:{parts.port or 80}"
        self.env_id = env_id
        self.timeout_s = float(timeout_s)
        self.observation_space = observation_space()
        self.action_space = UnicodeText()
        self._conn: http.client.HTTPConnection | None = None
        self._host, self._port = parts.hostname, parts.port or 80
        self.episode_id: str | None = None
        created = self._request("POST", "/v1/episodes", {"env_id": env_id, "kwargs": kwargs}, retry=True)
        self.episode_id = str(created["episode_id"])

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        out = self._request("POST", f"/v1/episodes/{self._id()}/reset", {"seed": seed, "options": options})
        return out["observation"], out["info"]

    def step(self, action: str | dict[str, Any]) -> tuple[dict, float, bool, bool, dict]:
        # a tool-calling assistant message travels as itself (the server's env reads it as the local one does)
        sent = action if isinstance(action, dict) else str(action)
        out = self._request("POST", f"/v1/episodes/{self._id()}/step", {"action": sent})
        return out["observation"], float(out["reward"]), bool(out["terminated"]), bool(out["truncated"]), out["info"]

    def close(self) -> None:
        if self.episode_id is not None:
            try:
                self._request("DELETE", f"/v1/episodes/{self.episode_id}", None, retry=True)
            except RemoteEnvError:
                pass  # the server is gone or already ended it: nothing is left to free here
            self.episode_id = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ------------------------------------------------------------------ transport
    def _id(self) -> str:
        if self.episode_id is None:
            raise RemoteEnvError("this RemoteEnv is closed")
        return self.episode_id

    def _request(self, method: str, path: str, body: Any, retry: bool = False) -> dict[str, Any]:
        payload = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        for attempt in range(2 if retry else 1):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
            try:
                self._conn.request(method, path, body=payload, headers=headers)
                response = self._conn.getresponse()
                data = response.read()
                status = response.status
                break
            except (OSError, http.client.HTTPException) as exc:
                self._conn.close()
                self._conn = None
                if attempt + 1 < (2 if retry else 1):
                    continue
                kind = "timed out" if isinstance(exc, socket.timeout) else f"failed ({type(exc).__name__}: {exc})"
                raise RemoteEnvError(
                    f"{method} {path} to the env server at {self.url} {kind}; "
                    "is it running? start one with `agentflow-env env-server`"
                ) from exc
        try:
            out = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise RemoteEnvError(
                f"the env server at {self.url} answered {status} with a body that is not JSON"
            ) from None
        if status != 200:
            message = out.get("error") if isinstance(out, dict) else None
            raise RemoteEnvError(f"env server at {self.url} refused {method} {path} ({status}): {message or out}")
        if not isinstance(out, dict):
            raise RemoteEnvError(f"the env server at {self.url} answered with {type(out).__name__}, not an object")
        return out
