"""The race's arrival pattern as pure functions: gaps around a measured close, cut to a
budget of idle time."""

from bench.load.race import gaps_around, within_budget


def test_gaps_around_a_measured_close() -> None:
    """Offsets in ms around the close (2.002 s), positive and distinct, ascending."""
    assert gaps_around(2.002, [-5, 0, 0, 10]) == [1997, 2002, 2012]
    assert gaps_around(0.003, [-5, 0]) == [3]


def test_budget_keeps_everything_when_it_fits() -> None:
    """4 rounds of 3 gaps near 2 s: 24 s of gaps, inside a 240 s budget."""
    assert within_budget([1990, 2000, 2010], 4, 240) == ([1990, 2000, 2010], 4)


def test_budget_cuts_rounds_then_gaps_nearest_the_close() -> None:
    """Near 30 s, 240 s buys 8 bursts: with 3 gaps, 2 rounds; with 11 gaps averaging 30.02 s,
    7: one round of the 7 nearest the measured close."""
    assert within_budget([29990, 30000, 30010], 4, 240) == ([29990, 30000, 30010], 2)
    gaps = [29980, 29990, 29995, 29998, 30000, 30001, 30002, 30005, 30010, 30020, 30250]
    kept, rounds = within_budget(gaps, 4, 240, close_ms=30000)
    assert rounds == 1 and len(kept) == 7
    assert 30250 not in kept and 29980 not in kept and 30000 in kept
