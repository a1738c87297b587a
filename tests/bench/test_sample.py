"""Kernel socket counters parsed from /proc, over a real capture."""

import contextlib
import os
import signal
from pathlib import Path

from bench.observe import sample
from bench.observe.sample import parse_listen_queue, parse_netstat

PROC = Path(__file__).resolve().parent.parent / "fixtures" / "proc"


def test_listen_queue_depth_from_proc_net_tcp() -> None:
    """A listener with 5 connections not yet accepted shows rx_queue 5; other ports None."""
    text = (PROC / "net_tcp_queue5.txt").read_text()
    port = int((PROC / "net_tcp_queue5.port").read_text())
    assert parse_listen_queue(text, port) == 5
    assert parse_listen_queue(text, 1) is None


def test_netstat_counters_are_read_by_name() -> None:
    """TcpExt.ListenOverflows and ListenDrops come out as integers keyed by prefix.name."""
    stats = parse_netstat((PROC / "netstat.txt").read_text())
    assert isinstance(stats["TcpExt.ListenOverflows"], int)
    assert isinstance(stats["TcpExt.ListenDrops"], int)
    assert stats["TcpExt.ListenDrops"] >= stats["TcpExt.ListenOverflows"]
    assert "IpExt.InOctets" in stats


def test_ss_listen_gives_queue_and_backlog() -> None:
    """`ss -Hltn` on gunicorn-sync (1 worker, /upstream, c=50): 50 waiting, backlog 2048."""
    text = (PROC / "ss_listen.txt").read_text()
    assert sample.parse_ss_listen(text) == (50, 2048)
    assert sample.parse_ss_listen("") is None


def test_ss_time_wait_counts_only_recent_sockets_when_asked() -> None:
    """30 TIME_WAIT lines on port 45417: 23 with 10-12 s left on their 60 s timers, 7 about
    to expire (ss prints `8.344ms`). All count in total; as "recent" only those whose start
    (60 s minus what is left) falls in the window."""
    text = (PROC / "ss_time_wait.txt").read_text()
    found = sample.parse_ss_time_wait(text, {45417}, recent_s=None)
    assert (found.total, found.by_port, found.recent) == (30, {45417: 30}, 0)
    assert sample.parse_ss_time_wait(text, {45417}, recent_s=52).recent == 23
    assert sample.parse_ss_time_wait(text, {45417}, recent_s=60).recent == 30
    assert sample.parse_ss_time_wait(text, {45417}, recent_s=5).recent == 0
    assert sample.parse_ss_time_wait(text, {1}, recent_s=52).total == 0


def test_a_family_is_listed_once_per_refresh_and_again_when_one_is_gone() -> None:
    """A process with a sleeping child: both listed; a child started later is not seen until
    the family is re-listed (when due, or after one of them was gone), then it is."""
    import os
    import signal
    import subprocess
    import sys

    script = (
        "import subprocess, sys\n"
        "for line in sys.stdin:\n"
        "    print(subprocess.Popen(['sleep', '60']).pid, flush=True)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdin is not None and parent.stdout is not None
    kids: list[int] = []

    def another() -> int:
        parent.stdin.write("\n")
        parent.stdin.flush()
        kids.append(int(parent.stdout.readline()))
        return kids[-1]

    try:
        first = another()
        family = sample.Family(parent.pid, refresh_s=3600)
        assert {p.pid for p in family.procs()} == {parent.pid, first}
        second = another()
        assert {p.pid for p in family.procs()} == {parent.pid, first}  # not due yet
        family.gone()
        assert {p.pid for p in family.procs()} == {parent.pid, first, second}
    finally:
        for pid in kids:
            os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()


def test_descendants_from_the_kernel_match_psutil() -> None:
    """A shell with two children, one of which has its own: the kernel's children lists give
    the same three descendants as psutil's scan of /proc."""
    import subprocess
    import time

    import psutil

    shell = subprocess.Popen(["sh", "-c", "sleep 60 & sh -c 'sleep 60 & wait' & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(psutil.Process(shell.pid).children(recursive=True)) < 3:
            assert time.monotonic() < deadline, "the shell never started its children"
            time.sleep(0.02)
        expected = {p.pid for p in psutil.Process(shell.pid).children(recursive=True)}
        assert set(sample.descendants(shell.pid)) == expected and len(expected) == 3
    finally:
        for proc in psutil.Process(shell.pid).children(recursive=True):
            proc.kill()
        shell.kill()
        shell.wait()


def test_the_load_tools_cpu_survives_its_exit_before_the_last_sample() -> None:
    """A load tool that burns CPU, then exits and is reaped before the sampler's last sample
    (as run_bounded does): its CPU % is what the samples saw while it ran, not reset."""
    import subprocess
    import sys
    import time

    tool = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nend = time.time() + 0.6\nwhile time.time() < end: pass",
        ]
    )
    sampler = sample.Sampler(None, None, load_pid=tool.pid, interval_s=0.05)
    sampler.start()
    tool.wait()
    time.sleep(0.1)
    sampler.stop()
    assert sampler.resources().load_cpu_pct > 0


def test_each_workers_cpu_seconds_are_recorded_apart_from_the_leaders() -> None:
    """A leader with two children, one burning CPU and one asleep: worker_cpu_s holds both
    children by PID (the busy one with most of the seconds), never the leader."""
    import subprocess
    import sys
    import time

    script = (
        "import subprocess, sys, time\n"
        "burn = 'import time\\nend = time.time() + 20\\nwhile time.time() < end: pass'\n"
        "kids = [subprocess.Popen([sys.executable, '-c', burn]),\n"
        "        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(20)'])]\n"
        "[k.wait() for k in kids]\n"
    )
    leader = subprocess.Popen([sys.executable, "-c", script])
    kids: list[int] = []
    try:
        deadline = time.monotonic() + 10
        while len(kids := sample.descendants(leader.pid)) < 2:
            assert time.monotonic() < deadline, "the leader never started its children"
            time.sleep(0.02)
        sampler = sample.Sampler(leader.pid, None, interval_s=0.05)
        sampler.start()
        time.sleep(0.6)
        sampler.stop()
        workers = sampler.resources().worker_cpu_s
        assert workers is not None and str(leader.pid) not in workers
        assert set(workers) == {str(p) for p in kids}
        busy, idle = sorted(workers.values(), reverse=True)
        # on a shared machine the burner may get a small slice: only the proportion is sure
        assert busy > 0.02 and idle < busy / 4
    finally:
        for pid in kids:  # the children this test started, by PID
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        leader.wait(timeout=10)


def test_the_rss_before_the_load_is_the_first_sample() -> None:
    """A server that allocates 50 MB after the sampler's first sample (as connections the load
    opens would): server_rss_start_mb is the RSS before, server_rss_mb the peak after; the
    growth is what it allocated."""
    import subprocess
    import sys
    import time

    script = (
        "import sys, time\nsys.stdin.readline()\nheld = b'x' * 50_000_000\n"
        "print('ok', flush=True)\ntime.sleep(20)\n"
    )
    server = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        sampler = sample.Sampler(server.pid, None, interval_s=0.05)
        sampler.start()
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("go\n")
        server.stdin.flush()
        assert server.stdout.readline() == "ok\n"
        time.sleep(0.2)
        sampler.stop()
        found = sampler.resources()
        assert found.server_rss_start_mb is not None and found.server_rss_mb is not None
        assert 45 < found.server_rss_mb - found.server_rss_start_mb < 60
    finally:
        server.kill()
        server.wait(timeout=10)
