"""The orchestrator in-process: bench.harness.run.execute with a fake site and a fake load tool, so
plan -> prepare -> serve -> measure -> record runs without a subprocess, and every record it
writes is read back from disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.core import plan, record
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
    # the trials' records: each server's warm-up start (trial 0) has tests of its own
    return status, [r for r in records if not r["metadata"].get("warmup_start")]


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
    # each server's warm-up start adds one run: its primer, warmup and measured window
    assert phases.count("primer") == 6 and phases.count("warmup") == 6
    assert phases.count("measure") == 6
    assert sorted(site.stopped) == ["granian", "granian", "gunicorn-sync", "gunicorn-sync"]
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
    assert len(tool.measured) == 3  # granian's warm-up run and its two trials


def test_server_dying_during_load_voids_the_rest_of_its_block(tmp_path: Path) -> None:
    """The server dies in its first measured run: that run and the next are failed with the
    watchdog's reason; the other server is still measured."""
    site = FakeSite()
    first = next(b for b in plan.make_plan(_options(tmp_path)) if not b.warmup).server

    def crash() -> object:
        site.dead.add(first)
        return result()

    tool = FakeTool(script=[result(), result(), crash])  # past the two warm-up runs
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
    error = LoadError("unreadable fake output: x", {"fake.txt": "garbage"})
    tool = FakeTool(script=[result(), error])  # the warm-up run, then the first trial's
    status, records = _run(tmp_path, FakeSite(), tool, servers=("granian",))
    assert status == 1
    rec = _by(records, "granian")
    assert rec["plaintext"]["status"] == "failed"
    assert rec["plaintext"]["reason"] == "unreadable fake output: x"
    assert (tmp_path / rec["plaintext"]["raw_files"][0]).read_text() == "garbage"
    assert rec["db"]["status"] == "ok"


def test_interrupt_during_load_records_the_run_and_stops(tmp_path: Path) -> None:
    """SIGTERM during the first measured trial: that run is a failed record saying so,
    nothing after it is measured, the exit status is 130 and the server is stopped."""
    site = FakeSite()
    tool = FakeTool(script=[result(), result(), Interrupted("SIGTERM")])  # after the warm-ups
    status, records = _run(tmp_path, site, tool)
    assert status == 130 and len(records) == 1
    assert records[0]["status"] == "failed"
    assert records[0]["reason"] == "interrupted by SIGTERM during load"
    assert site.stopped == site.started and len(tool.measured) == 3


def test_an_interrupt_names_the_run_it_cut_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during load: the one line says which run ("interrupted (): ..." named none)."""
    first = plan.make_plan(_options(tmp_path))[0].runs[0]
    status, _ = _run(tmp_path, FakeSite(), FakeTool(script=[KeyboardInterrupt()]))
    assert status == 130
    line = next(x for x in capsys.readouterr().err.splitlines() if "stopping" in x)
    # the first run is the server's warm-up start's
    want = f"interrupted by SIGINT; cut short: {first.server} {first.scenario} c=10 warm-up start;"
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
    status, _ = _run(tmp_path, site, tool, servers=("granian",))
    assert status == 130 and not tool.measured
    # the first start is the warm-up's: its one run is the failed record
    records = [json.loads(p.read_text()) for p in (tmp_path / "records").glob("*.json")]
    assert [r["reason"] for r in records] == [
        "interrupted by SIGINT while granian warm-up start (starting the server)"
    ]
    assert "cut short: granian warm-up start (starting the server);" in capsys.readouterr().err


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
        # past the two servers' warm-up runs: the first trial's run is interrupted
        script = [result(), result(), interrupt]
        status, records = _run(tmp_path, FakeSite(), FakeTool(script=script))
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


def test_a_measured_run_with_no_completed_request_is_recorded_as_failed(tmp_path: Path) -> None:
    """wrk's output of a window in which every one of 20 connections timed out
    (tests/fixtures/wrk/zero.txt: 0 requests, 20 timeouts) is measured, not refused: its
    record says failed, 'no request completed', with its count and timeouts; the other
    server's run is ok and the harness exits 1."""
    from bench.load.wrk import parse_wrk

    zero = parse_wrk((Path(__file__).resolve().parents[1] / "fixtures/wrk/zero.txt").read_text())
    assert zero.requests == 0 and zero.errors.timeout == 20
    # each server's warm-up start takes a window first; then, servers in a seeded random
    # order, the first measured trial gets the zero window
    tool = FakeTool(script=[result(), result(), zero, result()])
    status, records = _run(tmp_path, FakeSite(), tool, scenarios=("plaintext",))
    assert status == 1 and len(records) == 2
    failed = [r for r in records if r["status"] == "failed"]
    ok = [r for r in records if r["status"] == "ok"]
    assert len(failed) == 1 and len(ok) == 1
    assert failed[0]["reason"] == "no request completed"
    assert failed[0]["requests"] == 0 and failed[0]["errors"]["timeout"] == 20
    assert ok[0]["requests"] == 1000


def test_records_carry_session_start_and_boot_ids(tmp_path: Path) -> None:
    """Every record of one invocation has its session id and the boot id; a server start's
    records share a start id that no other start has; the warm-up start's records are marked
    and come first."""
    from bench.host.metadata import host_metadata

    site, tool = FakeSite(), FakeTool()

    def harness(first, arms, table, run_dir, progress) -> Harness:
        recorder = Recorder(host_metadata(), cpu_placement(False), tool, progress)
        return Harness(site, tool, recorder, table, run_dir, progress)

    assert execute(_options(tmp_path, trials=2), harness=harness) == 0
    records = [json.loads(p.read_text()) for p in (tmp_path / "records").glob("*.json")]
    metas = [r["metadata"] for r in records]
    assert len({m["session_id"] for m in metas}) == 1 and all(m["boot_id"] for m in metas)
    assert all(m["cpu_model"] and m["cpu_count"] for m in metas)
    starts: dict[str, set] = {}
    for rec in records:
        starts.setdefault(rec["metadata"]["start_id"], set()).add((rec["server"], rec["trial"]))
    # 2 servers × (warm-up + 2 trials) starts, each one (server, trial)
    assert len(starts) == 6 and all(len(v) == 1 for v in starts.values())
    warm = [r for r in records if r["metadata"].get("warmup_start")]
    assert sorted((r["server"], r["trial"]) for r in warm) == [("granian", 0), ("gunicorn-sync", 0)]
    assert all(r["format_version"] == record.FORMAT_VERSION for r in records)


def test_a_run_under_foreign_load_is_kept_marked_and_repeated_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard saw others use half a CPU through every run: each run is recorded marked
    (foreign_cpu_percent, foreign_load, the top process) and measured once more; the repeat
    names the run it replaces, and is not repeated again even though it is marked too."""
    import dataclasses

    from bench.harness import session
    from bench.observe.foreign import ForeignLoad

    real = session.measure_point

    def busy(*args, **kw):
        return dataclasses.replace(real(*args, **kw), foreign=ForeignLoad(50.0, [("burner", 49.0)]))

    monkeypatch.setattr(session, "measure_point", busy)
    status, records = _run(tmp_path, FakeSite(), FakeTool(), servers=("granian",))
    assert status == 0 and len(records) == 4  # plaintext and db, each twice
    warm = [json.loads(p.read_text()) for p in (tmp_path / "records").glob("*.json")]
    warm = [r for r in warm if r["metadata"].get("warmup_start")]
    assert len(warm) == 1 and warm[0]["foreign_load"] is True  # marked, never repeated
    assert all(r["foreign_load"] is True and r["foreign_cpu_percent"] == 50.0 for r in records)
    assert all(r["foreign_top"] == [["burner", 49.0]] for r in records)
    firsts = [r for r in records if "repeat_of" not in r["metadata"]]
    repeats = [r for r in records if "repeat_of" in r["metadata"]]
    assert sorted(r["metadata"]["repeat_of"] for r in repeats) == sorted(
        r["run_id"] for r in firsts
    )
    summary = (tmp_path / "summary.md").read_text()
    assert "**Foreign load** (" in summary and "burner" in summary
