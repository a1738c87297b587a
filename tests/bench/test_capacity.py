"""The capacity search, pure: against servers whose capacity is known by construction it
finds that capacity within the precision, confirms it, and stops."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench.core import plan
from bench.harness.capacity import Search, verdict
from bench.harness.measure import Measurement
from bench.load import Errors, Latency, LoadResult


def _search(
    capacity: int, start: int = 50, fail_first_confirm: bool = False
) -> tuple[Search, list]:
    """Run a search where a step passes when its rate is within `capacity` (the first
    confirmation fails when asked, as a noisy step does)."""
    search, steps = Search(start, 0.05), []
    while (step := search.next()) is not None:
        rate, phase = step
        ok = rate <= capacity
        if fail_first_confirm and phase == "confirm":
            fail_first_confirm, ok = False, False
        steps.append((rate, phase, ok))
        search.observe(rate, phase, ok)
        assert len(steps) < 60, steps
    return search, steps


@pytest.mark.parametrize("capacity", [1, 37, 90, 100, 999, 12_345, 87_000])
def test_search_finds_a_known_capacity_within_five_percent(capacity: int) -> None:
    """Step-up, bisection, then a confirming repeat of the rate that passed: the result passes
    and lies within 5 % below the true capacity."""
    search, steps = _search(capacity)
    assert search.result is not None and search.result <= capacity
    assert (capacity - search.result) / capacity <= 0.05 or capacity - search.result <= 1
    assert steps[-1] == (search.result, "confirm", True)


def test_search_steps_up_by_doubling_then_bisects() -> None:
    """From 50 req/s against a capacity of 300: 50, 100, 200, 400 (fails), then between."""
    _, steps = _search(300)
    assert [s[:2] for s in steps[:4]] == [
        (50, "step-up"),
        (100, "step-up"),
        (200, "step-up"),
        (400, "step-up"),
    ]
    assert {phase for _, phase, _ in steps[4:-1]} == {"bisect"}


def test_search_steps_down_when_the_start_is_past_capacity() -> None:
    """A server slower than the start rate: halving until a step passes, then bisection."""
    search, steps = _search(7, start=50)
    assert steps[0] == (50, "step-up", False) and steps[1][1] == "step-down"
    assert search.result is not None and 6 <= search.result <= 7


def test_a_failed_confirmation_searches_below_it_again() -> None:
    """The rate that passed once fails its confirmation: it becomes a failing rate and the
    search settles lower, confirmed."""
    plain, _ = _search(1000)
    search, steps = _search(1000, fail_first_confirm=True)
    assert ("confirm", False) in {(phase, ok) for _, phase, ok in steps}
    assert search.result is not None and search.result < plain.result
    assert steps[-1][1:] == ("confirm", True)


def test_nothing_passes_ends_without_a_result() -> None:
    """A server that fails even 1 req/s: the search ends, with no capacity."""
    search, steps = _search(0)
    assert search.result is None and steps[-1][0] == 1


def _measured(
    rate: float, p99: float, achieved: float | None = None, errors: Errors | None = None
) -> Measurement:
    result = LoadResult(
        requests=int(rate * 5),
        duration_s=5.0,
        rps=rate,
        latency=Latency(p50=1.0, p90=2.0, p99=p99, p999=p99 * 2, max=p99 * 3, mean=1.2),
        errors=errors or Errors(by_status={200: int(rate * 5)}, other=0),
        raw={},
        achieved_rps=rate if achieved is None else achieved,
    )
    return Measurement(result=result, started="now")


@pytest.mark.parametrize(
    ("measured", "ok", "why"),
    [
        (_measured(100, 20.0), True, "within"),
        (_measured(100, 120.0), False, "p99 120.0 ms > 100 ms"),
        (_measured(100, 20.0, achieved=98.0), False, "served 98 of 100 req/s"),
        (_measured(100, 20.0, errors=Errors(non_2xx=3)), False, "3 failed requests"),
        (_measured(100, 20.0, errors=Errors(timeout=1, other=1)), False, "2 failed requests"),
        (None, False, "the load tool failed"),
    ],
)
def test_verdict_needs_latency_no_errors_and_the_rate_served(
    measured: Measurement | None, ok: bool, why: str
) -> None:
    """p99 within the objective, no failed request, ≥ 99 % of the offered rate served."""
    got_ok, got_why = verdict(measured, 100, plan.Objective(p99_ms=100))
    assert got_ok is ok and why in got_why


def test_verdict_checks_p999_when_asked() -> None:
    """With a p99.9 objective too, a step within p99 but past p99.9 fails."""
    objective = plan.Objective(p99_ms=100, p999_ms=30)
    assert verdict(_measured(100, 20.0), 100, objective) == (False, "p99.9 40.0 ms > 30 ms")


def test_the_knee_ladder_repeats_each_rate_in_shuffled_rounds() -> None:
    """Every rate around the result once per round, each round a permutation."""
    from bench.core import defaults
    from bench.harness.capacity import knee_ladder

    rounds = knee_ladder(1000, seed=7, rounds=3)
    rates = sorted({round(1000 * f) for f in defaults.CAPACITY_KNEE})
    assert len(rounds) == 3
    assert all(sorted(r) == rates for r in rounds) and len({tuple(r) for r in rounds}) > 1


def _capacity_session(trials: int, capacity: int):
    """A stand-in session: its objective, trials and knobs, as search_one reads them."""
    from types import SimpleNamespace

    mode = SimpleNamespace(objective=plan.Objective(p99_ms=100))
    opts = SimpleNamespace(mode=mode, trials=trials)
    return SimpleNamespace(opts=opts, facts=SimpleNamespace(knobs={"workers": 2}))


def test_each_trial_repeats_the_knee_on_its_own_server_start(monkeypatch) -> None:
    """Trial 1 searches and runs the first round; later trials (fresh starts of the server)
    run their round under the same search id; the last adds the steps below and past."""
    from bench.core import defaults
    from bench.harness import capacity as cap

    steps: list[tuple[int, int, str, str, int]] = []  # (trial, rate, phase, search, number)
    trial = 0

    def fake_step(session, template, rate, phase, number, search_id):
        steps.append((trial, rate, phase, search_id, number))
        return rate <= 1000

    monkeypatch.setattr(cap, "_step", fake_step)
    template = SimpleNamespace(server="s", scenario="db")
    session, knees = _capacity_session(3, 1000), {}
    for trial in (1, 2, 3):
        assert cap.search_one(session, template, trial, knees) is not None
    by_trial = {t: [s for s in steps if s[0] == t] for t in (1, 2, 3)}
    rungs = len(set(defaults.CAPACITY_KNEE))
    assert {s[3] for s in steps} == {steps[0][3]}  # one search id across the trials
    assert [s[4] for s in steps] == list(range(1, len(steps) + 1))  # step numbers go on
    assert not {s[2] for s in by_trial[2]} - {"knee"} and len(by_trial[2]) == rungs
    assert {"step-up", "bisect", "confirm", "knee"} <= {s[2] for s in by_trial[1]}
    assert {"knee", "profile", "past"} == {s[2] for s in by_trial[3]}
    assert sum(s[2] == "knee" for s in steps) == 3 * rungs


def test_a_later_trial_without_a_search_result_measures_nothing(monkeypatch) -> None:
    """No result in trial 1 (or no trial 1 in this invocation): nothing to repeat."""
    from bench.harness import capacity as cap

    monkeypatch.setattr(cap, "_step", lambda *a: pytest.fail("measured a step"))
    template = SimpleNamespace(server="s", scenario="db")
    assert cap.search_one(_capacity_session(3, 1000), template, 2, {}) is None
