"""pgbouncer's SHOW POOLS as psql prints it (unaligned, `|`) -> the bench database's totals."""

from pathlib import Path

from bench.observe.pools import parse_show, pool_totals

FIXTURE = Path(__file__).parents[1] / "fixtures" / "pgbouncer" / "show_pools.txt"


def test_show_pools_rows_by_column_name() -> None:
    """pgbouncer 1.18's 16 columns, one row per pool: bench's own and the admin console's."""
    rows = parse_show(FIXTURE.read_text())
    assert [(r["database"], r["pool_mode"]) for r in rows] == [
        ("bench", "transaction"),
        ("pgbouncer", "statement"),
    ]


def test_totals_of_the_bench_database_only() -> None:
    """Counters of the bench pool (the console's own client is not the app's); sv_open sums
    the server connections in every state."""
    totals = pool_totals(parse_show(FIXTURE.read_text()), "bench")
    assert totals == {
        "cl_active": 2,
        "cl_waiting": 0,
        "sv_active": 0,
        "sv_idle": 0,
        "sv_used": 1,
        "sv_open": 1,
    }


def test_a_footer_or_nothing_gives_no_rows() -> None:
    """psql's `(2 rows)` footer and an empty answer are not rows."""
    assert parse_show("") == []
    assert parse_show(FIXTURE.read_text() + "(2 rows)\n") == parse_show(FIXTURE.read_text())
