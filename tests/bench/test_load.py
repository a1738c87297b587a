"""The load-tool registry (bench.load): tools are found, not listed; each declares what the rest
of the harness asks of it; a record's load_tool maps back to those declarations."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest

from bench import load
from bench.core import scenario
from bench.core.record import load_records
from bench.load import Errors, Latency, LoadResult

REFERENCE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "reference-2026-11"
LOAD_DIR = Path(load.__file__).parent


def test_every_module_of_the_package_is_a_discovered_tool() -> None:
    """Each bench/load/*.py but __init__ exports TOOL, and the registry holds exactly those."""
    modules = sorted(p.stem for p in LOAD_DIR.glob("*.py") if p.stem != "__init__")
    assert len(load.kinds()) == len(modules)
    for stem in modules:
        assert sys.modules[f"bench.load.{stem}"].TOOL in load.kinds().values()


def test_names_default_first_then_by_name() -> None:
    """LOAD= takes the selectable tools, the default first: wrk, then locust, oha, wsload; the
    race pattern is a study's own and LOAD= cannot name it."""
    assert load.names() == ("wrk", "locust", "oha", "wsload")
    assert load.default_name() == "wrk"
    assert load.open_loop_name() == "oha"
    assert "race" in load.kinds() and "race" not in load.names()
    with pytest.raises(KeyError):
        load.tool("race")


@pytest.mark.parametrize("name", ["wrk", "locust", "oha"])
def test_each_tool_is_configured_by_the_registry(name: str) -> None:
    """tool(name, LOAD_THREADS, LOCUST_WORKERS) gives that tool, each taking its own variable."""
    tool = load.tool(name, load_threads=3, load_workers=2)
    assert tool.name == name
    settings = tool.settings(10)
    expected = {"wrk": (3, None), "locust": (None, 2), "oha": (None, None)}[name]
    assert (settings["load_threads"], settings["load_workers"]) == expected
    assert load.tool(None).name == load.default_name()


def test_scenarios_follow_what_the_tool_drives() -> None:
    """URL tools drive every URL scenario; the mix tool the mix scenarios only."""
    url = scenario.needing(scenario.URL)
    assert load.scenarios_for("wrk") == load.scenarios_for("oha") == url
    assert "plaintext" in url and "saas" not in url
    assert load.scenarios_for("locust") == ("saas",) == scenario.needing(scenario.MIX)


def test_properties_asked_of_a_records_tool() -> None:
    """Closed or open loop, threads, default and per-request files, by the record's name; a
    name this checkout does not know has none of them."""
    assert load.traits("oha").open_loop and not load.traits("wrk").open_loop  # type: ignore[union-attr]
    assert load.is_default("wrk") and not load.is_default("locust")
    assert load.uses_threads("wrk") and not load.uses_threads("oha")
    raw = ["raw/a.measure.oha.json", "raw/a.measure.oha.requests.csv.gz", "raw/b.wrk.txt"]
    assert load.per_request_files("oha", raw) == ["raw/a.measure.oha.requests.csv.gz"]
    assert load.per_request_files("wrk", raw) == []
    assert load.traits("ab") is None and not load.is_default("ab") and not load.uses_threads("ab")
    assert load.per_request_files("ab", raw) == []


def test_every_shipped_record_names_a_known_tool_and_open_loop_means_a_rate() -> None:
    """Old records read through the registry: every load_tool in the shipped reference is
    known, and a measured run of an open-loop tool carries its offered rate."""
    records, problems = load_records(REFERENCE, with_reference=True)
    assert records and not problems
    assert {r.load_tool for r in records} >= {"wrk", "oha", "locust", "race"}
    for rec in records:
        kind = load.traits(rec.load_tool)
        assert kind is not None, rec.load_tool
        if rec.status == "ok" and kind.open_loop:
            assert rec.offered_rps is not None, rec.run_id


def test_per_request_files_of_shipped_records_read_back() -> None:
    """The reference's per-request files, found by asking the record's tool, read as latencies."""
    records, _ = load_records(REFERENCE, with_reference=True)
    files = [
        REFERENCE / n for r in records for n in load.per_request_files(r.load_tool, r.raw_files)
    ]
    present = [f for f in files if f.exists()]
    assert present
    samples = load.read_per_request_ms(present[0])
    assert samples and all(s >= 0 for s in samples)


def test_a_file_that_is_not_a_per_request_file_is_a_parse_error(tmp_path: Path) -> None:
    """No header, or a bad line: ParseError, never a silent empty list."""
    from bench.core.parse import ParseError

    bad = tmp_path / "x.csv.gz"
    bad.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    with pytest.raises(ParseError):
        load.read_per_request_ms(bad)
    worse = tmp_path / "y.csv"
    worse.write_text(f"{load.PER_REQUEST_HEADER}\n1.0,oops,200\n")
    with pytest.raises(ParseError):
        load.read_per_request_ms(worse)


def test_load_result_names_its_per_request_file() -> None:
    """per_request is the raw file the tool named, or None when it kept none."""
    base = dict(
        requests=1, duration_s=1.0, rps=1.0, latency=Latency(), errors=Errors(), raw={"k": b"x"}
    )
    assert LoadResult(**base, per_request_name="k").per_request == b"x"  # type: ignore[arg-type]
    assert LoadResult(**base).per_request is None  # type: ignore[arg-type]


NEW_TOOL = """
from typing import ClassVar
from bench.core import scenario


class Siege:
    name: ClassVar[str] = "siege"
    open_loop: ClassVar[bool] = False
    busy: ClassVar[bool] = False
    drives: ClassVar[str] = scenario.URL
    per_request: ClassVar[str | None] = None
    selectable: ClassVar[bool] = True
    default: ClassVar[bool] = False
    variables: ClassVar[tuple[str, ...]] = ()
    primes: ClassVar[bool] = True
    version = None

    @classmethod
    def configured(cls, load_threads, load_workers):
        return cls()


TOOL = Siege
"""


def test_a_new_tool_is_one_new_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module added to the package is a LOAD= choice with its scenarios: no list to edit."""
    (tmp_path / "siege.py").write_text(NEW_TOOL)
    monkeypatch.setattr(load, "__path__", [*load.__path__, str(tmp_path)])
    load.kinds.cache_clear()
    try:
        assert load.names() == ("wrk", "locust", "oha", "siege", "wsload")
        assert load.tool("siege").name == "siege"
        assert load.scenarios_for("siege") == load.scenarios_for("wrk")
    finally:
        monkeypatch.undo()
        load.kinds.cache_clear()
        sys.modules.pop("bench.load.siege", None)
    assert "siege" not in load.names()


def test_an_oha_run_names_its_per_request_file_in_the_result() -> None:
    """The per-request file oha's run keeps is what result.per_request gives the observers
    (LIFECYCLE, make soak); without it, None."""
    from bench.load.oha import REQUESTS_NAME, parse_oha, requests_csv, to_load_result

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "oha"
    parsed = parse_oha((fixtures / "normal.json").read_text(), offered_rps=100)
    csv_gz = gzip.compress(requests_csv(fixtures / "normal.db.gz").encode())
    kept = to_load_result(parsed, 100, parsed.duration_s, {REQUESTS_NAME: csv_gz})
    assert kept.per_request == csv_gz
    assert to_load_result(parsed, 100, parsed.duration_s, {}).per_request is None
