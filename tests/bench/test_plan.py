"""The plan: every server × scenario × concurrency × trial once, servers shuffled per trial."""

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
    """3 servers × 2 scenarios × 2 concurrencies × 3 trials = 36 distinct runs."""
    runs = [r for b in plan.make_plan(_options()) for r in b.runs]
    assert len(runs) == 36 == len(set(runs))


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
    assert plan.estimate_seconds(opts, plan.make_plan(opts)) == 2 * 1 + 4 * (1 + 3)
