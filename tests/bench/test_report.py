"""summary.md is rendered from the records alone, deterministically (golden file)."""

import os
from pathlib import Path

from bench.record import load_records
from bench.report import render_summary, server_version, write_summary

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GOLDEN = FIXTURES / "summary" / "summary.md"


def test_summary_matches_golden_file() -> None:
    """Rendering the fixture records gives the checked-in summary (UPDATE_GOLDEN=1 rewrites)."""
    text = render_summary(*load_records(FIXTURES / "records"))
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_summary_content() -> None:
    """Tables sorted by p99, the spread flagged, failures and skipped files listed."""
    text = render_summary(*load_records(FIXTURES / "records"))
    plaintext = text.split("## plaintext")[1].split("##")[0]
    assert plaintext.index("gunicorn-sync 27.0.1") < plaintext.index(
        "granian 2.8.7 | wsgi | 10 | 14,000"
    )
    assert "14,000 (13,000–15,000) ⚠" in plaintext  # 2,000 / 14,000 > 10 %
    assert "6,050 (6,000–6,100) |" in plaintext  # 100 / 6,050 < 10 %: no flag
    assert "server exited with code -9 during load" in text
    assert "greenlet<0.5" in text and "unsupported" in text
    assert "corrupt.json" in text and "future.json" in text
    assert "graviton (arm64)" in text
    # real version-2 records: resources and sockets columns, and the share of nginx-static
    sync_row = next(
        line for line in plaintext.splitlines() if "gunicorn-sync 27.0.1 | wsgi | 50" in line
    )
    assert "| 17,347 |" in sync_row  # TIME_WAIT piled up by a server that closes connections
    assert "| 5% |" in sync_row  # 6,397 rps of nginx-static's 118,121 at c=50
    # a deep accept queue (49), but it closes every connection, so every connection cycles
    # through and its waits are timed: 99 % served, not flagged as optimistic
    assert "| 49 | 99% |" in sync_row and "†" not in sync_row


def test_starved_connections_flag_the_latency_as_optimistic() -> None:
    """Little's law: 8 of 50 connections served (uWSGI's threads holding keep-alive
    connections) flags p99 with a dagger and the footnote; all connections served does not."""
    from dataclasses import replace

    from bench.report import served_share

    rec = load_records(FIXTURES / "records")[0][0]
    starved = replace(
        rec, concurrency=50, rps=19_354.0, latency_ms={**rec.latency_ms, "mean": 0.41, "p99": 1.7}
    )
    assert round(served_share(starved), 2) == 0.16
    text = render_summary([starved], [])
    assert "| 1.70 † |" in text and "Fewer than 50% of the connections" in text
    served = replace(starved, latency_ms={**starved.latency_ms, "mean": 2.6})
    assert round(served_share(served), 2) == 1.0
    assert "†" not in render_summary([served], [])


def test_write_summary_replaces_only_the_summary(tmp_path: Path) -> None:
    """write_summary creates summary.md and leaves no temp file."""
    path = write_summary(tmp_path)
    assert path.read_text().startswith("# Benchmark summary")
    assert [p.name for p in tmp_path.iterdir()] == ["summary.md"]


def test_server_version_falls_back_to_the_package_list() -> None:
    """Without server_version the version of packages[server_package] is shown, else "?"."""
    packages = {"gunicorn": "27.0.1", "flask": "3.1.2"}
    assert server_version({"packages": packages, "server_package": "gunicorn"}) == "27.0.1"
    assert server_version({"server_version": "2.8.7", "packages": packages}) == "2.8.7"
    assert server_version({"packages": packages, "server_package": None}) == "?"
    assert server_version({}) == "?"
