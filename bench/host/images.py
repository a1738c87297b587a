"""Images built here: a Debian base from Debian's packages, then one image per server.

Input: server specs (servers/<id>/), the arch, a `say` for progress lines. Output: images in
the local engine, and for a run the image of a server (ref and id) or the one line that says
which command builds it. No registry is reachable: the base is `debootstrap --variant=minbase`
of Debian bookworm (deb.debian.org) into a temporary directory, `tar -C dir -c . | docker
import -`; each server's image is compose/Dockerfile FROM that base, with the same pinned
servers/<id>/requirements.txt as the native venv, installed with uv from PyPI.

Caching: the base is tagged by the hash of its inputs (suite, variant, packages, mirror, arch,
this recipe's version) and reused while an image with that tag exists; a server image is built
by the engine's layer cache (requirements first, app code last) and labelled with the hash of
its inputs, so a run can tell an image that is out of date from one that is not.
Tags: pywebbench/<id>:<server version>-<git commit> and pywebbench/<id>:latest.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.core.registry import ROOT, ServerSpec
from bench.host.docker import EngineError, docker_binary, image_inspect

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
VARIANT = "minbase"
# python3-venv: uv is bootstrapped with it, as bench/setup.sh does; ca-certificates: PyPI's TLS.
PACKAGES = ("python3", "python3-venv", "ca-certificates")
RECIPE = 2  # bump when the way the base is made changes (a new hash, a new base)
# The base trusts what the host trusts: the host's CA bundle replaces Debian's in the image, so
# that a site's TLS-inspecting proxy in front of PyPI (this project's machines have one) works
# in the image as it does for the host's uv and pip. Its content is part of the base's inputs.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DOCKERFILE = ROOT / "compose" / "Dockerfile"
# What a server image is made of besides its own folder (hashed into its inputs label).
APP_DIR = ROOT / "app_common"
INPUTS_LABEL = "pywebbench.inputs"
DEBOOTSTRAP_ARCH = {"amd64": "amd64", "arm64": "arm64"}
Say = Callable[[str], None]


class ImageError(RuntimeError):
    """An image could not be built, or the one a run needs is missing or out of date."""


def _hash_files(paths: Iterable[Path], digest: hashlib._Hash) -> None:
    for path in sorted(paths):
        if "__pycache__" in path.parts or path.suffix == ".pyc" or not path.is_file():
            continue
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")


def base_inputs_hash(arch: str) -> str:
    """The hash of everything the base is made from."""
    text = f"{RECIPE}|{SUITE}|{VARIANT}|{MIRROR}|{arch}|{','.join(PACKAGES)}"
    digest = hashlib.sha256(text.encode())
    if HOST_CA_BUNDLE.is_file():
        digest.update(HOST_CA_BUNDLE.read_bytes())
    return digest.hexdigest()[:12]


def base_tag(arch: str) -> str:
    """The base image's tag: its inputs' hash in it."""
    return f"pywebbench/base:{SUITE}-{arch}-{base_inputs_hash(arch)}"


def host_base_tag() -> str:
    """The base's tag for this host's arch (compose builds the stack FROM it)."""
    from bench.host.arch import host_arch

    return base_tag(host_arch())


def server_inputs_hash(spec: ServerSpec, arch: str) -> str:
    """The hash of a server image's inputs: its base, the Dockerfile, its folder, the app."""
    digest = hashlib.sha256(base_tag(arch).encode() + b"\0")
    _hash_files([DOCKERFILE], digest)
    _hash_files(spec.folder.rglob("*"), digest)
    _hash_files(APP_DIR.rglob("*"), digest)
    return digest.hexdigest()[:16]


def image_repo(spec: ServerSpec) -> str:
    """pywebbench/<id>."""
    return f"pywebbench/{spec.id}"


def server_version(spec: ServerSpec) -> str:
    """The server package's pinned version in its requirements.txt ('unpinned' if absent)."""
    package = re.escape(spec.package or spec.id).replace(r"\-", "[-_]")
    if spec.requirements is not None:
        for line in spec.requirements.read_text().splitlines():
            match = re.match(rf"^{package}==([^\s;]+)", line.strip(), re.IGNORECASE)
            if match:
                return match.group(1)
    return "unpinned"


def git_commit() -> str:
    """The checkout's commit (12 hex digits), `-dirty` when tracked files differ from it."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "nogit"
    return commit + ("-dirty" if dirty else "")


def arch_problem(arch: str, host: str) -> str | None:
    """Why images for `arch` are not built here (one line), or None."""
    if arch == host:
        return None
    return (
        f"ARCH={arch} images are not built: emulated image builds (qemu binfmt) were left out "
        f"of make images; valid: ARCH={host} (this host's)"
    )


def not_buildable(spec: ServerSpec) -> str | None:
    """Why a server has no image (not a Python server), or None."""
    if spec.requirements is None:
        return f"{spec.id} is not a Python server (no requirements.txt): it has no image"
    return None


@dataclass(frozen=True)
class Image:
    """A server's built image."""

    ref: str  # pywebbench/<id>:latest
    id: str  # sha256:...
    tags: tuple[str, ...]
    inputs: str


def image_for(spec: ServerSpec, arch: str) -> Image:
    """The server's current image; ImageError naming `make images SERVER=<id>` when it is
    missing or built from other inputs than the checkout's."""
    problem = not_buildable(spec)
    if problem is not None:
        raise ImageError(f"RUNTIME=docker: {problem}")
    ref = f"{image_repo(spec)}:latest"
    data = image_inspect(ref)
    command = f"make images SERVER={spec.id}"
    if data is None:
        raise ImageError(f"RUNTIME=docker: no image of {spec.id}; run `{command}`")
    labels = (data.get("Config") or {}).get("Labels") or {}
    if labels.get(INPUTS_LABEL) != server_inputs_hash(spec, arch):
        raise ImageError(
            f"RUNTIME=docker: the image of {spec.id} is out of date (servers/{spec.id}/, "
            f"app_common/ or its base changed); run `{command}`"
        )
    return Image(ref, data["Id"], tuple(data.get("RepoTags") or ()), labels[INPUTS_LABEL])


def _stream(argv: list[str], say: Say, show: Callable[[str], str | None], log: Path, **kw) -> None:
    """Run argv, its output to log, the lines `show` keeps as progress; ImageError on failure
    with the log's tail."""
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            shown = show(line.rstrip("\n"))
            if shown:
                say(shown)
        code = proc.wait()
    if code != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise ImageError(f"{argv[0]} {argv[1]} failed (exit {code}):\n" + "\n".join(tail))


def ensure_base(arch: str, say: Say, log: Path) -> str:
    """The base image's tag, built unless an image with its inputs' hash exists."""
    tag = base_tag(arch)
    if image_inspect(tag) is not None:
        say(f"base {tag}: reused (its inputs are unchanged)")
        return tag
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    if not os.path.exists(debootstrap):
        raise ImageError("debootstrap is missing: run `make images` (it installs it)")
    say(f"base {tag}: debootstrap {SUITE} ({VARIANT}, {', '.join(PACKAGES)}) from {MIRROR}")
    with tempfile.TemporaryDirectory(prefix="pwb-base-") as tmp:
        root = Path(tmp) / "rootfs"
        _bootstrap(debootstrap, arch, root, say, log)
        say(f"base {tag}: importing into the engine")
        _import(root, arch, tag)
    return tag


def _bootstrap(debootstrap: str, arch: str, root: Path, say: Say, log: Path) -> None:
    """A minimal Debian tree in `root`, with the host's CA bundle, without apt's caches."""
    seen: set[str] = set()

    def phase(line: str) -> str | None:
        # debootstrap says "I: Retrieving <pkg> ..." per package: one line per phase.
        match = re.match(r"^I: (\w+)", line)
        if match and match.group(1) not in seen:
            seen.add(match.group(1))
            return f"base: {line[3:].strip()}"
        return None

    argv = [
        debootstrap,
        f"--variant={VARIANT}",
        f"--arch={DEBOOTSTRAP_ARCH[arch]}",
        f"--include={','.join(PACKAGES)}",
        SUITE,
        str(root),
        MIRROR,
    ]
    _stream(argv, say, phase, log)
    if HOST_CA_BUNDLE.is_file():
        shutil.copyfile(HOST_CA_BUNDLE, root / str(HOST_CA_BUNDLE).lstrip("/"))
    # Downloaded .debs and package lists are not part of the image.
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for path in (root / junk).glob("*"):
            if path.is_file():
                path.unlink()


def _import(root: Path, arch: str, tag: str) -> None:
    """`docker import` of the tree as `tag`, labelled with its inputs' hash."""
    changes = [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        # uv and pip read the system bundle (pip's own certifi otherwise).
        f"ENV SSL_CERT_FILE={HOST_CA_BUNDLE} PIP_CERT={HOST_CA_BUNDLE}",
        'CMD ["/bin/bash"]',
        f"LABEL {INPUTS_LABEL}={base_inputs_hash(arch)}",
    ]
    argv = [docker_binary() or "docker", "import"]
    for change in changes:
        argv += ["--change", change]
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE
    )
    try:
        result = subprocess.run(
            [*argv, "-", tag], stdin=tar.stdout, capture_output=True, text=True, timeout=1800
        )
    finally:
        if tar.stdout is not None:
            tar.stdout.close()
        tar.wait()
    if result.returncode != 0 or tar.returncode != 0:
        raise ImageError(f"docker import failed: {result.stderr.strip()}")


def build_server(spec: ServerSpec, arch: str, base: str, commit: str, say: Say, log: Path) -> str:
    """One server's image from compose/Dockerfile; its id."""
    version = server_version(spec)
    tags = [f"{image_repo(spec)}:{version}-{commit}", f"{image_repo(spec)}:latest"]
    inputs = server_inputs_hash(spec, arch)

    def step(line: str) -> str | None:
        # The legacy builder's "Step 3/9 : RUN ..." and whether the cache served it.
        if line.startswith("Step "):
            return f"{spec.id}: {line[:110]}"
        if "Using cache" in line:
            return f"{spec.id}:   (cached)"
        return None

    argv = [
        docker_binary() or "docker",
        "build",
        # The build's RUN steps (uv from PyPI) on the host's network: no engine bridge.
        "--network=host",
        # A failed step leaves no stopped container behind.
        "--force-rm",
        "--file",
        str(DOCKERFILE),
        "--build-arg",
        f"BASE={base}",
        "--build-arg",
        f"SERVER={spec.id}",
        "--build-arg",
        f"INSTALL_FLAGS={' '.join(spec.install_flags)}",
        "--label",
        f"{INPUTS_LABEL}={inputs}",
        "--label",
        f"pywebbench.server={spec.id}",
        "--label",
        f"pywebbench.server_version={version}",
        "--label",
        f"pywebbench.commit={commit}",
        *[arg for tag in tags for arg in ("--tag", tag)],
        str(ROOT),
    ]
    # The legacy builder (this engine has no buildx); it says so once on stderr.
    _stream(argv, say, step, log, env={**os.environ, "DOCKER_BUILDKIT": "0"})
    data = image_inspect(tags[-1])
    if data is None:
        raise ImageError(f"{spec.id}: the build ended but no image {tags[-1]} exists")
    say(f"{spec.id}: built {', '.join(tags)} ({data['Id'][7:19]})")
    return data["Id"]


def build_images(specs: list[ServerSpec], arch: str, say: Say, log: Path) -> dict[str, str | None]:
    """The base, then each server's image; server id -> image id (None: it failed, the
    reason said)."""
    if docker_binary() is None:
        raise ImageError("make images needs a Docker engine: the docker CLI is not installed")
    started = time.monotonic()
    base = ensure_base(arch, say, log)
    say(f"base ready after {time.monotonic() - started:.0f} s")
    commit = git_commit()
    built: dict[str, str | None] = {}
    for spec in specs:
        began = time.monotonic()
        try:
            built[spec.id] = build_server(spec, arch, base, commit, say, log)
        except (ImageError, EngineError) as exc:
            say(f"{spec.id}: FAILED: {exc}")
            built[spec.id] = None
            continue
        say(f"{spec.id}: {time.monotonic() - began:.0f} s")
    return built
