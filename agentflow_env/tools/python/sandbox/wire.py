"""The frames the host and the sandbox's zygote exchange, and the caps a cell's reply must keep.

Standalone: imports only the standard library, because it also runs inside the sandbox, next to ``zygote.py``
(which imports it as a plain file there, and as this package's module when the host imports the zygote).

Two channels:

- control (host <-> zygote, SOCK_SEQPACKET): one JSON object per packet (:func:`send_packet`,
  :func:`recv_packet`), at most ``MAX_CONTROL_PACKET`` bytes; a spawn reply carries the worker's socket.
- worker (host <-> supervisor <-> kernel, a stream socket): length-prefixed messages (``HEADER``: 4 bytes, big
  endian; :func:`send_body`, :func:`recv_body`). The host sends the call number (``CALL_NUMBER``), the output cap
  (``REQUEST_LIMIT``) and the JSON request; the supervisor answers with the call number and the kernel's JSON
  reply as is. Between supervisor and kernel each message starts with the request's token (``TOKEN_BYTES``), and
  the kernel's first message is ``KERNEL_READY``.

A reply is ``{"output", "dropped", "error", "exc"}``; :func:`sanitize_reply` is the host's check of it (types and
caps), whatever the worker says.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

HEADER = struct.Struct("!I")
MAX_CONTROL_PACKET = 1 << 16
# Replies from the supervisor to the host: the request's number (8 bytes), then the kernel's JSON reply as is
# (the host checks and caps it). Between supervisor and kernel, each message starts with the request's token.
CALL_NUMBER = struct.Struct("!q")
TOKEN_BYTES = 16
# Requests from the host to the supervisor: the call number, the output cap, then the JSON request for the kernel.
REQUEST_LIMIT = struct.Struct("!I")
# The kernel's first frame, once it is set up and idle (shorter than a token: never taken for a reply).
KERNEL_READY = b"ready"
TRACEBACK_CHARS = 3000  # the most characters of a traceback a reply carries (the kernel cuts it to this)


def recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    """Read exactly ``n`` bytes; ``EOFError`` when the peer closed first, ``TimeoutError`` past ``deadline``."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply before the deadline")
            sock.settimeout(left)
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("peer closed the channel")
        got += k
    return bytes(buf)


def recv_body(sock: socket.socket, limit: int, deadline: float | None = None) -> bytes:
    """Read one length-prefixed message of at most ``limit`` bytes, as bytes."""
    (size,) = HEADER.unpack(recv_exact(sock, HEADER.size, deadline))
    if size > limit:
        raise ValueError(f"message of {size} bytes exceeds the limit of {limit}")
    return recv_exact(sock, size, deadline)


def send_body(sock: socket.socket, *parts: bytes) -> None:
    """Send the concatenated ``parts`` as one length-prefixed message."""
    body = b"".join(parts)
    sock.sendall(HEADER.pack(len(body)) + body)


def send_packet(sock: socket.socket, obj: Any, fds: Sequence[int] = ()) -> None:
    """One JSON message per packet (the control channel is SOCK_SEQPACKET), with ``fds`` passed along."""
    if fds:
        socket.send_fds(sock, [json.dumps(obj).encode()], list(fds))
    else:
        sock.send(json.dumps(obj).encode())


def recv_packet(sock: socket.socket) -> tuple[Any, list[int]]:
    """One control packet: its JSON message and the file descriptors sent with it (at most one).

    ``EOFError`` when the peer closed the channel."""
    data, fds, _flags, _addr = socket.recv_fds(sock, MAX_CONTROL_PACKET, 1)
    if not data:
        raise EOFError("peer closed the channel")
    return json.loads(data), list(fds)


def reply_byte_limit(limit: int) -> int:
    """The most bytes an honest reply of ``limit`` characters takes on the wire (JSON escapes: 6 B a char)."""
    return 6 * (limit + 2 * TRACEBACK_CHARS) + 65536


def sanitize_reply(reply: Any, limit: int) -> dict[str, Any] | None:
    """The reply's fields, type-checked and cut to the caps (output to ``limit`` chars); ``None`` if malformed."""
    if not isinstance(reply, dict) or not isinstance(reply.get("output"), str):
        return None
    output = reply["output"]
    dropped = reply.get("dropped", 0)
    dropped = dropped if isinstance(dropped, int) and not isinstance(dropped, bool) and dropped >= 0 else 0
    if len(output) > limit:
        dropped += len(output) - limit
        output = output[:limit]
    error, exc = reply.get("error"), reply.get("exc")
    error = error[-TRACEBACK_CHARS - 3 :] if isinstance(error, str) else None
    exc = exc[:200] if isinstance(exc, str) else None
    return {"output": output, "dropped": dropped, "error": error, "exc": exc}
