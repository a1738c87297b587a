"""The stack: PostgreSQL, pgbouncer, the upstream stub and the server under test, on loopback.

Input: a ProcessTable (which owns every process), a run directory, server specs.
Output: running components with their ports; each one checked to really answer before use.
PostgreSQL and pgbouncer refuse to run as root: when the harness is root they run as the
`postgres` user, with their files in a directory that user can reach.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.core import defaults, seed
from bench.core.registry import (
    FRAMEWORK,
    ROOT,
    ServerSpec,
    render_argv,
    render_config,
    render_env,
)
from bench.core.registry import app_target as app_target_of
from bench.host import ready, tls
from bench.host.client import PLAIN, Client
from bench.host.procs import Proc, ProcessTable, StartError, listeners, process_tree
from bench.host.state import service_user, socket_dir, state_base
from bench.observe import pools

DB_DIR = ROOT / "db"
PROXY_DIR = ROOT / "proxy"
# One nginx worker in front: on 2 cores it already competes with the server it fronts.
PROXY_WORKERS = 1
# PROXY= -> the http-level nginx template in proxy/ (nginx.conf is the process-level part).
PROXY_TEMPLATES = {"nginx": "site.conf.template", "alb": "alb.conf.template"}
PGBOUNCER_POOL_SIZE = 20
DB_NAME = "bench"
DB_USER = "bench"
SUPERUSER = "postgres"
# The cluster's completion marker, and the suffix of the temporary directory it is built in.
CLUSTER_COMPLETE = "complete"
BUILD_SUFFIX = ".building-"


def _pg_bindir() -> Path:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3])
    )
    if not found:
        raise StartError("PostgreSQL server binaries not found: run `make setup`")
    return found[-1].parent


def _chown_service(path: Path) -> None:
    user = service_user()
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _run_as_service(argv: list[str], what: str, **kwargs: object) -> str:
    user = service_user()
    extra = {}
    if user is not None:
        entry = pwd.getpwnam(user)
        extra = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    result = subprocess.run(argv, capture_output=True, text=True, **extra, **kwargs)
    if result.returncode != 0:
        raise StartError(f"{what} failed: {(result.stderr or result.stdout).strip()}")
    return result.stdout


@dataclass(frozen=True)
class Database:
    """A running PostgreSQL + pgbouncer pair and how to reach them."""

    pg_port: int
    pg_socket_dir: Path
    pgbouncer_port: int
    password: str
    pg: Proc
    pgbouncer: Proc

    @property
    def app_url(self) -> str:
        """What the app connects to: pgbouncer over TCP on loopback."""
        return self.app_url_at("127.0.0.1")

    def app_url_at(self, host: str) -> str:
        """pgbouncer at `host` (one of its listen addresses: loopback, a bridge's gateway)."""
        return f"postgresql://{DB_USER}:{self.password}@{host}:{self.pgbouncer_port}/{DB_NAME}"

    def psql(self, sql: str, *, via_pgbouncer: bool = False, dbname: str = DB_NAME) -> str:
        """Run SQL with psql and return its unaligned output (header line included)."""
        if via_pgbouncer:
            target = (
                f"host=127.0.0.1 port={self.pgbouncer_port} dbname={dbname} user={DB_USER} "
                f"password={self.password}"
            )
        else:
            target = (
                f"host={self.pg_socket_dir} port={self.pg_port} dbname={dbname} user={SUPERUSER}"
            )
        result = subprocess.run(
            ["psql", "-X", "-A", "-F", "|", "-v", "ON_ERROR_STOP=1", target, "-c", sql],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if result.returncode != 0:
            raise RuntimeError(f"psql: {result.stderr.strip()}")
        return result.stdout

    def pgbouncer_stats(self) -> dict[str, int]:
        """pgbouncer's SHOW STATS totals for the bench database (live counters)."""
        lines = self.psql("SHOW STATS", via_pgbouncer=True, dbname="pgbouncer").splitlines()
        header = lines[0].split("|")
        for line in lines[1:]:
            cells = line.split("|")
            if cells[0] == DB_NAME:
                return {k: int(v) for k, v in zip(header[1:], cells[1:], strict=False) if v}
        return {}

    def pgbouncer_pools(self) -> dict[str, int]:
        """pgbouncer's SHOW POOLS counters for the bench database: server connections active
        (sv_active), clients waiting for one (cl_waiting), ... (a psql process per call:
        bench.observe.pools.PoolSession is the cheap way while load runs)."""
        text = self.psql("SHOW POOLS", via_pgbouncer=True, dbname="pgbouncer")
        return pools.pool_totals(pools.parse_show(text), DB_NAME)

    def world(self) -> dict[int, int]:
        """The current `world` table, id -> randomnumber (for verifying /db answers)."""
        out = self.psql("SELECT id, randomnumber FROM world")
        rows = {}
        for line in out.splitlines()[1:]:
            if "|" in line:
                ident, number = line.split("|")
                rows[int(ident)] = int(number)
        return rows


@dataclass(frozen=True)
class RunningServer:
    """The server under test, started and answering."""

    spec: ServerSpec
    port: int
    proc: Proc
    argv: list[str]
    knobs: dict[str, int]
    client: Client = PLAIN  # how it is asked: PROTOCOL= and the run's certificate

    @property
    def base_url(self) -> str:
        """scheme://127.0.0.1:port, in the protocol it serves."""
        return self.client.url("127.0.0.1", self.port)


@dataclass(frozen=True)
class RunningProxy:
    """nginx in front of the server under test."""

    port: int
    proc: Proc
    access_log: Path
    upstream_keepalive: bool
    timeout_s: int


def render_template(template: str, fill: dict[str, object]) -> str:
    """${NAME} replaced for known names only, as nginx's image does with envsubst: nginx's
    own $variables pass through untouched."""
    return render_config(template, fill, r"\$\{(\w+)\}")


def render_proxy(
    run_dir: Path,
    name: str,
    listen: str,
    app_server: str,
    upstream_keepalive: bool,
    timeout_s: int,
    kind: str = "nginx",
) -> tuple[Path, Path]:
    """nginx's two config files rendered into run_dir (PROXY_TEMPLATES[kind] for the site);
    the main config's path and the access log's."""
    (run_dir / "nginx-proxy-tmp").mkdir(exist_ok=True)
    access_log = run_dir / f"{name}-access.log"
    site = run_dir / f"{name}-site.conf"
    main = run_dir / f"{name}.conf"
    fill: dict[str, object] = {
        "LISTEN": listen,
        "APP_SERVER": app_server,
        "UPSTREAM_CONNECTION": "" if upstream_keepalive else "close",
        "PROXY_CONNECT_TIMEOUT": f"{timeout_s}s",
        "PROXY_READ_TIMEOUT": f"{timeout_s}s",
        "ACCESS_LOG": access_log,
        "RUN_DIR": run_dir,
        "SITE_CONF": site,
        "PROXY_WORKERS": PROXY_WORKERS,
    }
    site.write_text(render_template((PROXY_DIR / PROXY_TEMPLATES[kind]).read_text(), fill))
    main.write_text(render_template((PROXY_DIR / "nginx.conf").read_text(), fill))
    return main, access_log


class Stack:
    """Starts the components of one harness run; the ProcessTable stops them."""

    def __init__(self, table: ProcessTable, run_dir: Path, cluster_name: str = "pg") -> None:
        self.table = table
        self.run_dir = run_dir
        self.base = state_base()
        # The test suite uses its own cluster, so `make test` never meets a `make bench`.
        self.cluster = self.base / cluster_name
        self.upstream_port: int | None = None
        # Where pgbouncer listens besides loopback, and where the upstream stub listens: a
        # container on a bridge reaches both on the bridge's gateway (bench.stack.containers).
        self.extra_listen: tuple[str, ...] = ()
        self.upstream_host = "127.0.0.1"

    # -- PostgreSQL -------------------------------------------------------------------------
    def _cluster_complete(self) -> bool:
        """The cluster was built to the end (initdb and seed): its marker is only written in
        the temporary directory, just before the rename that puts it in place."""
        return (self.cluster / CLUSTER_COMPLETE).is_file() and (
            self.cluster / "data" / "PG_VERSION"
        ).is_file()

    def _initdb(self, data: Path) -> None:
        _run_as_service(
            [
                str(_pg_bindir() / "initdb"),
                "-D",
                str(data),
                "-U",
                SUPERUSER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-locale",
            ],
            "initdb",
        )

    def _build_cluster(self) -> None:
        """initdb and the seed in a temporary directory beside the cluster, renamed into
        place only when both finished: an interrupted first run (Ctrl-C, a kill, a power cut)
        leaves no half-made cluster that the next run would take for a good one."""
        # Left by a build that was killed: nothing runs on it (we hold the cluster's lock).
        for stale in self.base.glob(f"{self.cluster.name}{BUILD_SUFFIX}*"):
            shutil.rmtree(stale, ignore_errors=True)
        if self.cluster.exists():
            print(
                f"bench: the PostgreSQL cluster {self.cluster} is incomplete (no completion "
                "marker: an interrupted first run?); rebuilding it",
                file=sys.stderr,
            )
            shutil.rmtree(self.cluster)
        building = Path(tempfile.mkdtemp(prefix=self.cluster.name + BUILD_SUFFIX, dir=self.base))
        building.chmod(0o700)
        _chown_service(building)
        running = list(self.table.procs)
        try:
            self._initdb(building / "data")
            proc, port, sock = self._start_postmaster(building / "data", "postgres-init.log")
            try:
                self._seed(port, sock, secrets.token_urlsafe(18))
            except RuntimeError as exc:
                raise StartError(f"seeding the database failed: {exc}") from exc
            finally:
                self.table.stop(proc)
            (building / CLUSTER_COMPLETE).write_text(f"{seed.schema_version()}\n")
            building.rename(self.cluster)
        except BaseException:
            # A postmaster interrupted while it came up still runs on it: stopped first.
            for proc in [p for p in self.table.procs if p not in running]:
                self.table.stop(proc)
            shutil.rmtree(building, ignore_errors=True)
            raise

    def _lock_cluster(self) -> None:
        # One postmaster per cluster: a second user of it gets a clear word, not a FATAL.
        self.base.mkdir(parents=True, exist_ok=True)
        lock = open(self.base / f"{self.cluster.name}.lock", "a")  # noqa: SIM115 (held open)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise StartError(
                f"the PostgreSQL cluster {self.cluster} is in use by another run"
            ) from None
        self.table.on_stop(lock.close)

    def start_postgres(self) -> tuple[Proc, int, Path]:
        """Start the private cluster (built on first use, rebuilt when found incomplete) and
        wait until it accepts queries."""
        self._lock_cluster()
        if not self._cluster_complete():
            self._build_cluster()
        return self._start_postmaster(self.cluster / "data", "postgres.log")

    def _start_postmaster(self, data: Path, log_name: str) -> tuple[Proc, int, Path]:
        """postgres on `data`, on a free port and a private socket dir, accepting queries."""
        # Our settings are re-read every start so that edits to db/postgresql.conf apply.
        conf = data / "bench.conf"
        conf.write_text((DB_DIR / "postgresql.conf").read_text())
        _chown_service(conf)
        main_conf = data / "postgresql.conf"
        if "include 'bench.conf'" not in main_conf.read_text():
            with open(main_conf, "a") as fh:
                fh.write("\ninclude 'bench.conf'\n")
        sock = socket_dir()  # short (Unix socket paths: 107 bytes), private, ours by pid
        _chown_service(sock)
        self.table.on_stop(lambda: shutil.rmtree(sock, ignore_errors=True))
        port = ready.free_port()
        proc = self.table.start(
            "postgres",
            [str(_pg_bindir() / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sock)],
            self.run_dir / log_name,
            env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
            user=service_user(),
            stop_signal=signal.SIGINT,  # fast shutdown
        )
        pg_isready = _pg_bindir() / "pg_isready"
        ready.wait_until(
            lambda: (
                subprocess.run(
                    [str(pg_isready), "-q", "-h", str(sock), "-p", str(port)], check=False
                ).returncode
                == 0
            ),
            "accepting connections",
            proc,
            timeout_s=60,
        )
        return proc, port, sock

    def _seed(self, pg_port: int, sock: Path, password: str) -> None:
        def psql(sql: str | None, dbname: str, user: str, script: str | None = None) -> str:
            argv = ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
            argv += [f"host={sock} port={pg_port} dbname={dbname} user={user}"]
            argv += ["-c", sql] if sql is not None else ["-f", "-"]
            result = subprocess.run(argv, input=script, capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(result.stderr.strip())
            return result.stdout.strip()

        want = seed.schema_version()
        try:
            have = psql("SELECT schema_version FROM bench_meta", DB_NAME, SUPERUSER)
        except RuntimeError:
            have = ""
        if have != want:
            psql(f"DROP DATABASE IF EXISTS {DB_NAME}", "postgres", SUPERUSER)
            if not psql(
                f"SELECT 1 FROM pg_roles WHERE rolname = '{DB_USER}'", "postgres", SUPERUSER
            ):
                psql(f"CREATE ROLE {DB_USER} LOGIN", "postgres", SUPERUSER)
            psql(f"CREATE DATABASE {DB_NAME} OWNER {DB_USER}", "postgres", SUPERUSER)
            psql(None, DB_NAME, DB_USER, script=seed.seed_script())
        # A fresh password per run: nothing secret is stored between runs.
        psql(f"ALTER ROLE {DB_USER} PASSWORD '{password}'", "postgres", SUPERUSER)

    # -- pgbouncer --------------------------------------------------------------------------
    def start_pgbouncer(self, pg_port: int, sock: Path, password: str) -> tuple[Proc, int]:
        """Start pgbouncer (transaction pooling) and wait until a real query passes through."""
        conf_dir = self.base / "runs" / self.run_dir.name
        conf_dir.mkdir(parents=True, exist_ok=True)
        conf_dir.chmod(0o711)
        auth_file = conf_dir / "userlist.txt"
        auth_file.write_text(f'"{DB_USER}" "{password}"\n')
        auth_file.chmod(0o600)
        _chown_service(auth_file)
        port = ready.free_port()
        ini = conf_dir / "pgbouncer.ini"
        ini.write_text(
            (DB_DIR / "pgbouncer.ini")
            .read_text()
            .format(
                pg_socket_dir=sock,
                pg_port=pg_port,
                port=port,
                listen_addr=",".join(("127.0.0.1", *self.extra_listen)),
                auth_file=auth_file,
                pool_size=PGBOUNCER_POOL_SIZE,
            )
        )
        _chown_service(ini)
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        proc = self.table.start(
            "pgbouncer",
            [binary, str(ini)],
            self.run_dir / "pgbouncer.log",
            env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
            user=service_user(),
            nofile=20_000,  # max_client_conn = 10000 needs the sockets
            stop_signal=signal.SIGINT,  # SIGINT: safe shutdown
        )

        def answers() -> bool:
            target = (
                f"host=127.0.0.1 port={port} dbname={DB_NAME} user={DB_USER} password={password}"
            )
            result = subprocess.run(
                ["psql", "-X", "-A", "-t", target, "-c", "SELECT count(*) FROM fortune"],
                capture_output=True,
                text=True,
                check=False,
            )
            return result.returncode == 0 and result.stdout.strip().isdigit()

        # pgbouncer can exit 0 and die silently on a bad log file: a real query is the check.
        ready.wait_until(answers, "answering queries through pgbouncer", proc, timeout_s=30)
        return proc, port

    def start_database(self) -> Database:
        """PostgreSQL (seeded) behind pgbouncer, both answering."""
        pg, pg_port, sock = self.start_postgres()
        password = secrets.token_urlsafe(18)
        try:
            self._seed(pg_port, sock, password)
        except RuntimeError as exc:
            raise StartError(f"seeding the database failed: {exc}") from exc
        pgbouncer, pgb_port = self.start_pgbouncer(pg_port, sock, password)
        return Database(pg_port, sock, pgb_port, password, pg, pgbouncer)

    # -- the simulated external API ---------------------------------------------------------
    def start_upstream(self, python: str) -> int:
        """The local stub that answers /delay?ms= after ms, for the /upstream route, on
        upstream_host (the server is its only client)."""
        port = ready.free_port()
        host = self.upstream_host
        proc = self.table.start(
            "upstream",
            [python, "-m", "app_common.upstream", "--host", host, "--port", str(port)],
            self.run_dir / "upstream.log",
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
        )
        ready.wait_http(proc, port, "/health", timeout_s=20, host=host)
        self.upstream_port = port
        return port

    # -- the server under test --------------------------------------------------------------
    def _server_fill(
        self,
        spec: ServerSpec,
        knobs: dict[str, int],
        python: Path,
        port: int,
        app_target: str | None = None,
        flavor: str = FRAMEWORK,
    ) -> dict[str, object]:
        """The values of a server's placeholders; its native config rendered into the run dir.
        app_target: the user's module:callable (APP=) instead of app_common's; flavor: which
        of app_common's apps (APP_FLAVOR=)."""
        fill: dict[str, object] = {
            **knobs,
            "python": python,
            "port": port,
            "app": app_target or app_target_of(spec.app, flavor),
            "run_dir": self.run_dir,
            "root": ROOT,
            "venv": python.parent.parent,
        }
        if spec.config is not None:
            # A native config file (nginx.conf, ...), rendered per run into the run dir.
            config = self.run_dir / f"{spec.id}-{spec.config}"
            template = (spec.folder / spec.config).read_text()
            config.write_text(render_config(template, fill))
            (self.run_dir / f"{spec.id}-tmp").mkdir(exist_ok=True)
            fill["config"] = config
        return fill

    def _server_env(self, python: Path, db: Database) -> dict[str, str]:
        """The environment every server gets: its venv first on PATH, HOME in the run dir,
        the app's database and upstream URLs."""
        home = self.run_dir / "home"
        home.mkdir(exist_ok=True)
        return {
            "PATH": f"{python.parent}:{os.environ.get('PATH', '')}",
            "HOME": str(home),  # anything a server writes under $HOME stays in the run dir
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "APP_DATABASE_URL": db.app_url,
            "APP_UPSTREAM_URL": f"http://127.0.0.1:{self.upstream_port}",
        }

    def _await_server(
        self, spec: ServerSpec, proc: Proc, port: int, client: Client = PLAIN
    ) -> None:
        """Wait until the server answers on its port over the client's protocol, from its own
        process tree; on StartError the server is stopped."""
        try:
            ready.wait_http(proc, port, spec.ready_path, timeout_s=60, client=client)
            # Whoever answered must be ours: a port taken by someone else between picking it
            # and the server's bind() must not be benchmarked in our server's name.
            owners = listeners(port)
            if owners and not owners & process_tree(proc.pid):
                raise StartError(
                    f"{spec.id}: port {port} is answered by pid(s) {sorted(owners)}, not by "
                    f"{spec.id}; another program took the port"
                )
        except StartError:
            self.table.stop(proc)
            raise

    def start_server(
        self,
        spec: ServerSpec,
        knobs: dict[str, int],
        python: Path,
        db: Database,
        log_name: str,
        cpus: frozenset[int] | None = None,
        extra_env: dict[str, str] | None = None,
        cgroup: Path | None = None,
        app: tuple[str, Path] | None = None,
        client: Client = PLAIN,
        flavor: str = FRAMEWORK,
    ) -> RunningServer:
        """Start one server variant from its declaration and wait until it answers over the
        client's protocol (in the cgroup whose cgroup.procs file `cgroup` is, when given).
        app: the user's (module:callable, its folder): importable from that folder, run from it;
        flavor: app_common's framework app or its raw one (APP_FLAVOR=)."""
        port = ready.free_port()
        fill = self._server_fill(spec, knobs, python, port, app[0] if app else None, flavor)
        argv = render_argv(spec, fill)
        if "max_requests" in knobs and spec.recycle_argv is not None:
            # RECYCLE=: the server's own recycling flags ([recycle] in its server.toml).
            argv += [arg.format(**fill) for arg in spec.recycle_argv]
        if client.protocol.name in spec.protocols:
            # PROTOCOL=: the server's own flags for it ([protocols.<name>] in its server.toml).
            cert = tls.paths(self.run_dir)
            fill |= {"certfile": cert.cert, "keyfile": cert.key}
            argv += [arg.format(**fill) for arg in spec.protocols[client.protocol.name]]
        env = {**self._server_env(python, db), **render_env(spec, fill), **(extra_env or {})}
        if app is not None:
            env["PYTHONPATH"] = f"{app[1]}:{ROOT}"
        proc = self.table.start(
            spec.id,
            argv,
            self.run_dir / log_name,
            env=env,
            cwd=app[1] if app else ROOT,
            stop_signal=getattr(signal, spec.stop_signal),
            cpus=cpus,
            cgroup=cgroup,
        )
        self._await_server(spec, proc, port, client)
        return RunningServer(spec, port, proc, argv, knobs, client)

    # -- the reverse proxy -------------------------------------------------------------------
    def start_proxy(
        self,
        server: RunningServer,
        upstream_keepalive: bool,
        timeout_s: int = defaults.PROXY_TIMEOUT_S,
        cpus: frozenset[int] | None = None,
        kind: str = "nginx",
    ) -> RunningProxy:
        """nginx (config from proxy/: PROXY_TEMPLATES[kind]) in front of a running server,
        answering through it."""
        port = ready.free_port()
        name = f"nginx-proxy-{server.port}"
        main, access_log = render_proxy(
            self.run_dir,
            name,
            f"127.0.0.1:{port}",
            f"127.0.0.1:{server.port}",
            upstream_keepalive,
            timeout_s,
            kind,
        )
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        proc = self.table.start(
            "nginx-proxy",
            [binary, "-c", str(main), "-e", "stderr"],
            self.run_dir / f"{name}.log",
            env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
            stop_signal=signal.SIGQUIT,  # graceful: finish the requests in flight
            cpus=cpus,
        )
        try:
            ready.wait_http(proc, port, server.spec.ready_path, timeout_s=30)
        except StartError:
            self.table.stop(proc)
            raise
        return RunningProxy(port, proc, access_log, upstream_keepalive, timeout_s)

    def stop_server(self, server: RunningServer) -> int | None:
        """Stop the server's whole process group; its exit code (None if it had to be killed)."""
        self.table.stop(server.proc)
        with contextlib.suppress(Exception):
            return server.proc.exit_code()
        return None
