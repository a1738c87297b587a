"""Network namespaces of the harness (bench/host/netns.py): created, used, removed, and a killed
harness's leftovers removed at the next start. Needs root (skipped otherwise)."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core.registry import ROOT
from bench.host import netns
from bench.host.procs import ProcessTable

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(netns.root_problem() is not None, reason="network namespaces need root"),
]


def test_namespace_created_used_and_removed(tmp_path: Path) -> None:
    """A namespace gets its sysctl (the host's stays), serves a request to a process started
    inside it through the ProcessTable, is unreachable from the host, and is gone after
    stop_all()."""
    host_range = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
    table = ProcessTable()
    spaces = netns.Namespaces(table)
    try:
        ns = spaces.create({"net.ipv4.ip_local_port_range": "40000 40063"})
        assert ns.name.startswith(f"pwb-{os.getpid()}-")
        assert ns.name in netns.list_namespaces()
        assert ns.read_sysctl("net.ipv4.ip_local_port_range").split() == ["40000", "40063"]
        assert Path("/proc/sys/net/ipv4/ip_local_port_range").read_text() == host_range
        server = table.start(
            "http-server",
            ns.exec_argv([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "18080"]),
            tmp_path / "server.log",
            cwd=tmp_path,
        )
        (tmp_path / "hello.txt").write_text("inside\n")

        def fetch() -> str:
            deadline = time.monotonic() + 20
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", 18080), timeout=2) as sock:
                        sock.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
                        return sock.makefile("rb").read().decode()
                except OSError:
                    assert server.exit_code() is None, server.log_tail()
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

        answer = ns.call(fetch)
        assert answer.startswith("HTTP/1.0 200") and answer.endswith("inside\n")
        # The same pid runs inside the namespace (ip netns exec execs in place).
        inside = os.readlink(f"/proc/{server.pid}/ns/net")
        assert inside != os.readlink("/proc/self/ns/net")
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", 18080), timeout=1).close()
    finally:
        table.stop_all()
    assert ns.name not in netns.list_namespaces()


def test_killed_harness_leftovers_removed_at_next_start(tmp_path: Path) -> None:
    """SIGKILL a harness in the middle of a namespace study: its namespace stays (nothing runs
    at a SIGKILL), no process of it does (PR_SET_PDEATHSIG); the next start of the harness
    removes the namespace and says so."""
    results = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "study", "--name=port-exhaustion", f"--results={results}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    prefix = f"pwb-{proc.pid}-"
    try:
        deadline = time.monotonic() + 120
        while not any(n.startswith(prefix) for n in netns.list_namespaces()):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "no namespace appeared in 120 s"
            time.sleep(0.2)
        time.sleep(1.0)  # into the study: processes started inside
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    left = [n for n in netns.list_namespaces() if n.startswith(prefix)]
    assert left, "the killed harness's namespace should still be there before the next start"
    assert all(netns.is_leftover(n) for n in left)
    # the next start: make report over one fixture record (a report of nothing is refused)
    (results / "records").mkdir(parents=True, exist_ok=True)
    fixture = next((ROOT / "tests" / "fixtures" / "records" / "machine-a").glob("*.json"))
    shutil.copy(fixture, results / "records")
    nxt = subprocess.run(
        [sys.executable, "-m", "bench", "report", f"--results={results}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert nxt.returncode == 0, nxt.stderr
    assert not [n for n in netns.list_namespaces() if n.startswith(prefix)]
    assert all(n in nxt.stderr for n in left)
