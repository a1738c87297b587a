"""Worker recycling (RECYCLE=N): the server's own max-requests style flags, and the workers
that were started during the measured window.

Input: the server's leader PID. Output: the record's `recycles` {max_requests,
max_requests_jitter, workers_at_start, workers_started}: processes of the server's tree
seen during the window that were not there when it began (every replacement worker), found
by listing the tree every POLL_S seconds; a worker that lived less than that can be missed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from bench.host.procs import process_tree

POLL_S = 0.2


def jitter(max_requests: int) -> int:
    """The jitter the harness asks for: a tenth of the limit (at least 1), so the workers of
    one server do not all restart at once (Gunicorn's docs suggest jitter for this)."""
    return max(1, max_requests // 10)


@dataclass
class WorkerWatch:
    """Every PID of the server's tree, polled while the load runs."""

    pid: int
    initial: set[int] = field(default_factory=set)
    seen: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Note the tree now and poll it until stop()."""
        self.initial = process_tree(self.pid)
        self.seen = set(self.initial)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            self.seen |= process_tree(self.pid)

    def stop(self) -> None:
        """Stop polling (one last look first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.seen |= process_tree(self.pid)

    def outcome(self, knobs: dict[str, int]) -> dict[str, int]:
        """The record's recycles."""
        return {
            "max_requests": knobs["max_requests"],
            "max_requests_jitter": knobs.get("max_requests_jitter", 0),
            "workers_at_start": len(self.initial - {self.pid}),
            "workers_started": len(self.seen - self.initial),
        }
