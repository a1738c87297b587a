"""TCP sockets by state and port, asked of the kernel in-process (NETLINK_SOCK_DIAG, what `ss`
uses) instead of starting `ss` twice per sample: a process start costs the machine ~4 ms of
CPU each time, taken from the server under test.

Input: TCP states and ports. Output: DiagSocket tuples (state, ports, timer left, queues);
OSError when the kernel refuses (no netlink here: the callers fall back to `ss`). The
kernel keeps only the sockets on the ports (the port filter is the bytecode `ss` compiles
for `sport = :p or dport = :p`, linux/inet_diag.h), so a host with tens of thousands of
TIME_WAIT sockets of other runs costs nothing. parse_dump reads raw replies (tested over
captured ones).
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Collection
from typing import NamedTuple

import numpy as np

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_REQ_BYTECODE = 1
BC_JMP, BC_S_EQ, BC_D_EQ = 1, 11, 12
TCP_TIME_WAIT = 6
TCP_LISTEN = 10

_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_MSG_HEAD = struct.Struct("=BBBB")  # family, state, timer, retrans
_PORTS = struct.Struct(">HH")  # sport, dport (network order)
_MSG_TAIL = struct.Struct("=III")  # expires (ms), rqueue, wqueue
_TAIL_AT = 4 + 48  # after the head and struct inet_diag_sockid


class DiagSocket(NamedTuple):
    """One socket as sock_diag reports it. For LISTEN, rqueue is the accept queue now and
    wqueue the backlog (ss's Recv-Q/Send-Q); for TIME_WAIT, expires_ms the time left."""

    state: int
    sport: int
    dport: int
    expires_ms: int
    rqueue: int
    wqueue: int


def port_filter(ports: Collection[int]) -> bytes:
    """Bytecode accepting a socket whose local or remote port is one of `ports`.

    Like ss's `a or b`: each test continues to the next op when true and skips itself and
    the jump after it when false; the jump after a true test goes to the end (accept); a
    false last test lands 4 bytes past the end (reject). The kernel audits that every op is
    reachable by `yes` steps (inet_diag_bc_audit)."""
    tests = [(code, port) for port in sorted(set(ports)) for code in (BC_S_EQ, BC_D_EQ)]
    if not tests:
        raise ValueError("no port to filter on")
    total = 12 * len(tests) - 4
    out = bytearray()
    for index, (code, port) in enumerate(tests):
        # the port rides in the `no` field of the op that follows the test
        out += struct.pack("=BBH", code, 8, 12) + struct.pack("=BBH", 0, 0, port)
        if index < len(tests) - 1:
            out += struct.pack("=BBH", BC_JMP, 4, total - len(out))
    return bytes(out)


def request(family: int, states: int, ports: Collection[int]) -> bytes:
    """One SOCK_DIAG_BY_FAMILY dump request (struct inet_diag_req_v2 + the port filter)."""
    body = struct.pack("=BBBxI", family, socket.IPPROTO_TCP, 0, states) + bytes(48)
    code = port_filter(ports)
    body += struct.pack("=HH", 4 + len(code), INET_DIAG_REQ_BYTECODE) + code
    return _NLMSG.pack(16 + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + body


def parse_dump(data: bytes) -> tuple[list[DiagSocket], bool]:
    """The sockets in raw netlink replies, and whether NLMSG_DONE ended them; OSError for
    NLMSG_ERROR, ValueError for a truncated message."""
    found = []
    offset = 0
    while offset + _NLMSG.size <= len(data):
        length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, offset)
        if length < _NLMSG.size or offset + length > len(data):
            raise ValueError(f"truncated netlink message at {offset}")
        if kind == NLMSG_DONE:
            return found, True
        if kind == NLMSG_ERROR:
            errno = -struct.unpack_from("=i", data, offset + 16)[0]
            raise OSError(errno, os.strerror(errno))
        if kind == SOCK_DIAG_BY_FAMILY:
            at = offset + _NLMSG.size
            _family, state, _timer, _retrans = _MSG_HEAD.unpack_from(data, at)
            sport, dport = _PORTS.unpack_from(data, at + 4)
            expires, rqueue, wqueue = _MSG_TAIL.unpack_from(data, at + _TAIL_AT)
            found.append(DiagSocket(state, sport, dport, expires, rqueue, wqueue))
        offset += (length + 3) & ~3
    if offset < len(data):
        raise ValueError(f"truncated netlink message at {offset}")
    return found, False


# The reply messages of one dump are of one size (88 bytes: netlink header + struct
# inet_diag_msg; 96 when the kernel adds the socket mark, as it does for root): read as columns
# by numpy (a dependency of matplotlib, pinned in bench/requirements.txt) where tens of
# thousands of TIME_WAIT sockets would take a Python loop ~50 ms per sample.
_FIELDS = {
    "len": ("=u4", 0),
    "type": ("=u2", 4),
    "state": ("u1", 17),
    "sport": (">u2", 20),
    "dport": (">u2", 22),
    "expires": ("=u4", 16 + _TAIL_AT),
    "rqueue": ("=u4", 16 + _TAIL_AT + 4),
    "wqueue": ("=u4", 16 + _TAIL_AT + 8),
}
_MESSAGE_MIN = 16 + _TAIL_AT + 20  # up to the end of struct inet_diag_msg
_DONE = _NLMSG.size + 4  # NLMSG_DONE: a header and an int


def _row(size: int) -> np.dtype:
    return np.dtype(
        {
            "names": list(_FIELDS),
            "formats": [kind for kind, _ in _FIELDS.values()],
            "offsets": [offset for _, offset in _FIELDS.values()],
            "itemsize": size,
        }
    )


def columns(data: bytes) -> np.ndarray | None:
    """A whole dump (ending in NLMSG_DONE) as one record per socket with parse_dump's fields
    (state, sport, dport, expires, rqueue, wqueue); None when its socket messages are not all
    of one size (then parse_dump reads them one by one)."""
    if len(data) < _DONE:
        return None
    length, kind = _NLMSG.unpack_from(data, len(data) - _DONE)[:2]
    body = len(data) - _DONE
    if kind != NLMSG_DONE or length != _DONE:
        return None
    if body == 0:
        return np.zeros(0, dtype=_row(_MESSAGE_MIN))
    size = _NLMSG.unpack_from(data, 0)[0]
    if size < _MESSAGE_MIN or size % 4 or body % size:
        return None
    rows = np.frombuffer(data, dtype=_row(size), count=body // size)
    if not (np.all(rows["len"] == size) and np.all(rows["type"] == SOCK_DIAG_BY_FAMILY)):
        return None
    return rows


def receive(family: int, states: int, ports: Collection[int]) -> bytes:
    """The kernel's raw replies to one dump request, up to and including NLMSG_DONE."""
    chunks = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as sock:
        sock.settimeout(5)
        sock.sendto(request(family, states, ports), (0, 0))
        while True:
            # A reply never splits a message: each recv() holds whole ones.
            data = sock.recv(1 << 17)
            chunks.append(data)
            if parse_dump(data)[1]:
                return b"".join(chunks)


def dump(
    states: Collection[int], ports: Collection[int], families: Collection[int] = (socket.AF_INET,)
) -> list[DiagSocket]:
    """TCP sockets in `states` with a local or remote port in `ports`. IPv4 by default: every
    socket of the stack is (127.0.0.1, the studies' 198.18.0.0/15), and each family is one
    walk of the kernel's whole connection table, ~3 ms with 8,000 TIME_WAIT sockets of other
    runs on the host (LISTEN alone is a separate, small table)."""
    mask = 0
    for state in states:
        mask |= 1 << state
    found: list[DiagSocket] = []
    for family in families:
        found += parse_dump(receive(family, mask, ports))[0]
    return found
