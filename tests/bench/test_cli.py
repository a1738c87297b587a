"""Bad input gets one line naming the valid choices and exit status 2, and writes nothing."""

import subprocess
import sys
from pathlib import Path

import pytest

from bench import cli
from bench.registry import ROOT

BAD = [
    (["--server=nope"], "valid: "),
    (["--scenario=teapot"], "valid: plaintext"),
    (["--concurrency=0"], "out of range 1..10000"),
    (["--concurrency=ten"], "not a whole number"),
    (["--concurrency=5,-3"], "out of range"),
    (["--duration=-1"], "out of range 1..3600"),
    (["--duration=99999"], "out of range"),
    (["--trials=0"], "out of range 1..100"),
    (["--workers=abc"], "not a whole number"),
    (["--arch=sparc"], "valid: aarch64, amd64, arm64, x86_64"),
    (["--results=/proc/nope"], "not a writable directory"),
    (["--proxy=haproxy"], "valid: none, nginx"),
    (["--keepalive=maybe"], "valid: on, off"),
    (["--upstream-keepalive=off"], "add PROXY=nginx"),
    (["--proxy=nginx", "--proxy-timeout=0"], "out of range 1..600"),
    (["--pin=2"], "valid: on, off"),
    (["--load=ab"], "valid: wrk, locust"),
    (["--load=locust", "--scenario=plaintext"], "valid with it: saas"),
    (["--scenario=saas"], "cannot run with LOAD=wrk"),
    (["--locust-workers=2"], "needs LOAD=locust"),
    (["--load=locust", "--locust-workers=65"], "out of range 0..64"),
    (["--target=ftp://10.0.0.5:21"], "is not http://host:port"),
    (["--target=http://10.0.0.5"], "is not http://host:port"),
    (["--target=http://127.0.0.1:8000", "--proxy=nginx"], "valid: PROXY=none"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each bad value: exit 2, a single stderr line containing the valid choices or range."""
    results = tmp_path / "results"
    argv = ["run", f"--results={results}", *args]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert message in err
    assert not results.exists(), "nothing written on bad input"


def test_make_bench_with_an_unknown_server_exits_2() -> None:
    """Through make, as a user types it: the one-line error and status 2 reach the shell."""
    result = subprocess.run(
        ["make", "-s", "bench", "SERVER=nope"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "unknown SERVER" in result.stderr and "granian" in result.stderr


def test_valid_lists_are_parsed_and_deduplicated() -> None:
    """Comma lists keep their order and drop repeats; 'all' expands to every server."""
    assert cli.validate_int_list("concurrency", "5,10,5, 30") == (5, 10, 30)
    assert cli.validate_choices("server", "all", ["a", "b"], allow_all=True) == ("a", "b")


def test_python_m_bench_without_a_command_exits_2() -> None:
    """No subcommand is bad input too."""
    result = subprocess.run([sys.executable, "-m", "bench"], cwd=ROOT, capture_output=True)
    assert result.returncode == 2


def test_proxy_and_keepalive_options() -> None:
    """KEEPALIVE sets the upstream side too unless UPSTREAM_KEEPALIVE says otherwise; without
    a proxy there is no upstream side; LOAD=locust defaults to the SaaS mix."""
    parse = cli.build_parser().parse_args
    opts = cli.options_from(parse(["run", "--proxy=nginx", "--keepalive=off"]))
    assert (opts.proxy, opts.keepalive, opts.upstream_keepalive) == ("nginx", False, False)
    opts = cli.options_from(parse(["run", "--proxy=nginx", "--upstream-keepalive=off"]))
    assert (opts.keepalive, opts.upstream_keepalive) == (True, False)
    opts = cli.options_from(parse(["run", "--keepalive=off"]))
    assert (opts.proxy, opts.keepalive, opts.upstream_keepalive) == (None, False, None)
    opts = cli.options_from(parse(["run", "--load=locust", "--locust-workers=2"]))
    assert (opts.scenarios, opts.load_tool, opts.load_workers) == (("saas",), "locust", 2)
    assert "saas" not in cli.options_from(parse(["run", "--scenario=all"])).scenarios


def test_arch_values_and_emulation() -> None:
    """x86_64/aarch64 are normalised; arm64 on an amd64 host is emulated; amd64 on an arm64
    host is refused (not built), naming what is valid."""
    from bench import arch

    assert arch.normalize_arch("x86_64") == "amd64" and arch.normalize_arch("AArch64") == "arm64"
    if arch.host_arch() == "amd64":
        arch.check_emulation_supported("arm64")  # no error: emulated
        assert arch.needs_emulation("arm64") and not arch.needs_emulation("amd64")
    else:
        with pytest.raises(arch.ArchError, match="valid here: arm64"):
            arch.check_emulation_supported("amd64")
