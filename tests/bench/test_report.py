"""summary.md is rendered from the records alone, deterministically (golden file)."""

import os
from pathlib import Path

from bench.record import load_records
from bench.report import render_summary, write_summary

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


def test_write_summary_replaces_only_the_summary(tmp_path: Path) -> None:
    """write_summary creates summary.md and leaves no temp file."""
    path = write_summary(tmp_path)
    assert path.read_text().startswith("# Benchmark summary")
    assert [p.name for p in tmp_path.iterdir()] == ["summary.md"]
