"""Bad input to the production variables (LIFECYCLE, RECYCLE, SOAK_INTERVAL): one line
naming the valid choices and exit status 2, before anything starts."""

import pytest

from bench import cli


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--lifecycle=restart"], "unknown LIFECYCLE 'restart'; valid: reload"),
        (["run", "--lifecycle=reload"], "LIFECYCLE needs LOAD=oha"),
        (["run", "--recycle=0"], "RECYCLE=0 is out of range 1..10000000"),
        (["run", "--recycle=many"], "RECYCLE='many' is not a whole number"),
        (["capacity", "--lifecycle=reload"], "make capacity searches a steady server's rate"),
        (["soak", "--interval=0"], "SOAK_INTERVAL=0 is out of range 1..600"),
        (["soak", "--duration=10", "--interval=5"], "fewer than 3 samples"),
        (["soak", "--rate=100,200"], "one fixed rate"),
        (
            [
                "run",
                "--load=oha",
                "--rate=100",
                "--lifecycle=reload",
                "--target=http://10.0.0.5:80",
            ],
            "and TARGET= cannot go together",
        ),
    ],
)
def test_bad_production_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each mistake: exit 2, one line on stderr that says what is wrong."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_a_valid_reload_run_is_accepted() -> None:
    """LIFECYCLE=reload with LOAD=oha RATE=: the options carry it."""
    args = cli.build_parser().parse_args(["run", "--load=oha", "--rate=300", "--lifecycle=reload"])
    assert cli.options_from(args).lifecycle == "reload"
