"""Study files are data the harness can run; the verdict follows the file's rule."""

from dataclasses import replace
from pathlib import Path

import pytest

from bench import cli, study
from bench.record import load_records

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize("name", study.study_names())
def test_every_study_file_is_valid_and_runnable(name: str) -> None:
    """Each file loads, names real servers, has published figures or checks, and turns into
    harness options with the study's metadata."""
    spec = study.load_study(name)
    base = cli.options_from(cli.build_parser().parse_args(["run"]))
    arms = study.study_options([name], base)
    assert len(arms) == len(spec.arms) and spec.checks
    servers = set(cli.server_ids())
    for opts, arm in zip(arms, spec.arms, strict=True):
        assert opts.servers == (arm.server,) and arm.server in servers
        assert opts.meta["study"] == name and opts.meta["study_arm"] == arm.id


def test_the_five_source_documents_have_a_study() -> None:
    """One study per source document, under the names the issue gives."""
    assert study.study_names() == [
        "accept-queue",
        "keepalive-timewait",
        "sync-vs-async-p99",
        "sync-vs-gevent",
        "workers-threads",
    ]


def test_knob_rules_are_evaluated_for_this_machine() -> None:
    """Gunicorn's documented 2×CPU+1 and threads = 2×workers, on 2 and on 8 CPUs."""
    knobs = {"threads": "2*workers", "workers": "2*cpus+1", "backlog": 128}
    assert study.resolve_knob_expressions(knobs, 2) == {"workers": 5, "threads": 10, "backlog": 128}
    assert study.resolve_knob_expressions({"workers": "cpus"}, 8) == {"workers": 8}
    with pytest.raises(study.StudyError):
        study.resolve_knob_expressions({"workers": "__import__('os')"}, 2)


def test_unknown_study_name_is_refused_with_the_valid_ones() -> None:
    """NAME=nope: exit 2 naming the studies."""
    assert cli.main(["study", "--name=nope"]) == 2
    with pytest.raises(cli.UsageError, match="valid: accept-queue"):
        cli.study_names_from("nope")


def _as_arm(rec, arm: str, **changes):
    meta = {**rec.metadata, "study": "sync-vs-gevent", "study_arm": arm, "study_run": "r1"}
    return replace(rec, metadata=meta, run_id=arm + str(changes.get("concurrency")), **changes)


def test_verdict_follows_the_ratio_rule() -> None:
    """sync-vs-gevent: reproduced when sync/gevent mean time at 30 and 50 users is within a
    factor 2 of the paper's ratios; partly when only the direction holds; the section shows
    the published figure (28.3) beside ours."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    spec = study.load_study("sync-vs-gevent")

    def runs(sync_s: float, gevent_s: float) -> list:
        return [
            _as_arm(rec, arm, concurrency=conc, latency_ms={**rec.latency_ms, "mean": ms})
            for conc in (30, 50)
            for arm, ms in (("sync", sync_s * 1000), ("gevent", gevent_s * 1000))
        ]

    assert study.judge(spec, runs(15.0, 3.0))[0] == "reproduced"  # 5.0× vs 4.56× and 3.29×
    assert study.judge(spec, runs(40.0, 3.0))[0] == "partly reproduced"  # 13× > 2 × 4.56
    assert study.judge(spec, runs(3.0, 6.0))[0] == "not reproduced"  # the other way round
    section = "\n".join(study.study_section(spec, runs(15.0, 3.0), None))
    assert "**Verdict: reproduced**" in section and "| 28.30 | 15.00 |" in section
