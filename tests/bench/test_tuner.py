"""make tune in-process (bench.harness.tuner.execute with a fake site and load tool): each
configuration started through make bench's block runner and recorded, progress per round,
the answer saved and printed; then make bench's options pick the tuned configuration up and
its records say so."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from bench.cli.options import with_tuned
from bench.core import plan
from bench.harness import tuner
from bench.harness.recorder import Recorder
from bench.harness.run import Harness, execute
from bench.host.placement import cpu_placement
from tests.fakes import FakeSite, FakeTool, result


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run directories and the run lock in a temporary directory."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)


class KnobSite(FakeSite):
    """A fake site that remembers the knobs of the server it started last."""

    last: dict = {}

    def serve(self, spec, knobs, environment, opts, log_name):
        self.last = dict(knobs)
        return super().serve(spec, knobs, environment, opts, log_name)


def _options(results: Path, **kw: object) -> plan.Options:
    base = dict(
        servers=("gunicorn-gthread",),
        scenarios=("db",),
        concurrency=(50,),
        duration_s=2,
        warmup_s=1,
        trials=3,
        arch="amd64",
        results=results,
        overrides={},
        load_threads=1,
        seed=3,
        precision=plan.Precision(budget_s=3600),
    )
    base.update(kw)
    return plan.Options(**base)  # type: ignore[arg-type]


def _fakes(rps: dict[int, int] | None = None, seed: int = 5) -> tuple[KnobSite, FakeTool]:
    """workers=1 serves 1.5x what workers=2 does (the fake site's own default), 2 % noise
    (`rps`: workers -> req/s instead)."""
    site, rng = KnobSite(), random.Random(seed)
    rates = rps or {1: 1500, 2: 1000}

    def step():
        base = rates[site.last.get("workers", 1)]
        return result(requests=int(base * 2 * math.exp(rng.gauss(0, 0.02))))

    return site, FakeTool(script=[step] * 400)


def _harness(site, tool):
    def harness(first, arms, table, run_dir, progress) -> Harness:
        recorder = Recorder({"hostname": "test"}, cpu_placement(False), tool, progress)
        return Harness(site, tool, recorder, table, run_dir, progress)

    return harness


def test_tune_then_bench_measures_the_tuned_configuration(tmp_path: Path, capsys) -> None:
    """KNOBS=workers=1,2: the climb decides workers=2 worse, so workers=1 is the answer,
    saved with the lines to paste; the records carry metadata.tune; with_tuned then gives
    make bench the tuned knobs (not the site's default of 2), and its records name the
    answer file."""
    results = tmp_path / "results"
    site, tool = _fakes()
    opts = _options(results)
    status = tuner.execute(opts, {"workers": ("1", "2")}, "rps", harness=_harness(site, tool))
    assert status == 0
    out, err = capsys.readouterr()
    assert "tune gunicorn-gthread db c50 (rps): decided" in out
    assert "tune round" in err and "still in:" in err
    [path] = (results / "tuned").glob("*/gunicorn-gthread_db_c50.json")
    answer = json.loads(path.read_text())
    assert answer["best"]["knobs"]["workers"] == 1 and answer["decided"]
    assert answer["runner_up"]["label"] == "workers=2" and answer["runner_up"]["low"] > 1
    assert "WORKERS=1" in answer["recommended"]["paste"]["make"]
    # tuned vs declared (the site's workers=2), on the rounds they shared
    assert answer["declared"]["label"] == "workers=2" and answer["declared"]["low"] > 1
    assert "  declared (server.toml): workers=2: best/it " in out
    records = [json.loads(p.read_text()) for p in (results / "records").glob("*.json")]
    assert all(r["metadata"]["tune"] == {"objective": "rps"} for r in records)
    assert {r["knobs"]["workers"] for r in records} == {1, 2}

    bench = with_tuned(replace(opts, precision=None, trials=1), "1")
    source = str(path.relative_to(results))
    assert bench.tuned == {"gunicorn-gthread": (source, answer["recommended"]["knobs"])}
    assert with_tuned(replace(opts, precision=None), "0").tuned == {}
    assert with_tuned(replace(opts, overrides={"workers": 1}), "1").tuned == {}
    site, tool = _fakes()
    before = set((results / "records").glob("*.json"))
    assert execute(bench, harness=_harness(site, tool)) == 0
    new = [json.loads(p.read_text()) for p in set((results / "records").glob("*.json")) - before]
    assert new and all(r["metadata"]["tuned"] == source for r in new)
    assert all(r["knobs"]["workers"] == 1 for r in new)
    summary = (results / "summary.md").read_text()
    assert f"tuned ({source})" in summary
    # the search's answer itself, with the line to paste, on the summary's first screen
    answer_line = next(
        x for x in summary.splitlines() if x.startswith("- gunicorn-gthread db c50 on ")
    )
    assert answer["line"] in answer_line and answer["recommended"]["paste"]["make"] in answer_line
    assert summary.index("**Tuned by `make tune`**") < summary.index("## Details")
