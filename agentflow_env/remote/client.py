"""``RemoteEnv``: a ``gym.Env`` whose episodes run in an ``agentflow-env env-server`` (see
:mod:`agentflow_env.remote.server`), with the same spaces, observations, rewards and ``info`` as the
local env (less ``info["gold"]``/``info["task"]`` unless the server runs with ``--reveal-gold``).
``RemoteEnvBatch`` holds many episodes of one server and resets or steps them all in one request.

One keep-alive HTTP connection per object. Every request has a timeout, so a dead or killed server
gives a :class:`RemoteEnvError` naming the server, never a hang. ``step`` is not retried (it is not
idempotent); creating an episode and closing it are. A connection the server closed while idle is
noticed before a request is sent and reopened, so a step is never sent into a dead connection.
The token (``token=`` or ``$AGENTFLOW_ENV_SERVER_TOKEN``) goes in ``Authorization: Bearer``.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from agentflow_env.error import AgentFlowError, ConfigError
from agentflow_env.remote.connection import KeepAliveConnection
from agentflow_env.spaces import UnicodeText, observation_space

__all__ = ["RemoteEnv", "RemoteEnvBatch", "RemoteEnvError"]

TOKEN_ENV = "AGENTFLOW_ENV_SERVER_TOKEN"  # the same name as agentflow_env.remote.server.TOKEN_ENV


class RemoteEnvError(AgentFlowError):
    """The env server could not be reached, or refused a request; the message says which and why."""


class _Transport(KeepAliveConnection):
    """The connection to the env server: its token (``$AGENTFLOW_ENV_SERVER_TOKEN`` by default) and JSON
    requests whose failures are :class:`RemoteEnvError` naming the server."""

    def __init__(self, url: str, timeout_s: float, token: str | None):
        try:
            super().__init__(url, timeout_s, token if token is not None else os.environ.get(TOKEN_ENV) or None)
        except ConfigError as exc:
            raise RemoteEnvError(f"env server {exc}") from None

    def request(self, method: str, path: str, body: Any, retry: bool = False) -> dict[str, Any]:
        payload = b"" if body is None else json.dumps(body).encode("utf-8")
        tries = 2 if retry else 1
        for attempt in range(tries):
            try:
                status, data = self.exchange(method, path, payload)
                break
            except (OSError, http.client.HTTPException) as exc:
                if attempt + 1 < tries:
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
            message_text = out.get("error") if isinstance(out, dict) else None
            raise RemoteEnvError(f"env server at {self.url} refused {method} {path} ({status}): {message_text or out}")
        if not isinstance(out, dict):
            raise RemoteEnvError(f"the env server at {self.url} answered with {type(out).__name__}, not an object")
        return out


def _wire_action(action: Any) -> Any:
    return action if isinstance(action, dict) else str(action)


def _step_tuple(out: dict[str, Any]) -> tuple[dict, float, bool, bool, dict]:
    return out["observation"], float(out["reward"]), bool(out["terminated"]), bool(out["truncated"]), out["info"]


class RemoteEnv(gym.Env[dict, str]):
    """An ``agentflow/*`` env served by ``agentflow-env env-server`` at ``url``.

    ``kwargs`` go to ``gymnasium.make`` on the server (by default it accepts ``split``, ``max_turns``
    and ``num_tasks`` from clients). ``timeout_s`` bounds each request, a step's tool calls included.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        env_id: str,
        url: str = "http://127.0.0.1:8765",
        *,
        timeout_s: float = 300.0,
        token: str | None = None,
        **kwargs: Any,
    ):
        self._http = _Transport(url, timeout_s, token)
        self.url = self._http.url
        self.env_id = env_id
        self.timeout_s = float(timeout_s)
        self.observation_space = observation_space()
        self.action_space = UnicodeText()
        self.episode_id: str | None = None
        created = self._http.request("POST", "/v1/episodes", {"env_id": env_id, "kwargs": kwargs}, retry=True)
        self.episode_id = str(created["episode_id"])

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        out = self._http.request("POST", f"/v1/episodes/{self._id()}/reset", {"seed": seed, "options": options})
        return out["observation"], out["info"]

    def step(self, action: str | dict[str, Any]) -> tuple[dict, float, bool, bool, dict]:
        # a tool-calling assistant message travels as itself (the server's env reads it as the local one does)
        body = {"action": _wire_action(action)}
        return _step_tuple(self._http.request("POST", f"/v1/episodes/{self._id()}/step", body))

    def close(self) -> None:
        if self.episode_id is not None:
            try:
                self._http.request("DELETE", f"/v1/episodes/{self.episode_id}", None, retry=True)
            except RemoteEnvError:
                pass  # the server is gone or already ended it: nothing is left to free here
            self.episode_id = None
        self._http.close()

    def _id(self) -> str:
        if self.episode_id is None:
            raise RemoteEnvError("this RemoteEnv is closed")
        return self.episode_id


class RemoteEnvBatch:
    """``num_envs`` episodes of ``env_id`` on one server, reset and stepped together: one request per call
    (``/v1/reset_many``, ``/v1/step_many``) instead of one per episode; the server runs them on its pool.

    ``step(actions)`` returns one ``(obs, reward, terminated, truncated, info)`` per episode. If any
    episode fails, :class:`RemoteEnvError` is raised after all have run; its ``results`` holds each
    episode's tuple or its error message (a step is not repeated: the others did move).
    """

    def __init__(
        self,
        env_id: str,
        url: str = "http://127.0.0.1:8765",
        num_envs: int = 1,
        *,
        timeout_s: float = 300.0,
        token: str | None = None,
        **kwargs: Any,
    ):
        if num_envs < 1:
            raise RemoteEnvError(f"num_envs must be at least 1, got {num_envs}")
        self._http = _Transport(url, timeout_s, token)
        self.url, self.env_id, self.num_envs = self._http.url, env_id, int(num_envs)
        self.episode_ids: list[str] = []
        try:
            for _ in range(self.num_envs):
                created = self._http.request("POST", "/v1/episodes", {"env_id": env_id, "kwargs": kwargs}, retry=True)
                self.episode_ids.append(str(created["episode_id"]))
        except RemoteEnvError:
            self.close()
            raise

    def reset(
        self, seeds: Sequence[int | None] | None = None, options: Sequence[dict | None] | None = None
    ) -> list[tuple[dict, dict]]:
        seeds = list(seeds) if seeds is not None else [None] * self.num_envs
        options = list(options) if options is not None else [None] * self.num_envs
        self._check(seeds, "seeds")
        self._check(options, "options")
        items = [{"episode_id": e, "seed": s, "options": o} for e, s, o in zip(self._ids(), seeds, options)]
        results = self._many("/v1/reset_many", "resets", items)
        return [(r["observation"], r["info"]) for r in results]

    def step(self, actions: Sequence[str]) -> list[tuple[dict, float, bool, bool, dict]]:
        actions = list(actions)
        self._check(actions, "actions")
        items = [{"episode_id": e, "action": _wire_action(a)} for e, a in zip(self._ids(), actions)]
        return [_step_tuple(r) for r in self._many("/v1/step_many", "steps", items)]

    def _many(self, path: str, key: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = self._http.request("POST", path, {key: items})
        results = out.get("results")
        if not isinstance(results, list) or len(results) != len(items):
            raise RemoteEnvError(f"the env server at {self.url} answered {path} without one result per episode")
        failed = [(i, r.get("error")) for i, r in enumerate(results) if "error" in r]
        if failed:
            error = RemoteEnvError(
                f"env server at {self.url}: {len(failed)} of {len(items)} episodes failed in {path}; "
                f"the first, episode {failed[0][0]}: {failed[0][1]}"
            )
            convert = _step_tuple if key == "steps" else (lambda r: (r["observation"], r["info"]))
            error.results = [r["error"] if "error" in r else convert(r) for r in results]  # type: ignore[attr-defined]
            raise error
        return results

    def _check(self, values: list[Any], what: str) -> None:
        if len(values) != self.num_envs:
            raise RemoteEnvError(f"give one of {what} per episode: {len(values)} for {self.num_envs} episodes")

    def _ids(self) -> list[str]:
        if not self.episode_ids:
            raise RemoteEnvError("this RemoteEnvBatch is closed")
        return self.episode_ids

    def close(self) -> None:
        for episode_id in self.episode_ids:
            try:
                self._http.request("DELETE", f"/v1/episodes/{episode_id}", None, retry=True)
            except RemoteEnvError:
                pass
        self.episode_ids = []
        self._http.close()

    def __enter__(self) -> RemoteEnvBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
