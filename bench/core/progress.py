"""Progress: a line per stage on stderr, with the load time left.

Input: the plan's run count and load seconds. Output: lines on stderr; nothing else.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from bench.core.variables import duration_text


@dataclass
class Progress:
    """A line per stage on stderr: what runs now and roughly how long is left."""

    total_runs: int | None  # None: not known ahead (a capacity search decides as it goes)
    remaining_s: int
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    last: str = ""  # the stage said last: what an interrupt cut short

    def say(self, text: str) -> None:
        """Print one progress line."""
        self.last = text
        total = "?" if self.total_runs is None else self.total_runs
        left = duration_text(max(0, self.remaining_s))
        bound = " at most" if self.total_runs is None else ""
        print(
            f"[{self.done:>3}/{total}] {text} (~{left} of load left{bound})",
            file=sys.stderr,
            flush=True,
        )
