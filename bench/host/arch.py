"""Architectures: host detection, ARCH values, and emulation set-up.

Input: `uname -m`, the user's ARCH, a server's pinned requirements. Output: `amd64` or
`arm64` (or ArchError naming the valid choices); for ARCH=arm64 on an amd64 host, an
Emulator: qemu-user registered with binfmt_misc, Debian's arm64 CPython unpacked from its
.debs (a private apt state; the host's dpkg untouched) and aarch64 wheels of the same pins,
each prepared once (stamp files) and re-used.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.core.registry import ROOT
from bench.core.variables import ARCHES
from bench.host.state import STATE
from bench.host.venv import requirements_stamp

ALIASES = ARCHES  # declared with ARCH= (bench/core/variables.py)


class ArchError(ValueError):
    """An ARCH value that is not one of the known names."""


def normalize_arch(value: str) -> str:
    """amd64/x86_64 -> amd64, arm64/aarch64 -> arm64; anything else raises ArchError."""
    try:
        return ALIASES[value.strip().lower()]
    except KeyError:
        raise ArchError(f"unknown ARCH {value!r}; valid: {', '.join(sorted(ALIASES))}") from None


def host_arch() -> str:
    """This machine's arch, normalised."""
    return normalize_arch(platform.machine())


# -- emulation: the server side of ARCH=arm64 on an amd64 host ---------------------------------

QEMU = Path("/usr/bin/qemu-aarch64-static")
ARM_STATE = STATE / "arm64"
# Debian's arm64 CPython and what it needs at run time; apt adds their dependencies.
ARM_PACKAGES = ("python3.11-minimal", "libpython3.11-stdlib", "libstdc++6")
# uv's name for "aarch64 wheels a Debian 12 (glibc 2.36) system can run".
WHEEL_PLATFORM = "aarch64-manylinux_2_36"


class EmulationError(RuntimeError):
    """The emulated side could not be prepared (the message says what to do)."""


@dataclass(frozen=True)
class Emulator:
    """A prepared arm64 interpreter under qemu user-mode emulation."""

    qemu: Path
    qemu_version: str
    root: Path  # QEMU_LD_PREFIX: the arm64 files (libc, python) unpacked, no root filesystem
    python: Path
    python_version: str

    def env(self, site: Path) -> dict[str, str]:
        """What a server process needs: the arm64 libraries and its wheels."""
        # QEMU_LD_PREFIX rather than `qemu -L`: child processes (workers) inherit it.
        # PYTHONNOUSERSITE: like a venv, ignore packages in the user's ~/.local.
        return {
            "QEMU_LD_PREFIX": str(self.root),
            "PYTHONPATH": f"{site}:{ROOT}",
            "PYTHONNOUSERSITE": "1",
        }

    def metadata(self) -> dict[str, object]:
        """The record's metadata.emulator."""
        return {"name": "qemu-aarch64-static", "version": self.qemu_version}


def needs_emulation(arch: str) -> bool:
    """True when ARCH is not this host's: the server side then runs under qemu."""
    return arch != host_arch()


def check_emulation_supported(arch: str) -> None:
    """ArchError unless this host can emulate arch (arm64 on an amd64 host)."""
    if needs_emulation(arch) and not (arch == "arm64" and host_arch() == "amd64"):
        raise ArchError(
            f"ARCH={arch} on this {host_arch()} host: only arm64 on amd64 is emulated; "
            f"valid here: {host_arch()}" + (", arm64" if host_arch() == "amd64" else "")
        )


def _run(argv: list[str], log: Path, what: str, **kwargs: object) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(argv)}\n{result.stdout}{result.stderr}")
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise EmulationError(f"{what} failed: {' / '.join(tail)}")
    return result.stdout


def _privileged() -> list[str] | None:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"]).returncode == 0:
        return ["sudo", "-n"]
    return None


def ensure_qemu(log: Path) -> tuple[Path, str]:
    """qemu-aarch64-static (installed by bench/setup.sh) registered with binfmt_misc, so that
    an arm64 executable runs when exec'd; (path, version). Idempotent and quick once done."""
    sudo = _privileged()
    if not QEMU.exists():
        cmd = ["apt-get", "install", "-y", "--no-install-recommends"]
        cmd += ["qemu-user-static", "binfmt-support"]
        if sudo is None:
            raise EmulationError(
                f"qemu is missing; run: sudo apt-get update && sudo {' '.join(cmd)}"
            )
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run([*sudo, "apt-get", "update", "-qq"], log, "apt-get update", env=env)
        _run([*sudo, *cmd], log, "installing qemu-user-static", env=env)
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        if sudo is None:
            raise EmulationError("run: sudo update-binfmts --enable qemu-aarch64")
        # Mounts binfmt_misc if needed and registers the handler; safe to repeat.
        _run([*sudo, "update-binfmts", "--enable", "qemu-aarch64"], log, "update-binfmts")
    out = _run([str(QEMU), "--version"], log, "qemu --version")
    found = re.search(r"version (\S+)", out)
    return QEMU, found.group(1) if found else "?"


def _apt_options(state: Path) -> list[str]:
    # A private apt state: the host's sources, arm64 only, an empty dpkg status (so every
    # dependency is fetched), nothing of the host's dpkg database touched.
    return [
        "-o", "APT::Architecture=arm64",
        "-o", "APT::Architectures::=arm64",
        "-o", f"Dir::State={state}",
        "-o", f"Dir::State::Lists={state}/lists",
        "-o", f"Dir::State::status={state}/status",
        "-o", f"Dir::Cache={state}/cache",
        "-o", "Debug::NoLocking=1",
        "-o", "APT::Sandbox::User=root",
    ]  # fmt: skip


@contextlib.contextmanager
def _prepare_lock() -> Iterator[None]:
    # A harness run and the test suite may prepare at the same moment: one at a time.
    ARM_STATE.mkdir(parents=True, exist_ok=True)
    with open(ARM_STATE / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released by the kernel if the holder dies
        yield


def ensure_emulator(log: Path) -> Emulator:
    """The arm64 interpreter under .bench/arm64/root, prepared once (a stamp written last:
    an interrupted preparation starts over) and re-used."""
    with _prepare_lock():
        return _ensure_emulator(log)


def _ensure_emulator(log: Path) -> Emulator:
    """ensure_emulator without the lock."""
    qemu, qemu_version = ensure_qemu(log)
    root = ARM_STATE / "root"
    python = root / "usr" / "bin" / "python3.11"
    stamp = root / ".prepared"
    want = " ".join(ARM_PACKAGES)
    if not (stamp.exists() and stamp.read_text().strip() == want and python.exists()):
        shutil.rmtree(ARM_STATE / "apt", ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
        state = ARM_STATE / "apt"
        (state / "lists" / "partial").mkdir(parents=True)
        (state / "cache" / "archives" / "partial").mkdir(parents=True)
        (state / "status").write_text("")
        options = _apt_options(state)
        _run(["apt-get", *options, "update", "-qq"], log, "apt-get update (arm64 lists)")
        _run(
            ["apt-get", *options, "install", "-y", "-qq", "--download-only", *ARM_PACKAGES],
            log,
            "downloading Debian's arm64 Python",
        )
        root.mkdir(parents=True)
        for deb in sorted((state / "cache" / "archives").glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(root)], log, f"unpacking {deb.name}")
        shutil.rmtree(state / "cache", ignore_errors=True)
    emulator_env = {"QEMU_LD_PREFIX": str(root), "PATH": os.environ.get("PATH", "")}
    version = _run(
        [
            str(python),
            "-c",
            "import platform; print(platform.machine(), platform.python_version())",
        ],
        log,
        "running the arm64 Python under qemu",
        env=emulator_env,
    ).split()
    if not version or version[0] != "aarch64":
        raise EmulationError(f"the arm64 Python reports {version}, not aarch64")
    if not stamp.exists():
        # Compiled once here; otherwise every server start compiles the stdlib under qemu.
        _run(
            [str(python), "-m", "compileall", "-q", "-j", "0", str(root / "usr/lib/python3.11")],
            log,
            "compiling the arm64 stdlib",
            env=emulator_env,
        )
        stamp.write_text(want + "\n")
    return Emulator(qemu, qemu_version, root, python, version[1])


def ensure_site(
    emulator: Emulator, name: str, requirements: Path, flags: tuple[str, ...], uv: str, log: Path
) -> Path:
    """aarch64 wheels of the same pins as the native venv, in .bench/arm64/sites/<name>,
    re-made when the requirements change; the installed versions are checked against them."""
    with _prepare_lock():
        return _ensure_site(emulator, name, requirements, flags, uv, log)


def _ensure_site(
    emulator: Emulator, name: str, requirements: Path, flags: tuple[str, ...], uv: str, log: Path
) -> Path:
    site = ARM_STATE / "sites" / name
    stamp = site / ".requirements.sha256"
    want = requirements_stamp(requirements, flags)
    if stamp.exists() and stamp.read_text().strip() == want:
        return site
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    _run(
        [
            uv, "pip", "install", "-q", "--target", str(site),
            "--python-platform", WHEEL_PLATFORM, "--python-version", "3.11",
            "--only-binary", ":all:", *flags, "-r", str(requirements),
        ],
        log,
        f"{name}: installing aarch64 wheels (a package without an aarch64 wheel fails here)",
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"},
        cwd=requirements.parent,
    )  # fmt: skip
    pins = _pins(requirements)
    installed = site_packages(site)
    wrong = {n: (v, installed.get(n)) for n, v in pins.items() if installed.get(n) != v}
    if wrong:
        raise EmulationError(f"{name}: aarch64 versions differ from the pins: {wrong}")
    _run(
        [str(emulator.python), "-m", "compileall", "-q", "-j", "0", str(site)],
        log,
        f"{name}: compiling the site under qemu",
        env={"QEMU_LD_PREFIX": str(emulator.root), "PATH": os.environ.get("PATH", "")},
    )
    stamp.write_text(want + "\n")
    return site


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(requirements: Path) -> dict[str, str]:
    pins = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].split(";", 1)
        spec, marker = line[0].strip(), (line[1] if len(line) > 1 else "")
        # Pins for other platforms (win32, pypy) are not installed here.
        if "==" in spec and "win32" not in marker and "pypy" not in marker.lower():
            name, version = spec.split("==", 1)
            pins[_normal(name.split("[", 1)[0])] = version.strip()
    return pins


def site_packages(site: Path) -> dict[str, str]:
    """name -> version of every distribution in a --target folder (its *.dist-info)."""
    found = {}
    for info in site.glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").rpartition("-")
        found[_normal(name)] = version
    return dict(sorted(found.items()))


def is_emulated(pid: int) -> bool:
    """True when the process runs under qemu (its /proc/<pid>/exe is the emulator)."""
    try:
        return "qemu" in os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
