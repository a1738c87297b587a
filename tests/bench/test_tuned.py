"""make tune's answer file and its use (bench.report.tuned), the search space and the figures
a configuration's records give (bench.harness.tuner): over fixture records and files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from bench.core.record import Record
from bench.core.registry import load_all
from bench.harness import tuner
from bench.report import tuned

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOST = {
    "machine_label": None,
    "hostname": "box",
    "machine_id": "0123456789ab",
    "cpu_model": "Test CPU",
    "cpu_count": 2,
    "cpus_usable": 2,
}
NATIVE = {"runtime": "native", "cpus": None, "memory_bytes": None}


def _answer(knobs: dict[str, int], runtime: dict = NATIVE) -> dict:
    return {
        "machine": tuned.machine_identity(HOST),
        "runtime": runtime,
        "recommended": {"knobs": knobs},
    }


def test_the_answer_is_found_for_its_machine_point_and_runtime_only(tmp_path: Path) -> None:
    """find() returns the file and the knobs for the machine, server, point and runtime it
    holds for; another CPU model, another point or a memory limit find nothing."""
    path = tuned.answer_path(tmp_path, tuned.machine_identity(HOST), "granian", "db", 50)
    tuned.write(path, _answer({"workers": 2, "threads": 8}))
    assert path.parent.name == "box-01234567" and path.name == "granian_db_c50.json"
    assert tuned.find(tmp_path, HOST, "granian", "db", 50, NATIVE) == (
        path,
        {"workers": 2, "threads": 8},
    )
    assert tuned.find(tmp_path, HOST | {"cpu_model": "Other"}, "granian", "db", 50, NATIVE) is None
    assert tuned.find(tmp_path, HOST, "granian", "db", 10, NATIVE) is None
    limited = NATIVE | {"runtime": "docker", "memory_bytes": 2**29}
    assert tuned.find(tmp_path, HOST, "granian", "db", 50, limited) is None


def test_the_answer_is_replaced_atomically(tmp_path: Path) -> None:
    """A second make tune of the point replaces the file whole; no temporary file is left."""
    path = tuned.answer_path(tmp_path, HOST, "granian", "db", 50)
    tuned.write(path, _answer({"workers": 1}))
    tuned.write(path, _answer({"workers": 4}))
    assert json.loads(path.read_text())["recommended"]["knobs"] == {"workers": 4}
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_the_lines_to_paste_carry_the_knobs() -> None:
    """make's line names the knobs that have a make variable; the server's line is its
    declared argv with the knobs filled in."""
    resolved = {"workers": 2, "threads": 8, "backlog": 2048, "timeout": 30, "keepalive": 2}
    lines = tuned.paste("gunicorn-gthread", "db", 50, {"workers": 2, "threads": 8}, resolved)
    assert lines["make"] == (
        "make bench SERVER=gunicorn-gthread SCENARIO=db CONCURRENCY=50 THREADS=8 WORKERS=2"
    )
    assert "--workers 2" in lines["argv"] and "--threads 8" in lines["argv"]
    assert "--backlog 2048" in lines["argv"]


def test_the_space_comes_from_the_declaration_or_knobs() -> None:
    """gunicorn-gthread's declared space on 2 CPUs: workers 1, 2, 4, 8 and threads 1..16,
    both ordered; KNOBS= replaces it (cpus tokens resolved, duplicates merged)."""
    spec = load_all()["gunicorn-gthread"]
    space = tuner.space_for(spec, None, {"workers": 2, "threads": 4, "backlog": 2048}, 2)
    assert space.values == {"workers": (1, 2, 4, 8), "threads": (1, 2, 4, 8, 16)}
    assert space.ordered == ("workers", "threads")
    given = {"workers": ("1", "cpus", "2"), "backlog": ("64", "2048")}
    space = tuner.space_for(spec, given, {"workers": 2, "threads": 4, "backlog": 2048}, 2)
    assert space.values == {"workers": (1, 2), "backlog": (64, 2048)}
    assert space.ordered == ("workers",)
    assert len(space.grid(space.start())) == 2


def _fixture_record() -> Record:
    return Record.from_dict(json.loads((FIXTURES / "export" / "granian-c10-t1.json").read_text()))


def test_a_configuration_s_figure_or_why_it_is_out() -> None:
    """req/s (or p99) and RSS from an ok record; a failed record's reason; OOM kills under
    a memory limit; too many failed requests."""
    rec = _fixture_record()
    got = tuner.measured_of([rec], "rps", None)
    assert got.failure is None and got.figure == rec.rps
    assert tuner.measured_of([rec], "p99", None).figure == rec.latency_ms["p99"]
    failed = replace(rec, status="failed", reason="server exited with 137")
    assert tuner.measured_of([failed], "rps", None).failure == "server exited with 137"
    oom = replace(rec, container={"oom_kills": 2})
    assert tuner.measured_of([oom], "rps", 2**29).failure == "OOM kills: 2 (memory limit 512 MiB)"
    errors = replace(rec, errors={**(rec.errors or {}), "non_2xx": rec.requests})
    assert "failed request(s)" in str(tuner.measured_of([errors], "rps", None).failure)


def test_the_summary_says_tuned_or_declared() -> None:
    """Each configuration make bench measured: tuned (with its file) or declared; records
    without the key (before format 11) say nothing."""
    rec = _fixture_record()
    assert tuned.summary_lines([rec]) == []
    source = "tuned/box-01234567/granian_db_c50.json"
    one = replace(rec, metadata={**rec.metadata, "tuned": source})
    other = replace(
        rec, server="uvicorn", knobs={"workers": 2}, metadata={**rec.metadata, "tuned": None}
    )
    line = tuned.summary_lines([one, other])[0]
    assert f": tuned ({source})" in line and "uvicorn w2: declared" in line


def test_a_server_without_knobs_is_named_without_an_empty_part() -> None:
    """Issue 32 (plots and labels): daphne has no knobs; its item read "daphne : declared"
    (the empty knobs part left a space). It reads "daphne: declared"."""
    rec = _fixture_record()
    daphne = replace(rec, server="daphne", knobs={}, metadata={**rec.metadata, "tuned": None})
    line = tuned.summary_lines([daphne])[0]
    assert line.endswith("daphne: declared") and " : " not in line
