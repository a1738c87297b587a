"""make overhead's arithmetic and input; the measurement itself is a benchmark, not a test."""

from pathlib import Path

import pytest

from bench import cli
from bench.overhead import Cost, observer_pct, summarize


def test_observer_share_is_the_harness_plus_its_childrens_cpu_beyond_bare_wrk() -> None:
    """5 % of a core in the harness, 10 µs more per request than bare wrk at 2,000 req/s
    (2 % of a core): 7 %; children cheaper than bare wrk's count as nothing."""
    bare = Cost(rps=2_100, self_cpu_pct=0.2, children_us_per_request=20)
    assert observer_pct(Cost(2_000, 5.0, 30), bare) == pytest.approx(7.0)
    assert observer_pct(Cost(2_000, 1.0, 15), bare) == pytest.approx(1.0)


def test_summary_gives_each_arm_its_median_ratio_and_range() -> None:
    """Ratios per round to the same round's bare run: medians, min and max per arm."""
    arms = {
        "bare": [Cost(1000, 0.1, 20), Cost(2000, 0.1, 20), Cost(1000, 0.1, 20)],
        "harness": [Cost(950, 1.0, 20), Cost(2000, 1.0, 20), Cost(900, 1.0, 20)],
    }
    bare, harness = summarize("granian", "plaintext", arms)
    assert bare.split()[2:7] == ["bare", "1,000", "1.000", "1.000", "1.000"]
    assert harness.split()[2:7] == ["harness", "950", "0.950", "0.900", "1.000"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rounds=0"], "ROUNDS=0 is out of range 1..100"),
        (["--concurrency=10,50"], "one CONCURRENCY"),
        (["--server=nope"], "unknown SERVER"),
        (["--legacy=maybe"], "valid: on, off"),
        (["--bogus=1"], "unrecognized arguments: --bogus=1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Bad values: exit 2 and one line, before anything starts."""
    assert cli.main(["overhead", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_overhead_is_an_ordinary_command_with_its_own_defaults() -> None:
    """`python -m bench overhead` parses its variables like every command; unset, they are
    make overhead's defaults (bench/core/defaults.py)."""
    from bench.core import defaults

    args = cli.build_parser().parse_args(["overhead", "--duration=3"])
    options, rounds, legacy = cli.overhead_options(args)
    assert options.servers == tuple(defaults.OVERHEAD_SERVERS.split(","))
    assert options.scenarios == tuple(defaults.OVERHEAD_SCENARIOS.split(","))
    assert options.concurrency == (defaults.OVERHEAD_CONCURRENCY,)
    assert (options.duration_s, rounds, legacy) == (3, defaults.OVERHEAD_ROUNDS, False)
