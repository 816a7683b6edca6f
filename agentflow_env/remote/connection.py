"""``KeepAliveConnection``: one keep-alive HTTP/1.1 connection, the transport of this project's HTTP clients.

``RemoteEnv`` (:mod:`agentflow_env.remote.client`) and the Python tool's remote sandbox
(:mod:`agentflow_env.tools.python.remote`) both send their requests through it. It imports nothing of the
project but its errors, so the tools below ``remote/`` can use it (``tests/test_layers.py`` places it there).
"""

from __future__ import annotations

import http.client
import select
import socket
from urllib.parse import urlsplit

from agentflow_env.error import ConfigError

__all__ = ["KeepAliveConnection"]

_MAX_HEAD = 64 * 1024


class KeepAliveConnection:
    """One keep-alive HTTP connection: each request is one write (headers and body together) and the
    reply is read straight off the socket, with a timeout, the token, and a check for stale connections."""

    def __init__(self, url: str, timeout_s: float, token: str | None):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ConfigError(f"url {url!r}: expected http://HOST:PORT")
        self.host, self.port = parts.hostname, parts.port or 80
        self.url = f"http://{self.host}:{self.port}"
        self.timeout_s = float(timeout_s)
        host_header = f"{self.host}:{self.port}" if ":" not in self.host else f"[{self.host}]:{self.port}"
        self._headers = f"Host: {host_header}\r\nContent-Type: application/json\r\n"
        if token:
            self._headers += f"Authorization: Bearer {token}\r\n"
        self._sock: socket.socket | None = None
        self._buffer = b""

    def _connection(self) -> socket.socket:
        sock = self._sock
        if sock is not None:
            try:  # readable while idle: the server closed it (idle timeout, restart); reopen before sending
                if select.select([sock], [], [], 0)[0]:
                    self.close()
            except (OSError, ValueError):
                self.close()
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock, self._buffer = sock, b""
        return self._sock  # type: ignore[return-value]

    def exchange(self, method: str, path: str, payload: bytes, timeout_s: float | None = None) -> tuple[int, bytes]:
        """Send one request and read its reply: ``(status, body)``. Raises ``OSError`` or ``http.client``'s
        exceptions (the connection is closed then); ``timeout_s`` bounds this request (default: the transport's)."""
        head = f"{method} {path} HTTP/1.1\r\n{self._headers}Content-Length: {len(payload)}\r\n\r\n"
        try:
            sock = self._connection()
            sock.settimeout(self.timeout_s if timeout_s is None else timeout_s)
            sock.sendall(head.encode("latin-1") + payload)
            status, data, close = self._read_response(sock)
        except BaseException:
            self.close()
            raise
        if close:
            self.close()
        return status, data

    def _read_response(self, sock: socket.socket) -> tuple[int, bytes, bool]:
        buffer = self._buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if len(buffer) > _MAX_HEAD:
                raise http.client.HTTPException("reply headers too long")
            chunk = sock.recv(65536)
            if not chunk:
                raise http.client.RemoteDisconnected("the server closed the connection without a reply")
            buffer += chunk
        lines = buffer[:end].decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            raise http.client.BadStatusLine(lines[0][:100]) from None
        length, close = None, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value.strip())
            elif name == "connection":
                close = value.strip().lower() == "close"
        if length is None or length < 0:
            raise http.client.HTTPException("a reply without a Content-Length")
        buffer = buffer[end + 4 :]
        chunks, have = [buffer], len(buffer)
        while have < length:
            chunk = sock.recv(max(length - have, 65536))
            if not chunk:
                raise http.client.IncompleteRead(b"".join(chunks), length - have)
            chunks.append(chunk)
            have += len(chunk)
        data = b"".join(chunks)
        self._buffer = data[length:]
        return status, data[:length], close

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock, self._buffer = None, b""
