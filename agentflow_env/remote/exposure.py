"""Who may reach a server the project starts: loopback by default, a bearer token required beyond it.

``agentflow-env env-server`` and ``agentflow-env mcp-server`` follow the same rules, from here: binding an
address beyond this machine without a token is a :class:`~agentflow_env.error.ConfigError`, a token is at
least :data:`MIN_TOKEN_CHARS` characters, and a request is let in when its ``Authorization`` header is
``Bearer <token>`` (compared in constant time).
"""

from __future__ import annotations

import hmac
import ipaddress

from agentflow_env.error import ConfigError

__all__ = ["MIN_TOKEN_CHARS", "authorized", "check_exposure", "expected_header", "is_loopback"]

MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name that may resolve anywhere: treated as beyond loopback


def check_exposure(host: str, token: str | None, token_env: str) -> None:
    """Refuse a too-short token, and a bind beyond loopback without one (``token_env``: where it may come from)."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"the token must be at least {MIN_TOKEN_CHARS} characters "
            "(`python -c 'import secrets; print(secrets.token_hex())'`)"
        )
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"binding {host!r} exposes the server beyond this machine: give a token "
            f"(--token or ${token_env}), or bind 127.0.0.1"
        )


def expected_header(token: str | None) -> bytes | None:
    """The ``Authorization`` header value a request must carry (``None``: no token, every request is let in)."""
    return None if token is None else f"Bearer {token}".encode()


def authorized(given: bytes, expected: bytes | None) -> bool:
    """Whether a request's ``Authorization`` header (``given``, raw bytes) lets it in."""
    return expected is None or hmac.compare_digest(given, expected)
