"""``agentflow-env env-server``: reset/step of any ``agentflow/*`` id over HTTP, for trainers whose envs
live in other processes or on other machines (CPU boxes beside GPU boxes).

JSON over HTTP/1.1 (keep-alive), standard library only:

- ``POST /v1/episodes`` ``{"env_id", "kwargs"}`` -> ``{"episode_id"}``: a new env, keyed by a random id;
- ``POST /v1/episodes/<id>/reset`` ``{"seed", "options"}`` -> ``{"observation", "info"}``;
- ``POST /v1/episodes/<id>/step`` ``{"action"}`` -> ``{"observation", "reward", "terminated", "truncated", "info"}``;
- ``POST /v1/step_many`` ``{"steps": [{"episode_id", "action"}, ...]}`` and ``POST /v1/reset_many``
  ``{"resets": [{"episode_id", "seed", "options"}, ...]}`` -> ``{"results": [...]}``: one request for many
  episodes (each result is what the single call returns, or ``{"error", "status"}``);
- ``DELETE /v1/episodes/<id>`` ends it; ``GET /v1/health`` counts what is open.

Serving: one asyncio loop reads requests (``TCP_NODELAY``; each reply is one write) and hands env work to a
bounded thread pool (``workers``), one lock per episode. At most ``max_connections`` connections are open
(more get a 503 and are closed); a request must arrive whole within ``read_timeout_s`` and an idle
keep-alive connection is closed after ``idle_connection_s``, so slow or idle clients pin no thread. An
episode that no request has touched for ``idle_timeout_s`` (its client died) is closed by a reaper thread.
The ``env-server`` command also freezes its start-up heap and collects garbage less often
(:func:`tune_gc_for_serving`; ``--no-gc-tuning`` keeps Python's defaults): full collections were the tail latency.
Errors come back as ``{"error": "..."}`` with a 4xx/5xx status; a failing env never takes the server down.

Safety:

- ``token`` (``--token`` or ``$AGENTFLOW_ENV_SERVER_TOKEN``): every request must carry
  ``Authorization: Bearer <token>``. Required to bind beyond loopback, optional on loopback.
- Golds and task records (``info["gold"]``, ``info["task"]``) are left out of every reply unless the server
  runs with ``reveal_gold`` (``--reveal-gold``): a client plays the episode, it does not read the key.
- A ``Content-Length`` that is not a plain number, or over :data:`MAX_BODY_BYTES`, is refused without
  reading the body, and after any 4xx the connection is closed, so an unread body is never taken for the
  next request.
- Client kwargs are limited to :data:`CLIENT_KWARGS` (split, turn budget, task count) unless the server
  was started with ``allow_client_kwargs``: other kwargs can point an env at paths, engines or a sandbox
  setting, so only a trusted network may choose them. The server's own ``env_kwargs`` apply to every env.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast

import gymnasium as gym

from agentflow_env.error import AgentFlowError, ConfigError
from agentflow_env.remote.http_serving import (
    MAX_BODY_BYTES,
    Held,
    HTTPError,
    JsonHttpServer,
    add_serving_arguments,
    dumps,
    json_body,
    serving_kwargs,
    to_jsonable,
)

__all__ = [
    "CLIENT_KWARGS",
    "HIDDEN_INFO_KEYS",
    "MAX_BODY_BYTES",
    "SERVING_GC_THRESHOLD",
    "TOKEN_ENV",
    "EnvServer",
    "configure",
    "to_jsonable",
    "tune_gc_for_serving",
]

logger = logging.getLogger(__name__)

#: kwargs any client may set, with the type each must have
CLIENT_KWARGS: dict[str, type] = {"split": str, "max_turns": int, "num_tasks": int}
MAX_BATCH = 4096  # items of one step_many/reset_many request
#: the environment variable the server and ``RemoteEnv`` read the token from
TOKEN_ENV = "AGENTFLOW_ENV_SERVER_TOKEN"
#: info keys that give the answer away; replies leave them out unless the server runs with reveal_gold
HIDDEN_INFO_KEYS = ("gold", "task")
#: the collector's thresholds in a serving process (see :func:`tune_gc_for_serving`)
SERVING_GC_THRESHOLD = (5000, 20, 100)


def tune_gc_for_serving() -> None:
    """Tune this process's garbage collector for steady replies; ``agentflow-env env-server`` calls it at start.

    With Python's defaults, a server under load runs a full collection every second or two, and each one scans
    the whole heap (75k objects here: modules, the env registry, the tools' precomputes). No reply goes out
    during those 30-55 ms, and at 64 clients they made the p99 latency. So the start-up heap is collected once
    and frozen (``gc.freeze``: never scanned again, still freed by reference counting as usual), and the young
    generation is collected every 5,000 net allocations instead of 700 (:data:`SERVING_GC_THRESHOLD`).
    Cyclic garbage is still collected, just less often. Only the server's own process does this: an
    ``EnvServer`` started inside another program leaves that program's collector alone.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVING_GC_THRESHOLD)


@dataclass(kw_only=True)
class _Episode(Held):
    env: Any
    env_id: str


class EnvServer(JsonHttpServer):
    """The episode table and the HTTP server around it (``start()`` in a thread, or ``serve_forever()``)."""

    server_name = "env-server"
    token_env = TOKEN_ENV

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8765,
        *,
        idle_timeout_s: float = 300.0,
        max_episodes: int = 1024,
        env_kwargs: dict[str, Any] | None = None,
        allow_client_kwargs: bool = False,
        env_prefix: str = "agentflow/",
        token: str | None = None,
        reveal_gold: bool = False,
        max_connections: int = 256,
        workers: int | None = None,
        read_timeout_s: float = 30.0,
        idle_connection_s: float = 120.0,
    ):
        if idle_timeout_s <= 0 or max_episodes <= 0:
            raise ConfigError("idle_timeout_s and max_episodes must be positive")
        super().__init__(
            host,
            port,
            token=token,
            max_connections=max_connections,
            workers=workers,
            read_timeout_s=read_timeout_s,
            idle_connection_s=idle_connection_s,
        )
        self.idle_timeout_s = float(idle_timeout_s)
        self.max_episodes = int(max_episodes)
        self.env_kwargs = dict(env_kwargs or {})
        self.allow_client_kwargs = bool(allow_client_kwargs)
        self.env_prefix = env_prefix
        self.reveal_gold = bool(reveal_gold)
        self._episodes = cast("dict[str, _Episode]", self._held)

    def _release(self, item: Held) -> None:
        ep = cast(_Episode, item)
        try:
            ep.env.close()
        except Exception:
            logger.exception("closing an env of %s failed", ep.env_id)

    # ------------------------------------------------------------------ the API
    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        env_id = body.get("env_id")
        if not isinstance(env_id, str) or not env_id.startswith(self.env_prefix):
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"env_id must be a string starting with {self.env_prefix!r}")
        if env_id not in gym.registry:
            raise HTTPError(HTTPStatus.NOT_FOUND, f"unknown env id {env_id!r}; `agentflow-env list` shows the ids")
        kwargs = body.get("kwargs") or {}
        if not isinstance(kwargs, dict):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "kwargs must be a JSON object")
        self._check_client_kwargs(kwargs)
        self._check_room()
        try:
            env = gym.make(env_id, **{**self.env_kwargs, **kwargs})
        except (AgentFlowError, TypeError, ValueError) as exc:
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"cannot make {env_id}: {exc}") from exc
        episode_id = secrets.token_hex(16)
        with self._table_lock:
            if len(self._episodes) >= self.max_episodes:  # others were made meanwhile
                env.close()
                self._check_room()
            self._episodes[episode_id] = _Episode(env=env, env_id=env_id)
        return {"episode_id": episode_id, "env_id": env_id}

    def _check_room(self) -> None:
        if len(self._episodes) >= self.max_episodes:
            raise HTTPError(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"the server holds its maximum of {self.max_episodes} episodes; close some or retry later",
            )

    def _check_client_kwargs(self, kwargs: dict[str, Any]) -> None:
        if self.allow_client_kwargs:
            return
        for key, value in kwargs.items():
            kind = CLIENT_KWARGS.get(key)
            if kind is None:
                raise HTTPError(
                    HTTPStatus.FORBIDDEN,
                    f"kwarg {key!r} is not open to clients (allowed: {', '.join(CLIENT_KWARGS)}); "
                    "set it with the server's --env-kwargs, "
                    "or start it with --allow-client-kwargs on a trusted network",
                )
            if not isinstance(value, kind) or isinstance(value, bool):
                raise HTTPError(HTTPStatus.BAD_REQUEST, f"kwarg {key!r} must be a {kind.__name__}")

    def _episode(self, episode_id: Any) -> _Episode:
        ep = self._episodes.get(episode_id) if isinstance(episode_id, str) else None
        if ep is None:
            raise HTTPError(
                HTTPStatus.NOT_FOUND,
                f"no episode {episode_id!r}: it was closed, or expired after {self.idle_timeout_s:g} s idle",
            )
        return ep

    def _public(self, info: dict[str, Any]) -> dict[str, Any]:
        if not self.reveal_gold and ("gold" in info or "task" in info):
            info = {k: v for k, v in info.items() if k not in HIDDEN_INFO_KEYS}
        return info

    def reset(self, episode_id: str, body: dict[str, Any]) -> dict[str, Any]:
        seed, options = body.get("seed"), body.get("options")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "seed must be an integer or null")
        if options is not None and not isinstance(options, dict):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "options must be a JSON object or null")
        ep = self._episode(episode_id)
        with ep.lock:
            self._check_open(ep, episode_id)
            ep.last_used = time.monotonic()
            obs, info = ep.env.reset(seed=seed, options=options)
            ep.last_used = time.monotonic()
        return {"observation": obs, "info": self._public(info)}

    def step(self, episode_id: str, body: dict[str, Any]) -> dict[str, Any]:
        action = body.get("action")
        if not isinstance(action, (str, dict)):
            raise HTTPError(
                HTTPStatus.BAD_REQUEST, "action must be a string (the planner's raw text) or an assistant message"
            )
        ep = self._episode(episode_id)
        with ep.lock:
            self._check_open(ep, episode_id)
            ep.last_used = time.monotonic()
            obs, reward, terminated, truncated, info = ep.env.step(action)
            ep.last_used = time.monotonic()
        return {
            "observation": obs,
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": self._public(info),
        }

    @staticmethod
    def _check_open(ep: _Episode, episode_id: str) -> None:
        if ep.closed:
            raise HTTPError(HTTPStatus.NOT_FOUND, f"no episode {episode_id!r}: it was closed")

    def delete(self, episode_id: str) -> dict[str, Any]:
        with self._table_lock:
            ep = self._episodes.pop(episode_id, None)
        if ep is not None:
            self._end_held(ep)
        return {"closed": ep is not None}

    def health(self) -> dict[str, Any]:
        with self._table_lock:
            episodes = len(self._episodes)
        return {
            "ok": True,
            "episodes": episodes,
            "expired": self.expired,
            "idle_timeout_s": self.idle_timeout_s,
            "connections": self._connections,
            "max_connections": self.max_connections,
            "gc": {"frozen": gc.get_freeze_count(), "threshold": list(gc.get_threshold())},
        }

    # ------------------------------------------------------------------ batches
    def _items(self, body: dict[str, Any], key: str) -> list[dict[str, Any]]:
        items = body.get(key)
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"{key!r} must be a list of JSON objects")
        if len(items) > MAX_BATCH:
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"at most {MAX_BATCH} {key} per request, got {len(items)}")
        return items

    def _one(self, fn: Callable[[str, dict[str, Any]], dict[str, Any]], item: dict[str, Any]) -> dict[str, Any]:
        try:
            return fn(item.get("episode_id"), item)  # type: ignore[arg-type]
        except HTTPError as exc:
            return {"error": str(exc), "status": int(exc.status)}
        except Exception as exc:  # one failing env answers for itself, the others still run
            logger.exception("env server: a batched call failed")
            return {"error": f"{type(exc).__name__}: {exc}", "status": 500}

    async def _many(self, fn: Callable[[str, dict[str, Any]], dict[str, Any]], items: list[dict[str, Any]]) -> dict:
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(*(loop.run_in_executor(self._pool, self._one, fn, item) for item in items))
        return {"results": list(results)}

    async def _route(self, method: str, path: str, raw: bytes) -> bytes:
        """The reply body of one request; env work (and JSON) runs on the pool, never on the loop."""
        parts = [p for p in path.split("?")[0].split("/") if p]
        if parts[:1] != ["v1"]:
            raise HTTPError(HTTPStatus.NOT_FOUND, f"no route {path[:200]}; the API lives under /v1/")
        rest = parts[1:]
        loop = asyncio.get_running_loop()
        pool = self._pool
        if method == "GET" and rest == ["health"]:
            return dumps(self.health())
        if method == "POST" and rest in (["step_many"], ["reset_many"]):
            body = await loop.run_in_executor(pool, json_body, raw)
            key = "steps" if rest[0] == "step_many" else "resets"
            results = await self._many(self.step if key == "steps" else self.reset, self._items(body, key))
            return await loop.run_in_executor(pool, dumps, results)
        if rest[:1] == ["episodes"]:
            if method == "POST" and len(rest) == 1:
                return await loop.run_in_executor(pool, lambda: dumps(self.create(json_body(raw))))
            if method == "POST" and len(rest) == 3 and rest[2] in ("reset", "step"):
                fn = self.reset if rest[2] == "reset" else self.step
                return await loop.run_in_executor(pool, lambda: dumps(fn(rest[1], json_body(raw))))
            if method == "DELETE" and len(rest) == 2:
                return await loop.run_in_executor(pool, lambda: dumps(self.delete(rest[1])))
        raise HTTPError(HTTPStatus.NOT_FOUND, f"no route {method[:20]} {path[:200]}")


# ------------------------------------------------------------------ CLI
def configure(parser: argparse.ArgumentParser) -> None:
    add_serving_arguments(parser, port=8765, token_env=TOKEN_ENV, max_connections=256)
    parser.add_argument("--idle-timeout", type=float, default=300.0, help="seconds before an untouched episode ends")
    parser.add_argument("--max-episodes", type=int, default=1024, help="episodes open at once")
    parser.add_argument("--env-kwargs", default="{}", help="JSON kwargs given to every env (data_dir, modes, ...)")
    parser.add_argument(
        "--allow-client-kwargs",
        action="store_true",
        help="let clients pass any env kwargs (trusted networks only; default: split, max_turns, num_tasks)",
    )
    parser.add_argument(
        "--reveal-gold", action="store_true", help="include info['gold'] and info['task'] in replies (trusted clients)"
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="threads running env calls (default: 4 per CPU, <= 32)"
    )
    parser.add_argument(
        "--no-gc-tuning",
        action="store_true",
        help="keep Python's garbage-collector settings (default: freeze the start-up heap, collect less often)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        env_kwargs = json.loads(args.env_kwargs)
    except ValueError as exc:
        raise ConfigError(f"--env-kwargs is not JSON: {exc}") from None
    if not isinstance(env_kwargs, dict):
        raise ConfigError("--env-kwargs must be a JSON object")
    server = EnvServer(
        args.host,
        args.port,
        idle_timeout_s=args.idle_timeout,
        max_episodes=args.max_episodes,
        env_kwargs=env_kwargs,
        allow_client_kwargs=args.allow_client_kwargs,
        reveal_gold=args.reveal_gold,
        workers=args.workers,
        **serving_kwargs(args, TOKEN_ENV),
    )
    if not args.no_gc_tuning:
        tune_gc_for_serving()
    auth = "token required" if server.needs_token else "no token"
    print(f"agentflow env server on {server.url} (idle timeout {server.idle_timeout_s:g} s, {auth})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
