"""Kernel socket counters parsed from /proc, over a real capture."""

from pathlib import Path

from bench.sample import parse_listen_queue, parse_netstat, parse_time_wait

PROC = Path(__file__).resolve().parent.parent / "fixtures" / "proc"


def test_listen_queue_depth_from_proc_net_tcp() -> None:
    """A listener with 5 connections not yet accepted shows rx_queue 5; other ports None."""
    text = (PROC / "net_tcp_queue5.txt").read_text()
    port = int((PROC / "net_tcp_queue5.port").read_text())
    assert parse_listen_queue(text, port) == 5
    assert parse_listen_queue(text, 1) is None


def test_time_wait_counts_sockets_on_the_port() -> None:
    """Three connections closed by the server first leave three TIME_WAIT sockets on its port."""
    text = (PROC / "net_tcp_timewait3.txt").read_text()
    port = int((PROC / "net_tcp_timewait3.port").read_text())
    assert parse_time_wait(text, port) == 3
    assert parse_time_wait(text, 1) == 0


def test_netstat_counters_are_read_by_name() -> None:
    """TcpExt.ListenOverflows and ListenDrops come out as integers keyed by prefix.name."""
    stats = parse_netstat((PROC / "netstat.txt").read_text())
    assert isinstance(stats["TcpExt.ListenOverflows"], int)
    assert isinstance(stats["TcpExt.ListenDrops"], int)
    assert stats["TcpExt.ListenDrops"] >= stats["TcpExt.ListenOverflows"]
    assert "IpExt.InOctets" in stats
