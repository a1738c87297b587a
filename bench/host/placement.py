"""CPU placement: which CPUs the server side and the load tool may use.

Input: PIN (on or off) and this process's CPU affinity. Output: a Placement, recorded in
every record's metadata.cpu_placement.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    """Which CPUs the server side and the load tool may use (PIN=1 separates them)."""

    pinned: bool
    server_cpus: frozenset[int]
    load_cpus: frozenset[int]

    def to_dict(self) -> dict[str, object]:
        """The record's metadata.cpu_placement."""
        return {
            "pinned": self.pinned,
            "server_cpus": sorted(self.server_cpus),
            "load_cpus": sorted(self.load_cpus),
        }


def cpu_placement(pin: bool) -> Placement:
    """All usable CPUs for everyone, or (PIN=1) the first half for the server and its proxy,
    the rest for the load tool. PostgreSQL, pgbouncer and the stub are not pinned."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2:
        return Placement(False, frozenset(cpus), frozenset(cpus))
    half = (len(cpus) + 1) // 2
    return Placement(True, frozenset(cpus[:half]), frozenset(cpus[half:]))
