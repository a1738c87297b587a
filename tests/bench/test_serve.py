"""make serve's input: one server started here; anything else is one line and exit 2."""

from pathlib import Path

import pytest

from bench import cli

BAD_SERVE = [
    (["--server=granian,uvicorn"], "make serve starts one server; valid SERVER: "),
    (["--server=all"], "make serve starts one server; valid SERVER: "),
    (["--server=nope"], "unknown SERVER 'nope'; valid: "),
    (["--target=http://10.0.0.5:8000"], "TARGET applies to make bench only"),
    (["--proxy=haproxy"], "valid: none, nginx"),
    (["--workers=0"], "out of range 1..256"),
    (["--upstream-keepalive=off"], "needs PROXY=nginx or alb"),
]


@pytest.mark.parametrize(("args", "message"), BAD_SERVE)
def test_bad_serve_input_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each bad value: exit 2, a single stderr line naming the valid choices, nothing started."""
    results = tmp_path / "results"
    assert cli.main(["serve", f"--results={results}", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not results.exists()


def test_serve_takes_the_run_options() -> None:
    """make serve reads the variables that shape a server as make bench does."""
    args = cli.build_parser().parse_args(
        ["serve", "--server=gunicorn-sync", "--proxy=nginx", "--workers=3", "--keepalive=off"]
    )
    opts = cli.options_from(args)
    cli.check_serve(opts)
    assert opts.servers == ("gunicorn-sync",)
    assert (opts.proxy, opts.overrides, opts.keepalive) == ("nginx", {"workers": 3}, False)
