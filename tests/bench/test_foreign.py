"""The foreign-load guard: CPU used outside the harness's own trees, measured on a real CPU
burner (a busy loop this test starts and stops by PID), and what a marked run becomes."""

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from bench.core.record import Record
from bench.observe.foreign import THRESHOLD_PERCENT, ForeignLoad, ForeignSampler, own_pids
from bench.report import disturbed

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "records"
BURN = "import time\nend = time.time() + 60\nwhile time.time() < end: pass\n"


@pytest.fixture
def burner() -> Iterator[subprocess.Popen]:
    """A busy loop on one CPU (it ends by itself after a minute if the test dies)."""
    proc = subprocess.Popen([sys.executable, "-c", BURN])
    yield proc
    proc.kill()
    proc.wait()


def _burned_percent(proc: subprocess.Popen, seconds: float, *samplers: ForeignSampler) -> float:
    """Run the samplers over one window; the burner's own CPU over it (100 = one CPU): the
    machine may be shared, so what the burner got is measured, not assumed."""
    burner = psutil.Process(proc.pid)
    before, started = sum(burner.cpu_times()[:2]), time.monotonic()
    for sampler in samplers:
        sampler.start()
    time.sleep(seconds)
    for sampler in samplers:
        sampler.stop()
    return (sum(burner.cpu_times()[:2]) - before) / (time.monotonic() - started) * 100


def test_a_burner_outside_the_harness_is_foreign_load(burner: subprocess.Popen) -> None:
    """A process outside the own set burning a CPU: counted (at least what it burned, less
    the sampling's slack), marked, named."""
    sampler = ForeignSampler(own=lambda: {os.getpid()}, interval_s=0.2)
    burned = _burned_percent(burner, 2.0, sampler)
    load = sampler.result()
    # a shared machine's CPUs may leave the burner little: what it got is what counts
    assert burned > 5, "the burner got too little CPU to tell"
    assert load.cpu_percent > 0.6 * burned and load.marked == (load.cpu_percent > 10)
    assert any(name.startswith("python") for name, _ in load.top)
    fields = load.to_fields()
    assert fields["foreign_load"] is load.marked
    assert fields["foreign_cpu_percent"] == round(load.cpu_percent, 1)


def test_the_harness_own_tree_is_never_foreign(burner: subprocess.Popen) -> None:
    """The same burner as a child of this process (the harness's tree): not counted. Two
    samplers over one window: the one that owns the tree sees the burner's CPU less."""
    assert burner.pid in own_pids()
    mine = ForeignSampler(own=own_pids, interval_s=0.2)
    alone = ForeignSampler(own=lambda: {os.getpid()}, interval_s=0.2)
    burned = _burned_percent(burner, 2.0, mine, alone)
    difference = alone.result().cpu_percent - mine.result().cpu_percent
    assert burned > 5, "the burner got too little CPU to tell"
    assert 0.6 * burned < difference < 1.4 * burned  # not 0: the tree is left out


def test_threshold_is_above_ten_percent_of_a_cpu() -> None:
    """The documented threshold: over 10 % of one CPU averaged over the run."""
    assert THRESHOLD_PERCENT == 10.0
    assert not ForeignLoad(10.0).marked and ForeignLoad(10.1).marked


def _record() -> Record:
    return Record.from_dict(json.loads((FIXTURES / "machine-a" / "rec0.json").read_text()))


def test_summary_names_the_runs_under_foreign_load() -> None:
    """The summary's paragraph: the marked run, its CPU and top process, and its repeat."""
    rec = _record()
    marked = replace(
        rec, foreign_load=True, foreign_cpu_percent=93.0, foreign_top=[["burner", 90.0]]
    )
    repeat = replace(rec, run_id="r" * 32, metadata={**rec.metadata, "repeat_of": marked.run_id})
    lines = disturbed.summary_lines([marked, repeat])
    assert lines[0].startswith("**Foreign load** (1 run(s)): ")
    assert "93 % of a CPU (burner 90 %), repeated" in lines[0]
    assert disturbed.summary_lines([rec, repeat]) == []
    busy_repeat = replace(repeat, foreign_load=True, foreign_cpu_percent=40.0)
    assert "a repeat, analysed in its run's place" in disturbed.summary_lines([busy_repeat])[0]
