"""Kernel socket counters parsed from /proc, over a real capture."""

from pathlib import Path

from bench.sample import parse_listen_queue

PROC = Path(__file__).resolve().parent.parent / "fixtures" / "proc"


def test_listen_queue_depth_from_proc_net_tcp() -> None:
    """A listener with 5 connections not yet accepted shows rx_queue 5; other ports None."""
    text = (PROC / "net_tcp_queue5.txt").read_text()
    port = int((PROC / "net_tcp_queue5.port").read_text())
    assert parse_listen_queue(text, port) == 5
    assert parse_listen_queue(text, 1) is None
