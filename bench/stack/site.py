"""Where the server under test runs: here (LocalSite: PostgreSQL, pgbouncer, the upstream
stub, the server from its environment, nginx in front when asked) or elsewhere (RemoteSite,
TARGET=: nothing started, only the load is ours).

Input: a ProcessTable, the run directory, CPU placement. Output: a Served per server start
(what bench.harness.measure needs: URL, watchdog, samplers, database and proxy figures)
and the facts about it a record keeps (knobs, argv, verification, backlog), or ServeError
with the reason and the logs that say why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.core.app import AppSpec, app_env
from bench.core.parse import parse_proxy_log
from bench.core.plan import Options
from bench.core.protocol import PROTOCOLS, WEBSOCKET
from bench.core.registry import FRAMEWORK, RAW, RAW_SCENARIOS, ServerSpec, resolve_knobs
from bench.host import ready, tls
from bench.host.arch import Emulator, is_emulated
from bench.host.cgroup import CgroupError, CpuCgroup, remove_cgroup, remove_leftovers
from bench.host.client import PLAIN, Client
from bench.host.placement import Placement
from bench.host.prepare import Environment, Prepared, prepare_servers
from bench.host.procs import ProcessTable, StartError, process_tree
from bench.observe import sample
from bench.observe.pools import PoolSession
from bench.observe.sample import Sampler
from bench.stack.appverify import verify_routes
from bench.stack.components import DB_NAME, DB_USER, Database, RunningProxy, RunningServer, Stack
from bench.stack.verify import (
    Verification,
    VerifyError,
    read_interpreter,
    verify_server,
    verify_static,
)


class ServeError(RuntimeError):
    """The server could not be started, verified or fronted: the block is not measured."""

    def __init__(
        self,
        reason: str,
        logs: dict[str, str],
        argv: list[str] | None = None,
        container: dict[str, object] | None = None,
    ):
        super().__init__(reason)
        self.logs = logs
        self.argv = argv
        # RUNTIME=docker: what the container counted before it was removed (its OOM kills)
        self.container = container


def read_log(path: Path) -> str:
    """A log file's text ('' when it is absent)."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__


def _verify(
    port: int,
    spec: ServerSpec,
    db: Database | None,
    host: str,
    client: Client = PLAIN,
    flavor: str = FRAMEWORK,
) -> dict:
    if spec.app == "static":
        verification: Verification = verify_static(port, host, client)
    elif flavor == RAW:
        # The raw app serves its scenarios' routes only: theirs are checked, with the same
        # checks, and any other path must answer 404 (the unknown-route check).
        verification = verify_server(port, db, host, client, scenarios=RAW_SCENARIOS)
    else:
        verification = verify_server(port, db, host, client, spec.speaks(WEBSOCKET))
    return {"checked": verification.checked, "warnings": verification.warnings}


@dataclass
class LocalServed:
    """A server started here, with nginx in front when asked."""

    server: RunningServer
    db: Database
    site_problem: Callable[[], str | None]  # the shared stack's health
    proxy: RunningProxy | None = None
    verification: dict | None = None
    backlog: int | None = None
    name: str = ""
    cgroup: CpuCgroup | None = None  # CPU_QUOTA=: the server's own cgroup
    _pids: set[int] = field(default_factory=set)
    # pgbouncer's pools while load runs (one long-lived session); None: a psql per sample
    pool_probe: Callable[[], dict[str, int]] | None = None
    app_name: str | None = None  # APP=: the user's app it serves

    @property
    def base_url(self) -> str:
        """The front: nginx when in front, else the server (in the protocol it serves)."""
        return f"http://127.0.0.1:{self.proxy.port}" if self.proxy else self.server.base_url

    @property
    def argv(self) -> list[str]:
        """The server's command line."""
        return self.server.argv

    @property
    def proxied(self) -> bool:
        """nginx in front."""
        return self.proxy is not None

    def watch(self, leaders_only: bool = False, when: str = " during load") -> str | None:
        """The stack, the server, a worker or nginx died: the measurement is void.
        leaders_only: a replaced worker is the server's own business (make serve)."""
        problem = self.site_problem()
        if problem is not None:
            return problem
        code = self.server.proc.exit_code()
        if code is not None:
            return f"server exited with code {code}{when}"
        # RECYCLE=: workers are replaced by design; the leader alone must live.
        recycling = "max_requests" in self.server.knobs
        pids = {self.server.proc.pid} if recycling or leaders_only else self._pids
        gone = sorted(pid for pid in pids if not psutil.pid_exists(pid))
        if gone:
            return f"server process(es) {gone} died{when}"
        if self.proxy is not None and self.proxy.proc.exit_code() is not None:
            return f"nginx (proxy) exited with code {self.proxy.proc.exit_code()}{when}"
        return None

    def interpreter(self) -> dict | None:
        """app_common's /interpreter, asked of the server directly (never through nginx);
        None for a server that is not Python or a user's app (APP=)."""
        if self.app_name is not None or self.server.spec.app == "static":
            return None
        return read_interpreter(self.server.port, "127.0.0.1", self.server.client)

    def reload(self) -> None:
        """LIFECYCLE=reload: the server's own reload signal to its leader. Workers are
        replaced from now on: the watchdog follows the leader alone."""
        assert self.server.spec.reload_signal is not None
        self._pids = {self.server.proc.pid}
        os.kill(self.server.proc.pid, signal.Signals[self.server.spec.reload_signal])

    def wait_idle(self, timeout_s: float = 60.0) -> None:
        """Wait until the requests a finished load tool left behind are served.

        When the tool stops, connections still queued for accept() carry requests already
        sent; a sync server serves every one of them (for /upstream at c=50, seconds of
        work) and that work would land in the next measured window. Wait for an empty accept
        queue, then for the server to answer.
        """
        ready.wait_until(
            lambda: (sample.listen_queue(self.server.port) or 0) == 0,
            "draining its accept queue",
            self.server.proc,
            timeout_s,
        )
        server = self.server
        ready.wait_http(
            server.proc, server.port, server.spec.ready_path, timeout_s, client=server.client
        )
        # The processes the watchdog follows: the tree as it is before the window.
        self._pids = process_tree(self.server.proc.pid)

    def sampler(self) -> Sampler:
        """Server tree, nginx, sockets on both ports and pgbouncer's pools."""
        return Sampler(
            self.server.proc.pid,
            self.server.port,
            proxy_pid=self.proxy.proc.pid if self.proxy else None,
            proxy_port=self.proxy.port if self.proxy else None,
            pool_probe=self.pool_probe or self.db.pgbouncer_pools,
            db_port=self.db.pgbouncer_port,
        )

    def db_stats(self) -> dict[str, int] | None:
        """pgbouncer's counters."""
        return self.db.pgbouncer_stats()

    def proxy_mark(self) -> int:
        """The size of nginx's access log now."""
        if self.proxy is None:
            return 0
        try:
            return self.proxy.access_log.stat().st_size
        except OSError:
            return 0

    def proxy_statuses(self, mark: int, since: float, until: float) -> dict[int, int] | None:
        """nginx's failed responses that ended inside [since, until]."""
        if self.proxy is None:
            return None
        # nginx writes its log line when a request ends: give the last ones a moment.
        time.sleep(0.2)
        try:
            with open(self.proxy.access_log, "rb") as fh:
                fh.seek(mark)
                text = fh.read().decode(errors="replace")
        except OSError:
            text = ""
        return parse_proxy_log(text, since, until)


class LocalSite:
    """The real stack on this machine."""

    def __init__(
        self,
        table: ProcessTable,
        run_dir: Path,
        placement: Placement,
        emulator: Emulator | None = None,
        app: AppSpec | None = None,
    ) -> None:
        self.table = table
        self.run_dir = run_dir
        self.placement = placement
        self.emulator = emulator
        self.app = app  # APP=: the user's app instead of app_common
        # The app's SECRET_KEY and the like: new for every run, never in a file.
        self.app_secret = secrets.token_urlsafe(48)
        self.stack = Stack(table, run_dir)
        self.db: Database | None = None
        self.pools: PoolSession | None = None

    def open(self) -> None:
        """PostgreSQL, pgbouncer and the upstream stub; ServeError with their logs. Cgroups a
        killed harness left behind are removed first."""
        for name in remove_leftovers():
            print(f"bench: removed cgroup {name} left by a harness that is gone", file=sys.stderr)
        try:
            self.db = self.stack.start_database()
            self.stack.start_upstream(sys.executable)
            self.pools = PoolSession(
                self.table,
                self.db.pgbouncer_port,
                DB_USER,
                self.db.password,
                DB_NAME,
                self.run_dir / "psql-pools.log",
            )
            # Logged in now, not inside the first measured window; a failure here is the
            # sampler's to live with (no pool peaks), as before.
            with contextlib.suppress(RuntimeError):
                self.pools.pools()
        except StartError as exc:
            raise ServeError(
                f"stack did not start: {_first_line(exc)}", self.stack_logs()
            ) from None

    def stack_logs(self) -> dict[str, str]:
        """PostgreSQL's and pgbouncer's logs."""
        return {f"{n}.log": read_log(self.run_dir / f"{n}.log") for n in ("postgres", "pgbouncer")}

    def problem(self) -> str | None:
        """Why the shared stack cannot serve any more, or None while it is healthy."""
        if self.db is None:
            return "the stack is not running"
        for proc in (self.db.pg, self.db.pgbouncer):
            code = proc.exit_code()
            if code is not None:
                return f"{proc.name} exited with code {code} during the run"
        return None

    def cpus(self) -> int:
        """The CPUs this server may use (its half under PIN=1): what "cpus" means in a
        declaration."""
        return len(self.placement.server_cpus)

    def knobs(self, spec: ServerSpec, overrides: dict[str, int]) -> dict[str, int]:
        """The server's knobs, "cpus" in a declaration resolved by cpus()."""
        return resolve_knobs(spec, self.cpus(), overrides)

    def prepare(
        self,
        specs: list[ServerSpec],
        arch: str,
        say: Callable[[str], None],
        python: str | None = None,
    ) -> dict[str, Prepared]:
        """Each server's venv (on PYTHON=python) or emulated site."""
        prepared, self.emulator = prepare_servers(specs, arch, self.run_dir, say, self.app, python)
        return prepared

    def serve(
        self,
        spec: ServerSpec,
        knobs: dict[str, int],
        environment: Environment,
        opts: Options,
        log_name: str,
    ) -> LocalServed:
        """Start, check, verify and (PROXY=nginx) front one server; ServeError if any fails."""
        assert self.db is not None
        client = self._client(opts.protocol)
        quota = self._cgroup(opts.cpu_quota)
        app = opts.app
        entry = app.entry_for(spec.app) if app is not None else None
        app_env_vars = app_env(self.db.app_url, self.app_secret) if app is not None else {}
        if app is not None:
            # Ready when the app's own first GET route answers 200 (app_common's /plaintext
            # is not the user's).
            spec = dataclasses.replace(spec, ready_path=app.ready_path)
        try:
            server = self.stack.start_server(
                spec,
                knobs,
                environment.python,
                self.db,
                log_name,
                cpus=self._server_cpus(),
                extra_env={**environment.env, **opts.study.app_env, **app_env_vars},
                cgroup=quota.procs_file if quota else None,
                app=(entry.target, entry.root) if entry is not None else None,
                client=client,
                flavor=opts.app_flavor,
            )
        except StartError as exc:
            if quota is not None:
                quota.remove()
            reason = f"server did not start: {_first_line(exc)}"
            raise ServeError(reason, {"server.log": read_log(self.run_dir / log_name)}) from None
        served = LocalServed(
            server,
            self.db,
            self.problem,
            name=spec.id,
            cgroup=quota,
            pool_probe=self.pools.pools if self.pools is not None else None,
            app_name=app.name if app is not None else None,
        )
        served._pids = process_tree(server.proc.pid)
        try:
            self._check(served, spec, app, opts.app_flavor)
            if opts.proxy is not None:
                self._front(served, opts)
        except BaseException:
            self.stop(served)
            raise
        return served

    def _client(self, name: str) -> Client:
        """How the server is asked over PROTOCOL=name; under TLS the run's certificate is made
        on first use (ServeError when it cannot be) and removed when the harness stops."""
        protocol = PROTOCOLS[name]
        if not protocol.tls:
            return Client(protocol)
        cert = tls.paths(self.run_dir)
        if not cert.cert.is_file():
            try:
                cert = tls.make(self.run_dir)
            except tls.TlsError as exc:
                raise ServeError(str(exc), {}) from None
            self.table.on_stop(lambda: tls.remove(self.run_dir))
        return Client(protocol, cert.ca)

    def _server_cpus(self) -> frozenset[int] | None:
        """The CPUs the server may use under PIN=1; None: any."""
        return self.placement.server_cpus if self.placement.pinned else None

    def _check(
        self, served: LocalServed, spec: ServerSpec, app: AppSpec | None, flavor: str
    ) -> None:
        """Under qemu when emulated, verified (APP=: the user's routes; APP_FLAVOR=raw: the
        raw app's), its backlog read; ServeError with its log."""
        server = served.server
        if self.emulator is not None and not is_emulated(server.proc.pid):
            raise ServeError("not running under qemu", {}, server.argv)
        try:
            if app is not None:
                served.verification = verify_routes(
                    server.port, app.routes, self.db, client=server.client
                )
            else:
                served.verification = _verify(
                    server.port, spec, self.db, "127.0.0.1", server.client, flavor
                )
        except (VerifyError, OSError) as exc:
            logs = {"server.log": read_log(server.proc.log_path)}
            raise ServeError(f"verification failed: {exc}", logs, server.argv) from None
        served.backlog = sample.listen_backlog(server.port)

    def _front(self, served: LocalServed, opts: Options) -> None:
        """nginx (PROXY=nginx or alb) in front of the server; ServeError with its log."""
        server = served.server
        try:
            served.proxy = self.stack.start_proxy(
                server,
                bool(opts.upstream_keepalive),
                opts.proxy_timeout_s,
                self._server_cpus(),
                kind=opts.proxy,
            )
        except StartError as exc:
            reason = f"nginx (proxy) did not start: {_first_line(exc)}"
            logs = {"server.log": read_log(server.proc.log_path)}
            raise ServeError(reason, logs, server.argv) from None

    def _cgroup(self, quota: float | None) -> CpuCgroup | None:
        """CPU_QUOTA=: a new cgroup for one server start, removed with the server (and, on any
        other exit path, when the process table stops everything)."""
        if quota is None:
            return None
        try:
            group = CpuCgroup.create(quota)
        except CgroupError as exc:
            raise ServeError(str(exc), {}) from None
        self.table.on_stop(lambda: remove_cgroup(group.path))
        return group

    def logs(self, served: LocalServed) -> dict[str, str]:
        """The server's log, and the stack's when the stack broke."""
        logs = {"server.log": read_log(served.server.proc.log_path)}
        if self.problem() is not None:
            logs |= self.stack_logs()
        return logs

    def stop(self, served: LocalServed) -> None:
        """nginx, then the server."""
        if served.proxy is not None:
            self.table.stop(served.proxy.proc)
        self.stack.stop_server(served.server)
        if served.cgroup is not None:
            served.cgroup.remove()


@dataclass
class RemoteServed:
    """A server running elsewhere (TARGET=): no process of ours to watch or sample."""

    base_url: str
    verification: dict | None = None
    backlog: int | None = None
    argv: list[str] | None = None
    name: str = "target"
    proxied: bool = False  # a proxy there is not ours: its log is not read
    server: None = None  # no process of ours to signal or sample
    cgroup: None = None  # no cgroup of ours

    def reload(self) -> None:
        """A remote server's reload is its own (the CLI refuses LIFECYCLE with TARGET=)."""
        raise RuntimeError("a server running elsewhere is not ours to reload")

    def watch(self) -> str | None:
        """Nothing of ours can die."""
        return None

    def wait_idle(self) -> None:
        """The remote accept queue is not visible from here."""

    def sampler(self) -> Sampler:
        """Only the load tool's own CPU."""
        return Sampler(None, None)

    def db_stats(self) -> dict[str, int] | None:
        """The database is not ours."""
        return None

    def proxy_mark(self) -> int:
        """No proxy of ours."""
        return 0

    def proxy_statuses(self, mark: int, since: float, until: float) -> dict[int, int] | None:
        """No proxy of ours."""
        return None

    def interpreter(self) -> dict | None:
        """A server elsewhere runs on an interpreter of its own: not read (PYTHON= is refused
        with TARGET=)."""
        return None


class RemoteSite:
    """TARGET=http://host:port: verify and load a server running elsewhere."""

    emulator: Emulator | None = None  # nothing runs here: nothing emulated

    def __init__(self, target: str) -> None:
        self.target = target
        self.host, port = target.removeprefix("http://").rsplit(":", 1)
        self.port = int(port)

    def open(self) -> None:
        """Nothing to start."""

    def stack_logs(self) -> dict[str, str]:
        """No stack here."""
        return {}

    def problem(self) -> str | None:
        """Nothing of ours can break."""
        return None

    def cpus(self) -> int:
        """The server runs elsewhere: its CPUs are not known here (make tune refuses TARGET=)."""
        return 1

    def knobs(self, spec: ServerSpec, overrides: dict[str, int]) -> dict[str, int]:
        """Knobs are the remote side's: none resolved here."""
        return {}

    def prepare(
        self,
        specs: list[ServerSpec],
        arch: str,
        say: Callable[[str], None],
        python: str | None = None,  # refused with TARGET= before set-up
    ) -> dict[str, Prepared]:
        """Nothing runs here: only the package's name is known."""
        return {spec.id: Environment(Path(sys.executable), {}, None, remote=True) for spec in specs}

    def serve(
        self,
        spec: ServerSpec,
        knobs: dict[str, int],
        environment: Environment,
        opts: Options,
        log_name: str,
    ) -> RemoteServed:
        """Verify the remote server (rows by shape and range only)."""
        try:
            verification = _verify(self.port, spec, None, self.host)
        except (VerifyError, OSError) as exc:
            raise ServeError(f"verification failed: {exc}", {}) from None
        return RemoteServed(self.target, verification)

    def logs(self, served: RemoteServed) -> dict[str, str]:
        """No logs here."""
        return {}

    def stop(self, served: RemoteServed) -> None:
        """Nothing to stop."""
