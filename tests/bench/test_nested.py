"""make noise's design (bench/harness/nested.py) in-process, with the fake site and load tool:
the starts in order, each record's place in the design, and the command's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import cli
from bench.core import plan
from bench.harness import nested
from bench.harness.recorder import Recorder
from bench.harness.run import Harness
from bench.host.placement import cpu_placement
from tests.fakes import FakeSite, FakeTool


def _options(results: Path) -> plan.Options:
    return plan.Options(
        servers=("granian",),
        scenarios=("db",),
        concurrency=(50,),
        duration_s=2,
        warmup_s=1,
        trials=1,
        arch="amd64",
        results=results,
        overrides={},
        load_threads=1,
        seed=3,
    )


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run directories and the run lock in a temporary directory."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)


def test_the_design_runs_a_warmup_start_then_each_rounds_starts(tmp_path: Path) -> None:
    """3 rounds × 2 starts × 2 runs: 13 records, one server start per (round, start) plus
    the warm-up start, in order; each run of a start on that start's server (one primer per
    start, a warmup per run), each record marked with the design's id, round and start."""
    site, tool = FakeSite(), FakeTool()

    def harness(first, arms, table, run_dir, progress) -> Harness:
        recorder = Recorder({"hostname": "test"}, cpu_placement(False), tool, progress)
        return Harness(site, tool, recorder, table, run_dir, progress)

    status, noise_id = nested.execute(_options(tmp_path), nested.Design(3, 2, 2), harness=harness)
    records = [json.loads(p.read_text()) for p in (tmp_path / "records").glob("*.json")]
    assert status == 0 and len(records) == 13
    assert site.started == ["granian"] * 7 and len(site.stopped) == 7
    phases = [c.out.name.rsplit(".", 1)[1] for c in tool.calls]
    assert phases.count("primer") == 7 and phases.count("measure") == 13
    marks = sorted(
        (r["metadata"]["noise"]["round"], r["metadata"]["noise"]["start"]) for r in records
    )
    assert marks == [(0, 1)] + [(r, s) for r in (1, 2, 3) for s in (1, 2) for _ in range(2)]
    assert {r["metadata"]["noise"]["id"] for r in records} == {noise_id}
    assert all(
        r["metadata"]["noise"]["design"] == {"rounds": 3, "starts": 2, "runs": 2} for r in records
    )
    assert [r["trial"] for r in records if r["metadata"]["noise"]["warmup"]] == [0]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--server=granian,uvicorn"], "make noise measures one SERVER"),
        (["--server=all"], "make noise measures one SERVER"),
        (["--scenario=db,json"], "make noise measures one SCENARIO"),
        (["--concurrency=10,50"], "make noise measures one CONCURRENCY"),
        (["--rounds=0"], "ROUNDS=0 is out of range"),
        (["--starts=x"], "STARTS='x' is not a whole number"),
        (["--runs=51"], "RUNS=51 is out of range 1..50"),
        (["--trials=auto"], "unrecognized arguments: --trials=auto"),
        (["--target=http://127.0.0.1:9"], "unrecognized arguments: --target"),
    ],
)
def test_bad_input_is_refused_in_one_line(argv: list[str], says: str, capsys) -> None:
    """Exit 2 and one line naming what is valid, before anything starts (make bench's
    options are not make noise's: argparse refuses them)."""
    assert cli.main(["noise", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"RATE": "100"}, "RATE: not with make noise: it measures closed-loop req/s"),
        ({"TARGET": "http://127.0.0.1:9"}, "TARGET: not with make noise"),
        ({"LIFECYCLE": "reload"}, "LIFECYCLE: not with make noise"),
        ({"RECYCLE": "100"}, "RECYCLE: not with make noise"),
        ({"TRIALS": "auto"}, "TRIALS: not with make noise: its runs are ROUNDS x STARTS x RUNS"),
        ({"APP": "app_common/wsgi.py:app"}, "APP: not with make noise"),
        ({"SERVER": "all"}, "make noise measures one SERVER; valid: one of daphne, flask-dev"),
        ({"SERVER": "nginx-static"}, "nothing would run"),
    ],
)
def test_the_precheck_refuses_what_make_noise_does_not_take(
    given: dict[str, str], says: str
) -> None:
    """make bench's variables that make noise would otherwise ignore are refused by its
    declared command rules, in the pre-check (the environment make exports), before set-up;
    tests/bench/test_bad_input.py sends them through a real make."""
    from bench import precheck
    from bench.core.validate import UsageError

    with pytest.raises(UsageError) as caught:
        precheck.check("noise", given, list(given))
    assert says in str(caught.value)


def test_the_noise_options_are_the_run_options_at_make_noises_values() -> None:
    """make noise's Options: one server, /db, c=50, 5 s runs, closed loop, fixed trials, at
    make bench's defaults otherwise; the design 6 × 2 × 3."""
    options, design = cli.noise_options(cli.build_parser().parse_args(["noise", "--runs=4"]))
    assert (options.servers, options.scenarios, options.concurrency) == (
        ("granian",),
        ("db",),
        (50,),
    )
    assert (options.duration_s, options.rates, options.target, options.precision) == (
        5,
        (),
        None,
        None,
    )
    assert design == nested.Design(6, 2, 4)


def test_the_noise_command_has_its_own_defaults() -> None:
    """/db at c=50, 5 s runs, ROUNDS 6 × STARTS 2 × RUNS 3 (bench/core/defaults.py)."""
    from bench.core import defaults

    args = cli.build_parser().parse_args(["noise"])
    assert (args.scenario, args.concurrency, args.duration) == (
        defaults.NOISE_SCENARIO,
        str(defaults.NOISE_CONCURRENCY),
        str(defaults.NOISE_DURATION_S),
    )
    assert (args.rounds, args.starts, args.runs) == ("6", "2", "3")
