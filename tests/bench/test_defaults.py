"""Every shared default has one definition (bench/core/defaults.py) that the rest agrees with."""

import subprocess
from pathlib import Path

from bench import cli, load
from bench.core import defaults
from bench.core.registry import ROOT


def test_make_bench_without_variables_gets_the_defaults() -> None:
    """`python -m bench run` with nothing set: the options carry bench/core/defaults.py's values."""
    opts = cli.options_from(cli.build_parser().parse_args(["run"]))
    assert opts.servers == (defaults.SERVER,)
    assert opts.scenarios == defaults.SCENARIOS
    assert opts.concurrency == defaults.CONCURRENCY
    assert (opts.duration_s, opts.warmup_s, opts.trials) == (
        defaults.DURATION_S,
        defaults.WARMUP_S,
        defaults.TRIALS,
    )
    assert opts.results == Path(defaults.RESULTS).absolute()
    assert (opts.proxy, opts.keepalive, opts.proxy_timeout_s, opts.pin) == (
        None,
        defaults.KEEPALIVE,
        defaults.PROXY_TIMEOUT_S,
        defaults.PIN,
    )
    assert (opts.load_tool, opts.load_workers, opts.mode.runtime) == (
        load.default_name(),
        defaults.LOCUST_WORKERS,
        defaults.RUNTIME,
    )
    locust = cli.options_from(cli.build_parser().parse_args(["run", "--load=locust"]))
    # no default scenario is Locust's: it runs every scenario it can drive, the mix
    assert locust.scenarios == ("saas",)


def test_make_help_states_the_defaults() -> None:
    """What `make help` tells users is what they get."""
    text = subprocess.run(
        ["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    stated = {
        "SERVER": defaults.SERVER,
        "CONCURRENCY": ",".join(map(str, defaults.CONCURRENCY)),
        "DURATION": defaults.DURATION_S,
        "WARMUP": defaults.WARMUP_S,
        "TRIALS": defaults.TRIALS,
        "RESULTS": defaults.RESULTS,
        "PROXY": defaults.PROXY,
        "KEEPALIVE": "on" if defaults.KEEPALIVE else "off",
        "PROXY_TIMEOUT": defaults.PROXY_TIMEOUT_S,
        "PIN": int(defaults.PIN),
        "LOAD": load.default_name(),
        "LOCUST_WORKERS": defaults.LOCUST_WORKERS,
        "SOAK_INTERVAL": defaults.SOAK_INTERVAL_S,
        "CPU_QUOTA": "none",
        "LIFECYCLE": "none",
        "RECYCLE": "none",
    }
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}
    for name, value in stated.items():
        assert f"(default: {value}" in lines[name], lines[name]
    assert f"(default: {','.join(defaults.SCENARIOS)})" in text


def test_make_soak_without_variables_gets_the_soak_defaults() -> None:
    """`python -m bench soak`: oha at SOAK_RATE on SOAK_SCENARIO for SOAK_DURATION_S, RSS
    every SOAK_INTERVAL_S."""
    args = cli.build_parser().parse_args(["soak"])
    opts = cli.with_soak(cli.options_from(args), args.interval)
    assert (opts.load_tool, opts.rates, opts.scenarios) == (
        "oha",
        (defaults.SOAK_RATE,),
        (defaults.SOAK_SCENARIO,),
    )
    assert (opts.duration_s, opts.warmup_s, opts.trials) == (
        defaults.SOAK_DURATION_S,
        defaults.SOAK_WARMUP_S,
        1,
    )
    assert opts.mode.soak_interval_s == defaults.SOAK_INTERVAL_S
