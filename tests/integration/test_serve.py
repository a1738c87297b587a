"""make serve: a verified stack that answers on the printed URLs until Ctrl-C, then nothing
it started is left running."""

import os
import signal
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from bench.core.registry import ROOT
from tests.conftest import alive, stack_processes

pytestmark = pytest.mark.integration


def _urls(harness: subprocess.Popen, timeout_s: float = 180) -> dict[str, str]:
    """The `name url ...` lines up to `ready`."""
    assert harness.stdout is not None
    found: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    for line in harness.stdout:
        assert time.monotonic() < deadline, "make serve never said ready"
        if line.startswith("ready"):
            return found
        name, url = line.split()[:2]
        found[name] = url
    raise AssertionError(f"make serve ended with {harness.wait()} before ready")


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.read()


@pytest.mark.parametrize("proxy", ["none", "nginx"])
def test_serve_answers_until_ctrl_c_and_leaves_nothing(proxy: str) -> None:
    """granian answers on the printed URL (and through nginx), pgbouncer's DSN is given;
    SIGINT stops the harness with status 0, and its process group and every process it
    started are gone."""
    before = set(stack_processes())
    harness = subprocess.Popen(
        [sys.executable, "-m", "bench", "serve", "--server=granian", f"--proxy={proxy}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        urls = _urls(harness)
        assert _get(urls["server"] + "/plaintext") == (200, b"Hello, World!")
        status, body = _get(urls["server"] + "/db")
        assert status == 200 and b"randomNumber" in body
        if proxy == "nginx":
            assert _get(urls["nginx"] + "/plaintext") == (200, b"Hello, World!")
        else:
            assert "nginx" not in urls
        assert urls["pgbouncer"].startswith("postgresql://bench:")
        started = set(stack_processes()) - before
        started |= {p.pid for p in psutil.Process(harness.pid).children(recursive=True)}
        names = " ".join(stack_processes().get(pid, "") for pid in started)
        for part in ("postgres", "pgbouncer", "granian", *(["nginx"] if proxy == "nginx" else [])):
            assert part in names, f"{part} not among {names}"
        os.kill(harness.pid, signal.SIGINT)
        assert harness.wait(timeout=60) == 0
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    assert alive(started) == set(), f"left running: {alive(started)}"
    with pytest.raises(ProcessLookupError):
        os.killpg(harness.pid, 0)
