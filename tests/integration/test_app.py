"""APP= on the real stack: a broken app, requirement or route list is one line and exit 2
before any load, with nothing left running and nothing recorded; a working app is measured,
its records carry its identity, and two versions of it compare with `make compare`."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.record import FORMAT_VERSION
from bench.core.registry import ROOT
from tests.conftest import stack_processes
from tests.integration.conftest import report_text, run_bench, trial_records

pytestmark = pytest.mark.integration
TINY = "tests/fixtures/apps/tiny"
QUICK = {"server": "gunicorn-sync", "duration": 1, "warmup": 0, "trials": 1, "concurrency": 2}


def _refused(tmp_path: Path, **options: object) -> str:
    """Run the harness; it must exit 2 with the problem on the first line, record nothing
    and leave no process of this session running."""
    results = tmp_path / "results"
    before = set(stack_processes())  # (a stack another test module keeps up is not ours)
    done = run_bench(results, **{**QUICK, **options})
    assert done.returncode == 2, done.stderr
    assert not (results / "records").exists() or not list((results / "records").iterdir())
    assert set(stack_processes()) <= before, "a process outlived the refused run"
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("bench: APP")  # the problem, in the last and only error line
    return last


def test_an_import_error_is_refused(tmp_path: Path) -> None:
    line = _refused(tmp_path, app="tests/fixtures/apps/brokenimport/brokenimport.py:app")
    assert "cannot import brokenimport" in line
    assert "No module named 'no_such_module_for_pywebbench'" in line


@pytest.mark.parametrize(
    ("callable_", "message"),
    [
        ("notcallable", "is a int, not callable: neither a WSGI nor an ASGI callable"),
        ("one", "takes 1 positional argument(s): neither WSGI"),
        ("missing", "binds no 'missing' at its top level"),
    ],
)
def test_a_callable_that_is_not_wsgi_or_asgi_is_refused(
    tmp_path: Path, callable_: str, message: str
) -> None:
    line = _refused(tmp_path, app=f"{TINY}/tinyapp.py:{callable_}")
    assert message in line


def test_a_requirement_that_conflicts_with_the_servers_pins_is_refused(tmp_path: Path) -> None:
    line = _refused(
        tmp_path, app=f"{TINY}/tinyapp.py:app", app_requirements=f"{TINY}/conflict-requirements.txt"
    )
    assert "does not resolve on top of gunicorn-sync's pins" in line
    assert "psycopg" in line


def test_a_route_that_fails_verification_is_refused_before_any_load(tmp_path: Path) -> None:
    results = tmp_path / "results"
    before = set(stack_processes())
    done = run_bench(
        results, **QUICK, app=f"{TINY}/tinyapp.py:app", app_routes=f"{TINY}/routes-fail.toml"
    )
    assert done.returncode == 2, done.stderr
    rejected = [ln for ln in done.stderr.splitlines() if ln.startswith("bench: APP rejected")]
    assert len(rejected) == 1
    assert "gunicorn-sync: verification failed: route 'boom' (GET /boom): status 500" in rejected[0]
    assert "--- server.log (last lines)" in done.stderr  # the server's own log follows
    assert "trial 1: starting" not in done.stderr  # no block, no load
    assert not (results / "records").exists()
    assert set(stack_processes()) <= before


def _measure(tmp_path: Path, version: str) -> Path:
    """The tiny app copied with VERSION set, measured on its one route; its results dir."""
    app = tmp_path / f"v{version}" / "tiny"
    shutil.copytree(ROOT / TINY, app)
    source = app / "tinyapp.py"
    source.write_text(source.read_text().replace('VERSION = "1"', f'VERSION = "{version}"'))
    results = tmp_path / f"results-v{version}"
    done = run_bench(results, **QUICK, app=f"{app}/tinyapp.py:app")
    assert done.returncode == 0, done.stderr
    return results


def test_two_versions_of_an_app_are_measured_apart_and_compared(tmp_path: Path) -> None:
    base, head = _measure(tmp_path, "1"), _measure(tmp_path, "2")
    recs = [r for d in (base, head) for r in trial_records(d)]
    assert len(recs) == 2 and {r["status"] for r in recs} == {"ok"}
    assert {r["scenario"] for r in recs} == {"tiny:ok"}
    assert {r["format_version"] for r in recs} == {FORMAT_VERSION}
    assert len({r["user_app"]["sha256"] for r in recs}) == 2  # two versions
    assert {r["user_app"]["entry"] for r in recs} == {"tinyapp:app"}
    assert {r["user_app"]["kind"] for r in recs} == {"wsgi"}
    assert all(
        r["requests"] > 0 and r["verify"]["checked"] == ["GET /ok", "GET /nope"] for r in recs
    )
    summary = report_text(base)
    assert "## tiny:ok (`/ok`)" in summary and "· wsgi tiny@" in summary
    compared = subprocess.run(
        [sys.executable, "-m", "bench", "compare", f"--base={base}", f"--head={head}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compared.returncode == 0, compared.stderr
    assert "tiny:ok" in compared.stdout
    # Both sets in one summary: two rows, one per version, never merged as trials.
    merged = tmp_path / "merged"
    shutil.copytree(base, merged / "a")
    shutil.copytree(head, merged / "b")
    subprocess.run(
        [sys.executable, "-m", "bench", "report", f"--results={merged}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    text = report_text(merged)
    labels = {r["user_app"]["sha256"][:8] for r in recs}
    assert all(f"tiny@{label}" in text for label in labels)
