"""Network namespaces the harness owns: created, used, and removed on every exit path.

Input: a ProcessTable (its clean-ups run on every exit path) and the sysctls a study wants.
Output: Namespace handles named `pwb-<harness pid>-<n>`, each with its own loopback up and its
sysctls set *inside* it (`ip netns exec <ns> sysctl -w`; the host's are never touched);
argv wrapped to run inside (`ip netns exec` execs the program in place, so it keeps the
ProcessTable's process group and PR_SET_PDEATHSIG); a function run on a thread that entered
the namespace (setns(2) moves only the calling thread), so the harness's own probes (readiness
polls) reach 127.0.0.1 inside. remove_leftovers() deletes the namespaces of a harness that
died (SIGKILL leaves its namespaces: nothing runs at its death); the next start calls it.
Without root, RootRequired (the caller prints one line and exits 2).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import psutil

from bench.host.procs import ProcessTable

PREFIX = "pwb-"
NAME_PATTERN = re.compile(r"^pwb-(\d+)-(\d+)$")
# Where `ip netns add` bind-mounts the namespaces it names (iproute2's NETNS_RUN_DIR).
NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
IP = "ip"
COMMAND_TIMEOUT_S = 30
libc = ctypes.CDLL(None, use_errno=True)
T = TypeVar("T")


class NetnsError(RuntimeError):
    """A namespace could not be created, set up or entered."""


class RootRequired(NetnsError):
    """Network namespaces need root: the study is refused (exit 2)."""


def root_problem() -> str | None:
    """Why namespaces cannot be made here, or None (we are root and `ip` exists)."""
    if os.geteuid() != 0:
        return "needs root (it creates network namespaces with `ip netns add`); run it as root"
    if shutil.which(IP) is None:
        return "needs iproute2's `ip` (apt-get install iproute2)"
    return None


def _run(argv: list[str], what: str) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetnsError(f"{what}: {exc}") from exc
    if result.returncode != 0:
        raise NetnsError(f"{what}: {(result.stderr or result.stdout).strip()}")
    return result.stdout


def list_namespaces() -> list[str]:
    """Names of every named network namespace on the host (`ip netns list`)."""
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except OSError:
        return []


def is_leftover(name: str) -> bool:
    """A namespace of ours whose harness is gone: its pid does not exist, or belongs to a
    process started after the namespace was made (the pid was reused)."""
    match = NAME_PATTERN.match(name)
    if match is None:
        return False
    pid = int(match.group(1))
    if pid == os.getpid():
        return False
    try:
        started = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return True
    try:
        made = (NETNS_DIR / name).stat().st_mtime
    except OSError:
        return False
    return started > made


def delete(name: str) -> None:
    """`ip netns delete` one namespace (gone already: nothing to do)."""
    if name in list_namespaces():
        _run([IP, "netns", "delete", name], f"removing namespace {name}")


def pids_inside(name: str) -> list[int]:
    """Processes running in a namespace (`ip netns pids`)."""
    try:
        out = _run([IP, "netns", "pids", name], f"listing processes in {name}")
    except NetnsError:
        return []
    return [int(word) for word in out.split() if word.isdigit()]


def remove_leftovers() -> list[str]:
    """Delete the namespaces earlier harnesses left (killed before their clean-up ran), after
    killing what still runs inside them (a server's workers outlive their master by up to a
    second: PR_SET_PDEATHSIG is per process, and they only notice the master gone on their
    next tick); the names removed. Nobody else's namespace is touched: only exact
    `pwb-<pid>-<n>` names whose harness is gone."""
    removed = []
    for name in list_namespaces():
        if is_leftover(name):
            for pid in pids_inside(name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(NetnsError):
                delete(name)
                removed.append(name)
    return removed


@dataclass
class Namespace:
    """One namespace of ours: run programs and read counters inside it."""

    name: str
    sysctls: dict[str, str] = field(default_factory=dict)

    def exec_argv(self, argv: list[str]) -> list[str]:
        """argv to run inside the namespace (same pid: `ip netns exec` execs in place)."""
        return [IP, "netns", "exec", self.name, *argv]

    def run(self, argv: list[str], what: str) -> str:
        """Run a short command inside and return its stdout (NetnsError if it fails)."""
        return _run(self.exec_argv(argv), f"{what} (in {self.name})")

    def read_sysctl(self, key: str) -> str:
        """A sysctl's value as this namespace sees it."""
        return self.run(["sysctl", "-n", key], f"reading {key}").strip()

    def set_sysctl(self, key: str, value: str) -> None:
        """Set a per-namespace sysctl inside; read back so a silent no-op is caught."""
        self.run(["sysctl", "-q", "-w", f"{key}={value}"], f"setting {key}")
        seen = " ".join(self.read_sysctl(key).split())
        if seen != " ".join(str(value).split()):
            raise NetnsError(f"{key}: set to {value!r}, reads {seen!r} in {self.name}")
        self.sysctls[key] = seen

    def netstat(self) -> dict[str, int]:
        """The namespace's TCP counters (/proc/net/netstat and /proc/net/snmp, read inside):
        {"TcpExtListenOverflows": n, ...}."""
        counters: dict[str, int] = {}
        for source in ("/proc/net/netstat", "/proc/net/snmp"):
            lines = self.run(["cat", source], f"reading {source}").splitlines()
            for head, values in zip(lines[::2], lines[1::2], strict=False):
                prefix, _, names = head.partition(":")
                numbers = values.partition(":")[2].split()
                for key, number in zip(names.split(), numbers, strict=False):
                    with contextlib.suppress(ValueError):
                        counters[f"{prefix}{key}"] = int(number)
        return counters

    def call(self, fn: Callable[[], T]) -> T:
        """fn() on a thread that entered the namespace: its sockets are the namespace's."""
        return call_in(NETNS_DIR / self.name, fn)


def call_in(handle_path: Path, fn: Callable[[], T]) -> T:
    """fn() on a thread that entered the network namespace at handle_path (a bind mount of
    /run/netns, or /proc/<pid>/ns/net: a container's); the thread ends with it."""
    box: dict[str, object] = {}

    def body() -> None:
        try:
            with open(handle_path) as handle:
                if libc.setns(handle.fileno(), CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    raise NetnsError(f"setns({handle_path}): {os.strerror(errno)}")
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=body, name=f"in-{handle_path}", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


@dataclass
class Namespaces:
    """The namespaces of one harness process; each is removed when its `created` block ends,
    and every one still present when the ProcessTable stops (every exit path)."""

    table: ProcessTable
    count: int = 0
    live: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.table.on_stop(self.remove_all)

    def create(self, sysctls: dict[str, str] | None = None) -> Namespace:
        """A fresh namespace, loopback up, sysctls set inside (NetnsError, RootRequired)."""
        problem = root_problem()
        if problem is not None:
            raise RootRequired(problem)
        name = f"{PREFIX}{os.getpid()}-{self.count}"
        self.count += 1
        _run([IP, "netns", "add", name], f"creating namespace {name}")
        self.live.append(name)
        ns = Namespace(name)
        try:
            _run([IP, "-n", name, "link", "set", "lo", "up"], f"loopback up in {name}")
            for key, value in (sysctls or {}).items():
                ns.set_sysctl(key, str(value))
        except BaseException:
            self.remove(name)
            raise
        return ns

    @contextlib.contextmanager
    def created(self, sysctls: dict[str, str] | None = None) -> Iterator[Namespace]:
        """A namespace for the block; removed after it (processes inside stopped first by the
        caller: a namespace only disappears when nothing runs in it any more)."""
        ns = self.create(sysctls)
        try:
            yield ns
        finally:
            self.remove(ns.name)

    def remove(self, name: str) -> None:
        """Delete one of ours."""
        with contextlib.suppress(NetnsError):
            delete(name)
        if name in self.live:
            self.live.remove(name)

    def remove_all(self) -> None:
        """Delete every namespace of ours still present."""
        for name in list(self.live):
            self.remove(name)
