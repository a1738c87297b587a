"""bench.core.outcome: the one definition of failed and unserved requests."""

from pathlib import Path

from bench.core.outcome import UNSERVED_CLASSES, Outcome
from bench.core.record import load_records

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_every_class_but_aborted_is_unserved() -> None:
    """Socket errors and non-2xx answers fail; with unsent arrivals they are unserved; aborted
    requests count on neither side."""
    errors = {"connect": 1, "read": 2, "write": 3, "timeout": 4, "other": 5, "non_2xx": 6}
    outcome = Outcome.of(100, {**errors, "unsent": 7, "aborted": 8})
    assert outcome.failed == 1 + 2 + 3 + 4 + 5 + 6
    assert outcome.unserved == outcome.failed + 7
    assert outcome.arrivals == 100 + 1 + 2 + 3 + 4 + 5 + 7  # answers + no answer + never sent
    assert outcome.ok == 94
    assert outcome.unserved_pct == 100 * 28 / 122
    assert list(outcome.by_class()) == list(UNSERVED_CLASSES)


def test_nothing_arrived_has_no_share() -> None:
    """No request at all: the share is unknown, not 0 %."""
    assert Outcome.of(0, {}).unserved_pct is None
    assert Outcome.of(None, None).failed == 0


def test_a_tool_that_does_not_say_is_zero_not_an_error() -> None:
    """wrk's records carry no `other`/`unsent` (null or absent): they count 0."""
    assert Outcome.of(10, {"other": None, "unsent": None, "non_2xx": 2}).failed == 2


def test_real_open_loop_records_add_up() -> None:
    """Over the captured open-loop records: failed = the sum of the classes by_class lists."""
    records, problems = load_records(FIXTURES / "openloop")
    assert not problems and records
    for rec in records:
        outcome = Outcome.of_record(rec)
        assert outcome.unserved == sum(outcome.by_class().values())
        assert outcome.arrivals >= outcome.unserved - outcome.non_2xx
