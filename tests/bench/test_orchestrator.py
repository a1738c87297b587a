"""The orchestrator in-process: bench.harness.run.execute with a fake site and a fake load tool, so
plan -> prepare -> serve -> measure -> record runs without a subprocess, and every record it
writes is read back from disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.core import plan
from bench.harness.recorder import Recorder
from bench.harness.run import Harness, execute
from bench.host.placement import cpu_placement
from bench.host.procs import Interrupted
from bench.load import LoadError
from tests.fakes import FakeSite, FakeTool, result


def _options(results: Path, **kw: object) -> plan.Options:
    base = dict(
        servers=("granian", "gunicorn-sync"),
        scenarios=("plaintext", "db"),
        concurrency=(10,),
        duration_s=2,
        warmup_s=1,
        trials=1,
        arch="amd64",
        results=results,
        overrides={},
        load_threads=1,
        seed=3,
    )
    base.update(kw)
    return plan.Options(**base)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run directories and the run lock in a temporary directory: these tests never wait
    for, nor block, a real harness run on this checkout."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)


def _run(results: Path, site: FakeSite, tool: FakeTool, **kw: object) -> tuple[int, list[dict]]:
    def harness(first, arms, table, run_dir, progress) -> Harness:
        recorder = Recorder({"hostname": "test"}, cpu_placement(False), tool, progress)
        return Harness(site, tool, recorder, table, run_dir, progress)

    status = execute(_options(results, **kw), harness=harness)
    records = [json.loads(p.read_text()) for p in sorted((results / "records").glob("*.json"))]
    return status, records


def _by(records: list[dict], server: str) -> dict[str, dict]:
    return {r["scenario"]: r for r in records if r["server"] == server}


def test_ok_runs_become_ok_records(tmp_path: Path) -> None:
    """Two servers × two scenarios: four ok records with the fake tool's figures, pgbouncer's
    delta, the verification and knobs; one primer per scenario and a warmup per run."""
    site, tool = FakeSite(), FakeTool()
    status, records = _run(tmp_path, site, tool)
    assert status == 0 and len(records) == 4
    assert all(r["status"] == "ok" and r["load_tool"] == "fake" for r in records)
    rec = _by(records, "granian")["db"]
    assert rec["requests"] == 1000 and rec["rps"] == 500.0 and rec["latency_ms"]["p99"] == 2.0
    assert rec["db"] == {"queries": 10, "transactions": 10}
    assert rec["knobs"] == {"workers": 2} and rec["verify"]["checked"] == ["/plaintext"]
    assert rec["metadata"]["server_version"] == "1.0" and rec["metadata"]["argv"] == ["fake-server"]
    assert rec["load_threads"] == 1 and rec["backlog"] == 128 and rec["sockets"] is None
    assert rec["errors"]["by_status"] == {"200": 1000}
    raw = tmp_path / rec["raw_files"][0]
    assert raw.read_text() == "1000 requests\n"
    phases = [c.out.name.rsplit(".", 1)[1] for c in tool.calls]
    assert phases.count("primer") == 4 and phases.count("warmup") == 4
    assert phases.count("measure") == 4 and sorted(site.stopped) == ["granian", "gunicorn-sync"]
    assert (tmp_path / "summary.md").exists()


def test_failed_verification_records_every_run_failed_with_the_log(tmp_path: Path) -> None:
    """A server that fails verification is not measured: its runs are failed records with the
    reason and its log; the other server is measured; the exit status is 1."""
    site, tool = FakeSite(fail_verify={"gunicorn-sync"}), FakeTool()
    status, records = _run(tmp_path, site, tool)
    assert status == 1
    failed = _by(records, "gunicorn-sync")
    assert {r["status"] for r in failed.values()} == {"failed"}
    assert all(r["reason"] == "verification failed: /db: status 500" for r in failed.values())
    assert all(r["metadata"]["argv"] == ["fake"] for r in failed.values())
    assert all(any(f.endswith("server.log") for f in r["raw_files"]) for r in failed.values())
    assert {r["status"] for r in _by(records, "granian").values()} == {"ok"}
    assert len(tool.measured) == 2


def test_server_dying_during_load_voids_the_rest_of_its_block(tmp_path: Path) -> None:
    """The server dies in its first measured run: that run and the next are failed with the
    watchdog's reason; the other server is still measured."""
    site = FakeSite()
    first = plan.make_plan(_options(tmp_path))[0].server

    def crash() -> object:
        site.dead.add(first)
        return result()

    tool = FakeTool(script=[crash])
    status, records = _run(tmp_path, site, tool)
    assert status == 1
    dead = _by(records, first)
    assert {r["status"] for r in dead.values()} == {"failed"}
    assert {r["reason"] for r in dead.values()} == {"server exited with code 1 during load"}
    other = next(s for s in ("granian", "gunicorn-sync") if s != first)
    assert {r["status"] for r in _by(records, other).values()} == {"ok"}
    assert first in site.stopped


def test_load_tool_failure_fails_only_that_run(tmp_path: Path) -> None:
    """A load tool that fails (unreadable output) fails one record, raw output kept; the
    next run on the same server is measured."""
    tool = FakeTool(script=[LoadError("unreadable fake output: x", {"fake.txt": "garbage"})])
    status, records = _run(tmp_path, FakeSite(), tool, servers=("granian",))
    assert status == 1
    rec = _by(records, "granian")
    assert rec["plaintext"]["status"] == "failed"
    assert rec["plaintext"]["reason"] == "unreadable fake output: x"
    assert (tmp_path / rec["plaintext"]["raw_files"][0]).read_text() == "garbage"
    assert rec["db"]["status"] == "ok"


def test_interrupt_during_load_records_the_run_and_stops(tmp_path: Path) -> None:
    """SIGTERM during the first measured run: that run is a failed record saying so, nothing
    after it is measured, the exit status is 130 and the server is stopped."""
    site = FakeSite()
    tool = FakeTool(script=[Interrupted("SIGTERM")])
    status, records = _run(tmp_path, site, tool)
    assert status == 130 and len(records) == 1
    assert records[0]["status"] == "failed"
    assert records[0]["reason"] == "interrupted by SIGTERM during load"
    assert site.stopped == site.started and len(tool.measured) == 1


def test_an_interrupt_names_the_run_it_cut_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during load: the one line says which run ("interrupted (): ..." named none)."""
    first = plan.make_plan(_options(tmp_path))[0].runs[0]
    status, _ = _run(tmp_path, FakeSite(), FakeTool(script=[KeyboardInterrupt()]))
    assert status == 130
    line = next(x for x in capsys.readouterr().err.splitlines() if "stopping" in x)
    want = f"interrupted by SIGINT; cut short: {first.server} {first.scenario} c=10 trial 1;"
    assert want in line


def test_an_interrupt_while_a_server_starts_records_its_runs_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while the first server starts: its runs are failed records saying so, the line
    names that server, nothing is measured, 130."""
    site = FakeSite()

    def interrupted_serve(*_args: object) -> None:
        raise KeyboardInterrupt

    site.serve = interrupted_serve  # type: ignore[method-assign]
    tool = FakeTool()
    status, records = _run(tmp_path, site, tool, servers=("granian",))
    assert status == 130 and not tool.measured
    assert [r["reason"] for r in records] == [
        "interrupted by SIGINT while granian trial 1 (starting the server)"
    ] * 2
    assert "cut short: granian trial 1 (starting the server);" in capsys.readouterr().err


def test_an_interrupt_before_any_record_keeps_the_summary_and_no_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while the environments are prepared: no record, so the user's summary.md and
    index.html stay byte for byte, and no empty run directory is left in .bench/runs."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.md").write_text("the user's summary\n")
    (results / "index.html").write_text("<p>the user's page</p>\n")
    site = FakeSite()

    def interrupted_prepare(*_args: object) -> None:
        raise KeyboardInterrupt

    site.prepare = interrupted_prepare  # type: ignore[method-assign]
    status, records = _run(results, site, FakeTool())
    assert status == 130 and records == []
    assert (results / "summary.md").read_text() == "the user's summary\n"
    assert (results / "index.html").read_text() == "<p>the user's page</p>\n"
    assert list((tmp_path / "state" / "runs").iterdir()) == []
    err = capsys.readouterr().err
    assert "interrupted by SIGINT; cut short: preparing the servers;" in err
    assert "summary.md left as it was" in err


def test_sigint_arriving_ignored_still_interrupts(tmp_path: Path) -> None:
    """A background job starts with SIGINT ignored: the run installs its own handler, so a
    SIGINT during the run still ends it with 130 (and the handler is put back after)."""
    import os
    import signal

    def interrupt() -> object:
        os.kill(os.getpid(), signal.SIGINT)
        return result()

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status, records = _run(tmp_path, FakeSite(), FakeTool(script=[interrupt]))
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert status == 130
    assert records[0]["reason"] == "interrupted by SIGINT during load"


def test_unsupported_server_is_recorded_not_failed(tmp_path: Path) -> None:
    """A server its environment cannot run (unsupported) gets unsupported records; exit 0."""
    status, records = _run(tmp_path, FakeSite(unsupported={"gunicorn-sync"}), FakeTool())
    assert status == 0
    assert {r["status"] for r in _by(records, "gunicorn-sync").values()} == {"unsupported"}


@pytest.mark.parametrize("primes", [True, False])
def test_tools_that_start_cold_get_no_primer_or_warmup(tmp_path: Path, primes: bool) -> None:
    """A tool that declares primes=False (Locust) is only run for the measurement."""
    tool = FakeTool(primes=primes)
    _run(tmp_path, FakeSite(), tool, servers=("granian",))
    assert (len(tool.calls) > len(tool.measured)) is primes
