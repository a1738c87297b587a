"""The server under load as a measurement sees it: the Served protocol.

Input: nothing (a declaration). Output: Served, which bench.stack.site's LocalServed and
RemoteServed (and the tests' fakes) implement, and which bench.harness.measure and
bench.harness.observers read: its own module, so neither of the two imports the other for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bench.host.cgroup import CpuCgroup
    from bench.observe.sample import Sampler
    from bench.stack.components import RunningServer


class Served(Protocol):
    """The server under load, as the measurement sees it (bench.stack.site has the real ones)."""

    base_url: str
    name: str  # for raw file names: the server id, or "target"
    proxied: bool  # a proxy of ours in front: its log is read inside the tool's window
    # The facts a record keeps about this start (None where the site has none):
    argv: list[str] | None  # the server's command line
    verification: dict | None  # what verify_server checked, and its warnings
    backlog: int | None  # the listen socket's backlog as the kernel reports it
    # What the production observers follow (bench.harness.observers); None: not ours (TARGET=)
    server: RunningServer | None  # the server process we started: to signal and to sample
    cgroup: CpuCgroup | None  # CPU_QUOTA=: the server's own cgroup

    def reload(self) -> None:
        """LIFECYCLE=reload: the server's own reload signal (only where `server` is ours)."""

    def watch(self) -> str | None:
        """Why the measurement is void (a process died), or None."""

    def wait_idle(self) -> None:
        """Wait until requests left over from the warmup are served."""

    def sampler(self) -> Sampler:
        """A sampler of the server side (CPU, memory, sockets, pools) for the window."""

    def db_stats(self) -> dict[str, int] | None:
        """pgbouncer's SHOW STATS counters now; None when the database is not ours."""

    def proxy_mark(self) -> int:
        """Where the proxy's log ends now (0 without a proxy)."""

    def proxy_statuses(self, mark: int, since: float, until: float) -> dict[int, int] | None:
        """Failed responses by status the proxy logged in [since, until]; None: no proxy."""

    def interpreter(self) -> dict | None:
        """The interpreter as read inside the serving process now (app_common's /interpreter:
        version, build, gil_enabled); None where it cannot be read."""
