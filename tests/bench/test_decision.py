"""The race's decision engine against simulated races with a known truth.

The races are the engine's own simulation (simulate_race: after each round, judge;
configurations not in `racing` stop running; stop when done or at max_looks), never a copy
of it here (issue 57 item 5). Every name from
bench.report.decision is imported at module level, never inside a test:
tests/bench/test_mutants.py runs these tests with a mutant of the module in their place.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import nct, ttest_1samp
from scipy.stats import t as t_dist

from bench.report.decision import (
    Pair,
    Question,
    Standing,
    judge,
    judge_family,
    look_points,
    margin_deciding,
    rounds_to_decide,
    simulate_race,
    spent,
    stop_command,
    undecided_note,
    within_margin_p,
)

ROUND_SD = 0.05  # a shared per-round effect (the machine's drift between rounds)


def race(
    rng: np.random.Generator,
    truth: dict[str, float],
    sd: float,
    max_looks: int,
    round_sd: float = ROUND_SD,
) -> tuple[Standing, int]:
    """One simulated race by the engine's own simulation (bench.report.decision.simulate_race,
    looked up at call time so a mutant of the module races with its own judge)."""
    return simulate_race(rng, truth, sd, max_looks, round_sd)


def test_a_configuration_raced_against_itself_is_separated_in_at_most_5_percent() -> None:
    """A/A: two copies of one configuration, noise sd 0.025 to 0.2 and a shared round effect,
    a look after every round up to 20: "separated" in at most 5 % of 400 races (judging at a
    plain 5 % after every round separates about a fifth of them)."""
    rng = np.random.default_rng(30)
    sds = (0.025, 0.05, 0.1, 0.2)
    reps = 400
    separated = 0
    for i in range(reps):
        standing, _ = race(rng, {"a": 1000.0, "a-again": 1000.0}, sds[i % len(sds)], 20)
        separated += standing.pairs[0].state == "separated"
    assert separated / reps <= 0.05


def test_four_configurations_are_decided_and_the_tied_pair_is_equivalent() -> None:
    """1.00, 1.00, 0.72, 0.54 at the measured run-to-run noise (sd 0.025, issue 30), a budget
    of 20 looks: decided within 15 looks in at least 90 % of races, the tied pair
    "equivalent" in at least 95 %, and the ranking always agrees with the truth."""
    rng = np.random.default_rng(31)
    truth = {"granian": 1000.0, "uwsgi": 1000.0, "uvicorn": 720.0, "gunicorn-sync": 540.0}
    reps = 100
    quick = equivalent = 0
    for _ in range(reps):
        standing, looks = race(rng, truth, 0.025, 20)
        quick += standing.done and looks <= 15
        equivalent += standing.pairs[0].state == "equivalent"
        assert set(standing.ranking[:2]) == {"granian", "uwsgi"}
        assert standing.ranking[2:] == ("uvicorn", "gunicorn-sync")
        for pair in standing.pairs[1:]:
            assert pair.state in ("separated", "undecided")
    assert quick / reps >= 0.90
    assert equivalent / reps >= 0.95


def test_at_double_the_noise_the_clear_pairs_decide_and_the_tie_is_never_split() -> None:
    """sd 0.05: the clear pairs are separated within 15 looks in at least 95 % of races; a
    tie within ±5 % then needs about 30 paired rounds (the ln ratio's sd, 0.07, is wider
    than the margin), so the tied pair may stay undecided, but is separated in at most 5 %."""
    rng = np.random.default_rng(32)
    truth = {"a": 1000.0, "b": 1000.0, "c": 720.0, "d": 540.0}
    reps = 100
    clear = split = 0
    for _ in range(reps):
        standing, _ = race(rng, truth, 0.05, 15)
        assert set(standing.ranking[:2]) == {"a", "b"} and standing.ranking[2:] == ("c", "d")
        clear += all(p.state == "separated" for p in standing.pairs[1:])
        split += standing.pairs[0].state == "separated"
    assert clear / reps >= 0.95
    assert split / reps <= 0.05


def test_pairing_removes_the_rounds_shared_effect() -> None:
    """A 10 % difference under a round effect of sd 0.3 and run noise of 0.01: the paired
    ln ratios see only the run noise and separate the pair within 8 rounds (unpaired, the
    round effect is noise and nothing is decided)."""
    rng = np.random.default_rng(33)
    figures: dict[str, dict[int, float]] = {"fast": {}, "slow": {}}
    for r in range(1, 9):
        shared = rng.normal(0.0, 0.3)
        figures["fast"][r] = 1100.0 * math.exp(shared + rng.normal(0.0, 0.01))
        figures["slow"][r] = 1000.0 * math.exp(shared + rng.normal(0.0, 0.01))
    standing = judge(figures, look=8, max_looks=20)
    (pair,) = standing.pairs
    assert (pair.better, pair.worse, pair.state) == ("fast", "slow", "separated")
    assert pair.ratio == pytest.approx(1.1, abs=0.02)
    assert pair.low is not None and pair.high is not None and 1.0 < pair.low < pair.high < 1.2


def test_a_configuration_that_left_is_paired_on_the_common_rounds() -> None:
    """c ran rounds 1–4 and left; a and b ran 1–10: judge() pairs b and c on rounds 1–4 only
    (a look point), a and b on 1–9 (10 is between the looks at 9 and 12), and the decision of
    a frozen pair does not change at later looks."""
    rng = np.random.default_rng(34)
    figures: dict[str, dict[int, float]] = {"a": {}, "b": {}, "c": {}}
    for r in range(1, 11):
        shared = rng.normal(0.0, 0.05)
        figures["a"][r] = 2000.0 * math.exp(shared + rng.normal(0.0, 0.02))
        figures["b"][r] = 1000.0 * math.exp(shared + rng.normal(0.0, 0.02))
        if r <= 4:
            figures["c"][r] = 500.0 * math.exp(shared + rng.normal(0.0, 0.02))
    standing = judge(figures, look=10, max_looks=20)
    assert standing.ranking == ("a", "b", "c")
    assert [p.rounds for p in standing.pairs] == [9, 4]
    assert [p.state for p in standing.pairs] == ["separated", "separated"]
    assert standing.done and not standing.racing
    # the same data at a later look: a pair's level depends on its rounds, not the look
    later = judge(figures, look=15, max_looks=20)
    assert [p.state for p in later.pairs] == [p.state for p in standing.pairs]
    assert [p.level for p in later.pairs] == [p.level for p in standing.pairs]


def test_failed_configurations_rank_last_and_their_pair_waits_on_them() -> None:
    """A configuration whose runs all failed (None or 0 req/s) ranks last; its pair stays
    undecided with the reason, and only it keeps racing."""
    figures = {
        "ok": {1: 1000.0, 2: 1010.0, 3: 990.0, 4: 1005.0},
        "broken": {1: None, 2: 0.0, 3: None, 4: None},
        "slow": {1: 500.0, 2: 505.0, 3: 498.0, 4: 502.0},
    }
    standing = judge(figures, look=4, max_looks=10)  # type: ignore[arg-type]
    assert standing.ranking == ("ok", "slow", "broken")
    last = standing.pairs[-1]
    assert last.state == "undecided" and last.p is None and "failed" in last.reason
    assert standing.racing == frozenset({"broken"}) and not standing.done
    assert standing.line() == "ok > slow ? broken"


def test_no_decision_before_3_paired_rounds() -> None:
    figures = {"a": {1: 2000.0, 2: 2001.0}, "b": {1: 1000.0, 2: 1001.0}}
    (pair,) = judge(figures, look=2, max_looks=10).pairs
    assert pair.state == "undecided" and pair.p is None and "3 needed" in pair.reason


def test_identical_ratios_every_round_are_not_proof() -> None:
    """Quantised figures with the same ratio every round (p99 of 3,000 and 3,100 ms): no
    spread to test, undecided with p None, never "separated, p = 0"."""
    figures = {"a": dict.fromkeys(range(1, 9), 3000.0), "b": dict.fromkeys(range(1, 9), 3100.0)}
    standing = judge(figures, look=8, max_looks=10, higher_is_better=False)
    (pair,) = standing.pairs
    assert (pair.better, pair.worse) == ("a", "b")
    assert pair.state == "undecided" and pair.p is None and "spread" in pair.reason


def test_lower_is_better_ranks_the_lowest_p99_first() -> None:
    figures = {
        "slow": {1: 20.0, 2: 21.0, 3: 19.5, 4: 20.5, 5: 20.2},
        "fast": {1: 10.0, 2: 10.4, 3: 9.9, 4: 10.1, 5: 10.2},
    }
    standing = judge(figures, look=5, max_looks=10, higher_is_better=False)
    assert standing.ranking == ("fast", "slow")
    (pair,) = standing.pairs
    assert pair.state == "separated" and pair.ratio == pytest.approx(0.5, abs=0.02)


def test_the_line_names_each_pair_as_decided() -> None:
    """ "=" with the margin for equivalent, ">" for separated, "?" for undecided."""
    rng = np.random.default_rng(35)
    levels = {"granian": 1000.0, "uwsgi": 1000.0, "uvicorn": 720.0, "gunicorn-sync": 700.0}
    figures: dict[str, dict[int, float]] = {c: {} for c in levels}
    for r in range(1, 21):
        for config, level in levels.items():
            noise = 0.004 if config in ("granian", "uwsgi") else 0.1
            figures[config][r] = level * math.exp(rng.normal(0.0, noise))
    standing = judge(figures, look=20, max_looks=20)
    assert [p.state for p in standing.pairs] == ["equivalent", "separated", "undecided"]
    assert standing.line().endswith("(±5 %) > uvicorn ? gunicorn-sync")
    assert standing.line().split(" = ")[0] in ("granian", "uwsgi")
    assert standing.racing == frozenset({"uvicorn", "gunicorn-sync"})
    equivalent = standing.pairs[0]
    assert equivalent.p_equivalent is not None and equivalent.p_equivalent < 0.05
    assert equivalent.low is not None and equivalent.low <= 1.0 <= equivalent.high  # type: ignore[operator]


def test_spending_sums_to_alpha_over_the_budget() -> None:
    """Linear spending over a schedule of looks: a look at 3, 4, 5, 7, 9, 12, 15, 19 and the
    budget's 20 paired rounds, each at α·(its rounds − the last look's)/N; nothing between
    looks, before 3 or past the budget; they sum to alpha."""
    assert look_points(20) == (3, 4, 5, 7, 9, 12, 15, 19, 20)
    levels = {n: spent(n, 20) for n in range(1, 22)}
    assert levels[3] == pytest.approx(3 * 0.05 / 20)
    assert levels[7] == pytest.approx(2 * 0.05 / 20)
    assert levels[19] == pytest.approx(4 * 0.05 / 20)
    assert levels[20] == pytest.approx(1 * 0.05 / 20)
    assert [n for n, level in levels.items() if level == 0.0] == [
        1,
        2,
        6,
        8,
        10,
        11,
        13,
        14,
        16,
        17,
        18,
        21,
    ]
    assert sum(levels.values()) == pytest.approx(0.05)


def test_between_looks_a_pair_keeps_its_last_looks_test() -> None:
    """At 8 paired rounds the pair is judged on its first 7 (the look at 7): an 8th round
    that reverses the pair changes nothing until the look at 9."""
    rng = np.random.default_rng(7)
    a = {r: 1000 * math.exp(rng.normal(0.0, 0.05)) for r in range(1, 10)}
    b = {r: v * 0.8 * math.exp(rng.normal(0.0, 0.03)) for r, v in a.items()}

    def upto(last: int) -> dict[str, dict[int, float]]:
        return {
            "a": {r: v for r, v in a.items() if r <= last},
            "b": {r: v for r, v in b.items() if r <= last},
        }

    at7 = judge(upto(7), look=7, max_looks=20)
    b[8] = a[8] * 1.3  # b ahead in round 8 alone
    at8 = judge(upto(8), look=8, max_looks=20)
    assert at8.ranking == at7.ranking == ("a", "b")
    assert at8.pairs[0].rounds == 7 and at8.pairs[0].p == at7.pairs[0].p
    assert at8.pairs[0].ratio == pytest.approx(at7.pairs[0].ratio)
    at9 = judge(upto(9), look=9, max_looks=20)
    assert at9.pairs[0].rounds == 9 and at9.pairs[0].ratio < at7.pairs[0].ratio


def test_bad_looks_are_refused() -> None:
    with pytest.raises(ValueError, match=r"1\.\.max_looks"):
        judge({"a": {1: 1.0}}, look=11, max_looks=10)


def test_holm_over_the_pairs_of_a_race() -> None:
    """Three configurations, 10 rounds of 10: b against c 10 % apart with a paired t of
    about 3.9 (p ≈ 0.0035, scaled by the spending to about 0.035: alone it would be
    separated); a against b a noisy tie. Holm over the two pairs tests b/c first at α/2: its
    adjusted p is twice the scaled one (computed here with scipy's one-sample t-test), and
    the pair stays undecided."""
    pattern = np.array([-1.5, -1.1, -0.7, -0.4, -0.1, 0.1, 0.4, 0.7, 1.1, 1.5])
    z = (pattern - pattern.mean()) / pattern.std(ddof=1)
    z_other = np.roll(z, 3)
    rounds = range(1, 11)
    figures = {
        "a": {r: 1000 * math.exp(0.01 + 0.3 * z_other[r - 1]) for r in rounds},
        "b": dict.fromkeys(rounds, 1000.0),
        "c": {r: 1000 * math.exp(-(0.1 + 0.08 * z[r - 1])) for r in rounds},
    }
    standing = judge(figures, look=10, max_looks=10)
    assert standing.ranking == ("a", "b", "c")
    tie, marginal = standing.pairs
    p_raw = float(ttest_1samp(0.1 + 0.08 * z, 0.0).pvalue)
    scaled = p_raw * 0.05 / spent(10, 10)
    assert scaled < 0.05 < 2 * scaled  # the premise: separated alone, not in a family of 2
    assert marginal.p == pytest.approx(2 * scaled)
    assert marginal.state == "undecided" and tie.state == "undecided"
    assert standing.line() == "a ? b ? c"


def test_rounds_to_decide_a_tie_at_the_observed_noise() -> None:
    """A tie (ratio 1.00) whose ln ratios vary by 0.0707 (sd 0.05 per configuration): the
    first n at which TOST at the last look's level of a budget of n rounds (α times that
    look's share of the n rounds) has 80 % power, 2·P(T' > t(1 − level)) − 1 with T' the
    noncentral t of ln 1.05 / (sd/√n) (not the 50 % of a plug-in: 15 rounds); a rerun of a
    family of 3 pairs tests at a third of the level (Holm's first step) and needs more; at
    half the noise far fewer; a decided pair needs none."""
    tie = Pair("a", "b", 1.0, None, None, "undecided", 5, None, sd=0.0707)
    n = rounds_to_decide(tie)
    assert n is not None

    def power(k: int, family: int = 1) -> float:
        points = look_points(k)
        level = 0.05 * (points[-1] - points[-2]) / k / family
        shift = math.log(1.05) / (0.0707 / math.sqrt(k))
        return 2 * float(nct.sf(t_dist.ppf(1 - level, k - 1), k - 1, shift)) - 1

    assert power(n) >= 0.8 and not any(power(k) >= 0.8 for k in range(5, n))
    assert n == 34
    wider = rounds_to_decide(tie, family=3)
    assert wider is not None and wider > n and power(wider, 3) >= 0.8 > power(wider - 1, 3)
    quieter = rounds_to_decide(Pair("a", "b", 1.0, None, None, "undecided", 5, None, sd=0.035))
    assert quieter is not None and quieter < n / 2
    decided = Pair("a", "b", 1.3, 1.2, 1.4, "separated", 5, 0.001, sd=0.05)
    assert rounds_to_decide(decided) is None


def test_rounds_to_separate_give_80_percent_power_to_the_two_sided_test() -> None:
    """A 12 % difference varying by 0.2 (too far from ±5 % to be called equivalent): the
    first n whose two-sided paired t-test at the last look's level has 80 % power against a
    noncentral t (a one-sided quantile would promise it sooner)."""
    pair = Pair("a", "b", 1.12, None, None, "undecided", 5, None, sd=0.2)
    n = rounds_to_decide(pair)
    assert n is not None

    def power(k: int) -> float:
        points = look_points(k)
        level = 0.05 * (points[-1] - points[-2]) / k
        crit = t_dist.ppf(1 - level / 2, k - 1)
        shift = math.log(1.12) / (0.2 / math.sqrt(k))
        return float(nct.sf(crit, k - 1, shift) + nct.cdf(-crit, k - 1, shift))

    assert power(n) >= 0.8 and not any(power(k) >= 0.8 for k in range(5, n))


def test_stop_command_names_what_is_left_and_its_budget() -> None:
    """The race of test_the_line_names_each_pair_as_decided leaves uvicorn ? gunicorn-sync:
    the command races those two with a budget of the rounds that pair needs."""
    rng = np.random.default_rng(35)
    levels = {"granian": 1000.0, "uwsgi": 1000.0, "uvicorn": 720.0, "gunicorn-sync": 700.0}
    figures: dict[str, dict[int, float]] = {c: {} for c in levels}
    for r in range(1, 21):
        for config, level in levels.items():
            noise = 0.004 if config in ("granian", "uwsgi") else 0.1
            figures[config][r] = level * math.exp(rng.normal(0.0, noise))
    standing = judge(figures, look=20, max_looks=20)
    last = standing.pairs[-1]
    needed = rounds_to_decide(last)
    assert needed is not None and needed > last.rounds
    command = stop_command(standing, "make bench SCENARIO=db", minutes_per_round=0.5)
    budget = math.ceil(needed * 0.5)
    assert command == (
        f"make bench SCENARIO=db SERVER=uvicorn,gunicorn-sync TRIALS=auto BUDGET={budget}"
    )
    done = judge({"a": figures["granian"], "b": figures["uvicorn"]}, look=20, max_looks=20)
    assert done.done and stop_command(done, "make bench", 0.5) is None


def test_an_undecided_pair_says_what_would_decide_it() -> None:
    """A near tie (1.02×, ln ratios varying by 0.10, 38 paired rounds) is not decided at ±5 %:
    the note gives its interval, the rounds ±5 % would need (rounds_to_decide) and the
    smallest whole-percent MARGIN that would decide it within the rounds run (one percent
    less would not); a decided pair has no note."""
    pair = Pair("uwsgi", "granian", 1.02, 0.97, 1.08, "undecided", 38, 0.3, sd=0.10)
    note = undecided_note(pair)
    assert note is not None
    assert note.startswith("uwsgi/granian 1.02× [0.97–1.08], ln ratios varying by 0.10: ")
    needed = rounds_to_decide(pair)
    assert needed is not None and needed > 38 and f"about {needed} paired rounds" in note
    wider = margin_deciding(pair, 38)
    assert wider is not None and wider > 0.05
    assert rounds_to_decide(pair, wider, most=38) is not None
    assert rounds_to_decide(pair, wider - 0.01, most=38) is None
    assert note.endswith(f"MARGIN={wider * 100:.0f} would decide it within the 38 rounds run")
    decided = Pair("a", "b", 1.3, 1.2, 1.4, "separated", 5, 0.001, sd=0.05)
    assert undecided_note(decided) is None


def test_an_interval_that_bounds_nothing_says_so() -> None:
    """Three rounds at an α spent over many looks gave the shipped reference "a/b 0.23×
    [1.2e-10–443906318.71]": true and unreadable. An interval whose ends are 1,000× apart or
    more is said as "too few rounds to bound it" (a study's check says it the same way:
    tests/bench/test_studyrace.py); a narrower one keeps its figures."""
    wide = Pair("a", "b", 0.23, 1.2e-10, 4.4e8, "undecided", 3, 0.9, sd=2.0, reason="x")
    note = undecided_note(wide)
    assert note is not None and note.startswith("a/b 0.23× (too few rounds to bound it), ")
    assert "e-10" not in note and "443" not in note
    narrow = undecided_note(Pair("a", "b", 0.23, 0.11, 0.48, "undecided", 3, 0.9, sd=2.0))
    assert narrow is not None and narrow.startswith("a/b 0.23× [0.11–0.48], ")


def test_a_family_question_is_paired_by_round() -> None:
    """A study check's question: a 3 % below b under a ±20 % round effect that moves both
    alike, 0.5 % noise: separated on the within-round ratios; each a paired against another
    round's b, the round effect is noise and nothing is decided."""
    effect = [1.0, 1.25, 0.8, 1.15, 0.85, 1.2]
    noise = [0.004, -0.003, 0.005, -0.004, 0.002, -0.005]
    a = [970 * e * math.exp(n) for e, n in zip(effect, noise, strict=True)]
    b = [1000 * e * math.exp(-n) for e, n in zip(effect, noise, strict=True)]
    (pair,) = judge_family([Question("a", "b", dict(enumerate(zip(a, b, strict=True))))])
    assert pair.state == "separated" and pair.high is not None and pair.high < 1
    shifted = dict(enumerate(zip(a, b[1:] + b[:1], strict=True)))
    (unpaired,) = judge_family([Question("a", "b", shifted)])
    assert unpaired.state == "undecided"


def test_a_ratio_check_is_equivalent_within_its_band_or_outside_it() -> None:
    """A ratio check against a published 4.56× within a factor 2: 5.0× is within, and so is
    2.5× (well away from 4.56×, but inside the band: "outside" is past the band's edge, not
    merely different), 1.5× is outside (its interval wholly below 4.56 / 2), and a wide
    spread is neither."""

    def ratio(values: list[float]) -> Pair:
        pairs = {r: (v, 1.0) for r, v in enumerate(values)}
        (pair,) = judge_family([Question("a", "b", pairs, offset=4.56, margin=1.0, band=True)])
        return pair

    assert ratio([5.0, 4.9, 5.1, 5.05]).state == "equivalent"
    assert ratio([2.5, 2.6, 2.4, 2.5]).state == "equivalent"
    outside = ratio([1.5, 1.45, 1.55, 1.5])
    assert outside.state == "separated" and outside.high is not None and outside.high < 2.28
    assert ratio([1.2, 4.0, 2.0, 3.0]).state == "undecided"


def test_a_count_at_most_its_reference_plus_a_margin_is_decided() -> None:
    """Issue 32's reload check: Granian failed 1 request of 18,000 over three reloads,
    Gunicorn sync 0. An exact test of two counts never calls that "at most": it is never
    separated and a count has no ratio margin. With a tolerated difference of rates
    (count_margin 0.001: 0.1 % of the arrivals) the one-sided score test decides it "within
    the margin"; 45 in 18,000 against 0 is separated (above) instead; 0 against 0 with a
    margin is within it; without a margin 1 vs 0 stays undecided."""
    one = {r: (1 if r == 1 else 0, 6000.0, 0, 6000.0) for r in (1, 2, 3)}
    many = {r: (15, 6000.0, 0, 6000.0) for r in (1, 2, 3)}
    none = {r: (0, 6000.0, 0, 6000.0) for r in (1, 2, 3)}
    margin = 0.001
    judged = judge_family(
        [
            Question("granian", "sync", counts=one, count_margin=margin),
            Question("uwsgi", "sync", counts=many, count_margin=margin),
            Question("gevent", "sync", counts=none, count_margin=margin),
            Question("granian", "sync", counts=one),
        ]
    )
    assert [p.state for p in judged] == ["equivalent", "separated", "equivalent", "undecided"]
    assert judged[1].ratio == math.inf and judged[3].reason == "not separated yet"
    assert judged[0].p_equivalent is not None and judged[0].p_equivalent < 0.05
    # the test itself: small where a is clearly within b + margin, ~1 where it is past it
    assert within_margin_p((1, 18000), (0, 18000), margin) < 1e-3
    assert within_margin_p((45, 18000), (0, 18000), margin) > 0.99
    assert 0.05 < within_margin_p((15, 6000), (15, 6000), margin) < 0.5


def test_an_equivalent_pair_shows_the_interval_tost_decided_on() -> None:
    """TOST at level α′ is the 1 − 2α′ interval inside ±margin: an equivalent pair carries
    that interval (mean ± t(1 − α′)·se, widened to reach 1.00×), wholly inside ±5 %, and says
    its level; a separated pair keeps the two-sided 1 − α′ one."""
    noise = np.array([0.004, -0.006, 0.002, 0.007, -0.003, -0.005, 0.006, -0.002, 0.001, -0.004])
    figures = {
        "a": {r: 1000.0 * math.exp(0.002 + n) for r, n in enumerate(noise, 1)},
        "b": {r: 1000.0 for r in range(1, 11)},
    }
    (pair,) = judge(figures, look=10, max_looks=10).pairs
    assert pair.state == "equivalent" and pair.level is not None
    diffs = 0.002 + noise
    half = t_dist.ppf(1 - pair.level, 9) * diffs.std(ddof=1) / math.sqrt(10)
    assert pair.low == pytest.approx(min(1.0, math.exp(diffs.mean() - half)))
    assert pair.high == pytest.approx(math.exp(diffs.mean() + half))
    assert pair.low > 1 / 1.05 and pair.high < 1.05  # type: ignore[operator]
    assert pair.confidence == pytest.approx(1 - 2 * pair.level)
    assert pair.level_text() == f"{100 * (1 - 2 * pair.level):.3g} % interval"
    apart = {"a": {r: v * 1.5 for r, v in figures["a"].items()}, "b": figures["b"]}
    (separated,) = judge(apart, look=10, max_looks=10).pairs
    assert separated.state == "separated" and separated.level is not None
    half = t_dist.ppf(1 - separated.level / 2, 9) * diffs.std(ddof=1) / math.sqrt(10)
    assert separated.low == pytest.approx(1.5 * math.exp(diffs.mean() - half))
    assert separated.confidence == pytest.approx(1 - separated.level)


def test_a_pair_whose_ratio_drifts_is_not_separated() -> None:
    """Two configurations alike but b slowing 3 % over 20 rounds (0.15 % a round, noise
    ±0.2 %): the mean ln ratio (1.6 %) is far from 0 by its paired t-test, but the ratio trends
    with the round (OLS slope on round order), so the pair stays undecided, "drifted"; the
    same ratios in shuffled order (no trend) are separated."""
    wobble = np.array([0.002, -0.002] * 10)
    diffs = 0.0015 * np.arange(1, 21) + wobble
    figures = {
        "a": {r: 1000.0 for r in range(1, 21)},
        "b": {r: 1000.0 * math.exp(-d) for r, d in enumerate(diffs, 1)},
    }
    (pair,) = judge(figures, look=20, max_looks=20).pairs
    assert (pair.better, pair.state) == ("a", "undecided")
    assert pair.reason.startswith("drifted") and pair.p is not None and pair.p < 0.05
    order = np.random.default_rng(5).permutation(20)
    shuffled = {
        "a": figures["a"],
        "b": {r: 1000.0 * math.exp(-diffs[order[r - 1]]) for r in range(1, 21)},
    }
    (steady,) = judge(shuffled, look=20, max_looks=20).pairs
    assert steady.state == "separated"


def test_the_line_writes_only_the_equivalences_it_tested() -> None:
    """a = b and b = c were tested, a against c never: the line writes each tested pair
    ("a = b (±5 %); b = c (±5 %) > d"), never the chain "a = b = c", which claims a = c."""

    def pair(better: str, worse: str, state: str) -> Pair:
        return Pair(better, worse, 1.0, 0.98, 1.02, state, 10, 0.5)  # type: ignore[arg-type]

    pairs = (
        pair("a", "b", "equivalent"),
        pair("b", "c", "equivalent"),
        pair("c", "d", "separated"),
    )
    standing = Standing(("a", "b", "c", "d"), pairs, frozenset(), True)
    assert standing.line() == "a = b (±5 %); b = c (±5 %) > d"
    three = (*pairs[:2], pair("c", "d", "equivalent"))
    assert Standing(("a", "b", "c", "d"), three, frozenset(), True).line() == (
        "a = b (±5 %); b = c (±5 %); c = d (±5 %)"
    )
    one = (pair("a", "b", "equivalent"), pair("b", "c", "undecided"))
    assert Standing(("a", "b", "c"), one, frozenset({"b", "c"}), False).line() == (
        "a = b (±5 %) ? c"
    )


def _question(t_value: float, sd: float = 0.1, n: int = 10) -> Question:
    """A ratio question whose paired ln ratios have exactly this t statistic and sd."""
    pattern = np.array([-1.5, -1.1, -0.7, -0.4, -0.1, 0.1, 0.4, 0.7, 1.1, 1.5])[:n]
    z = (pattern - pattern.mean()) / pattern.std(ddof=1)
    diffs = t_value * sd / math.sqrt(n) + sd * z
    return Question("a", "b", {r: (math.exp(d), 1.0) for r, d in enumerate(diffs, 1)})


def test_holm_keeps_its_running_maximum() -> None:
    """Two questions at raw p 0.03 and 0.045 (paired t, 10 rounds, far from ±5 %): Holm tests
    the first at α/2 (adjusted 0.06: not separated) and stops there; the second's adjusted p
    is the running maximum 0.06, never its own 0.045, so neither is separated."""
    first = _question(float(t_dist.isf(0.015, 9)))
    second = _question(float(t_dist.isf(0.0225, 9)))
    judged = judge_family([first, second])
    assert [p.p for p in judged] == [pytest.approx(0.06), pytest.approx(0.06)]
    assert [p.state for p in judged] == ["undecided", "undecided"]


def test_a_count_below_its_reference_is_separated_too() -> None:
    """A count test is two-sided: 0 failures in 18,000 against 45 is separated (below), as 45
    against 0 is (above)."""
    below = {r: (0, 6000.0, 15, 6000.0) for r in (1, 2, 3)}
    above = {r: (15, 6000.0, 0, 6000.0) for r in (1, 2, 3)}
    judged = judge_family([Question("a", "b", counts=below), Question("a", "b", counts=above)])
    assert [p.state for p in judged] == ["separated", "separated"]
    assert judged[0].ratio == 0.0
