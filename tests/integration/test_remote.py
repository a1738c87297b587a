"""make remote against a real ssh server: a container of the project's own base image
(bench/host/images.py: debootstrap of Debian, no registry) with openssh-server and the stack's
Debian packages, running sshd on a bridge network the harness makes in 198.18.0.0/15, reached
with a key made for the test. The whole path runs: the probe, HEAD shipped as a bundle, make
bench there with its own set-up (uv and the venvs come from PyPI through the engine's default
bridge, a second network of the container), the records brought back, the summary rebuilt and
comparing the two machines; Ctrl-C removes the run directory there and the temp here.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.core.registry import ROOT
from bench.host import docker, images
from bench.host.arch import host_arch
from bench.host.ssh import CONFIG_ENV

pytestmark = pytest.mark.skipif(
    docker.engine_problem() is not None, reason=f"no Docker engine: {docker.engine_problem()}"
)
# What make bench needs there before its own set-up (bench.host.ssh.NEEDED) and what set-up
# would otherwise install with apt (bench/setup.sh): installed in the image, so that the test's
# set-up there is uv and the venvs only.
PACKAGES = "openssh-server git make postgresql postgresql-client pgbouncer nginx wrk curl iproute2"
PACKAGES += " gcc python3-dev procps"
CA = "/etc/ssl/certs/ca-certificates.crt"  # the host's bundle in the base (bench/host/images.py)
# ssh sessions do not get the image's ENV: pam_env reads /etc/environment for them
DOCKERFILE = f"""ARG BASE
FROM ${{BASE}}
RUN printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \\
 && apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {PACKAGES} \\
 && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d && mkdir -p /run/sshd && ssh-keygen -A \\
 && printf 'SSL_CERT_FILE={CA}\\nPIP_CERT={CA}\\n' >> /etc/environment
CMD ["/usr/sbin/sshd", "-D", "-e"]
"""
BENCH = ["SERVER=granian", "SCENARIO=plaintext", "CONCURRENCY=10", "DURATION=2", "TRIALS=1"]
BENCH += ["WARMUP=1"]


def _docker(*args: str, **kw: object) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True, **kw)


def build_sshd_image(log: Path) -> str:
    """The base image plus sshd and the stack's packages, tagged by its recipe's hash (built
    once, found afterwards)."""
    base = images.ensure_base(host_arch(), lambda text: None, log)
    tag = "pywebbench/test-sshd:" + hashlib.sha256((base + DOCKERFILE).encode()).hexdigest()[:12]
    if docker.image_inspect(tag) is None:
        argv = ["docker", "build", "--network", "host", "--build-arg", f"BASE={base}", "-t", tag]
        with log.open("a") as sink:
            subprocess.run(
                [*argv, "-"],
                input=DOCKERFILE.encode(),
                check=True,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env={**os.environ, "DOCKER_BUILDKIT": "0"},
            )
    return tag


@pytest.fixture(scope="session")
def sshd_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The test image (build_sshd_image)."""
    return build_sshd_image(tmp_path_factory.mktemp("remote-image") / "build.log")


@dataclass(frozen=True)
class Remote:
    host: str  # root@<address on the harness's bridge>
    container: str

    def sh(self, script: str) -> str:
        """A command's output in the container (docker exec, not ssh: the test's own view)."""
        return _docker("exec", self.container, "sh", "-c", script).stdout

    def left(self) -> str:
        """The run directories make remote left there (none, after any exit)."""
        return self.sh("ls -d /tmp/pywebbench-remote.* 2>/dev/null || true")


@pytest.fixture
def remote(sshd_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    """root@<address> of a running sshd container on a harness-made 198.18.0.0/15 bridge, with
    a key and known-hosts file made for this test (an ssh_config in PYWEBBENCH_SSH_CONFIG);
    the container, both networks' attachment and the key removed afterwards."""
    bridge = docker.create_bridge()
    name = docker.container_name("sshd")
    key = tmp_path / "ssh" / "key"
    key.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    labels = [f"--label={k}={v}" for k, v in docker.owner_labels().items()]
    try:
        _docker(
            "run",
            "-d",
            "--name",
            name,
            *labels,
            "--hostname",
            "remote-test",
            "--network",
            bridge.name,
            "--ip",
            bridge.server_address,
            sshd_image,
        )
        _docker("network", "connect", "bridge", name)  # set-up there reaches PyPI
        _docker(
            "exec",
            "-i",
            name,
            "sh",
            "-c",
            "mkdir -p -m 700 /root/.ssh && cat > /root/.ssh/authorized_keys",
            input=key.with_suffix(".pub").read_text(),
        )
        config = tmp_path / "ssh" / "config"
        config.write_text(
            f"Host *\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {tmp_path / 'ssh' / 'known_hosts'}\n"
            "  StrictHostKeyChecking accept-new\n"
        )
        monkeypatch.setenv(CONFIG_ENV, str(config))
        yield Remote(f"root@{bridge.server_address}", name)
    finally:
        docker.remove_container(name)
        docker.remove_network(bridge.name)


def _left_here() -> list[Path]:
    """make remote's temporary directories here (none, after any exit)."""
    return sorted(Path(tempfile.gettempdir()).glob("pywebbench-remote-*"))


def test_unreachable_host_refused_before_anything(tmp_path: Path) -> None:
    """No sshd there: one line, exit 2, from the pre-check (set-up never starts)."""
    marker = tmp_path / "setup-started"
    done = subprocess.run(
        ["make", "-s", "remote", "HOST=nobody@127.0.0.1", *BENCH, f"RESULTS={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYWEBBENCH_SETUP_MARKER": str(marker)},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("bench: HOST=nobody@127.0.0.1: ssh cannot reach")
    assert not marker.exists()


def test_remote_bench_comes_back_and_is_compared(remote: Remote, tmp_path: Path) -> None:
    """The same point here and there: the records from there land in RESULTS, the summary's
    first screen compares the two machines. A functional check (DURATION=2, one trial)."""
    results = tmp_path / "results"
    here = subprocess.run(
        ["make", "-s", "bench", *BENCH, f"RESULTS={results}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert here.returncode == 0, here.stderr[-3000:]
    before = set((results / "records").glob("*.json"))
    done = subprocess.run(
        ["make", "-s", "remote", f"HOST={remote.host}", *BENCH, f"RESULTS={results}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    came = [json.loads(p.read_text()) for p in set((results / "records").glob("*.json")) - before]
    assert came and {r["metadata"]["hostname"] for r in came} == {"remote-test"}
    assert any(r["status"] == "ok" and r["server"] == "granian" for r in came)
    for rec in came:  # the raw files each record lists came too
        assert all((results / raw).is_file() for raw in rec["raw_files"])
    first = "\n".join((results / "summary.md").read_text().splitlines()[:60])
    assert "## Machines compared" in first and "remote-test" in first
    assert "- **light CPU**, granian" in first
    assert remote.left() == "" and _left_here() == []


def test_ctrl_c_cleans_up_there_and_here(remote: Remote, tmp_path: Path) -> None:
    """SIGINT while make bench runs there: exit 130, the run directory there and the temp
    directory here removed, no harness left running there."""
    log = tmp_path / "remote.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench",
            "remote",
            f"--host={remote.host}",
            "--server=granian",
            "--scenario=plaintext",
            "--concurrency=10",
            "--duration=30",
            "--trials=1",
            f"--results={tmp_path / 'results'}",
        ],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 600
    running = "-m bench run --from-env"  # the harness there, past its set-up
    while running not in remote.sh("ps -eo args") and time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(2)
    time.sleep(5)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=180) == 130, log.read_text()[-3000:]
    assert remote.left() == "" and _left_here() == []
    deadline = time.monotonic() + 60  # the hang-up reached the harness there: it stops
    while running in remote.sh("ps -eo args") and time.monotonic() < deadline:
        time.sleep(1)
    assert running not in remote.sh("ps -eo args")
