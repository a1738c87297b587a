"""One WebSocket exchange (RFC 6455) for the verification: upgrade, send, read back, close.

Input: host, port, path, the messages to send (binary frames, masked as a client must) and how
many to read. Output: a Response whose status is the upgrade's (101 when it succeeded), its
headers, and `messages`: the data frames received in order (fewer than asked when the server
closed first); OSError when no answer came. Standard library only: the harness's venv has no
WebSocket package, and a verification needs one connection, not speed.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import socket
import struct
import time

from bench.core.scenario import Response

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x1, 0x2, 0x8, 0x9, 0xA


def accept_key(key: bytes) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 section 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()


def frame(opcode: int, payload: bytes, mask: bytes | None = None) -> bytes:
    """One final frame; masked with `mask` (4 bytes, random when None): a client's frame."""
    mask = os.urandom(4) if mask is None else mask
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


def _read_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data


def read_frame(sock: socket.socket) -> tuple[int, bool, bytes]:
    """(opcode, final, payload) of the next frame from the server (unmasked, as it must be)."""
    first, second = _read_exact(sock, 2)
    size = second & 0x7F
    if size == 126:
        size = struct.unpack("!H", _read_exact(sock, 2))[0]
    elif size == 127:
        size = struct.unpack("!Q", _read_exact(sock, 8))[0]
    mask = _read_exact(sock, 4) if second & 0x80 else b""
    payload = _read_exact(sock, size)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return first & 0x0F, bool(first & 0x80), payload


def _upgrade(sock: socket.socket, host: str, port: int, path: str) -> tuple[int, dict[str, str]]:
    key = base64.b64encode(os.urandom(16))
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key.decode()}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    )
    sock.sendall(request.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += _read_exact(sock, 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers.setdefault(name.strip().lower(), value.strip())
    if status == 101 and headers.get("sec-websocket-accept") != accept_key(key):
        raise ConnectionError(f"{path}: Sec-WebSocket-Accept does not answer the key")
    return status, headers


def _messages(sock: socket.socket, receive: int) -> list[bytes]:
    """Up to `receive` data messages (fragments joined); fewer when the server closes."""
    messages: list[bytes] = []
    parts = b""
    while len(messages) < receive:
        opcode, final, payload = read_frame(sock)
        if opcode == OP_CLOSE:
            break
        if opcode == OP_PING:
            sock.sendall(frame(OP_PONG, payload))
            continue
        if opcode == OP_PONG:
            continue
        parts += payload
        if final:
            messages.append(parts)
            parts = b""
    return messages


def exchange(
    host: str, port: int, path: str, send: tuple[bytes, ...], receive: int, timeout_s: float = 10
) -> Response:
    """Upgrade `path` to a WebSocket, send each message as a binary frame, read `receive`
    messages back, close; the upgrade's status and headers with the messages received."""
    start = time.monotonic()
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        status, headers = _upgrade(sock, host, port, path)
        if status != 101:
            return Response(status, headers, b"", time.monotonic() - start)
        for message in send:
            sock.sendall(frame(OP_BINARY, message))
        messages = _messages(sock, receive)
        # The server may have closed first (the push route after its count): nothing to say.
        with contextlib.suppress(OSError):
            sock.sendall(frame(OP_CLOSE, struct.pack("!H", 1000)))
    return Response(101, headers, b"", time.monotonic() - start, messages=tuple(messages))
