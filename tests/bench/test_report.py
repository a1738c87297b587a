"""summary.md is rendered from the records alone, deterministically (golden file)."""

import os
import shutil
from pathlib import Path

from bench.record import load_records
from bench.report import render_summary, server_version, write_summary

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GOLDEN = FIXTURES / "summary" / "summary.md"
SYSTEM_CELLS = 15  # cells of a row of the second (resources and sockets) table


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
        "granian 2.8.7 | wsgi | w2 t4 b1024 | direct | 10 | 14,000"
    )
    assert "14,000 (13,000–15,000) ⚠" in plaintext  # 2,000 / 14,000 > 10 %
    assert "6,050 (6,000–6,100) |" in plaintext  # 100 / 6,050 < 10 %: no flag
    assert "server exited with code -9 during load" in text
    assert "greenlet<0.5" in text and "unsupported" in text
    assert "corrupt.json" in text and "future.json" in text
    assert "graviton (arm64)" in text
    # real version-2 records: resources and sockets columns, and the share of nginx-static
    speed_row, system_row = (
        line
        for line in plaintext.splitlines()
        if "gunicorn-sync 27.0.1 | w" in line or "gunicorn-sync 27.0.1 | wsgi | w2 b2048" in line
        if "| 50 |" in line
    )
    assert "| 5% |" in speed_row  # 6,397 rps of nginx-static's 118,121 at c=50
    assert "| 17,347 |" in system_row  # TIME_WAIT piled up by a server that closes connections
    # a deep accept queue (49), but it closes every connection, so every connection cycles
    # through and its waits are timed: 99 % served, not flagged as optimistic
    assert "| 49 | 99% |" in system_row and "†" not in speed_row + system_row
    # machines are never ranked together: each machine's rows form one block
    rows = [
        line
        for line in plaintext.splitlines()
        if line.startswith("| granian") and line.count("|") != SYSTEM_CELLS + 1
    ]
    assert "graviton" in rows[0] and "graviton" not in rows[-1]


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


def test_keepalive_and_proxy_columns() -> None:
    """Real v3 records behind nginx: keep-alive off shows thousands of TIME_WAIT sockets on
    both sides, keep-alive on almost none; the 502/504 columns read nginx's counts."""
    text = render_summary(*load_records(FIXTURES / "records"))
    rows = [line for line in text.splitlines() if line.startswith("| gunicorn-gthread")]
    system = [r for r in rows if r.count("|") == SYSTEM_CELLS + 1]
    off = next(r for r in system if "nginx, keepalive off" in r)
    on = next(r for r in system if "| nginx |" in r)
    assert "15,713 (7,827 / 7,886)" in off and "30 (29 / 1)" in on
    speed = next(r for r in rows if "| nginx |" in r and "| 4,737 |" in r)
    assert "| 0 | 0 | – |" in speed  # 502 and 504 counted (none), no ceiling measured


def test_compare_arches_ratio_and_emulated_apart() -> None:
    """Native amd64 and arm64 of the same configuration are put side by side with the
    arm64/amd64 ratio; emulated records never enter the per-scenario tables."""
    from dataclasses import replace

    records, problems = load_records(FIXTURES / "records")
    section = render_summary(records, problems).split("## Compare arches")[1]
    row = "| plaintext | granian | w2 t4 b1024 | direct | 10 | 14,000 | 20,000 | 1.43× |"
    assert row in section
    emulated = replace(records[0], emulated=True, arch="arm64", rps=1234.0, run_id="e" * 16)
    text = render_summary([*records, emulated], problems)
    assert "### Emulated runs (functional check)" in text
    before_arches = text.split("## Compare arches")[0]
    assert "1,234" not in before_arches


def test_plots_get_one_series_per_scenario(tmp_path: Path) -> None:
    """Each scenario has its own plot data (records of other scenarios never join its lines),
    and write_summary links a PNG per scenario."""
    from bench.report import plot_series

    records, _ = load_records(FIXTURES / "records")
    series = plot_series(records)
    assert set(series) == {"db", "plaintext"}
    assert all(conc == 10 for conc, _, _ in series["db"]["granian w2 t4 b1024 [vm]"])
    shutil.copytree(FIXTURES / "records" / "machine-a", tmp_path / "records", dirs_exist_ok=True)
    text = write_summary(tmp_path).read_text()
    assert "![db: req/s and p99 by concurrency](plots/db.png)" in text
    assert (tmp_path / "plots" / "db.png").stat().st_size > 1000
