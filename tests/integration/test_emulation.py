"""ARCH=arm64 on an amd64 host: the server side under qemu, labelled, never ranked."""

from pathlib import Path

import pytest

from bench.host.arch import host_arch
from tests.conftest import stack_processes
from tests.integration.conftest import report_text, run_bench, trial_records

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(host_arch() != "amd64", reason="emulates arm64 on an amd64 host"),
]


def test_emulated_granian_verifies_every_route_and_is_labelled(tmp_path: Path) -> None:
    """Debian's arm64 CPython and aarch64 wheels of granian's pins under qemu-user: every
    route passes verification, the record says arm64, emulated, the emulator and its
    version; memory is reported as qemu's, not the server's; nothing is left running."""
    results = tmp_path / "results"
    before = set(stack_processes())
    proc = run_bench(
        results,
        server="granian",
        arch="arm64",
        scenario="plaintext",
        concurrency=4,
        duration=2,
        warmup=0,
        trials=1,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rec,) = trial_records(results)
    assert rec["status"] == "ok" and rec["rps"] > 10
    assert (rec["arch"], rec["host_arch"], rec["emulated"]) == ("arm64", "amd64", True)
    assert rec["metadata"]["emulator"]["name"] == "qemu-aarch64-static"
    assert rec["metadata"]["emulator"]["version"][0].isdigit()
    # the same pins as the native venv, as aarch64 wheels
    pins = dict(
        line.split("==")
        for line in Path("servers/granian/requirements.txt").read_text().splitlines()
        if "==" in line and ";" not in line
    )
    assert rec["metadata"]["packages"]["granian"] == pins["granian"]
    assert {"/fortunes", "/updates?n=5", "/db", "/upstream?ms=50"} <= set(rec["verify"]["checked"])
    assert rec["resources"]["server_rss_mb"] is None and rec["resources"]["qemu_rss_mb"] > 0
    summary = report_text(results)
    assert "Emulated runs (functional check)" in summary
    assert set(stack_processes()) == before
