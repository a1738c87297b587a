"""make serve: the stack and one verified server left up for the user's own tools until
Ctrl-C or SIGTERM, then everything it started stopped (the ownership rules of make bench).

Input: validated Options (one server; PROXY, KEEPALIVE, knobs, PIN, ARCH as for make bench).
Output: on stdout one line per URL (`server http://...`, `nginx http://...` with PROXY=nginx,
`pgbouncer postgresql://...`, the throwaway stack's own password in it), then `ready`; the
exit status: 0 stopped on request, 1 the stack or the server did not start or died while up
(the reason and the log tail on stderr), 1 another harness run holds the lock. Nothing is
recorded: no load runs here.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import TextIO

from bench.core import plan
from bench.core.protocol import HTTP1
from bench.core.registry import load_all
from bench.core.runid import run_dir_name
from bench.host.placement import cpu_placement
from bench.host.prepare import Unavailable
from bench.host.procs import Interrupted, ProcessTable, signals_ignored, signals_raise
from bench.host.state import LockedError, machine_lock, state_base
from bench.host.venv import venv_name
from bench.stack.site import LocalServed, LocalSite, ServeError

POLL_S = 1.0  # how often a dead server or stack is noticed while nobody is looking


def urls(served: LocalServed) -> list[str]:
    """The lines a user's tools need: the server, nginx in front, pgbouncer's DSN."""
    app = f", APP {served.app_name}" if getattr(served, "app_name", None) else ""
    host = getattr(served, "host", "127.0.0.1")  # RUNTIME=docker NETWORK=bridge: its address
    client = served.server.client  # PROTOCOL=: its scheme; under TLS the run's certificate
    trust = f", certificate {client.cafile}" if client.cafile is not None else ""
    over = f" over {client.protocol.name}" if client.protocol.name != HTTP1 else ""
    lines = [f"server {client.url(host, served.server.port)} ({served.name}{app}{over}{trust})"]
    if served.proxy is not None:
        lines.append(f"nginx http://127.0.0.1:{served.proxy.port} (in front of {served.name})")
    lines.append(f"pgbouncer {served.db.app_url}")
    return lines


def problem(served: LocalServed) -> str | None:
    """Why the served stack stopped serving: the database, the server's master, or nginx.

    Unlike a measured window, a worker replaced by its master (max_requests, a crash the
    master repairs) is the server's own business here: only the leaders count."""
    return served.watch(leaders_only=True, when="")


def _log_tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _up(site: LocalSite, opts: plan.Options, out: TextIO, say: TextIO) -> int:
    spec = load_all()[opts.servers[0]]
    on = (opts.python,) if opts.python is not None else ()
    prepared = site.prepare([spec], opts.arch, lambda text: print(f"serve: {text}", file=say), *on)
    env = prepared[venv_name(spec.id, opts.python)]
    if isinstance(env, Unavailable):
        print(f"serve: {spec.id} cannot run here: {env.reason}", file=say)
        return 1
    print("serve: starting PostgreSQL, pgbouncer and the upstream stub", file=say)
    site.open()
    knobs = site.knobs(spec, opts.overrides)
    print(f"serve: starting {spec.id} {knobs}", file=say)
    served = site.serve(spec, knobs, env, opts, f"{spec.id}-serve.log")
    for line in urls(served):
        print(line, file=out)
    print(f"ready (logs in {site.run_dir}; Ctrl-C or SIGTERM stops everything)", file=out)
    out.flush()
    while True:
        reason = problem(served)
        if reason is not None:
            print(f"serve: {reason}; stopping everything", file=say)
            for name, text in site.logs(served).items():
                print(f"--- {name}\n{_log_tail(text)}", file=say)
            return 1
        time.sleep(POLL_S)


def serve(opts: plan.Options, out: TextIO = sys.stdout, say: TextIO = sys.stderr) -> int:
    """Start the stack and the server, print the URLs, stay up until Ctrl-C/SIGTERM, then
    stop everything started; the exit status."""
    base = state_base()
    run_dir = base / "runs" / run_dir_name("serve")
    run_dir.mkdir(parents=True, exist_ok=True)
    # Ctrl-C is how a user stops it, even when a shell started it in the background with
    # SIGINT ignored (`make serve &`, a script): Python then installs no handler of its own.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # a stack left up for the user's tools: never waits, refuses while another measures
        with machine_lock(wait=False), signals_raise():
            table = ProcessTable()
            site = LocalSite(table, run_dir, cpu_placement(opts.pin), app=opts.app)
            if opts.mode.runtime == "docker":
                from bench.host.docker import Limits
                from bench.stack.containers import ContainerSite

                limits = Limits(opts.cpus, opts.memory_bytes)
                site = ContainerSite(table, run_dir, cpu_placement(opts.pin), limits, opts.network)
            try:
                return _up(site, opts, out, say)
            except ServeError as exc:
                print(f"serve: {exc}", file=say)
                for name, text in exc.logs.items():
                    print(f"--- {name}\n{_log_tail(text)}", file=say)
                return 1
            except (KeyboardInterrupt, Interrupted) as exc:
                print(f"serve: {str(exc) or 'SIGINT'}: stopping everything", file=say)
                return 0
            finally:
                # A second Ctrl-C must not cut the clean-up short and leave servers behind.
                with signals_ignored():
                    table.stop_all()
                print("serve: stopped", file=say)
    except LockedError as exc:
        print(f"serve: {exc}; try again when it has finished", file=say)
        return 1
