"""bench/precheck.py: bad input refused before anything is installed, with the standard
library alone (python -S: no site-packages, as on a fresh clone before `make setup`)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _precheck(command: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in variables} | variables
    return subprocess.run(
        [sys.executable, "-S", "-m", "bench.precheck", command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    ("command", "variables", "message"),
    [
        ("capacity", {"SLO_P99_MS": "abc"}, "SLO_P99_MS='abc' is not a whole number"),
        ("run", {"SCENARIO": "nosuch", "ARCH": "arm64"}, "valid: plaintext"),
        ("run", {"SERVER": "granian,nope"}, "valid: daphne, flask-dev"),
        ("run", {"CONCURRENCY": "10,0"}, "CONCURRENCY=0 is out of range"),
        ("run", {"ARCH": "sparc"}, "unknown ARCH"),
        ("run", {"KEEPALIVE": "maybe"}, "valid: on, off"),
        ("run", {"CPU_QUOTA": "lots"}, "CPU_QUOTA='lots'"),
        ("run", {"TARGET": "ftp://x"}, "TARGET="),
        ("run", {"RUNTIME": "foo"}, "valid: native, docker"),
        ("run", {"RUNTIME": "compose"}, "valid: native, docker"),
        ("run", {"LOAD": "nosuchtool"}, "unknown LOAD 'nosuchtool'; valid: "),
        ("serve", {"RUNTIME": "docker", "CPUS": "abc"}, "CPUS='abc' is not a number of CPUs"),
        ("run", {"RUNTIME": "docker", "MEMORY": "12q"}, "MEMORY='12q' is not a size"),
        (
            "run",
            {"RUNTIME": "docker", "NETWORK": "nat"},
            "unknown NETWORK 'nat'; valid: host, bridge",
        ),
        ("serve", {"NETWORK": "BOGUS"}, "valid: host, bridge"),
        ("images", {"SERVER": "nope"}, "valid: daphne, flask-dev"),
        ("study", {"NAME": "nope"}, "valid: accept-queue"),
        (
            "study",
            {"NAME": "lb-keepalive-race", "ARMS": "gevent-fix,nope"},
            "unknown ARMS 'nope'; valid: gthread-default",
        ),
        ("run", {"TRIALS": "many"}, "TRIALS='many' is not a whole number (1..100) or auto"),
        ("run", {"TRIALS": "5", "BUDGET": "3"}, "BUDGET needs TRIALS=auto"),
        ("run", {"TRIALS": "auto", "BUDGET": "0"}, "BUDGET=0 is out of range 1..1440"),
        ("report", {"RESULTS": "/nonexistent/deeper"}, "does not exist"),
        ("compare", {"BASE": "results/reference", "HEAD": "results/reference"}, "same directory"),
        ("compare", {"BASE": "/nonexistent", "HEAD": "results/reference"}, "holds no records"),
        ("compare", {"BASE": "results/reference"}, "HEAD is required"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_without_site_packages(
    command: str, variables: dict[str, str], message: str
) -> None:
    """Each bad value: exit status 2 and one line naming the problem, with no third-party
    package importable (nothing is installed yet on a fresh clone)."""
    result = _precheck(command, **variables)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr


@pytest.mark.parametrize("reference", ["", "1"])
def test_report_on_a_fresh_clone_is_refused_before_setup(tmp_path: Path, reference: str) -> None:
    """RESULTS holding only the shipped reference (a fresh clone's results/): make report says
    nothing was measured yet and where the reference is, exit 2, before set-up; REFERENCE=1
    reports the reference, so it passes."""
    results = tmp_path / "results"
    # a real record: one that does not parse is refused too (issue 58 item 6)
    record = next((ROOT / "results" / "reference" / "records").glob("*.json")).read_text()
    (results / "reference" / "records").mkdir(parents=True)
    (results / "reference" / "records" / "r.json").write_text(record)
    (results / "raw").mkdir()
    (results / "raw" / "oha.json").write_text("{}")  # raw tool output is not a record
    given = {"REFERENCE": reference} if reference else {}  # unset, as make leaves it
    result = _precheck("report", RESULTS=str(results), **given)
    if reference:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 2
    assert result.stderr == (
        f"bench: nothing measured yet: RESULTS={str(results)!r} holds no records (make bench "
        "writes them); the shipped reference run is results/reference/summary.md (REFERENCE=1 "
        "merges it into yours)\n"
    )
    (results / "records").mkdir()
    (results / "records" / "mine.json").write_text(record)
    assert _precheck("report", RESULTS=str(results), **given).returncode == 0


def test_good_input_passes() -> None:
    """Values the harness accepts pass the pre-check (it checks them again after setup)."""
    result = _precheck(
        "run",
        SERVER="granian,gunicorn-sync",
        SCENARIO="plaintext,db",
        CONCURRENCY="10,50",
        DURATION="3",
        KEEPALIVE="off",
        ARCH="arm64",
        TRIALS="auto",
        BUDGET="5",
    )
    assert result.returncode == 0, result.stderr


def test_arms_of_the_named_study_pass() -> None:
    """ARMS= naming arms of the study NAME names passes the pre-check."""
    result = _precheck("study", NAME="lb-keepalive-race", ARMS="gevent-fix,meinheld-fix")
    assert result.returncode == 0, result.stderr


def test_make_refuses_before_setup() -> None:
    """`make capacity SLO_P99_MS=abc` stops at the pre-check: setup (apt, uv, the oha build)
    never starts."""
    result = subprocess.run(
        ["make", "-s", "capacity", "SLO_P99_MS=abc"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "SLO_P99_MS='abc'" in result.stderr
    assert "setup:" not in result.stderr


def testload_names_read_from_source_are_the_harness_names() -> None:
    """LOAD's names, read from bench/load's source without importing it, are exactly the
    tools the harness offers (a tool added, renamed or made unselectable shows here), with
    the same default and the same open-loop ones."""
    from bench import load, precheck
    from bench.core import variables

    assert precheck.load_names() == sorted(load.names())
    assert variables.default_load() == load.default_name()
    assert variables.open_loop_loads()[0] == load.open_loop_name()
    assert _precheck("run", LOAD=load.default_name()).returncode == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("source =", "# source ="), "missing `source`"),
        (("server = ", "server = 'nope' #"), "needs a server = '<server id>'"),
        (("[run]", "[run]\nfront = 1"), "[run] has unknown keys ['front']"),
    ],
)
def test_a_broken_study_file_is_refused_without_site_packages(
    change: tuple[str, str], message: str, tmp_path: Path
) -> None:
    """A study file's static schema, incl. a missing key, before anything is installed."""
    text = (ROOT / "studies" / "reload.toml").read_text()
    assert change[0] in text
    (tmp_path / "broken.toml").write_text(text.replace(*change, 1))
    code = (
        "import os, sys, pathlib; from bench import precheck; from bench.core import studyfile; "
        f"studyfile.STUDIES_DIR = pathlib.Path({str(tmp_path)!r}); "
        "sys.exit(precheck.main(['study']))"
    )
    env = {k: v for k, v in os.environ.items() if k != "ARMS"} | {"NAME": "broken"}
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_a_study_arms_search_space_holds_to_the_knobs_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 58 item 2: a tuned arm's `tune = {workers = [...]}` is bounded as KNOBS= is
    (workers by WORKERS' 1..256), named by its study and arm."""
    from bench import precheck
    from bench.core.validate import UsageError

    arm = {"id": "tuned", "tune": {"workers": [1, 99999]}}
    monkeypatch.setattr(precheck, "check_study", lambda path: {"arm": [arm]})
    with pytest.raises(UsageError, match="x: arm tuned: KNOBS: workers=99999 is out of range"):
        precheck.check_studies({"NAME": "x"}, {"NAME": ("x",)})
