"""The seed data is deterministic and the script loads exactly what the verifier expects."""

from bench.core import seed


def test_world_rows_are_deterministic_and_in_range() -> None:
    """Same rows on every call; 10,000 ids in order; numbers within 1..10000."""
    rows = seed.world_rows()
    assert rows == seed.world_rows()
    assert [i for i, _ in rows] == list(range(1, 10_001))
    assert all(1 <= n <= 10_000 for _, n in rows)
    assert len({n for _, n in rows}) > 5_000  # really random, not a constant


def test_fortunes_include_the_escaping_and_unicode_cases() -> None:
    """The fortune table holds the rows that make /fortunes a real escaping test."""
    messages = dict(seed.fortunes())
    assert len(messages) == 12
    assert messages[11].startswith("<script>")
    assert messages[12] == "フレームワークのベンチマーク"


def test_seed_script_copies_every_row_and_stamps_the_version() -> None:
    """The psql script has 10,000 world lines, 12 fortunes and the schema stamp."""
    script = seed.seed_script()
    assert script.count("\n") > 10_012
    assert f"VALUES ('{seed.schema_version()}')" in script
    assert "COPY world" in script and "COPY fortune" in script
