"""The "Production behaviours" section over captured records: a reload of granian and
gunicorn-sync, granian's two cpu-quota arms (w2 by its rule, w1 by the quota) and a 20 s
soak of granian. Every catalog server gets a row, every cell a figure or a reason."""

import dataclasses
import json
import shutil
from pathlib import Path

from bench.core.defaults import LATE_LIMIT_MS
from bench.core.outcome import Outcome
from bench.core.record import FORMAT_VERSION, Record
from bench.core.registry import server_ids
from bench.load.oha import parse_oha, to_load_result
from bench.observe import lifecycle
from bench.report.production import NOT_CATALOG, production_sections
from bench.studies.metrics import COUNT_METRICS, count_of, metric_value
from bench.studies.schema import load_study

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _records() -> list[Record]:
    paths = [
        *(FIXTURES / "lifecycle").glob("*.record.json"),
        *(FIXTURES / "production").glob("cpu-quota-*.record.json"),
        *(FIXTURES / "soak").glob("*.record.json"),
    ]
    return [Record.from_dict(json.loads(p.read_text())) for p in paths]


def _rows(lines: list[str]) -> dict[str, list[str]]:
    rows = {}
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] in server_ids():
            rows[cells[0]] = cells[1:]
    return rows


def test_no_section_without_production_records() -> None:
    """Ordinary runs only: the summary has no production section."""
    assert production_sections([]) == []


def test_every_catalog_server_has_a_figure_or_a_reason() -> None:
    """One row per catalog server; no blank cell."""
    rows = _rows(production_sections(_records()))
    assert set(rows) == set(server_ids()) - set(NOT_CATALOG)
    assert all(cell for cells in rows.values() for cell in cells)


def test_measured_cells_carry_the_records_figures() -> None:
    """granian: its reload (0 failed at 300 req/s), its rule's req/s against the quota's
    (1,428 vs 973: +47 %), its soak slope; gunicorn-sync's recovery after the HUP stall."""
    rows = _rows(production_sections(_records()))
    reload, recycle, quota, memory, limits = rows["granian"]
    assert reload.startswith("0 failed, late not recorded at 300 req/s, ")
    assert quota.startswith("req/s +47 % (w2 vs w1 at 1 CPU: 1,428 vs 973; one trial: no interval)")
    assert quota.endswith("throttled 35 vs 0 ms")
    assert "MB/h [" in memory and "at 50 req/s" in memory
    assert recycle == (
        "not measured (make bench SERVER=granian LOAD=oha RATE=300 SCENARIO=db DURATION=20 "
        "RECYCLE=1000, then the same without RECYCLE)"
    )
    assert rows["gunicorn-sync"][0].startswith(
        "0 failed, late not recorded at 300 req/s, recovered in 2.0 s"
    )
    assert limits == "not measured (make study NAME=container-limits, with arms for granian)"


def test_servers_without_the_feature_say_so() -> None:
    """waitress and flask-dev: one process, no reload signal, no workers to recycle."""
    rows = _rows(production_sections(_records()))
    for server in ("waitress", "flask-dev"):
        reload, recycle, quota, _memory, limits = rows[server]
        assert reload.startswith("not supported by the server")
        assert recycle.startswith("not supported by the server")
        assert quota == "not supported by the server (one process: no worker rule)"
        assert limits == quota


def test_a_reload_that_killed_the_server_says_failed() -> None:
    """uWSGI (pyuwsgi) before --binary-path: its binary reload re-exec'd the base interpreter,
    which has no pyuwsgi, and the server exited (captured). The recorder now marks such a
    failed run with the event it was asked for; the cell says failed, with the reason."""
    path = FIXTURES / "production" / "reload-uwsgi-failed.record.json"
    failed = Record.from_dict(json.loads(path.read_text()))
    failed = dataclasses.replace(failed, lifecycle={"event": "reload"})
    rows = _rows(production_sections([*_records(), failed]))
    assert rows["uwsgi"][0] == "failed: server exited with code 1 during load"


def _declare(servers: Path, name: str, extra: str) -> None:
    folder = servers / name
    folder.mkdir()
    (folder / "requirements.txt").write_text("fakeserver==1.0\n")
    (folder / "server.toml").write_text(
        'description = "a server no study or record knows yet"\napp = "wsgi"\n'
        'argv = ["{python}", "-m", "fakeserver", "--port", "{port}", "--workers", "{workers}"]\n'
        "[knobs.workers]\ndefault = 2\nserver_default = 2\n" + extra
    )


def test_a_new_server_reads_not_measured_with_the_command(tmp_path, monkeypatch) -> None:
    """A server declared after every record and study: its row comes from the registry, each
    cell "not measured" with the command that measures it (or why the server cannot)."""
    from bench.core import registry

    servers = tmp_path / "servers"
    shutil.copytree(registry.SERVERS_DIR, servers)
    _declare(
        servers,
        "fakeserver",
        '[reload]\nsignal = "SIGHUP"\nwhy = "its docs"\n'
        '[recycle]\nargv = ["--max-requests", "{max_requests}"]\nwhy = "its docs"\n',
    )
    _declare(servers, "fakeserver-plain", "")
    monkeypatch.setattr(registry, "SERVERS_DIR", servers)
    rows = _rows_of(production_sections(_records()), ("fakeserver", "fakeserver-plain"))
    window = "LOAD=oha RATE=300 SCENARIO=db DURATION=20"
    assert rows["fakeserver"] == [
        f"not measured (make bench SERVER=fakeserver {window} LIFECYCLE=reload)",
        f"not measured (make bench SERVER=fakeserver {window} RECYCLE=1000, then the same "
        "without RECYCLE)",
        # its declared workers are 2, not the CPUs: the command names them
        "not measured (make bench SERVER=fakeserver SCENARIO=db CPU_QUOTA=0.5 WORKERS=<the CPUs "
        "here>, then the same with WORKERS=1)",
        "not measured (make soak SERVER=fakeserver)",
        "not measured (make study NAME=container-limits, with arms for fakeserver)",
    ]
    reload, recycle, _quota, _memory, _limits = rows["fakeserver-plain"]
    assert reload == "not supported by the server (no [reload] declared)"
    assert recycle == "not supported by the server (no [recycle] declared)"


def _rows_of(lines: list[str], names: tuple[str, ...]) -> dict[str, list[str]]:
    rows = {}
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] in names:
            rows[cells[0]] = cells[1:]
    return rows


def _granian_reload() -> Record:
    path = FIXTURES / "lifecycle" / "granian-reload.record.json"
    return Record.from_dict(json.loads(path.read_text()))


def test_not_supported_is_read_from_the_code_and_from_older_records() -> None:
    """metadata.unsupported (format 6) says what the server lacks whatever the reason's
    words; a record before format 6 says it in its reason's opening words."""
    rec = _granian_reload()
    new = dataclasses.replace(
        rec,
        status="unsupported",
        reason="any words at all",
        lifecycle=None,
        metadata={**rec.metadata, "unsupported": "reload", "started_at": "9999"},
    )
    old = dataclasses.replace(
        new,
        format_version=5,
        reason="reload not supported by the server: no [reload] declared",
        metadata={k: v for k, v in new.metadata.items() if k != "unsupported"},
    )
    for unsupported in (new, old):
        assert _rows(production_sections([unsupported]))["granian"][0].startswith(
            "not supported by the server"
        )


def test_recycling_is_paired_by_study_run_not_by_arm_names() -> None:
    """A recycling record and the steady record of its study run, whatever their arms are
    called; a steady record of another study run is not its pair."""
    rec = _granian_reload()
    meta = {**rec.metadata, "study": "any", "study_run": "R1"}
    on = dataclasses.replace(
        rec,
        lifecycle=None,
        recycles={"workers_started": 7},
        metadata={**meta, "study_arm": "with-some-name"},
    )
    off = dataclasses.replace(rec, lifecycle=None, metadata={**meta, "study_arm": "plain"})
    cell = _rows(production_sections([on, off]))["granian"][1]
    assert cell.startswith("0 failed, late not recorded vs 0 failed without (7 workers started)")
    elsewhere = dataclasses.replace(off, metadata={**off.metadata, "study_run": "R2"})
    cell = _rows(production_sections([on, elsewhere]))["granian"][1]
    assert cell.startswith("not measured (make bench SERVER=granian ")


def _quota_arm(rule: str, rps: list[float], throttled_ms: float, plain: bool = False) -> list:
    """granian's captured quota record of a rule as trials with these req/s; `plain`: as a
    `make bench CPU_QUOTA=1` run would record it (no study metadata)."""
    rec = Record.from_dict(
        json.loads((FIXTURES / "production" / f"cpu-quota-granian-{rule}.record.json").read_text())
    )
    meta = dict(rec.metadata)
    if plain:
        for key in ("study", "study_arm", "study_run", "workers_rule"):
            meta.pop(key, None)
    cgroup = {**(rec.cgroup or {}), "throttled_ms": throttled_ms}
    return [
        dataclasses.replace(
            rec, rps=v, trial=i + 1, run_id=f"{rule}{i}", metadata=meta, cgroup=cgroup
        )
        for i, v in enumerate(rps)
    ]


def test_a_quota_that_did_not_bind_shows_no_penalty() -> None:
    """Both rules unthrottled in every trial: the cell says the quota did not bind instead of
    a req/s change that would read as the quota's penalty."""
    records = [
        *_quota_arm("cpus", [1400.0, 1420.0, 1430.0], 0.0),
        *_quota_arm("quota", [970.0, 980.0, 975.0], 0.0),
    ]
    cell = _rows(production_sections(records))["granian"][2]
    assert (
        cell
        == "quota did not bind (w2 vs w1 at 1 CPU: 0 ms throttled in every trial): no penalty shown"
    )


def test_a_bound_quota_shows_the_penalty_with_its_interval() -> None:
    """The os.cpu_count() rule throttled: its req/s against the quota's with the interval
    over three trials, and the throttling of each."""
    records = [
        *_quota_arm("cpus", [1400.0, 1420.0, 1430.0], 250.0),
        *_quota_arm("quota", [970.0, 980.0, 975.0], 0.0),
    ]
    cell = _rows(production_sections(records))["granian"][2]
    assert cell.startswith("req/s +45 % [+"), cell
    assert "(w2 vs w1 at 1 CPU: 1,420 vs 975)" in cell and cell.endswith("throttled 250 vs 0 ms")


def test_plain_make_bench_quota_runs_are_read_too() -> None:
    """Two plain `make bench SCENARIO=db CPU_QUOTA=1` runs (the server's rule, then WORKERS=1):
    no study metadata, the rules told apart by workers against the CPUs each saw — what the
    "not measured" command writes is what the cell reads."""
    records = [
        *_quota_arm("cpus", [1400.0, 1420.0, 1430.0], 250.0, plain=True),
        *_quota_arm("quota", [970.0, 980.0, 975.0], 0.0, plain=True),
    ]
    cell = _rows(production_sections(records))["granian"][2]
    assert cell.startswith("req/s +45 % [+") and "(w2 vs w1 at 1 CPU: 1,420 vs 975)" in cell


def test_plain_make_bench_recycling_pairs_with_a_plain_steady_run() -> None:
    """`make bench … RECYCLE=1000` and the same without, plain runs of one machine at one
    rate: the recycling cell reads them; a steady run at another rate is not its pair."""
    rec = _granian_reload()
    meta = {k: v for k, v in rec.metadata.items() if not k.startswith("study")}
    on = dataclasses.replace(rec, lifecycle=None, recycles={"workers_started": 4}, metadata=meta)
    off = dataclasses.replace(rec, lifecycle=None, metadata=meta, run_id="steady")
    cell = _rows(production_sections([on, off]))["granian"][1]
    assert cell.startswith("0 failed, late not recorded vs 0 failed without (4 workers started)")
    other_rate = dataclasses.replace(off, offered_rps=(off.offered_rps or 0) * 2)
    cell = _rows(production_sections([on, other_rate]))["granian"][1]
    assert cell.startswith("not measured (make bench SERVER=granian ")


def test_a_recycling_run_that_started_no_worker_is_not_a_measurement() -> None:
    """A RECYCLE= run in whose window no worker was replaced (meinheld: 0 workers started)
    measured the server without recycling: the cell says so, never "0 failed vs 0 without"."""
    rec = _granian_reload()
    meta = {**rec.metadata, "study": "any", "study_run": "R1"}
    on = dataclasses.replace(rec, lifecycle=None, recycles={"workers_started": 0}, metadata=meta)
    off = dataclasses.replace(rec, lifecycle=None, metadata=meta, run_id="steady")
    cell = _rows(production_sections([on, off]))["granian"][1]
    assert cell.startswith("not measured: no worker was recycled in the window (0 started")
    assert "failed vs" not in cell


def test_each_quota_is_its_own_comparison_and_is_named() -> None:
    """One study run at 1 CPU (the rule ahead by +45 %) and, later, at 0.5 CPU (ahead by
    +100 %): the cell shows the latest quota's trials alone, named "at 0.5 CPU", never the
    six trials of each rule pooled; the header types no quota."""
    one = [
        *_quota_arm("cpus", [1400.0, 1420.0, 1430.0], 250.0),
        *_quota_arm("quota", [970.0, 980.0, 975.0], 0.0),
    ]
    half = [
        dataclasses.replace(
            r,
            cgroup={**(r.cgroup or {}), "cpu_quota": 0.5},
            run_id=f"half{r.run_id}",
            metadata={**r.metadata, "started_at": "2099-01-01T00:00:00Z"},
        )
        for r in [
            *_quota_arm("cpus", [1000.0, 1010.0, 990.0], 400.0),
            *_quota_arm("quota", [500.0, 505.0, 495.0], 10.0),
        ]
    ]
    lines = production_sections([*one, *half])
    cell = _rows(lines)["granian"][2]
    assert cell.startswith("req/s +100 % [+"), cell
    assert "(w2 vs w1 at 0.5 CPU: 1,000 vs 500)" in cell
    assert "1 CPU" not in next(line for line in lines if line.startswith("| server |"))
    assert "at 1 CPU" in _rows(production_sections(one))["granian"][2]


def test_a_reload_before_format_16_says_late_not_recorded() -> None:
    """gunicorn-sync's captured reload (a record before format 16): 0 requests failed, and
    its late arrivals are no figure of the record: the cell says "late not recorded" and, as
    before, how long arrivals were later than that record's own limit."""
    rows = _rows(production_sections(_records()))
    assert rows["gunicorn-sync"][0].startswith(
        "0 failed, late not recorded at 300 req/s, recovered in 2.0 s (2.0 s with arrivals "
        "late past 102 ms or failed)"
    )


def _reanalysed(server: str) -> Record:
    """The captured reload of `server` with the lifecycle the harness writes now
    (bench.observe.lifecycle.analyse over its kept per-request file)."""
    folder = FIXTURES / "lifecycle"
    rec = next(r for r in _records() if r.server == server and r.lifecycle)
    result = to_load_result(
        parse_oha((folder / f"{server}-reload.oha.json").read_text(), offered_rps=300), 300, 10, {}
    )
    requests = (folder / f"{server}-reload.oha.requests.csv.gz").read_bytes()
    life = rec.lifecycle or {}
    found = lifecycle.analyse(requests, result.errors.to_dict(), 300, 10, float(life["at_s"]))
    return dataclasses.replace(rec, lifecycle=life | found, format_version=FORMAT_VERSION)


def test_a_reload_counts_late_arrivals_as_a_figure() -> None:
    """Issue 32 item 8: gunicorn-sync "0 failed" while arrivals were answered seconds late.
    The record now carries late_arrivals against one fixed limit (LATE_LIMIT_MS) and the
    cell reads "N failed, M late (past X ms)"."""
    rec = _reanalysed("gunicorn-sync")
    life = rec.lifecycle or {}
    late = life["late_arrivals"]
    assert life["failed"] == 0 and isinstance(late, int) and late > 0
    assert life["latency_limit_ms"] == LATE_LIMIT_MS
    cell = _rows(production_sections([rec]))["gunicorn-sync"][0]
    assert cell.startswith(f"0 failed, {late:,} late (past {LATE_LIMIT_MS:,.0f} ms) at 300 req/s")
    assert "late past" not in cell  # the figure, not the remark of older records


def test_the_reload_study_tables_late_arrivals_beside_failed() -> None:
    """The reload study's table reads the same late arrivals as the production cell (its
    `late` metric, a count out of the arrivals like `reload_failed`): "0 failed" never stands
    alone while arrivals were seconds late; a record before format 16 has no figure (None,
    never a zero)."""
    old = next(r for r in _records() if r.server == "gunicorn-sync" and r.lifecycle)
    rec = _reanalysed("gunicorn-sync")
    late = (rec.lifecycle or {})["late_arrivals"]
    assert metric_value(rec, "reload_failed") == 0
    assert metric_value(rec, "late") == late > 0
    assert count_of(rec, "late") == (late, float(Outcome.of_record(rec).arrivals))
    assert metric_value(old, "late") is None
    assert "late" in COUNT_METRICS
    for name in ("reload", "recycle"):
        assert "late" in load_study(name).metrics


def test_the_latency_limit_is_the_same_for_every_server() -> None:
    """The limit is not each server's own p99 before the signal (eventlet's was 1.58 s):
    granian's and gunicorn-sync's reloads are judged against one limit, though their p99s
    before the signal differ."""
    granian, sync = (_reanalysed(s).lifecycle or {} for s in ("granian", "gunicorn-sync"))
    assert granian["p99_before_ms"] != sync["p99_before_ms"]
    assert granian["latency_limit_ms"] == sync["latency_limit_ms"] == LATE_LIMIT_MS


def test_a_failed_reload_run_beside_a_measured_one_is_said() -> None:
    """uwsgi: the study's reload run failed (server exited) and a later run measured it: the
    cell shows the measured run and says the failed one beside it, so the summary never
    reads "15 failed" here while the study reads "run failed" with nothing linking them."""
    path = FIXTURES / "production" / "reload-uwsgi-failed.record.json"
    failed = Record.from_dict(json.loads(path.read_text()))
    failed = dataclasses.replace(failed, lifecycle={"event": "reload"})
    measured = dataclasses.replace(
        _reanalysed("gunicorn-sync"),
        server="uwsgi",
        metadata={**failed.metadata, "started_at": "2099-01-01T00:00:00Z"},
        run_id="later",
    )
    cell = _rows(production_sections([failed, measured]))["uwsgi"][0]
    assert cell.startswith("0 failed, ")
    assert cell.endswith(
        "; 1 other such run(s) failed, the latest: server exited with code 1 during load"
    )


def test_a_recycling_run_counts_late_arrivals_too() -> None:
    """A RECYCLE= run's record carries its late arrivals (recycles.late_arrivals, from the
    per-request file as bench.observe.lifecycle.late counts them): the cell reads "N failed,
    M late (past X ms) vs N failed without"."""
    rec = _granian_reload()
    rows = lifecycle.parse_requests(
        (FIXTURES / "lifecycle" / "gunicorn-sync-reload.oha.requests.csv.gz").read_bytes()
    )
    late = lifecycle.late(rows, 300, 10)
    assert isinstance(late["late_arrivals"], int) and late["late_arrivals"] > 0
    meta = {**rec.metadata, "study": "any", "study_run": "R1"}
    on = dataclasses.replace(
        rec, lifecycle=None, recycles={"workers_started": 4, **late}, metadata=meta
    )
    off = dataclasses.replace(rec, lifecycle=None, metadata=meta, run_id="steady")
    cell = _rows(production_sections([on, off]))["granian"][1]
    assert cell.startswith(
        f"0 failed, {late['late_arrivals']:,} late (past {LATE_LIMIT_MS:,.0f} ms) vs 0 failed "
        "without (4 workers started)"
    ), cell
