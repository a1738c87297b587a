"""Suite-wide guard: nothing the tests start may outlive the suite."""

from collections.abc import Iterator

import psutil
import pytest

STACK_WORDS = (
    "postgres",
    "pgbouncer",
    "nginx",
    "gunicorn",
    "granian",
    "uwsgi",
    "uvicorn",
    "meinheld",
    "hypercorn",
    "wrk",
    "app_common",
    "locust",
)


def stack_processes() -> dict[int, str]:
    """PID -> command line of every live (non-zombie) process of a stack component."""
    found = {}
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            line = " ".join(proc.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if any(word in line for word in STACK_WORDS) and "pytest" not in line:
            found[proc.info["pid"]] = line
    return found


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Fail the session if a stack process started during it is still alive at the end."""
    before = set(stack_processes())
    yield
    left = {pid: line for pid, line in stack_processes().items() if pid not in before}
    assert not left, f"processes left running by the tests: {left}"
