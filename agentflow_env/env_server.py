"""``agentflow-env env-server``: reset/step of any ``agentflow/*`` id over HTTP, for trainers whose envs
live in other processes or on other machines (CPU boxes beside GPU boxes).

JSON over HTTP/1.1 (keep-alive), standard library only:

- ``POST /v1/episodes`` ``{"env_id", "kwargs"}`` -> ``{"episode_id"}``: a new env, keyed by a random id;
- ``POST /v1/episodes/<id>/reset`` ``{"seed", "options"}`` -> ``{"observation", "info"}``;
- ``POST /v1/episodes/<id>/step`` ``{"action"}`` -> ``{"observation", "reward", "terminated", "truncated", "info"}``;
- ``DELETE /v1/episodes/<id>`` ends it; ``GET /v1/health`` counts what is open.

Many episodes run at once (one thread per connection, one lock per episode). An episode that no
request has touched for ``idle_timeout_s`` (its client died) is closed by a reaper thread. Errors come
back as ``{"error": "..."}`` with a 4xx/5xx status; a failing env never takes the server down.

Client kwargs are limited to :data:`CLIENT_KWARGS` (split, turn budget, task count) unless the server
was started with ``allow_client_kwargs``: other kwargs can point an env at paths, engines or a sandbox
setting, so only a trusted network may choose them. The server's own ``env_kwargs`` apply to every env.
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import gymnasium as gym

from agentflow_env.error import AgentFlowError, ConfigError

__all__ = ["CLIENT_KWARGS", "EnvServer", "configure", "to_jsonable"]

logger = logging.getLogger(__name__)

#: kwargs any client may set, with the type each must have
CLIENT_KWARGS: dict[str, type] = {"split": str, "max_turns": int, "num_tasks": int}
MAX_BODY_BYTES = 16 * 1024 * 1024  # an action is capped far below this by the env itself


def to_jsonable(value: Any) -> Any:
    """``value`` with numpy scalars/arrays, tuples and dataclass-like objects turned into JSON types."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if hasattr(value, "tolist"):  # numpy scalar or array
        return value.tolist()
    if hasattr(value, "to_dict"):
        return to_jsonable(value.to_dict())
    return str(value)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the default backlog of 5 resets a burst of clients connecting at once


class _HTTPError(Exception):
    def __init__(self, status: HTTPStatus, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class _Episode:
    env: Any
    env_id: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    closed: bool = False


class EnvServer:
    """The episode table and the HTTP server around it (``start()`` in a thread, or ``serve_forever()``)."""

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
    ):
        if idle_timeout_s <= 0 or max_episodes <= 0:
            raise ConfigError("idle_timeout_s and max_episodes must be positive")
        self.idle_timeout_s = float(idle_timeout_s)
        self.max_episodes = int(max_episodes)
        self.env_kwargs = dict(env_kwargs or {})
        self.allow_client_kwargs = bool(allow_client_kwargs)
        self.env_prefix = env_prefix
        self._episodes: dict[str, _Episode] = {}
        self._table_lock = threading.Lock()
        self._stop = threading.Event()
        self.expired = 0  # episodes closed by the idle reaper
        handler = type("_Handler", (_Handler,), {"app": self})
        self.httpd = _Server((host, port), handler)
        self._serving = False

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> EnvServer:
        """Serve and reap in daemon threads; returns at once."""
        self._serving = True
        for target in (self.httpd.serve_forever, self._reap_loop):
            threading.Thread(target=target, name=f"env-server-{target.__name__}", daemon=True).start()
        return self

    def serve_forever(self) -> None:
        reaper = threading.Thread(target=self._reap_loop, name="env-server-reaper", daemon=True)
        reaper.start()
        self._serving = True
        try:
            self.httpd.serve_forever()
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()
        if self._serving:
            self._serving = False
            self.httpd.shutdown()
        self.httpd.server_close()
        with self._table_lock:
            episodes, self._episodes = list(self._episodes.values()), {}
        for ep in episodes:
            self._close_episode(ep)

    def _reap_loop(self) -> None:
        period = min(max(self.idle_timeout_s / 4, 0.05), 5.0)
        while not self._stop.wait(period):
            self.reap()

    def reap(self) -> int:
        """Close the episodes idle for longer than ``idle_timeout_s``; returns how many."""
        now = time.monotonic()
        with self._table_lock:
            stale = [k for k, ep in self._episodes.items() if now - ep.last_used > self.idle_timeout_s]
            dead = [self._episodes.pop(k) for k in stale]
        for ep in dead:
            self._close_episode(ep)
        self.expired += len(dead)
        return len(dead)

    @staticmethod
    def _close_episode(ep: _Episode) -> None:
        with ep.lock:
            if ep.closed:
                return
            ep.closed = True
            try:
                ep.env.close()
            except Exception:
                logger.exception("closing an env of %s failed", ep.env_id)

    # ------------------------------------------------------------------ the API
    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        env_id = body.get("env_id")
        if not isinstance(env_id, str) or not env_id.startswith(self.env_prefix):
            raise _HTTPError(HTTPStatus.BAD_REQUEST, f"env_id must be a string starting with {self.env_prefix!r}")
        if env_id not in gym.registry:
            raise _HTTPError(HTTPStatus.NOT_FOUND, f"unknown env id {env_id!r}; `agentflow-env list` shows the ids")
        kwargs = body.get("kwargs") or {}
        if not isinstance(kwargs, dict):
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "kwargs must be a JSON object")
        self._check_client_kwargs(kwargs)
        with self._table_lock:
            if len(self._episodes) >= self.max_episodes:
                raise _HTTPError(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    f"the server holds its maximum of {self.max_episodes} episodes; close some or retry later",
                )
        try:
            env = gym.make(env_id, **{**self.env_kwargs, **kwargs})
        except (AgentFlowError, TypeError, ValueError) as exc:
            raise _HTTPError(HTTPStatus.BAD_REQUEST, f"cannot make {env_id}: {exc}") from exc
        episode_id = secrets.token_hex(16)
        with self._table_lock:
            self._episodes[episode_id] = _Episode(env=env, env_id=env_id)
        return {"episode_id": episode_id, "env_id": env_id}

    def _check_client_kwargs(self, kwargs: dict[str, Any]) -> None:
        if self.allow_client_kwargs:
            return
        for key, value in kwargs.items():
            kind = CLIENT_KWARGS.get(key)
            if kind is None:
                raise _HTTPError(
                    HTTPStatus.FORBIDDEN,
                    f"kwarg {key!r} is not open to clients (allowed: {', '.join(CLIENT_KWARGS)}); "
                    "set it with the server's --env-kwargs, "
                    "or start it with --allow-client-kwargs on a trusted network",
                )
            if not isinstance(value, kind) or isinstance(value, bool):
                raise _HTTPError(HTTPStatus.BAD_REQUEST, f"kwarg {key!r} must be a {kind.__name__}")

    def _episode(self, episode_id: str) -> _Episode:
        with self._table_lock:
            ep = self._episodes.get(episode_id)
        if ep is None:
            raise _HTTPError(
                HTTPStatus.NOT_FOUND,
                f"no episode {episode_id!r}: it was closed, or expired after {self.idle_timeout_s:g} s idle",
            )
        return ep

    def reset(self, episode_id: str, body: dict[str, Any]) -> dict[str, Any]:
        seed, options = body.get("seed"), body.get("options")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "seed must be an integer or null")
        if options is not None and not isinstance(options, dict):
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "options must be a JSON object or null")
        ep = self._episode(episode_id)
        with ep.lock:
            self._check_open(ep, episode_id)
            ep.last_used = time.monotonic()
            obs, info = ep.env.reset(seed=seed, options=options)
            ep.last_used = time.monotonic()
        return {"observation": obs, "info": to_jsonable(info)}

    def step(self, episode_id: str, body: dict[str, Any]) -> dict[str, Any]:
        action = body.get("action")
        if not isinstance(action, (str, dict)):
            raise _HTTPError(
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
            "info": to_jsonable(info),
        }

    @staticmethod
    def _check_open(ep: _Episode, episode_id: str) -> None:
        if ep.closed:
            raise _HTTPError(HTTPStatus.NOT_FOUND, f"no episode {episode_id!r}: it was closed")

    def delete(self, episode_id: str) -> dict[str, Any]:
        with self._table_lock:
            ep = self._episodes.pop(episode_id, None)
        if ep is not None:
            self._close_episode(ep)
        return {"closed": ep is not None}

    def health(self) -> dict[str, Any]:
        with self._table_lock:
            open_ids = [ep.env_id for ep in self._episodes.values()]
        return {"ok": True, "episodes": len(open_ids), "expired": self.expired, "idle_timeout_s": self.idle_timeout_s}


class _Handler(BaseHTTPRequestHandler):
    app: EnvServer
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per client for all its requests

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _body(self) -> dict[str, Any]:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "bad Content-Length") from None
        if length > MAX_BODY_BYTES:
            raise _HTTPError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY_BYTES} bytes")
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "the request body is not valid UTF-8 JSON") from None
        if not isinstance(body, dict):
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "the request body must be a JSON object")
        return body

    def _route(self, method: str) -> dict[str, Any]:
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if parts[:1] != ["v1"]:
            raise _HTTPError(HTTPStatus.NOT_FOUND, f"no route {self.path}; the API lives under /v1/")
        rest = parts[1:]
        app = self.app
        if method == "GET" and rest == ["health"]:
            return app.health()
        if rest[:1] == ["episodes"]:
            if method == "POST" and len(rest) == 1:
                return app.create(self._body())
            if method == "POST" and len(rest) == 3 and rest[2] == "reset":
                return app.reset(rest[1], self._body())
            if method == "POST" and len(rest) == 3 and rest[2] == "step":
                return app.step(rest[1], self._body())
            if method == "DELETE" and len(rest) == 2:
                return app.delete(rest[1])
        raise _HTTPError(HTTPStatus.NOT_FOUND, f"no route {method} {self.path}")

    def _dispatch(self, method: str) -> None:
        try:
            status, payload = HTTPStatus.OK, self._route(method)
        except _HTTPError as exc:
            status, payload = exc.status, {"error": str(exc)}
        except Exception as exc:  # an env bug answers 500 and leaves the server up
            logger.exception("env server: %s %s failed", method, self.path)
            status, payload = HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"}
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# ------------------------------------------------------------------ CLI
def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=8765, help="port (0: any free port, printed at start)")
    parser.add_argument("--idle-timeout", type=float, default=300.0, help="seconds before an untouched episode ends")
    parser.add_argument("--max-episodes", type=int, default=1024, help="episodes open at once")
    parser.add_argument("--env-kwargs", default="{}", help="JSON kwargs given to every env (data_dir, modes, ...)")
    parser.add_argument(
        "--allow-client-kwargs",
        action="store_true",
        help="let clients pass any env kwargs (trusted networks only; default: split, max_turns, num_tasks)",
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
    )
    print(f"agentflow env server on {server.url} (idle timeout {server.idle_timeout_s:g} s)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
