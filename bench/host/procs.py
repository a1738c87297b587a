"""Process ownership: start every child in its own process group, stop them all on any exit.

Input: argv, environment and a log path per component. Output: Proc handles; on stop, the
whole group is gone (politely first, then SIGKILL after a deadline) and its ports are free.
A crash of the harness itself cannot leave servers behind either: each child gets
PR_SET_PDEATHSIG, so the kernel kills it when the harness dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import resource
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

PR_SET_PDEATHSIG = 1
OWNER_ENV = "PYWEBBENCH_OWNER"
libc = ctypes.CDLL(None, use_errno=True)


class StartError(RuntimeError):
    """A component did not start or did not come up."""


@dataclass
class Proc:
    """One started component: its leader process, group and log."""

    name: str
    popen: subprocess.Popen
    log_path: Path
    stop_signal: int = signal.SIGTERM

    @property
    def pid(self) -> int:
        """The leader's PID (also the process group id)."""
        return self.popen.pid

    def exit_code(self) -> int | None:
        """The leader's exit code, or None while it runs."""
        return self.popen.poll()

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the component's log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def process_tree(pid: int) -> set[int]:
    """PIDs of a process and all its descendants (a server's master and workers)."""
    try:
        root = psutil.Process(pid)
        return {pid, *(child.pid for child in root.children(recursive=True))}
    except psutil.NoSuchProcess:
        return set()


def listeners(port: int, host: str = "127.0.0.1") -> set[int]:
    """PIDs holding a listening TCP socket on host:port (those this user may see)."""
    return {
        conn.pid
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN
        and conn.laddr
        and conn.laddr.port == port
        and conn.laddr.ip in (host, "0.0.0.0", "::")
        and conn.pid is not None
    }


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _child_setup(
    nofile: int | None, cpus: frozenset[int] | None = None, cgroup: Path | None = None
) -> None:
    # Runs in the child between fork and exec (after the uid switch): die with the harness,
    # and lift the open-files limit for pgbouncer/nginx/wrk with thousands of sockets.
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if cgroup is not None:
        # CPU_QUOTA: into the harness's cgroup before exec, so every worker forks inside it.
        with open(cgroup, "w") as procs:
            procs.write(str(os.getpid()))
    if cpus:
        # PIN=1: the process and everything it forks stay on these CPUs.
        os.sched_setaffinity(0, cpus)
    if nofile:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = min(nofile, hard) if hard != resource.RLIM_INFINITY else nofile
        if target > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


@dataclass
class ProcessTable:
    """Every process this run started; stop_all() is called on every exit path."""

    procs: list[Proc] = field(default_factory=list)
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def on_stop(self, cleanup: Callable[[], None]) -> None:
        """Run cleanup (e.g. remove a socket dir) after every process is stopped."""
        self.cleanups.append(cleanup)

    def start(
        self,
        name: str,
        argv: list[str],
        log_path: Path,
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
        nofile: int | None = 65536,
        stop_signal: int = signal.SIGTERM,
        cpus: frozenset[int] | None = None,
        stdout_path: Path | None = None,
        pipes: bool = False,
        cgroup: Path | None = None,
    ) -> Proc:
        """Start argv in a new session (own process group), output to log_path (stdout to
        stdout_path when given: a tool's machine-readable report apart from its messages;
        with pipes, stdin and stdout are pipes to the caller: a session fed commands; into
        the cgroup whose cgroup.procs file `cgroup` is, before it execs)."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        owner = os.environ.get(OWNER_ENV)
        if owner:
            # Lets whoever started the harness (the test suite) find every process of its
            # own, even after the harness is gone, without touching anyone else's.
            env = {**(os.environ if env is None else env), OWNER_ENV: owner}
        kwargs: dict = {}
        if user is not None:
            entry = pwd.getpwnam(user)
            kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
            if env is not None:
                env = {**env, "HOME": entry.pw_dir, "USER": user}
        with open(log_path, "ab") as log, open(stdout_path or os.devnull, "ab") as out:
            if user is not None:
                os.chown(log_path, pwd.getpwnam(user).pw_uid, -1)
            interrupts = len(_raised)
            try:
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                    stdout=subprocess.PIPE if pipes else out if stdout_path is not None else log,
                    stderr=subprocess.STDOUT if stdout_path is None and not pipes else log,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                    preexec_fn=lambda: _child_setup(nofile, cpus, cgroup),
                    **kwargs,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise StartError(f"{name}: cannot start {argv[0]}: {exc}") from exc
        proc = Proc(name, popen, log_path, stop_signal)
        self.procs.append(proc)
        if len(_raised) > interrupts:
            # With a preexec_fn CPython runs its at-fork hooks (logging's among them) in
            # Python; an interrupt raised inside one is printed as "Exception ignored" and
            # lost, and the run would go on (seen: one Ctrl-C in four while the stack
            # started). Raised again here, the new process already in the table.
            raise _interrupt(_raised[-1])
        return proc

    def stop(self, proc: Proc, grace_s: float = 10.0) -> None:
        """Stop one component's whole process group: its signal, then SIGKILL at the deadline."""
        pgid = proc.pid
        if proc.exit_code() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, proc.stop_signal)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=grace_s)
        # Children left behind by a leader that exited or was killed (gunicorn workers whose
        # master died, postgres backends) are still in the group: end them too.
        if _group_alive(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            deadline = time.monotonic() + min(grace_s, 3.0)
            while _group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            # SIGKILL is delivered, not yet done: on a busy machine an orphan of the group
            # (reparented, then reaped by init) outlives the call by some milliseconds
            # unless we wait for the group to be empty (a zombie still counts as in it, so
            # the leader, our child, is reaped as we go).
            gone_by = time.monotonic() + 10
            while time.monotonic() < gone_by:
                proc.popen.poll()
                if not _group_alive(pgid):
                    break
                time.sleep(0.01)
        if proc.exit_code() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=grace_s)
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self, grace_s: float = 10.0) -> None:
        """Stop every started component, newest first (the server before its database)."""
        for proc in reversed(list(self.procs)):
            self.stop(proc, grace_s)
        while self.cleanups:
            self.cleanups.pop()()


class Interrupted(BaseException):
    """SIGTERM or SIGHUP reached the harness (SIGINT raises KeyboardInterrupt)."""


# Every interrupt signals_raise's handler raised, by signal name: ProcessTable.start compares
# the count before and after a fork to find one that CPython swallowed.
_raised: list[str] = []


def _interrupt(name: str) -> BaseException:
    return KeyboardInterrupt() if name == "SIGINT" else Interrupted(name)


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into an exception so that every `finally` runs and stops the stack;
    SIGINT raises KeyboardInterrupt even where it arrived ignored (a background job, `make
    bench &`, a CI runner: Python then installs no handler of its own and Ctrl-C or a kill -INT
    would pass unseen)."""

    def handler(signum: int, _frame: object) -> None:
        _raised.append(signal.Signals(signum).name)
        raise _interrupt(signal.Signals(signum).name)

    signums = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    previous = {s: signal.signal(s, handler) for s in signums}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM/SIGHUP for the duration (the clean-up after an interrupt)."""
    signums = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in signums}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
