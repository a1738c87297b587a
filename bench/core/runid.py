"""Run ids: the one format of a run directory's name and of a study run's id.

Input: the clock (UTC, so that ids from machines in different time zones sort together).
Output: `20260123T101500-<tag>` for a run directory under .bench/runs/, `20260123T101500Z`
for metadata.study_run (every record of one `make study`).
"""

from __future__ import annotations

import time

STAMP_FORMAT = "%Y%m%dT%H%M%S"


def stamp() -> str:
    """Now, UTC, to the second."""
    return time.strftime(STAMP_FORMAT, time.gmtime())


def run_dir_name(tag: str) -> str:
    """A run directory's name: when it started and what started it (a pid, serve, overhead)."""
    return f"{stamp()}-{tag}"


def study_run_id() -> str:
    """The id every record of one `make study` carries (metadata.study_run)."""
    return stamp() + "Z"
