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

Beyond the statistics (ELSEWHERE, at the end): the same check for other modules and the tests
meant for them (the plots read back from their Figure, the docs' figure check, ...): a copy of
the module mutated, the tests' names repointed at it (or, for a check that lives in its test
file, the copy's own tests run), and a control per module.
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
from tests.bench import test_decision, test_glance, test_screen, test_stats

# target name -> (the real module, the test module whose tests kill its mutants); "screen" is
# the decision module again, its screen's mutants killed by tests/bench/test_screen.py
TARGETS: dict[str, tuple[types.ModuleType, types.ModuleType]] = {
    "stats": (real_stats, test_stats),
    "decision": (real_decision, test_decision),
    "glance": (real_glance, test_glance),
    "screen": (real_decision, test_screen),
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
        replace=(
            (
                "    pair, nxt = race.pairs()[0], ranking[1]\n",
                "    pair, nxt = race.pairs()[0], ranking[-1]\n",
            ),
        ),
        target="glance",
    ),
    Mutant(
        "race-alpha-spending-removed",  # a plain 5 % at every look
        (("test_a_configuration_raced_against_itself_is_separated_in_at_most_5_percent", {}),),
        replace=(
            (
                "return alpha * (rounds - before) / points[-1]",
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
                "[logs[better][r] - logs[worse][r] for r in used]",
                "[logs[better][r] - logs[worse][s] for r, s in zip(used, used[::-1])]",
            ),
        ),
        target="decision",
    ),
    Mutant(
        "family-pairing-removed",  # a study check's a against another round's b
        (("test_a_family_question_is_paired_by_round", {}),),
        replace=(
            (
                "values = [math.log(x) - math.log(y) - math.log(q.offset) for x, y in pairs]",
                "values = [math.log(x) - math.log(y) - math.log(q.offset) "
                "for (x, _), (_, y) in zip(pairs, pairs[1:] + pairs[:1])]",
            ),
        ),
        target="decision",
    ),
    Mutant(
        "family-band-as-a-difference",  # a ratio check's "outside" read as "not the published"
        (("test_a_ratio_check_is_equivalent_within_its_band_or_outside_it", {}),),
        replace=(("    if band:\n", "    if False:\n"),),
        target="decision",
    ),
    Mutant(
        "race-holm-removed",  # every pair at its own level, no family correction
        (("test_holm_over_the_pairs_of_a_race", {}),),
        replace=(("        factor = m - rank\n", "        factor = 1\n"),),
        target="decision",
    ),
)

# issue 57: the engine's defects fixed, and the mutants it found surviving
MUTANTS += (
    Mutant(
        "screen-by-conover-alone",  # the pair's own paired test no longer has to agree
        (("test_tied_leaders_in_the_same_order_are_not_screened_for_a_consistent_tail", {}),),
        replace=(
            (
                "    paired = _paired_screen(matrix, best, others)\n",
                "    paired = np.zeros(len(others))\n",
            ),
        ),
        target="screen",
    ),
    Mutant(
        "screen-no-spread-guard-removed",  # a constant ratio's paired test reads p = 0
        (("test_the_same_ratio_every_round_screens_nobody", {}),),
        replace=(
            (
                "    raw = np.where(spread & np.isfinite(raw), raw, 1.0)",
                "    raw = np.where(np.isfinite(raw), raw, 1.0)",
            ),
        ),
        target="screen",
    ),
    Mutant(
        "equivalent-interval-two-sided",  # 1 − α′ shown where TOST decided on 1 − 2α′
        (("test_an_equivalent_pair_shows_the_interval_tost_decided_on", {}),),
        replace=(('        tails = 1 if state == "equivalent" else 2', "        tails = 2"),),
        target="decision",
    ),
    Mutant(
        "pair-interval-normal-quantile",  # z instead of Student's t with df = rounds − 1
        (("test_an_equivalent_pair_shows_the_interval_tost_decided_on", {}),),
        replace=(
            (
                "half = float(stats.t.ppf(1 - level / tails, n - 1)) * test.se",
                "half = float(stats.norm.ppf(1 - level / tails)) * test.se",
            ),
        ),
        target="decision",
    ),
    Mutant(
        "drift-not-checked",  # a trending ratio read as "separated"
        (("test_a_pair_whose_ratio_drifts_is_not_separated", {}),),
        replace=(
            (
                "drifted = test.drift_p is not None and test.drift_p < DRIFT_ALPHA",
                "drifted = False",
            ),
        ),
        target="decision",
    ),
    Mutant(
        "equivalences-chained",  # "a = b = c": a = c never tested
        (("test_the_line_writes_only_the_equivalences_it_tested", {}),),
        replace=(("                if chained:\n", "                if False:\n"),),
        target="decision",
    ),
    Mutant(
        "rounds-to-decide-one-sided",  # the separation test's quantile at 1 − level
        (("test_rounds_to_separate_give_80_percent_power_to_the_two_sided_test", {}),),
        replace=(
            (
                "two = stats.t.ppf(1 - level / 2, df)",
                "two = stats.t.ppf(1 - level, df)",
            ),
        ),
        target="decision",
    ),
    Mutant(
        "rounds-to-decide-without-the-family",  # the rerun's Holm family ignored
        (("test_rounds_to_decide_a_tie_at_the_observed_noise", {}),),
        replace=(
            (
                "level = np.array([spent(k, k, alpha) for k in n]) / max(1, family)",
                "level = np.array([spent(k, k, alpha) for k in n])",
            ),
        ),
        target="decision",
    ),
    Mutant(
        "race-holm-without-running-max",  # a later step may pass after an earlier one failed
        (("test_holm_keeps_its_running_maximum", {}),),
        replace=(
            (
                "p_sep_adj = max(running, min(1.0, factor * scaled_sep[i]))",
                "p_sep_adj = min(1.0, factor * scaled_sep[i])",
            ),
        ),
        target="decision",
    ),
    Mutant(
        "count-test-only-above",  # a's rate below b's never separated
        (("test_a_count_below_its_reference_is_separated_too", {}),),
        replace=(
            (
                "p_two = min(1.0, 2 * min(above, below))",
                "p_two = min(1.0, 2 * above)",
            ),
        ),
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


# -- beyond the statistics ------------------------------------------------------------------
# The same check for the other places issue 36 found unable to fail: each wrong implementation
# below was tried once against the real module and failed the tests named with it.


@dataclass(frozen=True)
class Elsewhere:
    """A wrong implementation of `module` (text replacements, each exactly once) with the test
    functions of `tests` meant to kill it, as for Mutant. When `tests` is `module` itself (a
    check that lives in its test file, as the docs' figure check), the copy's own tests run."""

    name: str
    module: str
    tests: str
    killers: tuple[tuple[str, dict], ...]
    replace: tuple[tuple[str, str], ...]
    # what the tests' autouse fixtures do, done here: (monkeypatch, tmp_path) -> None
    setup: Callable[[pytest.MonkeyPatch, Path], None] | None = None


def _own_state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """test_orchestrator's autouse fixture: run directories and the lock in tmp_path."""
    state = tmp_path / "state"
    state.mkdir(parents=True)
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)


PLOTS, TEST_PLOTS = "bench.report.plots", "tests.bench.test_plots"
SCENARIO_FIGURE = (("test_the_scenario_figure_draws_the_leading_series_with_their_data", {}),)
KNEE_FIGURE = (("test_the_knee_figure_draws_every_step_the_capacity_and_its_interval", {}),)
EXPORT, TEST_EXPORT = "bench.report.export", "tests.bench.test_export"
EXPORT_KILLERS = (("test_the_estimates_and_failures_match_an_independent_computation", {}),)
TEST_GLANCE = "tests.bench.test_glance_capacity"
GLANCE_KILLERS = (
    ("test_two_servers_capacities_compare_by_the_race_on_paired_rounds", {}),
    ("test_a_configuration_is_not_compared_with_its_own_second_search", {}),
)
RECOMMEND, TEST_RECOMMEND = "bench.report.recommend", "tests.bench.test_recommend"
DOCS = "tests.docs.test_docs"
DOCS_KILLERS = (
    ("test_a_figure_needs_its_unit_and_its_words_in_the_generated_text", {}),
    ("test_a_changed_figure_fails_with_an_actionable_line", {}),
)
ELSEWHERE = (
    Elsewhere(
        "plot-axes-without-data",
        PLOTS,
        TEST_PLOTS,
        SCENARIO_FIGURE,
        replace=(
            (
                "    for index, label in enumerate(shown):\n        points = sorted(lines",
                "    for index, label in enumerate(shown[:0]):\n        points = sorted(lines",
            ),
        ),
    ),
    Elsewhere(
        "plot-every-series",
        PLOTS,
        TEST_PLOTS,
        SCENARIO_FIGURE,
        replace=(
            (
                "return sorted(contenders, key=lambda label: (-best[label], label))[:limit]",
                "return sorted(contenders, key=lambda label: (-best[label], label))",
            ),
        ),
    ),
    Elsewhere(
        "plot-baseline-as-a-series",
        PLOTS,
        TEST_PLOTS,
        SCENARIO_FIGURE,
        replace=(
            (
                "contenders = [label for label in lines if not is_baseline(label)]",
                "contenders = list(lines)",
            ),
        ),
    ),
    Elsewhere(
        "plot-intervals-dropped",
        PLOTS,
        TEST_PLOTS,
        SCENARIO_FIGURE,
        replace=(
            (
                "rps_err = _errors(rps, [p[3] if len(p) > 3 else None for p in points])",
                "rps_err = None",
            ),
        ),
    ),
    Elsewhere(
        "plot-req/s-on-the-p99-axes",
        PLOTS,
        TEST_PLOTS,
        SCENARIO_FIGURE,
        replace=(
            (
                "ax_p99.errorbar(conc, p99, yerr=p99_err,",
                "ax_p99.errorbar(conc, rps, yerr=rps_err,",
            ),
        ),
    ),
    Elsewhere(
        "knee-pass-and-miss-swapped",
        PLOTS,
        TEST_PLOTS,
        KNEE_FIGURE,
        replace=(
            (
                'face = look["color"] if passed is not False else "white"',
                'face = "white" if passed is not False else look["color"]',
            ),
        ),
    ),
    Elsewhere(
        "knee-interval-unshaded",
        PLOTS,
        TEST_PLOTS,
        KNEE_FIGURE,
        replace=(("        if knee.interval:\n", "        if knee.interval and False:\n"),),
    ),
    Elsewhere(
        "knee-medians-in-search-order",
        PLOTS,
        TEST_PLOTS,
        KNEE_FIGURE,
        replace=(("    rates = sorted(by_rate)\n", "    rates = list(by_rate)\n"),),
    ),
    Elsewhere(
        "export-arithmetic-mean",
        EXPORT,
        TEST_EXPORT,
        EXPORT_KILLERS,
        replace=(
            (
                '"rps": _round(rps.center if rps else None),',
                '"rps": _round(sum(rps_values(group)) / len(group) if rps else None),',
            ),
        ),
    ),
    Elsewhere(
        "export-min-max-interval",
        EXPORT,
        TEST_EXPORT,
        EXPORT_KILLERS,
        replace=(
            (
                '"p99_ms_low": _round(p99.low if p99 else None),',
                '"p99_ms_low": _round(min(latency_values(group)) if p99 else None),',
            ),
        ),
    ),
    Elsewhere(
        "export-failed-without-non-2xx",
        EXPORT,
        TEST_EXPORT,
        EXPORT_KILLERS,
        replace=(
            (
                '"failed": sum(Outcome.of_record(r).failed for r in group),',
                '"failed": sum(Outcome.of_record(r).socket_errors for r in group),',
            ),
        ),
    ),
    Elsewhere(
        "export-unserved-without-unsent",
        EXPORT,
        TEST_EXPORT,
        EXPORT_KILLERS,
        replace=(
            (
                '"unserved": sum(Outcome.of_record(r).unserved for r in group),',
                '"unserved": sum(Outcome.of_record(r).failed for r in group),',
            ),
        ),
    ),
    Elsewhere(
        "capacity-interval-not-widened-to-its-bracket",
        "bench.report.stats",
        "tests.bench.test_stats",
        (("test_capacity_edges", {}),),
        replace=(
            (
                "        min(low, step_low),\n        max(high, step_high),\n",
                "        low,\n        high,\n",
            ),
        ),
    ),
    Elsewhere(
        "capacity-ratio-ends-crossed",
        "bench.report.stats",
        TEST_GLANCE,
        GLANCE_KILLERS,
        replace=(
            (
                "return a.center / b.center, a.low / b.high, a.high / b.low",
                "return a.center / b.center, a.low / b.low, a.high / b.high",
            ),
        ),
    ),
    Elsewhere(
        "glance-capacity-compared-with-itself",
        "bench.report.glance",
        TEST_GLANCE,
        GLANCE_KILLERS,
        replace=(
            (
                "    pair, nxt = race.pairs()[0], ranking[1]\n",
                "    pair, nxt = race.pairs()[0], ranking[0]\n",
            ),
        ),
    ),
    Elsewhere(
        "glance-capacity-tie-unsaid",
        "bench.report.glance",
        TEST_GLANCE,
        GLANCE_KILLERS,
        replace=(('"undecided": f"undecided ({pair.reason})",', '"undecided": "separated",'),),
    ),
    Elsewhere(
        "recommend-a-leader-at-one-load-only",
        RECOMMEND,
        TEST_RECOMMEND,
        (("test_a_leader_at_one_load_must_hold_rank_1_at_every_other_load", {}),),
        replace=(
            (
                "        if not _beaten(ident, arenas_, caps) and not unmet:\n",
                "        if not unmet:\n",
            ),
        ),
    ),
    Elsewhere(
        "recommend-capacity-overlap-allowed",
        RECOMMEND,
        TEST_RECOMMEND,
        (("test_the_capacity_route_recommends_the_winner_of_the_capacity_race", {}),),
        replace=(("if (e := race.leader())}", "if (e := race.ranking()[0])}"),),
    ),
    Elsewhere(
        "recommend-keepalive-first-brace",
        RECOMMEND,
        TEST_RECOMMEND,
        (("test_the_keepalive_above_the_balancer_comes_from_the_race_study", {}),),
        replace=((r'r"upstream app \{(.*?)\n\}"', r'r"upstream app \{(.*?)\}"'),),
    ),
    Elsewhere(
        "recommend-keepalive-undecided-race",
        RECOMMEND,
        TEST_RECOMMEND,
        (("test_the_keepalive_above_the_balancer_comes_from_the_race_study", {}),),
        replace=(
            (
                "race is not None and race.decided and _clears_balancer(race):",
                "race is not None and race.longer is not None and _clears_balancer(race):",
            ),
        ),
    ),
    Elsewhere(
        "recommend-tune-search-pooled-with-bench",
        RECOMMEND,
        TEST_RECOMMEND,
        (("test_a_make_bench_session_is_preferred_to_make_tunes_search", {}),),
        replace=(("    return bench or runs\n", "    return runs\n"),),
    ),
    Elsewhere(
        "recommend-leader-never-met-others",
        RECOMMEND,
        TEST_RECOMMEND,
        (("test_a_leader_never_measured_beside_another_configuration_is_not_recommended", {}),),
        replace=(("        unmet = _unmet(ident, arenas_, caps)\n", "        unmet = {}\n"),),
    ),
    Elsewhere(
        "recommend-starved-leader",
        RECOMMEND,
        TEST_RECOMMEND,
        (("test_a_starved_leader_is_never_recommended", {}),),
        replace=(
            (
                "return top if top is not None and not starved(self.members[top]) else None",
                "return top",
            ),
        ),
    ),
    Elsewhere(
        "screen-without-the-omnibus-and-holm",
        "bench.report.decision",
        "tests.bench.test_screen",
        (("test_among_equals_the_screen_puts_out_nobody_in_at_least_97_percent", {}),),
        replace=(
            (
                "    if stats.friedmanchisquare(*matrix.T).pvalue >= level:\n        return []\n",
                "",
            ),
            ("    adjusted = holm_adjust(raw)\n", "    adjusted = raw * 0 + raw\n"),
            (
                "    return holm_adjust(raw)\n\n\ndef holm_adjust",
                "    return raw\n\n\ndef holm_adjust",
            ),
        ),
    ),
    Elsewhere(
        "recommend-leading-group-where-nothing-was-separated",
        RECOMMEND,
        TEST_RECOMMEND,
        (("test_a_raced_workload_recommends_its_leading_group_never_a_starved_server", {}),),
        replace=(
            (
                "    if not any(a.separated_some() for a in arenas_):",
                "    if not arenas_:",
            ),
        ),
    ),
    Elsewhere(
        "recommend-one-server-command",
        RECOMMEND,
        TEST_RECOMMEND,
        (("test_a_run_command_always_names_two_servers_or_more", {}),),
        replace=(("        if len(servers) >= 2:\n", "        if len(servers) >= 1:\n"),),
    ),
    Elsewhere(
        "recommend-quota-runs-ranked-as-direct",
        RECOMMEND,
        TEST_RECOMMEND,
        (("test_runs_under_a_cpu_quota_make_their_own_deployment", {}),),
        replace=(
            (
                "    proxy = PROXY_OF[deployment]\n",
                "    if deployment == DIRECT:\n"
                "        return _quota_runs(records, machine, scenarios)\n"
                "    proxy = PROXY_OF[deployment]\n",
            ),
        ),
    ),
    Elsewhere(
        "glance-saturation-per-core-not-per-thread",
        "bench.report.glance",
        TEST_GLANCE,
        (("test_the_load_tool_near_saturation_caveat", {}),),
        replace=(
            (
                '(r.resources or {}).get("load_cpu_pct", 0) / (100 * (r.load_threads or 1))',
                '(r.resources or {}).get("load_cpu_pct", 0) / 100',
            ),
        ),
    ),
    Elsewhere(
        "glance-saturation-never-said",
        "bench.report.glance",
        TEST_GLANCE,
        (("test_the_load_tool_near_saturation_caveat", {}),),
        replace=(("LOAD_SATURATED = 0.9  #", "LOAD_SATURATED = 1.0  #"),),
    ),
    Elsewhere(
        "recorder-zero-requests-ok",
        "bench.harness.recorder",
        "tests.bench.test_orchestrator",
        (("test_a_measured_run_with_no_completed_request_is_recorded_as_failed", {}),),
        replace=(
            (
                "reason = result.empty_reason()",
                "reason = None",
            ),
        ),
        setup=_own_state,
    ),
    Elsewhere(
        "pin-shares-every-cpu",
        "bench.host.placement",
        "tests.bench.test_placement",
        (
            ("test_pin_splits_the_cpus_in_two_disjoint_halves", {}),
            ("test_the_load_tool_runs_on_its_half_and_the_records_say_so", {"pin": True}),
        ),
        replace=(
            (
                "return Placement(True, frozenset(cpus[:half]), frozenset(cpus[half:]))",
                "return Placement(True, frozenset(cpus), frozenset(cpus))",
            ),
        ),
        setup=_own_state,
    ),
    Elsewhere(
        "docs-figure-unit-ignored",
        DOCS,
        DOCS,
        DOCS_KILLERS,
        replace=(
            (
                'pattern = rf"(?<![\\d,.]){re.escape(figure.number)}{spaced}'
                '{re.escape(figure.unit)}(?![\\w/])"',
                'pattern = rf"(?<![\\d,.]){re.escape(figure.number)}(?![\\d,])"',
            ),
        ),
    ),
    Elsewhere(
        "docs-figure-context-ignored",
        DOCS,
        DOCS,
        DOCS_KILLERS,
        replace=(("CONTEXT_WORDS = 2  #", "CONTEXT_WORDS = 0  #"),),
    ),
)


def _call(
    test: Callable[..., None], kwargs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run one test function, giving it the fixtures it names that the killers use."""
    import inspect

    import matplotlib.pyplot as plt

    names = inspect.signature(test).parameters
    figures: list = []
    given = {"drawn": figures, "tmp_path": tmp_path, "monkeypatch": monkeypatch}
    try:
        test(**kwargs, **{name: given[name] for name in names if name not in kwargs})
    finally:
        for fig in figures:
            plt.close(fig)


def _elsewhere_copy(
    mutant: Elsewhere, source: str, monkeypatch: pytest.MonkeyPatch
) -> types.ModuleType:
    """The copy loaded, and the test module that runs against it (the copy itself when the
    check lives in its test file; else the tests with the real module's names repointed)."""
    import importlib

    real = importlib.import_module(mutant.module)
    name = f"_mutant_{mutant.name.replace('-', '_').replace('/', '_')}"
    copy = types.ModuleType(name)
    copy.__file__ = real.__file__  # where the module finds its files (the docs' checkout)
    monkeypatch.setitem(sys.modules, name, copy)
    exec(compile(source, f"<{name}>", "exec"), copy.__dict__)
    if mutant.tests == mutant.module:
        return copy
    tests = importlib.import_module(mutant.tests)
    names = [
        n
        for n, v in vars(tests).items()
        if not isinstance(v, types.ModuleType) and getattr(real, n, None) is v
    ]
    assert names, f"{mutant.tests} imports nothing from {mutant.module}"
    for name in names:
        monkeypatch.setattr(tests, name, getattr(copy, name))
    return tests


def _elsewhere_failures(
    mutant: Elsewhere,
    tests: types.ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stop_at_first: bool,
) -> list[str]:
    failed = []
    for test_name, only in mutant.killers:
        runs = cases(tests, test_name, only)
        assert runs, f"{test_name} has no parameters matching {only}"
        for i, kwargs in enumerate(runs):
            try:
                where = tmp_path / f"{test_name}-{i}"
                _call(getattr(tests, test_name), kwargs, where, monkeypatch)
            except (AssertionError, pytest.fail.Exception):
                failed.append(f"{test_name}{kwargs or ''}")
                if stop_at_first:
                    return failed
    return failed


def _elsewhere_source(mutant: Elsewhere) -> str:
    import importlib

    source = Path(importlib.import_module(mutant.module).__file__ or "").read_text()
    for old, new in mutant.replace:
        assert source.count(old) == 1, f"{mutant.name}: {old!r} is not in {mutant.module} once"
        source = source.replace(old, new)
    return source


@pytest.mark.parametrize("mutant", ELSEWHERE, ids=[m.name for m in ELSEWHERE])
def test_every_mutant_beyond_the_statistics_is_killed(
    mutant: Elsewhere, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Some test meant for this kind of mistake fails on the mutant."""
    if mutant.setup is not None:
        mutant.setup(monkeypatch, tmp_path)
    tests = _elsewhere_copy(mutant, _elsewhere_source(mutant), monkeypatch)
    killed = _elsewhere_failures(mutant, tests, tmp_path, monkeypatch, stop_at_first=True)
    assert killed, f"mutant {mutant.name} survived {[name for name, _ in mutant.killers]}"


@pytest.mark.parametrize(
    ("module", "tests"), sorted({(m.module, m.tests) for m in ELSEWHERE}), ids=lambda s: s
)
def test_the_killers_beyond_the_statistics_pass_on_an_unmutated_copy(
    module: str, tests: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Control: loaded and repointed the same way, the real source passes every killer."""
    import importlib

    mutants = [m for m in ELSEWHERE if (m.module, m.tests) == (module, tests)]
    source = Path(importlib.import_module(module).__file__ or "").read_text()
    every = tuple(dict.fromkeys((n, tuple(o.items())) for m in mutants for n, o in m.killers))
    control = Elsewhere("none", module, tests, tuple((n, dict(o)) for n, o in every), ())
    for setup in {m.setup for m in mutants if m.setup is not None}:
        setup(monkeypatch, tmp_path)
    copy = _elsewhere_copy(control, source, monkeypatch)
    failed = _elsewhere_failures(control, copy, tmp_path, monkeypatch, stop_at_first=False)
    assert not failed, f"the unmutated copy of {module} fails {failed} of {tests}"
