"""RUNTIME=docker on the real engine: the image has the native venv's packages, a run in the
container under CPUS/MEMORY writes ok records whose throttling comes from the container's
cgroup, and no container outlives a run, even one whose harness was SIGKILLed.

The base and granian's image are built once per session (cached layers after the first
build: bench.host.images). Skipped only where no Docker engine answers."""

import ipaddress
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core import record, registry
from bench.core.registry import ROOT
from bench.host import docker, images
from bench.host.arch import host_arch
from bench.host.venv import ensure_venv, installed_packages
from tests.conftest import session_containers
from tests.integration.conftest import run_bench, trial_records

SERVER = "granian"
pytestmark = pytest.mark.skipif(
    docker.engine_problem() is not None, reason=f"no Docker engine: {docker.engine_problem()}"
)


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> images.Image:
    """granian's image, built (or found current) once per session."""
    spec = registry.load_all()[SERVER]
    log = tmp_path_factory.mktemp("images") / "images.log"
    built = images.build_images([spec], host_arch(), lambda text: None, log)
    assert built[SERVER], log.read_text()[-3000:]
    return images.image_for(spec, host_arch())


def _records(results: Path) -> list[dict]:
    return trial_records(results)


def _next_start(results: Path) -> str:
    """What the next harness start (here `python -m bench report`, over one fixture record:
    a report of nothing is refused) says on stderr: it removes what a dead harness left."""
    (results / "records").mkdir(parents=True, exist_ok=True)
    fixture = next((ROOT / "tests" / "fixtures" / "records" / "machine-a").glob("*.json"))
    shutil.copy(fixture, results / "records")
    nxt = subprocess.run(
        [sys.executable, "-m", "bench", "report", f"--results={results}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert nxt.returncode == 0, nxt.stderr
    return nxt.stderr


def test_image_holds_the_native_venvs_packages(image: images.Image) -> None:
    """The same pinned requirements give the same distributions and versions in the image
    as in the native venv; the image is tagged with the server's version and the commit."""
    from bench.stack.containers import image_packages

    in_image, python = image_packages(image)
    native = installed_packages(ensure_venv(registry.load_all()[SERVER]))
    assert in_image == native
    assert python.startswith("3.")
    version = images.server_version(registry.load_all()[SERVER])
    assert any(tag.startswith(f"pywebbench/{SERVER}:{version}-") for tag in image.tags)
    assert f"pywebbench/{SERVER}:latest" in image.tags


def test_bench_in_the_container_under_limits(image: images.Image, tmp_path: Path) -> None:
    """RUNTIME=docker CPUS=0.5 MEMORY=256m: ok records carrying the runtime, the image id, the
    limits and the network; one worker (0.5 CPU rounds up to 1); the container's cgroup shows
    the quota and throttling under load; nothing of the run is left in the engine."""
    results = tmp_path / "results"
    done = run_bench(
        results,
        server=SERVER,
        scenario="plaintext,db",
        concurrency=5,
        duration=2,
        warmup=1,
        trials=1,
        runtime="docker",
        cpus="0.5",
        memory="256m",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    records = _records(results)
    assert [r["scenario"] for r in records] and all(r["status"] == "ok" for r in records)
    for rec in records:
        assert (
            rec["format_version"] == record.FORMAT_VERSION
            and rec["metadata"]["runtime"] == "docker"
        )
        box = rec["container"]
        assert box["image_id"] == image.id and box["network"] == "host"
        assert box["cpus"] == 0.5 and box["memory_bytes"] == 256 * 2**20
        assert box["name"].startswith("pwb-") and box["engine"]["version"]
        assert box["cgroup_version"] in ("v1", "v2")
        assert (box["quota_us"], box["period_us"]) == (50_000, 100_000)
        assert box["memory_limit_bytes"] == 256 * 2**20
        assert 0 < box["cpu_pct"] <= 60  # half a CPU, with the kernel's period granularity
        assert box["memory_peak_mb"] > 0 and box["oom_kills"] in (0, None)
        assert rec["knobs"]["workers"] == 1
        assert rec["rps"] > 0
    plaintext = next(r for r in records if r["scenario"] == "plaintext")
    # A closed loop of 5 connections keeps a 0.5-CPU server busy: the quota binds.
    assert plaintext["container"]["nr_throttled"] > 0
    assert plaintext["container"]["throttled_ms"] > 0
    assert session_containers() == []


def _owned_by(pid: int) -> list[str]:
    out = subprocess.run(
        [
            "docker",
            "ps",
            "--all",
            "--filter",
            f"label={docker.OWNER_LABEL}={pid}",
            "--format",
            "{{.Names}}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return out.split()


@pytest.fixture
def serve_proc(image: images.Image) -> Iterator[subprocess.Popen]:
    """`python -m bench serve --runtime=docker`, up and ready (stopped if the test fails)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench",
            "serve",
            f"--server={SERVER}",
            "--runtime=docker",
            "--cpus=1",
            "--memory=512m",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("ready"):
                break
            assert time.monotonic() < deadline, "serve did not get ready in 180 s"
        else:
            pytest.fail(f"serve ended before ready: {proc.stderr.read()[-3000:]}")
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        proc.stdout.close()
        proc.stderr.close()


def test_sigkilled_harness_container_is_removed_at_the_next_start(
    serve_proc: subprocess.Popen, tmp_path: Path
) -> None:
    """SIGKILL the harness while its server container runs: the container outlives it (the
    engine, not the harness, runs it), under the harness's name and owner label; the next
    start of the harness removes it, and only it."""
    pid = serve_proc.pid
    names = _owned_by(pid)
    assert len(names) == 1 and names[0].startswith(f"pwb-{pid}-{SERVER}-"), names
    os.kill(pid, signal.SIGKILL)
    serve_proc.wait(timeout=30)
    # The docker CLI died with its parent (PR_SET_PDEATHSIG); the container did not.
    assert _owned_by(pid) == names
    assert f"removed {names[0]} left by a harness that died" in _next_start(tmp_path)
    assert _owned_by(pid) == []


def test_sigterm_stops_the_container(serve_proc: subprocess.Popen) -> None:
    """SIGTERM to make serve: the container is stopped and removed before it exits."""
    names = _owned_by(serve_proc.pid)
    assert len(names) == 1
    # labelled with this session's token, so the session guard (tests/conftest.py) would
    # also catch it left behind
    assert names[0] in session_containers()
    serve_proc.send_signal(signal.SIGTERM)
    assert serve_proc.wait(timeout=90) == 0
    assert _owned_by(serve_proc.pid) == []
    assert names[0] not in session_containers()


def test_bench_on_a_bridge_leaves_no_network(image: images.Image, tmp_path: Path) -> None:
    """RUNTIME=docker NETWORK=bridge: the server answers on its address in the harness's
    bridge (a /24 of 198.19.0.0/16, inside 198.18.0.0/15), reaches pgbouncer on the gateway
    (/db verified and measured), the records say so, and neither the container nor the
    network outlives the run."""
    results = tmp_path / "results"
    done = run_bench(
        results,
        server=SERVER,
        scenario="db",
        concurrency=5,
        duration=1,
        warmup=1,
        trials=1,
        runtime="docker",
        network="bridge",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (rec,) = _records(results)
    box = rec["container"]
    assert rec["status"] == "ok" and rec["rps"] > 0 and box["network"] == "bridge"
    subnet = ipaddress.IPv4Network(box["subnet"])
    assert subnet.subnet_of(ipaddress.IPv4Network("198.18.0.0/15")), subnet
    assert ipaddress.IPv4Address(box["address"]) in subnet
    assert session_containers() == []


def test_a_dead_harness_network_is_removed_at_the_next_start(tmp_path: Path) -> None:
    """A bridge whose owner pid is gone (a SIGKILLed harness) is removed by the next start of
    the harness; one whose owner lives (this test) is left alone."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = docker.create_bridge(owner=gone.pid)
    alive = docker.create_bridge(owner=os.getpid())
    try:
        assert f"removed {dead.name} left by a harness that died" in _next_start(tmp_path)
        left = [name for name, _ in docker.owned("network")]
        assert dead.name not in left and alive.name in left
    finally:
        docker.remove_network(dead.name)
        docker.remove_network(alive.name)
