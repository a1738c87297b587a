"""Set-up before anything is installed: the system python3's version (bench/require-python.sh)
and Ctrl-C during bench/setup.sh's first checks, on the real scripts with a fake python3 first on
PATH (a few lines of shell), so no real Python 3.10 and nothing heavy is needed."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.core.registry import ROOT

# Variables that make setup.sh look for more (oha, images, the test suite's packages).
SETUP_SWITCHES = ("LOAD", "OHA", "IMAGES", "ARCH", "PYWEBBENCH_TEST", "MAKEFLAGS", "MAKELEVEL")


def _fake_python(where: Path, version: str, on_c: str = "exit 1") -> Path:
    """A python3 that says `version` to --version, logs every call, and runs `on_c` (shell)
    for anything else."""
    where.mkdir(exist_ok=True)
    fake = where / "python3"
    fake.write_text(
        "#!/bin/bash\n"
        f'echo "$*" >> {where}/calls\n'
        f'if [ "$1" = --version ]; then echo "Python {version}"; exit 0; fi\n'
        f"{on_c}\n"
    )
    fake.chmod(0o755)
    return where


def _env(fake: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SETUP_SWITCHES}
    return {**env, "PATH": f"{fake}:{os.environ['PATH']}", **extra}


def _calls(fake: Path) -> list[str]:
    log = fake / "calls"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("version", ["3.10.12", "3.9.2", "3.8"])
def test_an_old_system_python_is_refused_in_one_line_before_anything(
    tmp_path: Path, version: str
) -> None:
    """make bench with python3 older than 3.11 first on PATH: exit 2 at once (python3 asked its
    version only: the pre-check, which needs tomllib, never ran, so nothing was installed),
    one line naming the version needed, its own and how to get it. No wall-clock bound: the
    calls python3 saw say what ran."""
    fake = _fake_python(tmp_path / "bin", version)
    result = subprocess.run(
        ["make", "--no-print-directory", "bench", "SERVER=granian"],
        cwd=ROOT,
        env=_env(fake),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    ours = [line for line in result.stderr.splitlines() if line.startswith("bench:")]
    short = ".".join(version.split(".")[:2])
    assert len(ours) == 1, result.stderr
    assert f"python3 >= 3.11 is needed, {fake}/python3 is {short};" in ours[0]
    assert "apt-get install python3.11" in ours[0]
    assert _calls(fake) == ["--version"]


def test_setup_sh_refuses_an_old_python_too(tmp_path: Path) -> None:
    """make test calls bench/setup.sh directly: the same line, exit 2, before any check."""
    fake = _fake_python(tmp_path / "bin", "3.10.12")
    result = subprocess.run(
        ["bash", "bench/setup.sh"], cwd=ROOT, env=_env(fake), capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.startswith("bench: python3 >= 3.11 is needed")
    assert _calls(fake) == ["--version"]


@pytest.mark.parametrize("version", ["3.11.0", "3.12.3", "3.13.1", "4.0"])
def test_a_recent_python_passes(tmp_path: Path, version: str) -> None:
    fake = _fake_python(tmp_path / "bin", version)
    result = subprocess.run(
        ["bash", "bench/require-python.sh"], cwd=ROOT, env=_env(fake), capture_output=True
    )
    assert result.returncode == 0 and result.stderr == b""


def test_a_dry_run_reaches_the_apt_step(tmp_path: Path) -> None:
    """Without an interrupt the same checks go on to apt (here a dry run prints the command):
    what the interrupt below has to stop."""
    fake = _fake_python(tmp_path / "bin", "3.11.9")  # -c fails: no Python.h, as it were
    result = subprocess.run(
        ["bash", "bench/setup.sh"],
        cwd=ROOT,
        env=_env(fake, PYWEBBENCH_SETUP_DRY_RUN="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "setup: dry run: would run apt-get" in result.stderr
    assert "python3-dev" in result.stderr
    # Both apt commands wait for a lock another apt holds (a second make setup, unattended
    # upgrades) instead of failing with exit 100 at once.
    assert "apt-get -o DPkg::Lock::Timeout=600 update" in result.stderr
    assert "apt-get -o DPkg::Lock::Timeout=600 install -y" in result.stderr


def test_ctrl_c_during_the_first_checks_stops_set_up(tmp_path: Path) -> None:
    """SIGINT to setup.sh's process group (Ctrl-C in a terminal) while a check runs a child
    that handles SIGINT itself and exits 1 (bash then goes on by default): set-up stops with
    130 and never reaches apt."""
    fake = _fake_python(
        tmp_path / "bin",
        "3.11.9",
        # A check that takes a while and handles Ctrl-C itself, as many programs do.
        f"sleep 30 & pid=$!; trap 'kill $pid; exit 1' INT; touch {tmp_path}/checking; wait",
    )
    setup = subprocess.Popen(
        ["bash", "bench/setup.sh"],
        cwd=ROOT,
        env=_env(fake, PYWEBBENCH_SETUP_DRY_RUN="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # SIGINT at its default, as a terminal's shell starts a foreground job: bash cannot
        # trap a signal ignored on entry, which a runner may have left ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "checking").exists():
            assert setup.poll() is None, setup.communicate()
            assert time.monotonic() < deadline, "the check never started"
            time.sleep(0.01)
        os.killpg(setup.pid, signal.SIGINT)
        _, err = setup.communicate(timeout=30)
    finally:
        if setup.poll() is None:
            os.killpg(setup.pid, signal.SIGKILL)
    assert setup.returncode == 130, err
    assert "setup: interrupted; nothing more is installed" in err
    assert "would run" not in err and "dry run" not in err
