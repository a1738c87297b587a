"""The "Production behaviours" section over captured records: a reload of granian and
gunicorn-sync, granian's two cpu-quota arms (w2 by its rule, w1 by the quota) and a 20 s
soak of granian. Every catalog server gets a row, every cell a figure or a reason."""

import dataclasses
import json
from pathlib import Path

from bench.core.record import Record
from bench.core.registry import server_ids
from bench.report.production import NOT_CATALOG, production_sections

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
    reload, recycle, quota, memory = rows["granian"]
    assert reload.startswith("0 failed at 300 req/s, ")
    assert quota.startswith("req/s +47 % (w2 1,428 vs w1 973)")
    assert "MB/h [" in memory and "at 50 req/s" in memory
    assert recycle == "not measured (make study NAME=recycle)"
    assert rows["gunicorn-sync"][0].startswith("0 failed at 300 req/s, recovered in 2.0 s")


def test_servers_without_the_feature_say_so() -> None:
    """waitress and flask-dev: one process, no reload signal, no workers to recycle."""
    rows = _rows(production_sections(_records()))
    for server in ("waitress", "flask-dev"):
        reload, recycle, quota, _memory = rows[server]
        assert reload.startswith("not supported by the server")
        assert recycle.startswith("not supported by the server")
        assert quota == "not supported by the server (one process: no worker rule)"


def test_a_reload_that_killed_the_server_says_failed() -> None:
    """uWSGI (pyuwsgi) before --binary-path: its binary reload re-exec'd the base interpreter,
    which has no pyuwsgi, and the server exited (captured). The recorder now marks such a
    failed run with the event it was asked for; the cell says failed, with the reason."""
    path = FIXTURES / "production" / "reload-uwsgi-failed.record.json"
    failed = Record.from_dict(json.loads(path.read_text()))
    failed = dataclasses.replace(failed, lifecycle={"event": "reload"})
    rows = _rows(production_sections([*_records(), failed]))
    assert rows["uwsgi"][0] == "failed: server exited with code 1 during load"
