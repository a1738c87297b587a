"""Points: trials pool within one machine (one CPU model) and one session, never across."""

import json
from dataclasses import replace
from pathlib import Path

from bench.core.record import Record
from bench.report.cells import cpu_tag, host_of, scope_label, via_label
from bench.report.groups import (
    arena_key,
    groups,
    latency_values,
    ranks,
    rps_values,
    served_share,
    starved,
    trial_count,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "records"


def _record() -> Record:
    return Record.from_dict(json.loads((FIXTURES / "machine-a" / "rec0.json").read_text()))


def _trials(meta: dict, count: int = 2) -> list[Record]:
    rec = _record()
    return [
        replace(rec, trial=i, run_id=f"{i}" * 32, metadata={**rec.metadata, **meta})
        for i in range(1, count + 1)
    ]


def test_two_sessions_are_two_points_side_by_side() -> None:
    """Trials of one configuration from two sessions form two groups (and two arenas)."""
    a = _trials({"session_id": "aaaa1111", "machine_id": "m1"})
    b = _trials({"session_id": "bbbb2222", "machine_id": "m1"})
    found = groups([*a, *b])
    assert sorted(len(g) for g in found.values()) == [2, 2]
    assert arena_key(a[0]) != arena_key(b[0])
    assert scope_label(a[0]) != scope_label(b[0])
    assert len(groups(a)) == 1


def test_one_label_never_spans_two_cpu_models() -> None:
    """One machine identity with an AMD and an Intel CPU (a cloud image moved to another
    host type) names two machines, and their trials never pool."""
    amd = _trials({"machine_id": "a5adb7fd86ee", "cpu_model": "AMD EPYC", "session_id": "s"})
    intel = _trials(
        {"machine_id": "a5adb7fd86ee", "cpu_model": "Intel(R) Xeon(R) Processor", "session_id": "s"}
    )
    assert host_of(amd[0]) == "vm·a5ad [AMD EPYC]"
    assert host_of(intel[0]) == "vm·a5ad [Intel Xeon]"
    assert len(groups([*amd, *intel])) == 2
    assert cpu_tag("Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz") == "Intel Xeon Platinum 8370C"


def test_warmup_and_foreign_runs_are_left_out_of_points() -> None:
    """A warm-up start's run and a run under foreign load are not trials of any point."""
    trials = _trials({"session_id": "s"}, 3)
    trials[0] = replace(trials[0], metadata={**trials[0].metadata, "warmup_start": True})
    trials[1] = replace(trials[1], foreign_load=True)
    [group] = groups(trials).values()
    assert group == [trials[2]]


def test_a_protocol_other_than_http1_is_named_in_the_rows_via() -> None:
    """Two protocols of one configuration are two points and two rows: the row's "via" names
    the protocol (and HTTP/2's streams per connection); HTTP/1.1 in clear text, and records
    from before format 11, say nothing."""
    rec = _record()
    h2c = replace(rec, protocol="h2c", streams=1)
    multiplexed = replace(rec, protocol="h2", tls=True, streams=4)
    assert via_label(rec) == via_label(replace(rec, protocol="http1")) == "direct"
    assert via_label(h2c) == "direct, h2c"
    assert via_label(multiplexed) == "direct, h2 ×4 streams"
    assert len(groups([rec, h2c, multiplexed])) == 3


def test_a_raced_rounds_slices_are_one_trial_in_the_tables() -> None:
    """Two rounds of two slices each (metadata.slice 1 and 2, same trial) are two trials:
    each round's figure the geometric mean of its slices, counted once."""
    rec = _record()
    rates = {(1, 1): 100.0, (1, 2): 400.0, (2, 1): 900.0, (2, 2): 100.0}
    sliced = [
        replace(
            rec,
            trial=t,
            run_id=f"{t}{s}" * 16,
            rps=rate,
            latency_ms={**(rec.latency_ms or {}), "p99": rate / 100},
            metadata={**rec.metadata, "slice": s},
        )
        for (t, s), rate in rates.items()
    ]
    assert [round(v, 6) for v in rps_values(sliced)] == [200.0, 300.0]
    assert [round(v, 6) for v in latency_values(sliced)] == [2.0, 3.0]
    assert trial_count(sliced) == 2
    unsliced = _trials({"session_id": "s"}, count=3)
    assert trial_count(unsliced) == 3
    assert len(rps_values(unsliced)) == 3


def test_a_cpu_quota_is_part_of_a_configurations_identity() -> None:
    """Trials of one configuration at 1.0 and at 0.5 CPU (cgroup.cpu_quota) are two points,
    never one pool of four trials (the cpu-quota study's 1-CPU and 0.5-CPU runs were)."""
    trials = _trials({"session_id": "s"}, 4)
    quotas = [1.0, 1.0, 0.5, 0.5]
    limited = [replace(r, cgroup={"cpu_quota": q}) for r, q in zip(trials, quotas, strict=True)]
    assert sorted(len(g) for g in groups(limited).values()) == [2, 2]
    assert arena_key(limited[0]) != arena_key(limited[2])


def test_a_container_limited_row_is_ranked_apart_from_native_rows() -> None:
    """A configuration in a container under --cpus=0.5 meets the native ones of its load in
    no arena: its rank is among rows under the same limits only."""
    native, boxed = _trials({"session_id": "s"}, 2)
    boxed = replace(boxed, container={"cpus": 0.5, "memory_bytes": None, "network": "host"})
    assert len(groups([native, boxed])) == 2
    assert arena_key(native) != arena_key(boxed)
    assert arena_key(boxed) == arena_key(replace(boxed, server="uvicorn"))


def test_a_starved_configuration_gets_no_rank_by_req_s_or_p99() -> None:
    """At c50, uwsgi's 3 trials reach 16 % of the connections (Little's law: 0.4 ms mean
    latency × 20,000 req/s / 50) and granian's all of them: ranked among the configurations
    that served their connections, uwsgi has no rank by req/s nor by p99, though its req/s is
    16 times granian's; admitted, it would be first by both."""
    out = []
    for server, rps, mean in (("uwsgi", 20_000.0, 0.4), ("granian", 1_250.0, 40.0)):
        for i, rec in enumerate(_trials({"session_id": "s"}, 3), start=1):
            latency = {**rec.latency_ms, "mean": mean * (1 + i / 100), "p99": mean * 3}
            out.append(replace(rec, server=server, rps=rps * (1 + i / 100), concurrency=50,
                               latency_ms=latency, run_id=f"{server}{i}"))  # fmt: skip
    found = groups(out)
    by_server = {g[0].server: k for k, g in found.items()}
    assert starved(found[by_server["uwsgi"]]) and not starved(found[by_server["granian"]])
    by_rps, by_p99 = ranks(found, admit=lambda group: not starved(group))
    assert by_server["uwsgi"] not in by_rps and by_server["uwsgi"] not in by_p99
    assert by_rps[by_server["granian"]].label == "1" and by_p99[by_server["granian"]].label == "1"
    every_rps, every_p99 = ranks(found)
    assert every_rps[by_server["uwsgi"]].low == 1 and every_p99[by_server["uwsgi"]].low == 1


def test_a_paced_load_tools_share_is_not_read() -> None:
    """Locust's users wait between requests: few are in flight by design, so Little's law
    says nothing of unserved connections there; wrk's share of the same figures is read."""
    rec = replace(_record(), concurrency=20, rps=29.9, latency_ms={"mean": 1.0, "p99": 3.0})
    assert served_share(replace(rec, load_tool="wrk")) is not None
    assert served_share(replace(rec, load_tool="locust")) is None
    assert not starved([replace(rec, load_tool="locust", trial=t) for t in (1, 2, 3)])


def test_raw_and_framework_runs_are_never_trials_of_one_point() -> None:
    """APP_FLAVOR=raw and the framework app are two points, the raw one labelled; a record
    without app_flavor (before it) is the framework's and pools with an explicit one."""
    meta = {"session_id": "aaaa1111", "machine_id": "m1"}
    before = _trials(meta)  # the fixture predates app_flavor
    framework = [replace(r, app_flavor="framework", run_id="f" * 32) for r in _trials(meta, 1)]
    raw = [replace(r, app_flavor="raw", run_id=f"r{i}" * 16) for i, r in enumerate(_trials(meta))]
    found = groups([*before, *framework, *raw])
    assert sorted(len(g) for g in found.values()) == [2, 3]
    labels = {via_label(g[0]) for g in found.values()}
    assert labels == {"direct", "direct, raw app"}
