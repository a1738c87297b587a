"""A mutation check of the summary's statistics and the race's decisions: each wrong
statistic the summary once had, or could slip into, must make some test fail.

Input: the source of each target module (bench/report/stats.py, bench/report/decision.py,
bench/report/glance.py; read, never written) and the test functions of its test module
(tests/bench/test_stats.py, test_decision.py, test_glance.py). Each mutant is a source-text or
AST replacement applied to a copy of its module, executed as a module of another name; the
test functions meant to catch that kind of mistake run with the mutant's names injected in
place of the real ones (the tests import every name at module level for this). Output: a pass
when at least one of them fails its assertions (the mutant is killed); a mutant that survives
fails here, naming the tests it passed. Deterministic: the tests seed their own generators. A
control runs the same tests on an unmutated copy of each module and demands they all pass, so
a kill is the mutation's doing, not the loading's.
"""

from __future__ import annotations

import ast
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import bench.report.decision as real_decision
import bench.report.glance as real_glance
import bench.report.stats as real_stats
from tests.bench import test_decision, test_glance, test_stats

# target name -> (the real module, the test module whose tests kill its mutants)
TARGETS: dict[str, tuple[types.ModuleType, types.ModuleType]] = {
    "stats": (real_stats, test_stats),
    "decision": (real_decision, test_decision),
    "glance": (real_glance, test_glance),
}
SOURCES = {name: Path(module.__file__ or "").read_text() for name, (module, _) in TARGETS.items()}
SOURCE = SOURCES["stats"]

# The chain tie-ranking the summary once had: best first, each configuration compared only
# with its group's leader, joining the group when not significantly different from it.
CHAIN_RANKS = """
def rank_intervals(samples, higher_is_better=True):
    estimates = {key: estimate(values) for key, values in samples.items()}
    present = [key for key in samples if estimates[key] is not None]
    present.sort(key=lambda k: estimates[k].center, reverse=higher_is_better)
    family = pairwise({k: samples[k] for k in present})
    groups = []
    for key in present:
        if groups and not family[(groups[-1][0], key)].significant:
            groups[-1].append(key)
        else:
            groups.append([key])
    out, start = [], 1
    for group in groups:
        out += [Ranked(k, start, start + len(group) - 1) for k in group]
        start += len(group)
    return out
"""

WELCH_SATTERTHWAITE = """\
    va, vb = la.var(ddof=1) / la.size, lb.var(ddof=1) / lb.size
    df = (va + vb) ** 2 / (va**2 / (la.size - 1) + vb**2 / (lb.size - 1))"""


@dataclass(frozen=True)
class Mutant:
    """One wrong statistic: text replacements (each `old` must occur exactly once) and/or
    whole top-level functions swapped for another definition, with the tests meant to kill
    it, cheapest first: (test function name, the parameters to run it with; {} runs every
    parameter set of its parametrize marks, {"trials": 3} those with trials 3)."""

    name: str
    killers: tuple[tuple[str, dict], ...]
    replace: tuple[tuple[str, str], ...] = ()
    functions: dict[str, str] = field(default_factory=dict)
    target: str = "stats"  # a key of TARGETS


FALSE_POSITIVES = (("test_one_pair_false_positive_rate_is_calibrated_on_both_sides", {}),)
MUTANTS = (
    Mutant(
        "arithmetic-mean-of-a-point",
        (("test_geometric_not_arithmetic_mean", {}),),
        replace=(("center = float(np.exp(logs.mean()))", "center = float(np.mean(present))"),),
    ),
    Mutant(
        "arithmetic-mean-ratio",
        (("test_geometric_not_arithmetic_mean", {}),),
        replace=(
            ("ratio = math.exp(lb.mean() - la.mean())", "ratio = float(np.mean(b) / np.mean(a))"),
        ),
    ),
    Mutant(
        "min-max-interval-of-a-point",
        (
            ("test_interval_is_a_t_interval_not_the_range", {}),
            ("test_interval_of_a_point_covers_the_truth_about_95_percent", {}),
        ),
        replace=(
            (
                "low, high = stats.t.interval(CONFIDENCE, logs.size - 1, loc=logs.mean(), "
                "scale=sem)",
                "low, high = float(logs.min()), float(logs.max())",
            ),
        ),
    ),
    Mutant(
        "min-max-quantile-interval",
        (("test_quantile_interval_from_per_request_latencies", {}),),
        replace=(
            (
                "low = float(interval.low) if np.isfinite(interval.low) else float(array.min())",
                "low = float(array.min())",
            ),
            (
                "high = float(interval.high) if np.isfinite(interval.high) else float(array.max())",
                "high = float(array.max())",
            ),
        ),
    ),
    Mutant(
        "chain-tie-ranking",
        (("test_ranks_are_transitive_where_a_chain_is_not", {}),),
        functions={"rank_intervals": CHAIN_RANKS},
    ),
    Mutant(
        "significant-at-10-percent",
        FALSE_POSITIVES,
        replace=(
            (
                "return self.p is not None and self.p < ALPHA",
                "return self.p is not None and self.p < 2 * ALPHA",
            ),
        ),
    ),
    Mutant(
        "alpha-doubled",
        (*FALSE_POSITIVES, ("test_interval_of_a_point_covers_the_truth_about_95_percent", {})),
        replace=(("ALPHA = 0.05", "ALPHA = 0.10"),),
    ),
    Mutant(
        "welch-satterthwaite-df",
        (
            ("test_power_curve_of_a_30_percent_difference", {}),
            *FALSE_POSITIVES,
        ),
        replace=(("    df = min(la.size, lb.size) - 1", WELCH_SATTERTHWAITE),),
    ),
    Mutant(
        "holm-removed",
        (
            ("test_holm_adjusts_like_the_textbook", {}),
            ("test_a_family_of_13_identical_configurations_splits_at_most_5_percent", {}),
        ),
        replace=(
            (
                "running = max(running, min(1.0, (m - rank) * p))",
                "running = max(running, min(1.0, p))",
            ),
        ),
    ),
    Mutant(
        "pairwise-uncorrected",
        (
            ("test_ranks_are_transitive_where_a_chain_is_not", {}),
            ("test_a_family_of_13_identical_configurations_splits_at_most_5_percent", {}),
        ),
        replace=(
            (
                "return dict(zip(pairs, correct(raw), strict=True))",
                "return dict(zip(pairs, raw, strict=True))",
            ),
        ),
    ),
    Mutant(
        "holm-interval-uncorrected",
        (
            ("test_a_corrected_interval_is_at_its_holm_step_level", {}),
            ("test_a_corrected_interval_excludes_1_exactly_when_holm_says_significant", {}),
        ),
        replace=(
            (
                "level = ALPHA / (family - step[i])",
                "level = ALPHA",
            ),
        ),
    ),
    Mutant(
        "study-family-uncorrected",
        (("test_decide_says_inconclusive_where_the_interval_does_not_decide", {}),),
        replace=(("diff.df, ALPHA / family)", "diff.df, ALPHA)"),),
    ),
    Mutant(
        "iid-bootstrap",
        (
            (
                "test_within_run_interval_is_wider_than_order_statistics_on_autocorrelated_requests",
                {},
            ),
        ),
        replace=(("    block = max(1, min(int(block), n))", "    block = 1"),),
    ),
    Mutant(
        "iid-bootstrap-block-length",
        (("test_within_run_blocks_hold_half_a_second_of_arrivals", {}),),
        replace=(("return max(1, round((rate_rps or 0.0) * BLOCK_S))", "return 1"),),
    ),
)


ZERO_SPREAD_P0 = """\
    if se == 0.0:  # identical trials on both sides (fixtures)
        p0 = 1.0 if ratio == 1.0 else 0.0
        return Difference(ratio, ratio, ratio, p0, p0, 1, 0.0, 1)
"""
ZERO_SPREAD_FIXED = """\
    if se == 0.0:
        # identical trials on both sides: rounded or capped figures (Locust's p99 at 3,000 ms
        # every trial), not an absence of noise; no spread to test against, so untestable
        # (never "significant, p = 0", which no family correction could weaken)
        return Difference(ratio, None, None, None)
"""

MUTANTS += (
    Mutant(
        "holm-interval-at-ratio-level",  # the summary's old rule: α·p_raw/p_adj
        (("test_a_corrected_interval_is_at_its_holm_step_level", {}),),
        replace=(
            ("level = ALPHA / (family - step[i])", "level = min(ALPHA, ALPHA * raws[i] / p_adj)"),
        ),
    ),
    Mutant(
        "zero-spread-significant-p0",
        (("test_identical_quantised_trials_are_untestable_not_proof", {}),),
        replace=((ZERO_SPREAD_FIXED, ZERO_SPREAD_P0),),
    ),
    Mutant(
        "capacity-ratio-bounds-crossed",
        (("test_capacity_ratio_takes_each_interval_s_far_end", {}),),
        replace=(
            (
                "return a.center / b.center, a.low / b.high, a.high / b.low",
                "return a.center / b.center, a.low / b.low, a.high / b.high",
            ),
        ),
    ),
    Mutant(
        "equivalence-margin-10-percent",
        (("test_equal_within_5_percent_means_5_not_10", {}),),
        replace=(("    margin: float = 0.05,\n", "    margin: float = 0.10,\n"),),
    ),
    Mutant(
        "count-shift-family-uncorrected",
        (("test_a_count_shift_is_corrected_for_its_family", {}),),
        replace=(
            (
                "half = float(stats.t.ppf(1 - ALPHA / family / 2, n - 1)) * se",
                "half = float(stats.t.ppf(1 - ALPHA / 2, n - 1)) * se",
            ),
        ),
    ),
    Mutant(
        "capacity-line-next-is-the-last",
        (("test_the_capacity_line_compares_the_best_with_the_next_not_the_last", {}),),
        replace=(("            nxt = found[1]\n", "            nxt = found[-1]\n"),),
        target="glance",
    ),
    Mutant(
        "race-alpha-spending-removed",  # a plain 5 % at every look
        (("test_a_configuration_raced_against_itself_is_separated_in_at_most_5_percent", {}),),
        replace=(
            (
                "return alpha * (MIN_ROUNDS if rounds == MIN_ROUNDS else 1) / total",
                "return alpha",
            ),
        ),
        target="decision",
    ),
    Mutant(
        "race-pairing-removed",  # each round's figure against another round's
        (("test_pairing_removes_the_rounds_shared_effect", {}),),
        replace=(
            (
                "[logs[better][r] - logs[worse][r] for r in common]",
                "[logs[better][r] - logs[worse][s] for r, s in zip(common, common[::-1])]",
            ),
        ),
        target="decision",
    ),
    Mutant(
        "race-holm-removed",  # every pair at its own level, no family correction
        (("test_holm_over_the_pairs_of_a_race", {}),),
        replace=(("        factor = m - rank\n", "        factor = 1\n"),),
        target="decision",
    ),
)


def mutate(mutant: Mutant) -> str:
    """The target module's source with the mutant's replacements applied."""
    source = SOURCES[mutant.target]
    where = f"{mutant.target}.py"
    for old, new in mutant.replace:
        assert source.count(old) == 1, f"{mutant.name}: {old!r} is not in {where} exactly once"
        source = source.replace(old, new)
    if not mutant.functions:
        return source
    tree = ast.parse(source)
    for name, definition in mutant.functions.items():
        spots = [
            i
            for i, node in enumerate(tree.body)
            if isinstance(node, ast.FunctionDef) and node.name == name
        ]
        assert len(spots) == 1, f"{mutant.name}: no single function {name} in {where}"
        tree.body[spots[0]] = ast.parse(definition).body[0]
    return ast.unparse(tree)


def load(name: str, source: str, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The source executed as module `name` (registered only for this test: dataclasses look
    their module up while the classes are made)."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def inject(target: str, module: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point every name the target's test module took from the real module at the copy's."""
    real, tests = TARGETS[target]
    names = [n for n, v in vars(tests).items() if getattr(real, n, None) is v]
    assert names, f"{tests.__name__} imports nothing from {real.__name__}"
    for name in names:
        monkeypatch.setattr(tests, name, getattr(module, name))


def cases(tests: types.ModuleType, test_name: str, only: dict) -> list[dict]:
    """A test's parameter sets from its own parametrize marks (so the bounds stay the test's),
    keeping those that agree with `only`."""
    combos: list[dict] = [{}]
    for mark in getattr(getattr(tests, test_name), "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = [v if len(names) > 1 else (v,) for v in values]
        combos = [{**c, **dict(zip(names, row, strict=True))} for c in combos for row in rows]
    return [c for c in combos if all(c[k] == v for k, v in only.items())]


def failures(
    tests: types.ModuleType, killers: tuple[tuple[str, dict], ...], stop_at_first: bool
) -> list[str]:
    """The killers whose assertions fail (pytest.approx and pytest.raises fail so too); any
    other exception is a broken mutant and propagates."""
    failed = []
    for test_name, only in killers:
        test: Callable[..., None] = getattr(tests, test_name)
        runs = cases(tests, test_name, only)
        assert runs, f"{test_name} has no parameters matching {only}"
        for kwargs in runs:
            try:
                test(**kwargs)
            except (AssertionError, pytest.fail.Exception):
                failed.append(f"{test_name}{kwargs or ''}")
                if stop_at_first:
                    return failed
    return failed


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_of_the_statistics_is_killed(
    mutant: Mutant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some test meant for this kind of mistake fails on the mutant."""
    source = mutate(mutant)
    assert source != SOURCES[mutant.target]
    module = load(f"_{mutant.target}_mutant_{mutant.name.replace('-', '_')}", source, monkeypatch)
    inject(mutant.target, module, monkeypatch)
    start = time.monotonic()
    killed = failures(TARGETS[mutant.target][1], mutant.killers, stop_at_first=True)
    names = [name for name, _ in mutant.killers]
    assert killed, f"mutant {mutant.name} survived {names}"
    print(f"{mutant.name}: killed by {killed[0]} in {time.monotonic() - start:.1f} s")


@pytest.mark.parametrize("target", list(TARGETS))
def test_the_killers_pass_on_an_unmutated_copy(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: loaded and injected the same way, the real source passes every killer."""
    module = load(f"_{target}_mutant_none", SOURCES[target], monkeypatch)
    inject(target, module, monkeypatch)
    tests = TARGETS[target][1]
    every = {
        (name, tuple(sorted(kwargs.items())))
        for mutant in MUTANTS
        if mutant.target == target
        for name, only in mutant.killers
        for kwargs in cases(tests, name, only)
    }
    assert every, f"no mutant of {target}"
    failed = failures(tests, tuple((name, dict(kwargs)) for name, kwargs in sorted(every)), False)
    assert not failed, f"the unmutated copy of {target} fails {failed}"
