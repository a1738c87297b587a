"""The server's share (bench/report/share.py) over synthetic records: CPU µs per request from
the server tree's CPU and the requests, raw against framework within one session only, the
interval from the project's stats, and details/share.md linked from the summary."""

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from bench.core.record import Record
from bench.report import share
from bench.report.stats import difference
from bench.report.summary import render_report

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "records"


def _base() -> Record:
    rec = Record.from_dict(json.loads((FIXTURES / "machine-a" / "rec0.json").read_text()))
    return replace(rec, server="granian", app="wsgi", app_framework="flask", scenario="plaintext")


def _trials(flavor: str | None, cpu_pcts: list[float], session: str = "s1") -> list[Record]:
    """One record per trial: 10 s windows of 100,000 requests at the given server CPU %."""
    base = _base()
    return [
        replace(
            base,
            trial=i + 1,
            run_id=f"{flavor}{session}{i}".ljust(32, "0"),
            app_flavor=flavor,
            app_framework=None if flavor == "raw" else "flask",
            requests=100_000,
            duration_s=10.0,
            resources={"server_cpu_pct": pct},
            metadata={**base.metadata, "session_id": session, "machine_id": "m1"},
        )
        for i, pct in enumerate(cpu_pcts)
    ]


def test_cpu_per_request_is_the_windows_cpu_time_over_its_requests() -> None:
    """50 % of a CPU for 10 s over 100,000 requests: 50 µs each; no CPU figure: None."""
    [rec] = _trials("raw", [50.0])
    assert share.cpu_us_per_request(rec) == pytest.approx(50.0)
    assert share.cpu_us_per_request(replace(rec, resources=None)) is None
    assert share.cpu_us_per_request(replace(rec, requests=0)) is None


def test_the_share_is_raw_over_framework_with_the_stats_interval() -> None:
    """Each flavour's figure is the geometric mean over trials; the share the ratio of
    geometric means with stats.difference's interval; framework records from before
    app_flavor (None) pair with raw ones."""
    raw, framework = _trials("raw", [60.0, 62.0, 58.0]), _trials(None, [300.0, 310.0, 320.0])
    [found] = share.shares([*raw, *framework])
    assert share.cpu_us_per_request(raw[0]) == pytest.approx(60.0)  # 60 % of a CPU: 60 µs
    assert found.cost("raw").center == pytest.approx(math.prod([60, 62, 58]) ** (1 / 3))
    assert found.cost("framework").center == pytest.approx(math.prod([300, 310, 320]) ** (1 / 3))
    expected = difference([300, 310, 320], [60, 62, 58])
    assert found.share.ratio == pytest.approx(expected.ratio)
    assert (found.share.low, found.share.high) == pytest.approx((expected.low, expected.high))
    assert 0.18 < found.share.ratio < 0.21
    text = share.sentence(found)
    assert text is not None
    assert text.startswith("Of the 310 µs of CPU granian spends on a Flask `/plaintext` request")
    assert "about 60 µs (19%) is the server's" in text


def test_one_session_is_preferred_and_two_sessions_pair_unpooled_on_one_machine() -> None:
    """Both flavours in one session pair there; otherwise (one APP_FLAVOR per invocation)
    each flavour's largest session pairs, unpooled, and the row names both sessions; another
    machine's (or speed class's) runs never pair; one flavour alone is no share."""
    same = [*_trials("raw", [60.0, 61.0], "s1"), *_trials(None, [300.0, 301.0], "s1")]
    other_raw = _trials("raw", [90.0, 91.0, 92.0], "s3")
    [found] = share.shares([*same, *other_raw])
    assert {r.metadata["session_id"] for r in found.raw} == {"s1"}
    raw, framework = _trials("raw", [60.0, 61.0], "s1"), _trials(None, [300.0], "s2")
    [apart] = share.shares([*raw, *framework])
    assert (len(apart.raw), len(apart.framework)) == (2, 1)
    assert "framework" in share._sessions(apart) and " / raw " in share._sessions(apart)
    elsewhere = [
        replace(r, metadata={**r.metadata, "machine_id": "m2", "hostname": "other"})
        for r in framework
    ]
    assert share.shares([*raw, *elsewhere]) == []
    assert share.shares(raw) == []


def test_the_summary_links_share_md_only_when_both_flavours_were_measured() -> None:
    """details/share.md holds the table and the sentence, linked from the details list; a
    result set with one flavour has no such file."""
    paired = [*_trials("raw", [60.0, 62.0]), *_trials("framework", [300.0, 320.0])]
    files = render_report(paired, [])
    assert "details/share.md" in files
    assert "- [share.md](details/share.md): server CPU time per request" in files["summary.md"]
    text = files["details/share.md"]
    assert "| plaintext | granian |" in text and "raw app" not in text.split("|")[4]
    assert "Of the 310 µs of CPU granian spends on a Flask" in text
    assert "details/share.md" not in render_report(_trials(None, [300.0, 310.0]), [])
