"""PROTOCOL= on the real stack: each protocol verified and driven end to end, short runs
(DURATION=1, no warmup, one trial; functional checks, no speed asserted)."""

from pathlib import Path

import pytest

from bench.core.record import FORMAT_VERSION
from tests.integration.conftest import run_bench, trial_records

pytestmark = pytest.mark.integration

CASES = [
    # (servers, protocol, load, streams): each protocol with each load tool that speaks it, every
    # server whose declaration adds flags for one; servers of one protocol share one harness
    # run (one stack start), several streams per connection over h2c.
    ("granian", "https1", "wrk", 1),
    ("uvicorn", "https1", "oha", 1),
    ("granian-asgi,hypercorn,gunicorn-gthread", "h2c", "oha", 4),
    ("granian,hypercorn", "h2", "oha", 1),
]


@pytest.mark.parametrize(("servers", "name", "load", "streams"), CASES)
def test_a_short_run_over_each_protocol(
    tmp_path: Path, servers: str, name: str, load: str, streams: int
) -> None:
    """Each server verified over the protocol, measured, recorded with protocol, tls and
    streams; the run's certificate is gone afterwards."""
    results = tmp_path / "results"
    options: dict[str, object] = {"rate": 200} if load == "oha" else {"concurrency": 10}
    if streams > 1:
        options["streams"] = streams
    proc = run_bench(
        results,
        server=servers,
        scenario="plaintext",
        load=load,
        protocol=name,
        duration=1,
        warmup=0,
        trials=1,
        **options,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = trial_records(results)
    assert {rec["server"] for rec in records} == set(servers.split(","))
    for rec in records:
        assert rec["status"] == "ok", rec["reason"]
        assert rec["format_version"] == FORMAT_VERSION
        assert (rec["protocol"], rec["tls"], rec["streams"]) == (
            name,
            name in ("https1", "h2"),
            streams,
        )
        assert "/plaintext" in rec["verify"]["checked"]
        assert rec["requests"] > 0 and rec["errors"]["non_2xx"] == 0
    # The harness names its run directory on stderr; the certificate made in it is gone.
    run_dir = Path(proc.stderr.split("run directory ", 1)[1].split()[0].rstrip(","))
    assert run_dir.is_dir() and not (run_dir / "tls").exists()


def test_a_server_that_does_not_speak_it_is_refused_before_anything(tmp_path: Path) -> None:
    """uvicorn declares no HTTP/2 (its --http2 needs another HTTP implementation): exit 2 in
    one line, no record written."""
    results = tmp_path / "results"
    proc = run_bench(
        results, server="uvicorn", protocol="h2c", load="oha", rate=100, duration=2, trials=1
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "SERVER=uvicorn cannot serve PROTOCOL=h2c" in lines[0]
    assert not (results / "records").exists()
