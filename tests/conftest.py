"""Suite-wide guard: nothing the tests start may outlive the suite.

Every process the harness starts carries the session's PYWEBBENCH_OWNER token in its
environment (bench.host.procs passes it on), so the guard finds the tests' own processes, and
only those, even after the harness that started them has exited.
"""

import os
import uuid
from collections.abc import Iterator

import psutil
import pytest

from bench.core.variables import MAKE_OWN
from bench.host.procs import OWNER_ENV

TOKEN = f"tests-{uuid.uuid4().hex}"
os.environ[OWNER_ENV] = TOKEN
# `make test PYTEST_ARGS=...` passes its command-line variables to every child make through
# MAKEFLAGS: the tests' own `make bench ...` would inherit PYTEST_ARGS and refuse it. The suite
# runs as if pytest had been started directly.
for _name in MAKE_OWN:
    os.environ.pop(_name, None)


def stack_processes() -> dict[int, str]:
    """PID -> command line of every live process started on behalf of this test session."""
    found = {}
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
                continue
            if proc.environ().get(OWNER_ENV) == TOKEN:
                found[proc.pid] = " ".join(proc.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def alive(pids: set[int]) -> set[int]:
    """The PIDs among `pids` that still run (zombies count as gone: nothing holds a port)."""
    running = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.add(pid)
        except psutil.NoSuchProcess:
            pass
    return running


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Fail the session if a process started during it is still alive at the end."""
    yield
    left = stack_processes()
    assert not left, f"processes left running by the tests: {left}"
    containers = session_containers()
    assert not containers, f"containers or networks left by the tests: {containers}"


def session_containers() -> list[str]:
    """Names of the containers and networks labelled with this session's token (none when no
    engine is installed)."""
    import shutil
    import subprocess

    from bench.host.docker import TOKEN_LABEL

    docker = shutil.which("docker")
    if docker is None:
        return []
    names = []
    for args in (["ps", "--all"], ["network", "ls"]):
        result = subprocess.run(
            [
                docker,
                *args,
                "--filter",
                f"label={TOKEN_LABEL}={TOKEN}",
                "--format",
                "{{.Names}}" if args[0] == "ps" else "{{.Name}}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        names += result.stdout.split()
    return names
