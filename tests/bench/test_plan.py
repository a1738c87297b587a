"""The plan: every server × scenario × concurrency × trial once, servers shuffled per trial."""

import itertools
from pathlib import Path

from bench.core import plan


def _options(**kw: object) -> plan.Options:
    base = dict(
        servers=("a", "b", "c"),
        scenarios=("plaintext", "db"),
        concurrency=(5, 10),
        duration_s=3,
        warmup_s=1,
        trials=3,
        arch="amd64",
        results=Path("/tmp/r"),
        overrides={},
        load_threads=1,
        seed=7,
    )
    base.update(kw)
    return plan.Options(**base)  # type: ignore[arg-type]


def test_every_run_planned_once() -> None:
    """3 servers × 2 scenarios × 2 concurrencies × 3 trials = 36 distinct runs, after a
    warm-up run per server."""
    runs = [r for b in plan.make_plan(_options()) for r in b.runs]
    assert len(runs) == 3 + 36 == len(set(runs))


def test_order_is_seeded_and_varies_by_trial() -> None:
    """The same seed gives the same order; across trials the order is shuffled."""
    a = [(b.trial, b.server) for b in plan.make_plan(_options())]
    assert a == [(b.trial, b.server) for b in plan.make_plan(_options())]
    orders = {tuple(s for t, s in a if t == trial) for trial in (1, 2, 3)}
    many = {tuple(b.server for b in plan.make_plan(_options(seed=s)))[:3] for s in range(20)}
    assert len(many) > 1 and all(sorted(o) == ["a", "b", "c"] for o in orders)


def test_estimate_counts_primer_warmup_and_measurement() -> None:
    """Per block: a 1 s primer per scenario plus (warmup + duration) per run."""
    opts = _options(trials=1, servers=("a",))
    warm_up = 1 + (1 + 3)  # the warm-up start: one scenario's primer, one run
    assert plan.estimate_seconds(opts, plan.make_plan(opts)) == warm_up + 2 * 1 + 4 * (1 + 3)


def test_each_server_first_starts_for_a_warm_up_run() -> None:
    """Round 0 comes first: one start per server, one run of the plan's DURATION at the first
    scenario's first point, marked warm-up; the trials after it are as without it."""
    opts = _options()
    blocks = plan.make_plan(opts)
    warm = [b for b in blocks if b.warmup]
    assert blocks[: len(warm)] == warm and sorted(b.server for b in warm) == ["a", "b", "c"]
    assert all(
        b.trial == 0 and b.runs == (plan.RunSpec(b.server, "plaintext", 5, 0),) for b in warm
    )
    trials = [b for b in blocks if not b.warmup]
    assert trials == [b for r in itertools.islice(plan.rounds(opts), 3) for b in r]


def test_no_warm_up_for_a_remote_server_a_capacity_search_or_a_soak() -> None:
    """TARGET= (not started here), make capacity and make soak plan no warm-up round."""
    objective = plan.Mode(objective=plan.Objective(p99_ms=50))
    for opts in (
        _options(target="http://10.0.0.1:80"),
        _options(mode=objective),
        _options(mode=plan.Mode(soak_interval_s=10)),
    ):
        assert not any(b.warmup for b in plan.make_plan(opts))


def test_a_study_warms_each_server_up_once() -> None:
    """Arms sharing a server: only the first arm that runs it has its warm-up start."""
    arms = [_options(servers=("a", "b")), _options(servers=("b", "c"))]
    warm = [[b.server for b in blocks if b.warmup] for _, blocks in plan.arm_plans(arms)]
    assert sorted(warm[0]) == ["a", "b"] and warm[1] == ["c"]


def test_a_race_round_measures_each_server_only_where_it_still_races() -> None:
    """rounds() given each server's points still racing: a server out of the race at one
    point is not measured there again, one out everywhere not started; the order's draws
    are as for the full round (the same seeded shuffle)."""
    opts = _options()
    still = {"a": {("db", 10, None)}, "c": {("plaintext", 5, None), ("db", 10, None)}}
    blocks = next(plan.rounds(opts, lambda: still))
    assert sorted(b.server for b in blocks) == ["a", "c"]
    got = {b.server: {(r.scenario, r.concurrency, r.rate) for r in b.runs} for b in blocks}
    assert got == still
    full = [b.server for b in next(plan.rounds(opts, lambda: {"a", "c"}))]
    assert [b.server for b in blocks] == full
