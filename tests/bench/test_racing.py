"""TRIALS=auto with several servers races them (bench.harness.racing): the fake harness's
servers answer with scripted req/s per server (seeded lognormal noise), a fake clock charges
each measured run 20 s, and the race must decide what is decidable, drop decided servers and
stop at the budget with the command that would decide the rest."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from bench.core import plan
from bench.core.record import Record
from bench.harness.recorder import Recorder
from bench.harness.run import execute
from bench.harness.session import Harness
from bench.host.placement import cpu_placement
from bench.report import standings
from tests.fakes import FakeSite, FakeTool, result

SERVERS = ("granian", "gunicorn-sync", "uvicorn", "uwsgi")
RUN_S = 20.0  # the fake clock: seconds charged per measured run


def _race(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    rps: dict[str, float],
    sd: float,
    budget_s: int = 3_600,
    seed: int = 7,
) -> tuple[list[dict], str]:
    """Race `rps`'s servers (each trial: its rate × lognormal noise of `sd`); the records and
    stderr."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)
    rng = random.Random(seed)
    site = FakeSite()
    tool = FakeTool()

    def step():
        server = site.started[-1]
        if tool.measured[-1].out.name.endswith("-t0.measure"):
            # a warm-up start's run (never analysed): no draw, the trials' noise stays seeded
            return result(requests=round(rps[server]))
        return result(requests=max(1, round(rps[server] * rng.lognormvariate(0, sd))))

    tool.script = [step] * 10_000
    monkeypatch.setattr("bench.harness.run.clock", lambda: RUN_S * len(tool.measured))

    def harness(first, arms, table, run_dir, progress) -> Harness:
        recorder = Recorder({"hostname": "test"}, cpu_placement(False), tool, progress)
        return Harness(site, tool, recorder, table, run_dir, progress)

    options = plan.Options(
        servers=tuple(rps),
        scenarios=("db",),
        concurrency=(50,),
        duration_s=1,
        warmup_s=0,
        trials=3,
        arch="amd64",
        results=tmp_path / "results",
        overrides={},
        load_threads=1,
        seed=seed,
        precision=plan.Precision(budget_s=budget_s),
    )
    assert execute(options, harness=harness) == 0
    paths = sorted((tmp_path / "results" / "records").glob("*.json"))
    return [json.loads(p.read_text()) for p in paths], capsys.readouterr().err


def _rounds(records: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in records:
        out[rec["server"]] = max(out.get(rec["server"], 0), rec["trial"])
    return out


def test_clear_differences_are_decided_and_ranked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """1000 / 700 / 500 req/s at 2 % noise: decided well before the budget, in the true
    order, and the output ends with the verdict, which the summary repeats."""
    rps = {"granian": 1000.0, "uvicorn": 700.0, "gunicorn-sync": 500.0}
    records, err = _race(tmp_path, monkeypatch, capsys, rps, 0.02)
    last = err.strip().splitlines()[-1]
    assert last.startswith("db c50: decided in "), err[-2000:]
    assert last.endswith("granian > uvicorn > gunicorn-sync"), last
    assert max(_rounds(records).values()) < 20
    auto = records[0]["metadata"]["trials_auto"]
    assert auto["margin"] == 0.05 and auto["max_looks"] >= 1
    summary = (tmp_path / "results" / "summary.md").read_text()
    assert "granian > uvicorn > gunicorn-sync" in summary and "decided in" in summary
    # a race stops on its comparisons: no line of each point's own precision target
    assert "reached the target" not in summary
    assert "TRIALS=auto round 3: db c50:" in err  # the standings after each round


def test_a_decided_server_leaves_the_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two servers 0.5 % apart at 3 % noise take many rounds to be called equivalent; the
    one at half their rate is separated early and runs fewer rounds than they do."""
    rps = {"granian": 1000.0, "uwsgi": 995.0, "gunicorn-sync": 500.0}
    records, err = _race(tmp_path, monkeypatch, capsys, rps, 0.03)
    rounds = _rounds(records)
    assert rounds["gunicorn-sync"] < rounds["granian"] == rounds["uwsgi"], (rounds, err[-1500:])
    last = err.strip().splitlines()[-1]
    assert "= " in last and last.endswith("> gunicorn-sync"), last


def test_an_undecidable_pair_stops_at_the_budget_with_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """7 % apart at 30 % noise cannot be decided in a 10-minute budget (20 s a run): the race
    stops there, says which pair is undecided and the command that would decide it."""
    rps = {"granian": 1000.0, "uwsgi": 930.0}
    records, err = _race(tmp_path, monkeypatch, capsys, rps, 0.30, budget_s=600)
    assert "race stopped (budget)" in err, err[-1500:]
    assert max(_rounds(records).values()) * 2 * RUN_S <= 600 + 2 * RUN_S
    assert "undecided after" in err and "make bench SERVER=" in err and "TRIALS=auto" in err
    summary = (tmp_path / "results" / "summary.md").read_text()
    assert "undecided in" in summary and "?" in summary
    # the pair's interval and what would decide it, in the output and the summary alike
    note = re.search(r"^  (granian/uwsgi|uwsgi/granian) \S+× \[.*at ±5 %.*$", err, re.M)
    assert note is not None, err[-1500:]
    assert f"  - {note.group(0).strip()}" in summary


def test_one_server_keeps_the_precision_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A single server has nothing to race: rounds stop on its interval's width as before."""
    records, err = _race(tmp_path, monkeypatch, capsys, {"granian": 1000.0}, 0.01)
    assert "TRIALS=auto: stopped on precision" in err, err[-1500:]
    assert "race stopped" not in err
    assert len(records) >= 3


def test_make_tunes_runs_are_not_a_race_of_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same records marked as make tune's search (metadata.tune): its climbs pair other
    rounds than a race's, and its answer is make tune's own; standings judge none of them."""
    rps = {"granian": 1000.0, "uvicorn": 700.0}
    records, _ = _race(tmp_path, monkeypatch, capsys, rps, 0.02)
    raced = [Record.from_dict(r) for r in records]
    assert standings.races(raced)
    searched = [
        Record.from_dict({**r, "metadata": {**r["metadata"], "tune": {"objective": "rps"}}})
        for r in records
    ]
    assert standings.races(searched) == []
