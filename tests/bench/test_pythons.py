"""PYTHON= (issue 33): the interpreters a server's venv may be made from, the refusals before
set-up, the venv on a build under its own name, the record's `interpreter` (format 14) and
app_common's /interpreter payload. None of these needs the interpreter built: the build
(bench/python-build.sh, minutes) is never part of the test suite; the test that runs a
server on it skips with the reason when it is absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bench.core import pythons, record
from bench.core.registry import (
    DeclarationError,
    ServerSpec,
    load_all,
    python_refusal,
    validate_pythons,
)
from bench.core.validate import UsageError
from bench.host import venv
from bench.report.cells import via_label
from bench.report.groups import config_key
from tests.bench.test_orchestrator import _run
from tests.fakes import FakeSite, FakeTool

ROOT = Path(__file__).resolve().parents[2]
FREE = {"version": "3.13.5", "build": "free-threaded", "gil_enabled": False}
BACK = {"version": "3.13.5", "build": "free-threaded", "gil_enabled": True}
GIL = {"version": "3.13.5", "build": "default", "gil_enabled": None}


def test_python_names_are_each_minor_with_and_without_the_gil() -> None:
    """Every declared minor version gives two names, <minor> and <minor>t; 3.13t and 3.14t
    (CPython 3.14.7, reachable since issue 33's tarball was found) are accepted."""
    names = pythons.names()
    assert names == ("3.13", "3.13t", "3.14", "3.14t")
    assert all(n in names for m in pythons.builds() for n in (m, m + "t"))
    assert pythons.parse_python(" 3.13t ") == "3.13t"
    assert pythons.parse_python("3.14t") == "3.14t" and pythons.parse_python("3.14") == "3.14"
    assert pythons.builds()["3.14"].version == "3.14.7"
    assert pythons.is_free_threaded("3.14t") and not pythons.is_free_threaded("3.14")


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A python-builds.toml of the test's own in place of the real one (builds() is cached:
    cleared before and after)."""
    path = tmp_path / "python-builds.toml"
    monkeypatch.setattr(pythons, "BUILDS_FILE", path)
    pythons.builds.cache_clear()
    yield path
    pythons.builds.cache_clear()


def test_unknown_and_unreachable_pythons_are_refused_in_one_line(table: Path) -> None:
    """An unknown name lists the valid ones; a declared version whose tarball cannot be
    fetched here (3.15 in this table) is refused with that reason and the names that can be
    built."""
    table.write_text(
        '[builds."3.13"]\nversion = "3.13.5"\nurl = "http://example.invalid/3.13.5.tar.xz"\n'
        f'sha256 = "{"0" * 64}"\n\n'
        '[builds."3.15"]\nunreachable = "the 3.15 tarball is not reachable from this machine"\n'
    )
    with pytest.raises(UsageError) as unknown:
        pythons.parse_python("2.7")
    assert "valid: 3.13, 3.13t, 3.15, 3.15t" in str(unknown.value)
    assert "\n" not in str(unknown.value)
    with pytest.raises(UsageError) as unreachable:
        pythons.parse_python("3.15t")
    text = str(unreachable.value)
    assert "PYTHON=3.15t cannot be built here" in text and "not reachable" in text
    assert text.endswith("valid: 3.13, 3.13t") and "\n" not in text
    table.write_text('[builds."3.15"]\nunreachable = "none"\n')
    pythons.builds.cache_clear()
    with pytest.raises(UsageError, match=r"valid: none$"):
        pythons.parse_python("3.15")


def test_every_build_declares_a_tarball_with_its_sha256_or_why_not() -> None:
    """The one table of tarballs: a version, a URL and a 64-hex sha256, or `unreachable`."""
    for build in pythons.builds().values():
        if build.unreachable is None:
            assert build.version and build.version.startswith(build.minor + ".")
            assert build.url and build.url.endswith(".tar.xz")
            assert build.sha256 and len(build.sha256) == 64
            int(build.sha256, 16)


def test_servers_that_cannot_run_on_a_build_are_refused_with_why() -> None:
    """gevent's server declares why it cannot run on 3.13t: the refusal names it, its reason
    and the servers that can; gthread, granian and waitress run on it."""
    specs = load_all()
    assert python_refusal(specs, ["gunicorn-gthread", "granian", "waitress"], "3.13t") is None
    refusal = python_refusal(specs, ["granian", "gunicorn-gevent"], "3.13t")
    assert refusal is not None and "\n" not in refusal
    assert refusal.startswith("SERVER=gunicorn-gevent cannot run on PYTHON=3.13t (gunicorn-gevent:")
    assert specs["gunicorn-gevent"].python_why["3.13t"] in refusal
    assert "gunicorn-gthread" in refusal.split("valid on 3.13t: SERVER=")[1]
    assert python_refusal(specs, ["gunicorn-gevent"], None) is None  # unset: as before
    able = ["gunicorn-gthread", "granian", "waitress"]
    assert python_refusal(specs, able, "3.14t") is None
    assert python_refusal(specs, able, "3.14") is None
    refusal = python_refusal(specs, ["meinheld"], "3.14t")
    assert refusal is not None
    assert refusal.startswith("SERVER=meinheld cannot run on PYTHON=3.14t (meinheld: ")


def control_mismatches(spec: ServerSpec) -> list[str]:
    """The minor versions where a server's free-threaded build and its GIL control differ:
    one declared without the other, one run and not the other, or other pins."""
    return [
        minor
        for minor in pythons.builds()
        if (minor + "t" in spec.python_why) != (minor in spec.python_why)
        or spec.runs_on(minor + "t") != spec.runs_on(minor)
        or spec.pythons.get(minor + "t") != spec.pythons.get(minor)
    ]


def test_each_free_threaded_build_has_its_control_on_the_same_pins() -> None:
    """The GIL build is the fair control of its free-threaded twin: every server declares
    both or neither, runs on both or on neither, and from the same pinned file; a server
    that ran on 3.14t alone, or on other pins for 3.14, is caught."""
    specs = load_all()
    assert {sid: control_mismatches(spec) for sid, spec in specs.items()} == {
        sid: [] for sid in specs
    }
    granian = specs["granian"]
    alone = replace(granian, pythons={k: v for k, v in granian.pythons.items() if k != "3.14"})
    other = replace(granian, pythons=granian.pythons | {"3.14": "requirements.txt"})
    assert control_mismatches(alone) == control_mismatches(other) == ["3.14"]


def test_precheck_refuses_before_set_up(tmp_path: Path) -> None:
    """make bench PYTHON=… is checked by the pre-check (system python3, no site-packages):
    exit 2 and one line, for an unknown name and for a server without wheels for it."""
    for variables, words in (
        ({"PYTHON": "3.12t"}, "valid: 3.13, 3.13t, 3.14, 3.14t"),
        ({"PYTHON": "3.13t", "SERVER": "uwsgi"}, "SERVER=uwsgi cannot run on PYTHON=3.13t"),
        ({"PYTHON": "3.14t", "SERVER": "meinheld"}, "SERVER=meinheld cannot run on PYTHON=3.14t"),
        ({"PYTHON": "3.13t", "TARGET": "http://127.0.0.1:9"}, "PYTHON and TARGET= cannot go"),
    ):
        env = {k: v for k, v in os.environ.items() if k not in variables} | variables
        done = subprocess.run(
            [sys.executable, "-S", "-m", "bench.precheck", "run"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2, (variables, done.stderr)
        assert words in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_pythons_declaration_forms(tmp_path: Path) -> None:
    """[pythons."<name>"]: requirements beside server.toml with why, or unsupported; anything
    else, an unknown name or a missing file is a DeclarationError naming the table."""
    path = tmp_path / "server.toml"
    (tmp_path / "requirements-3.13.txt").write_text("waitress==3.0.2\n")
    files, why = validate_pythons(
        path,
        {
            "3.13t": {"requirements": "requirements-3.13.txt", "why": "wheels for cp313t"},
            "3.13": {"unsupported": "no wheel"},
        },
    )
    assert files == {"3.13t": "requirements-3.13.txt"}
    assert why == {"3.13t": "wheels for cp313t", "3.13": "no wheel"}
    for bad in (
        {"2.7": {"unsupported": "old"}},
        {"3.13t": {"requirements": "requirements-3.13.txt"}},
        {"3.13t": {"requirements": "missing.txt", "why": "x"}},
        {"3.13t": {"unsupported": ""}},
    ):
        with pytest.raises(DeclarationError, match=r"\[pythons\."):
            validate_pythons(path, bad)


def test_a_venv_on_a_build_is_made_from_its_interpreter_under_its_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ensure_venv(spec, python="3.13t"): uv makes .bench/venvs/<id>@3.13t with --python the
    built interpreter, from the server's [pythons] requirements; the usual venv's name and
    command are unchanged; a rebuilt interpreter (its .build stamp) makes the venv anew."""
    built = tmp_path / "python" / "3.13t" / "bin" / "python3"
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    (built.parent.parent / ".build").write_text("3.13.5 abc --disable-gil\n")
    monkeypatch.setattr(venv, "PYTHONS", tmp_path / "python")
    monkeypatch.setattr(venv, "VENVS", tmp_path / "venvs")
    monkeypatch.setattr(venv, "uv_path", lambda: "uv")
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        if argv[1] == "venv":
            (Path(argv[-1]) / "bin").mkdir(parents=True)
            (Path(argv[-1]) / "bin" / "python").write_text("")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(venv.subprocess, "run", fake_run)
    spec = load_all()["waitress"]
    python = venv.ensure_venv(spec, python="3.13t")
    assert python == tmp_path / "venvs" / "waitress@3.13t" / "bin" / "python"
    assert calls[0][:4] == ["uv", "venv", "-q", "--python"] and calls[0][4] == str(built)
    assert calls[1][-1] == str(spec.folder / "requirements-3.13.txt")
    assert venv.ensure_venv(spec, python="3.13t") == python and len(calls) == 2  # fresh: kept
    (built.parent.parent / ".build").write_text("3.13.5 abc --disable-gil --other\n")
    venv.ensure_venv(spec, python="3.13t")
    assert len(calls) == 4  # the interpreter changed: made anew
    usual = venv.ensure_venv(spec)
    assert usual == tmp_path / "venvs" / "waitress" / "bin" / "python"
    assert calls[4][4] == "python3" and calls[5][-1] == str(spec.requirements)
    assert venv.venv_name("waitress", "3.13") != venv.venv_name("waitress", "3.13t")


def test_a_missing_build_says_how_to_make_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No interpreter under .bench/tools/python/<name>: built on the spot (here a build
    script that fails at once), else VenvError with its reason and the command to run."""
    script = tmp_path / "build.sh"
    script.write_text("echo 'python-build: no tarball today' >&2; exit 1\n")
    monkeypatch.setattr(venv, "PYTHONS", tmp_path)
    monkeypatch.setattr(venv, "BUILD_SCRIPT", script)
    with pytest.raises(venv.VenvError, match=r"no tarball today.*python-build.sh 3\.13t"):
        venv.ensure_venv(load_all()["waitress"], python="3.13t")


def test_interpreter_record_from_the_two_reads() -> None:
    """The later read's state; gil_came_back when a free-threaded server answered the GIL on
    at either read; null GIL state on a default build; PYTHON= kept even when unread."""
    assert record.interpreter_fields(None, None, None) is None
    kept = record.interpreter_fields("3.13t", FREE, FREE)
    assert kept == {
        "python": "3.13t",
        "version": "3.13.5",
        "build": "free-threaded",
        "gil_enabled": False,
        "gil_came_back": False,
    }
    assert record.interpreter_fields("3.13t", FREE, BACK)["gil_came_back"] is True  # type: ignore[index]
    assert record.interpreter_fields("3.13t", BACK, None)["gil_enabled"] is True  # type: ignore[index]
    default = record.interpreter_fields("3.13", GIL, GIL)
    assert default is not None and default["gil_enabled"] is None
    assert default["gil_came_back"] is None
    unread = record.interpreter_fields("3.13t", None, None)
    assert unread == {k: None for k in record.INTERPRETER_KEYS} | {"python": "3.13t"}


def test_records_before_and_after_format_14_load() -> None:
    """A format 13 record (no interpreter) loads as before; a format 14 one carries it."""
    fixture = sorted((ROOT / "tests" / "fixtures" / "reference-2026-11").rglob("records/*.json"))[0]
    old = json.loads(fixture.read_text())
    old.pop("interpreter", None)
    assert record.Record.from_dict(old).interpreter is None
    assert record.FORMAT_VERSION >= 14 and 14 in record.KNOWN_VERSIONS
    new = old | {
        "format_version": 14,
        "interpreter": record.interpreter_fields("3.13t", FREE, BACK),
    }
    rec = record.Record.from_dict(new)
    assert record.python_of(rec) == "3.13t" and record.gil_came_back(rec)


def test_the_summary_tells_interpreters_apart_and_labels_a_gil_that_came_back() -> None:
    """Two interpreters (and a run whose GIL came back) are separate configurations, each
    labelled; a record before format 14 keeps its key and label."""
    fixture = sorted((ROOT / "tests" / "fixtures" / "reference-2026-11").rglob("records/*.json"))[0]
    base = record.Record.from_dict(json.loads(fixture.read_text()) | {"interpreter": None})
    ft = record.Record.from_dict(
        base.to_dict() | {"interpreter": record.interpreter_fields("3.13t", FREE, FREE)}
    )
    back = record.Record.from_dict(
        base.to_dict() | {"interpreter": record.interpreter_fields("3.13t", FREE, BACK)}
    )
    assert len({config_key(base), config_key(ft), config_key(back)}) == 3
    assert "Python" not in via_label(base)
    assert via_label(ft).endswith(", Python 3.13t")
    assert "GIL came back" in via_label(back)


def test_a_run_on_a_build_prepares_it_and_records_the_gil_it_saw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The orchestrator with PYTHON=3.13t: servers prepared on it, and each record's
    interpreter from the reads after verification and after each window: the warm-up start
    reads the GIL off twice, trial 1's start off after verification and after its first
    window, then on after its second: that run says the GIL came back, the first does not."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)
    site = FakeSite(interpreters=[FREE, FREE, FREE, FREE, BACK])
    status, records = _run(
        tmp_path / "results", site, FakeTool(), servers=("granian",), python="3.13t"
    )
    assert status == 0 and site.prepared_on == ["3.13t"]
    assert len(records) == 2 and all(r["format_version"] == record.FORMAT_VERSION for r in records)
    assert all(r["interpreter"]["python"] == "3.13t" for r in records)
    assert sorted(r["interpreter"]["gil_came_back"] for r in records) == [False, True]
