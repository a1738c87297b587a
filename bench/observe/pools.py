"""pgbouncer's pool counters during a measured window, through one long-lived psql session on
its admin console (fed SHOW POOLS through a pipe) instead of a psql process per sample: a
process start and a SCRAM login cost the machine ~30 ms of CPU each second, taken from the
server under test.

Input: the ProcessTable (which owns the psql process), pgbouncer's port and the stack's
password. Output: SHOW POOLS totals of the bench database ({"sv_active": n, "cl_waiting": n,
"sv_open": n, ...}); RuntimeError when the session does not answer in time (the next call
starts a new one). parse_show and pool_totals are pure (tested over captured output).
"""

from __future__ import annotations

import os
import select
import threading
import time
from pathlib import Path

from bench.host.procs import Proc, ProcessTable

END = "__pywebbench_end__"
POOL_KEYS = ("cl_active", "cl_waiting", "sv_active", "sv_idle", "sv_used")


def parse_show(text: str) -> list[dict[str, str]]:
    """psql's unaligned (`-A -F |`) output of a SHOW command: one dict per row."""
    lines = [line for line in text.splitlines() if line and not line.startswith("(")]
    if not lines:
        return []
    header = lines[0].split("|")
    return [dict(zip(header, line.split("|"), strict=False)) for line in lines[1:]]


def pool_totals(rows: list[dict[str, str]], dbname: str) -> dict[str, int]:
    """SHOW POOLS counters of one database, summed over its users; sv_open: server
    connections open to PostgreSQL, whatever their state at this instant."""
    totals: dict[str, int] = {}
    for cells in rows:
        if cells.get("database") != dbname:
            continue
        for key in POOL_KEYS:
            if cells.get(key, "").isdigit():
                totals[key] = totals.get(key, 0) + int(cells[key])
    totals["sv_open"] = sum(totals.get(k, 0) for k in ("sv_active", "sv_idle", "sv_used"))
    return totals


class PoolSession:
    """One psql on pgbouncer's admin console, started on first use, owned by the table."""

    def __init__(
        self, table: ProcessTable, port: int, user: str, password: str, dbname: str, log: Path
    ) -> None:
        self.table = table
        self.port = port
        self.user = user
        self.password = password
        self.dbname = dbname
        self.log = log
        self.proc: Proc | None = None
        self._lock = threading.Lock()

    def _start(self) -> Proc:
        target = f"host=127.0.0.1 port={self.port} dbname=pgbouncer user={self.user}"
        return self.table.start(
            "psql-pools",
            ["psql", "-X", "-q", "-A", "-F", "|", "-P", "footer=off", target],
            self.log,
            # the password in the environment, not on a command line others can read
            env={"PATH": os.environ.get("PATH", ""), "PGPASSWORD": self.password},
            pipes=True,
        )

    def _ask(self, proc: Proc, command: str, timeout_s: float) -> str:
        assert proc.popen.stdin is not None and proc.popen.stdout is not None
        proc.popen.stdin.write(f"{command};\n\\echo {END}\n".encode())
        proc.popen.stdin.flush()
        out = proc.popen.stdout.fileno()
        data = b""
        deadline = time.monotonic() + timeout_s
        while not data.endswith(f"{END}\n".encode()):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                raise RuntimeError(f"psql on pgbouncer's console: no answer in {timeout_s} s")
            chunk = os.read(out, 1 << 16)
            if not chunk:
                raise RuntimeError(f"psql on pgbouncer's console exited: {proc.log_tail(3)}")
            data += chunk
        return data.decode(errors="replace").removesuffix(f"{END}\n")

    def show(self, what: str, timeout_s: float = 2.0) -> str:
        """The text of `SHOW <what>`; RuntimeError (and a fresh session next time) on failure."""
        with self._lock:
            if self.proc is None or self.proc.exit_code() is not None:
                # Started by LocalSite.open() in the main thread; a replacement started here in
                # a sampler thread dies with that thread (PR_SET_PDEATHSIG follows the thread
                # that forked), so the next window starts its own: a login per window, only
                # after a failure.
                self.proc = self._start()
            try:
                return self._ask(self.proc, f"SHOW {what}", timeout_s)
            except (OSError, RuntimeError):
                self.close()
                raise RuntimeError("psql on pgbouncer's console failed") from None

    def pools(self) -> dict[str, int]:
        """SHOW POOLS totals of the bench database."""
        return pool_totals(parse_show(self.show("POOLS")), self.dbname)

    def close(self) -> None:
        """Stop the psql process (the table would at the end anyway)."""
        if self.proc is not None:
            self.table.stop(self.proc, grace_s=2)
            self.proc = None
