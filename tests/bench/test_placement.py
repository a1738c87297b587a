"""PIN=1: the server side and the load tool on separate CPUs (bench.host.placement), and the
harness handing each its half: the load tool's requests carry the load CPUs, every record
says where each ran.

Expectations by hand: of CPUs {0, 1, 2, 3} the server takes the first half {0, 1} and the
load tool {2, 3}; of 3 the server takes 2 (it is the side being measured); one CPU cannot
be split, so nothing is pinned.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.core.progress import Progress
from bench.harness.recorder import Recorder
from bench.harness.run import Harness, execute, make_harness
from bench.host.placement import cpu_placement
from bench.host.procs import ProcessTable
from tests.bench.test_orchestrator import _options
from tests.fakes import FakeSite, FakeTool


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run directories and the run lock in a temporary directory (as test_orchestrator)."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)


def _cpus(monkeypatch: pytest.MonkeyPatch, cpus: set[int]) -> None:
    monkeypatch.setattr("bench.host.placement.os.sched_getaffinity", lambda pid: set(cpus))


@pytest.mark.parametrize(
    ("cpus", "server", "load"),
    [({0, 1, 2, 3}, {0, 1}, {2, 3}), ({4, 5, 6}, {4, 5}, {6})],
)
def test_pin_splits_the_cpus_in_two_disjoint_halves(
    cpus: set[int], server: set[int], load: set[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """PIN=1: the first half (rounded up) for the server, the rest for the load tool."""
    _cpus(monkeypatch, cpus)
    placed = cpu_placement(True)
    assert placed.pinned and (placed.server_cpus, placed.load_cpus) == (server, load)
    shared = cpu_placement(False)
    assert not shared.pinned and shared.server_cpus == shared.load_cpus == cpus


def test_one_cpu_cannot_be_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    _cpus(monkeypatch, {3})
    placed = cpu_placement(True)
    assert not placed.pinned and placed.server_cpus == placed.load_cpus == {3}


def _run_pinned(results: Path, tool: FakeTool, pin: bool) -> tuple[int, list[dict]]:
    """The orchestrator with the fake site and tool, the placement chosen as make_harness
    chooses it (cpu_placement(first.pin))."""

    def harness(first, arms, table, run_dir, progress) -> Harness:
        recorder = Recorder({"hostname": "test"}, cpu_placement(first.pin), tool, progress)
        return Harness(FakeSite(), tool, recorder, table, run_dir, progress)

    status = execute(_options(results, pin=pin, scenarios=("plaintext",)), harness=harness)
    records = [json.loads(p.read_text()) for p in sorted((results / "records").glob("*.json"))]
    # the trials' records (each server's warm-up start is recorded too, and placed alike)
    warm = [r for r in records if r["metadata"].get("warmup_start")]
    assert all(
        r["metadata"]["cpu_placement"] == records[-1]["metadata"]["cpu_placement"] for r in warm
    )
    return status, [r for r in records if not r["metadata"].get("warmup_start")]


@pytest.mark.parametrize("pin", [True, False])
def test_the_load_tool_runs_on_its_half_and_the_records_say_so(
    pin: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the orchestrator on CPUs {0, 1, 2, 3}: with PIN=1 every measured request of
    the load tool is confined to {2, 3} and every record's metadata.cpu_placement says
    pinned, server [0, 1], load [2, 3]; without it the tool is not confined and the
    records say so."""
    _cpus(monkeypatch, {0, 1, 2, 3})
    tool = FakeTool()
    status, records = _run_pinned(tmp_path, tool, pin)
    assert status == 0 and len(records) == 2 and tool.measured
    want = {"pinned": pin, "server_cpus": [0, 1], "load_cpus": [2, 3]}
    if not pin:
        want = {"pinned": False, "server_cpus": [0, 1, 2, 3], "load_cpus": [0, 1, 2, 3]}
    assert all(r["metadata"]["cpu_placement"] == want for r in records)
    assert all(req.cpus == ({2, 3} if pin else None) for req in tool.measured)


@pytest.mark.parametrize("pin", [True, False])
def test_the_real_harness_places_by_pin(
    pin: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make_harness gives the site and the recorder the placement PIN asks for."""
    _cpus(monkeypatch, {0, 1, 2, 3})
    opts = _options(tmp_path, pin=pin)
    table = ProcessTable()
    try:
        h = make_harness(opts, [opts], table, tmp_path, Progress(1, 0))
    finally:
        table.stop_all()
    assert h.recorder.placement.pinned is pin
    assert h.site.placement is h.recorder.placement
