"""Records are written atomically, never overwritten, and read back tolerantly."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from bench.core.record import (
    FORMAT_VERSION,
    Record,
    RecordError,
    load_records,
    record_name,
    write_record,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "records"


def _record() -> Record:
    data = json.loads(next((FIXTURES / "machine-a").glob("rec0.json")).read_text())
    return Record.from_dict(data)


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    """A written record loads back equal, with its raw file listed and on disk."""
    rec = _record()
    path = write_record(tmp_path, rec, {"wrk.txt": "raw output\n"})
    loaded, problems = load_records(tmp_path)
    assert problems == [] and len(loaded) == 1
    assert loaded[0] == replace(rec, raw_files=[f"raw/{path.stem}.wrk.txt"])
    assert (tmp_path / loaded[0].raw_files[0]).read_text() == "raw output\n"
    assert json.loads(path.read_text())["format_version"] == 1
    assert not list(tmp_path.rglob(".tmp-*")), "no temp file left behind"


def test_existing_record_is_never_overwritten(tmp_path: Path) -> None:
    """Writing a record whose file exists raises, and the earlier file stays byte-identical."""
    rec = _record()
    path = write_record(tmp_path, rec, {})
    before = path.read_bytes()
    with pytest.raises(FileExistsError):
        write_record(tmp_path, replace(rec, rps=1.0), {})
    assert path.read_bytes() == before


def test_corrupt_foreign_and_future_files_are_skipped_with_a_line_each(tmp_path: Path) -> None:
    """Only usable records load; every other JSON file gets one problem line naming it."""
    shutil.copytree(FIXTURES, tmp_path / "r")
    records, problems = load_records(tmp_path / "r")
    assert len(records) == 15
    assert len(problems) == 3
    assert any("corrupt.json" in p and "unreadable" in p for p in problems)
    assert any("foreign.json" in p and "not a record" in p for p in problems)
    assert any("future.json" in p and "99" in p for p in problems)


def test_unknown_format_version_is_refused() -> None:
    """from_dict refuses a version this code does not know."""
    data = _record().to_dict() | {"format_version": FORMAT_VERSION + 1}
    with pytest.raises(RecordError, match=f"format_version {FORMAT_VERSION + 1}"):
        Record.from_dict(data)


def test_version_1_records_load_without_the_keys_version_2_added() -> None:
    """Records written before resources/sockets existed still load, with those as None."""
    data = json.loads((FIXTURES / "machine-a" / "rec0.json").read_text())
    assert data["format_version"] == 1 and "resources" not in data
    rec = Record.from_dict(data)
    assert rec.resources is None and rec.sockets is None


def test_record_name_is_safe_and_specific() -> None:
    """The file stem carries time, host, server, scenario, concurrency, trial; no odd chars."""
    name = record_name(replace(_record(), server="gunicorn-sync"))
    assert name.startswith("20261123T010100Z_vm_gunicorn-sync_plaintext_c10_t1_")
    assert "/" not in name and " " not in name


def test_shipped_reference_stays_out_of_a_users_set_unless_asked(tmp_path: Path) -> None:
    """results/reference/ (the shipped run) is not merged into RESULTS=results; it is with
    REFERENCE=1, and RESULTS=results/reference reads it as any set."""
    own = _record()
    write_record(tmp_path, own, {})
    write_record(tmp_path / "reference", replace(own, run_id="shipped"), {})
    write_record(tmp_path / "arm64-vm", replace(own, run_id="copied"), {})
    mine, _ = load_records(tmp_path)
    assert sorted(r.run_id for r in mine) == sorted([own.run_id, "copied"])
    merged, _ = load_records(tmp_path, with_reference=True)
    assert "shipped" in {r.run_id for r in merged} and len(merged) == 3
    reference, _ = load_records(tmp_path / "reference")
    assert [r.run_id for r in reference] == ["shipped"]


def test_a_users_results_are_ignored_by_git_and_the_reference_is_not() -> None:
    """make bench writes under results/ and leaves `git status` clean; the shipped reference
    stays tracked."""
    import subprocess

    from bench.core.registry import ROOT

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", path]).returncode == 0

    assert ignored("results/summary.md") and ignored("results/system.md")
    assert ignored("results/records/x.json") and ignored("results/plots/db.png")
    assert not ignored("results/reference/summary.md")
    assert not ignored("results/reference/records/x.json")


def test_version_7_container_record_loads_and_older_ones_have_no_container() -> None:
    """A real RUNTIME=docker record (make bench ... RUNTIME=docker CPUS=1 MEMORY=512m, this
    machine) loads with its `container` section; records of earlier versions load with none."""
    path = FIXTURES.parent / "container_records" / "granian-db-docker-cpus1.json"
    rec = Record.from_dict(json.loads(path.read_text()))
    assert rec.format_version == 7 and rec.metadata["runtime"] == "docker"
    box = rec.container
    assert box is not None and box["image_id"].startswith("sha256:")
    assert (box["cpus"], box["memory_bytes"], box["network"]) == (1.0, 512 * 2**20, "host")
    assert (box["quota_us"], box["period_us"]) == (100_000, 100_000)
    assert box["cgroup_version"] == "v1" and box["engine"]["cgroup_driver"] == "cgroupfs"
    older = Record.from_dict(json.loads((FIXTURES / "machine-a" / "rec0.json").read_text()))
    assert older.container is None


def test_session_and_start_ids_are_read_or_derived() -> None:
    """A format-10 record's session and start are its own ids; an older record gets a stable
    pseudo-session from its machine, kernel, CPU, seed and study run, and a pseudo-start per
    server and trial, so that two invocations never read as one."""
    from bench.core.record import session_of, start_of

    old = _record()
    assert session_of(old) == session_of(replace(old, rps=1.0)).lower()  # stable
    assert session_of(old).startswith("legacy-")
    reseeded = replace(old, metadata={**old.metadata, "seed": 12345})
    assert session_of(reseeded) != session_of(old)
    other_cpu = replace(old, metadata={**old.metadata, "cpu_model": "Intel Xeon"})
    assert session_of(other_cpu) != session_of(old)
    assert start_of(old) != start_of(replace(old, trial=old.trial + 1))
    assert start_of(old) == start_of(replace(old, concurrency=old.concurrency + 1))
    new = replace(old, metadata={**old.metadata, "session_id": "s1", "start_id": "b1"})
    assert (session_of(new), start_of(new)) == ("s1", "b1")


def test_warmup_and_foreign_load_are_kept_but_not_analysed(tmp_path: Path) -> None:
    """A warm-up start's run and a run under foreign load load back (format 10 keys) and
    are not analysed; an ordinary ok run is."""
    from bench.core.record import analysed

    rec = _record()
    assert analysed(rec)
    warm = replace(rec, metadata={**rec.metadata, "warmup_start": True}, run_id="w" * 32)
    busy = replace(rec, foreign_load=True, foreign_cpu_percent=55.0, run_id="f" * 32)
    busy = replace(busy, foreign_top=[["burner", 50.0]], format_version=FORMAT_VERSION)
    for made in (warm, busy):
        write_record(tmp_path, made, {})
    loaded = {r.run_id: r for r in load_records(tmp_path)[0]}
    assert not analysed(loaded["w" * 32]) and not analysed(loaded["f" * 32])
    assert loaded["f" * 32].foreign_top == [["burner", 50.0]]
    assert not analysed(replace(rec, status="failed"))
    # a repeat under foreign load too stands for its run: a busy machine still yields trials
    assert analysed(replace(busy, metadata={**busy.metadata, "repeat_of": busy.run_id}))


def test_app_flavor_round_trips_and_reads_framework_before_it(tmp_path: Path) -> None:
    """app_flavor (format 17, no new version) is written and read back; a record without
    the key (every one before it) is the framework app's."""
    from bench.core.record import flavor_of

    rec = _record()
    assert rec.app_flavor is None and flavor_of(rec) == "framework"
    write_record(tmp_path, replace(rec, app_flavor="raw", format_version=FORMAT_VERSION), {})
    [loaded], problems = load_records(tmp_path)
    assert problems == [] and loaded.app_flavor == "raw" and flavor_of(loaded) == "raw"
    assert FORMAT_VERSION == 17
