"""Fakes for in-process tests of the orchestrator: a load tool and a site, no subprocess.

FakeTool answers each run from a script (a LoadResult, or an exception to raise, per call);
FakeSite "starts" servers that a test can make fail to verify or die during load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.record import PROBE_VERSION
from bench.core.registry import ServerSpec
from bench.host.prepare import Environment, Prepared
from bench.load import Errors, Latency, LoadAborted, LoadRequest, LoadResult
from bench.observe.sample import Sampler
from bench.stack.site import ServeError


def result(requests: int = 1000, duration_s: float = 2.0, mean_ms: float = 1.1) -> LoadResult:
    """A plausible measured run: every request a 200 in ~1 ms (`mean_ms` on average)."""
    return LoadResult(
        requests=requests,
        duration_s=duration_s,
        rps=requests / duration_s,
        latency=Latency(p50=1.0, p90=1.5, p99=2.0, p999=3.0, max=4.0, mean=mean_ms),
        errors=Errors(by_status={200: requests}),
        raw={"fake.txt": f"{requests} requests\n"},
    )


@dataclass
class FakeTool:
    """A load tool that returns scripted results; `measured` lists the measured requests."""

    script: list[LoadResult | BaseException | Callable[[], LoadResult]] = field(
        default_factory=list
    )
    name: str = "fake"
    primes: bool = True
    open_loop: bool = False
    variables: tuple[str, ...] = ()
    version: str | None = "fake-1"
    calls: list[LoadRequest] = field(default_factory=list)
    measured: list[LoadRequest] = field(default_factory=list)

    def prepare(self, log: Path) -> None:
        """Nothing to prepare."""

    def settings(self, concurrency: int) -> dict[str, int | None]:
        """One thread, no workers."""
        return {"load_threads": 1, "load_workers": None}

    def run(self, table, request, watch=None, sampler=None) -> LoadResult:
        """Primers and warmups answer at once; a measured run takes the next scripted step,
        with the watchdog asked first as the real tools do."""
        self.calls.append(request)
        if sampler is None:
            return result()
        self.measured.append(request)
        sampler.start()
        try:
            step = self.script.pop(0) if self.script else result()
            if callable(step):
                step = step()  # may kill the fake server, as a crash during load would
            if watch is not None and (reason := watch()) is not None:
                raise LoadAborted(reason)
            if isinstance(step, BaseException):
                raise step
            return step
        finally:
            sampler.stop()


@dataclass
class FakeServed:
    """A started fake server."""

    site: FakeSite
    name: str
    base_url: str = "http://127.0.0.1:9"
    verification: dict | None = None
    backlog: int | None = 128
    argv: list[str] = field(default_factory=lambda: ["fake-server"])
    proxied: bool = False
    server: None = None  # no process to signal or sample
    cgroup: None = None

    def reload(self) -> None:
        """No server process to signal."""
        raise RuntimeError("a fake server cannot reload")

    def watch(self) -> str | None:
        """The site's scripted death, once its time has come."""
        return self.site.death(self)

    def wait_idle(self) -> None:
        """Nothing queued."""

    def sampler(self) -> Sampler:
        """A sampler with no server process: only this process's CPU would be seen."""
        return Sampler(None, None)

    def db_stats(self) -> dict[str, int] | None:
        """pgbouncer-like counters that grow by 10 per call."""
        self.site.queries += 10
        return {"total_query_count": self.site.queries, "total_xact_count": self.site.queries}

    def proxy_mark(self) -> int:
        """No proxy."""
        return 0

    def proxy_statuses(self, mark: int, since: float, until: float) -> dict[int, int] | None:
        """No proxy."""
        return None

    def interpreter(self) -> dict | None:
        """The site's scripted answers of /interpreter, one per read (the last one repeats);
        None when it has none."""
        answers = self.site.interpreters
        return answers.pop(0) if len(answers) > 1 else (answers[0] if answers else None)


@dataclass
class FakeSite:
    """Servers that verify (or not) and die (or not) as a test says."""

    fail_verify: set[str] = field(default_factory=set)
    dead: set[str] = field(default_factory=set)  # servers that "crashed"
    unsupported: set[str] = field(default_factory=set)
    queries: int = 0
    emulator: None = None  # nothing emulated
    started: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    # what /interpreter answers, read by read (FakeServed.interpreter)
    interpreters: list[dict] = field(default_factory=list)
    prepared_on: list[str | None] = field(default_factory=list)  # PYTHON= of each prepare

    def prepare(
        self,
        specs: list[ServerSpec],
        arch: str,
        say: Callable[[str], None],
        python: str | None = None,
    ) -> dict[str, Prepared]:
        """Every server ready, or unsupported when listed."""
        from bench.host.prepare import Unavailable
        from bench.host.venv import venv_name

        self.prepared_on.append(python)
        return {
            venv_name(s.id, python): Unavailable("not here", "unsupported")
            if s.id in self.unsupported
            else Environment(Path("/usr/bin/python3"), {s.id: "1.0"}, "3.11.7")
            for s in specs
        }

    def open(self) -> None:
        """Nothing shared to start."""

    def problem(self) -> str | None:
        """The shared stack never breaks here."""
        return None

    def stack_logs(self) -> dict[str, str]:
        """No stack logs."""
        return {}

    def cpus(self) -> int:
        """Two CPUs, whatever this machine has."""
        return 2

    def knobs(self, spec: ServerSpec, overrides: dict[str, int]) -> dict[str, int]:
        """A fixed worker count."""
        return {"workers": 2, **overrides}

    def serve(self, spec, knobs, environment, opts, log_name) -> FakeServed:
        """Start, or fail verification when listed."""
        self.started.append(spec.id)
        if spec.id in self.fail_verify:
            raise ServeError(
                "verification failed: /db: status 500", {"server.log": "boom\n"}, ["fake"]
            )
        return FakeServed(self, spec.id, verification={"checked": ["/plaintext"], "warnings": []})

    def death(self, served: FakeServed) -> str | None:
        """ "server exited" once a test has killed the server."""
        return "server exited with code 1 during load" if served.name in self.dead else None

    def logs(self, served: FakeServed) -> dict[str, str]:
        """The server's log."""
        return {"server.log": f"{served.name} log\n"}

    def stop(self, served: FakeServed) -> None:
        """Remember the stop."""
        self.stopped.append(served.name)


@dataclass
class FakeProbe:
    """A host-speed probe (bench.host.speed.probe's stand-in) answering scripted work per
    second, one per call (the last repeats): no second of real work per test."""

    speeds: list[float] = field(default_factory=lambda: [1000.0])
    calls: int = 0

    def __call__(self) -> dict:
        """A probe dict of the current format with the next scripted speed."""
        ops = self.speeds[min(self.calls, len(self.speeds) - 1)]
        self.calls += 1
        return {
            "version": PROBE_VERSION,
            "at": f"2026-11-29T00:00:{self.calls:02d}Z",
            "ops_per_s": ops,
            "per_cpu_ops_per_s": [ops, ops],
            "cpu_wall_ratio": 1.0,
            "steal_pct": 0.0,
            "mhz": 2596,
            "wall_s": 1.0,
        }
