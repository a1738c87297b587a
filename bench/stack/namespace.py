"""Components inside one harness namespace: the server under test, nginx in front, oha, and
what the kernel of that namespace counts.

Input: a Namespace (bench.host.netns), the ProcessTable that owns every process, a run directory,
a server declaration. Output: running components on fixed ports of the namespace's own
loopback (a fresh namespace has every port free), an oha run's JSON text, and samples of the
namespace's sockets (TIME_WAIT, the accept queue) read from /proc/thread-self/net/tcp on a
thread that entered the namespace. The routes used here (/plaintext, /sleep) need no database:
none is started inside, and the app's database URL points nowhere.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.registry import ROOT, ServerSpec, render_argv, render_env
from bench.host import ready
from bench.host.netns import CLONE_NEWNET, NETNS_DIR, Namespace, libc
from bench.host.procs import Proc, ProcessTable, StartError
from bench.observe import sample
from bench.stack.components import Stack, render_proxy

SERVER_PORT = 8000
PROXY_PORT = 8080
TCP_TIME_WAIT = "06"
# No PostgreSQL inside: a URL that can never be reached (port 9 is discard, nothing listens).
NO_DATABASE = "postgresql://bench:none@127.0.0.1:9/bench"


def count_time_wait(text: str) -> int:
    """TIME_WAIT sockets in a /proc/net/tcp listing."""
    return sum(
        1 for line in text.splitlines()[1:] if len(f := line.split()) > 3 and f[3] == TCP_TIME_WAIT
    )


def start_server(
    table: ProcessTable,
    ns: Namespace,
    run_dir: Path,
    spec: ServerSpec,
    knobs: dict[str, int],
    python: Path,
    extra_env: dict[str, str] | None = None,
) -> tuple[Proc, list[str]]:
    """The server from its declaration, inside ns on SERVER_PORT, answering its ready path."""
    fill = Stack(table, run_dir)._server_fill(spec, knobs, python, SERVER_PORT)
    argv = render_argv(spec, fill)
    home = run_dir / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": f"{python.parent}:{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "APP_DATABASE_URL": NO_DATABASE,
        "APP_UPSTREAM_URL": "http://127.0.0.1:9",
        **render_env(spec, fill),
        **(extra_env or {}),
    }
    proc = table.start(
        spec.id,
        ns.exec_argv(argv),
        run_dir / f"{spec.id}.log",
        env=env,
        cwd=ROOT,
        stop_signal=getattr(signal, spec.stop_signal),
    )
    try:
        ns.call(lambda: ready.wait_http(proc, SERVER_PORT, spec.ready_path, timeout_s=60))
    except StartError:
        table.stop(proc)
        raise
    return proc, argv


@dataclass(frozen=True)
class NsProxy:
    """nginx inside the namespace: its process, logs and config kind."""

    proc: Proc
    access_log: Path
    error_log: Path
    kind: str
    upstream_keepalive: bool


def start_proxy(
    table: ProcessTable,
    ns: Namespace,
    run_dir: Path,
    kind: str,
    upstream_keepalive: bool,
    timeout_s: int,
    ready_path: str,
) -> NsProxy:
    """nginx (proxy/: PROXY_TEMPLATES[kind]) on PROXY_PORT in front of SERVER_PORT."""
    main, access_log = render_proxy(
        run_dir,
        "nginx-proxy",
        f"127.0.0.1:{PROXY_PORT}",
        f"127.0.0.1:{SERVER_PORT}",
        upstream_keepalive,
        timeout_s,
        kind,
    )
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    proc = table.start(
        "nginx-proxy",
        ns.exec_argv([binary, "-c", str(main), "-e", "stderr"]),
        run_dir / "nginx-proxy.log",
        env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
        stop_signal=signal.SIGQUIT,
    )
    try:
        ns.call(lambda: ready.wait_http(proc, PROXY_PORT, ready_path, timeout_s=30))
    except StartError:
        table.stop(proc)
        raise
    return NsProxy(proc, access_log, run_dir / "nginx-proxy-error.log", kind, upstream_keepalive)


@dataclass
class SocketSampler:
    """Every INTERVAL_S, inside the namespace: TIME_WAIT sockets and the server's accept
    queue (peaks kept)."""

    ns: Namespace
    port: int = SERVER_PORT
    time_wait_max: int = 0
    listen_queue_max: int = 0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _loop(self) -> None:
        with open(NETNS_DIR / self.ns.name) as handle:
            if libc.setns(handle.fileno(), CLONE_NEWNET) != 0:
                return
        while True:
            try:
                text = Path("/proc/thread-self/net/tcp").read_text()
            except OSError:
                text = ""
            self.time_wait_max = max(self.time_wait_max, count_time_wait(text))
            depth = sample.parse_listen_queue(text, self.port) or 0
            self.listen_queue_max = max(self.listen_queue_max, depth)
            self.samples += 1
            if self._stop.wait(sample.INTERVAL_S):
                return

    def start(self) -> None:
        """Start sampling on a thread of its own."""
        self._thread = threading.Thread(target=self._loop, name="ns-sockets", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Take one last sample and stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
