"""Images built here: a Debian base from Debian's packages, then one image per server.

Input: server specs (servers/<id>/), the arch, a `say` for progress lines. Output: images in
the local engine, and for a run the image of a server (ref and id) or the one line that says
which command builds it. No registry is reachable: the base is `debootstrap --variant=minbase`
of Debian bookworm (deb.debian.org) into a temporary directory, `tar -C dir -c . | docker
import -`; each server's image is compose/Dockerfile FROM that base, with the same pinned
servers/<id>/requirements.txt as the native venv, installed with uv from PyPI.
PYTHON=<name> (bench/core/pythons.py): the interpreter bench/python-build.sh built
(.bench/tools/python/<name>) is copied into an image of its own FROM the base
(compose/python.Dockerfile, pywebbench/python:<name>-<arch>-<hash>; the host and the base are
both Debian bookworm, so the binary runs there as here), at the same path (its prefix is
compiled in), and the server's image on it is compose/Dockerfile FROM that, its venv made from
that interpreter and the server's [pythons."<name>"] requirements.

Caching: the base is tagged by the hash of its inputs (suite, variant, packages, mirror, arch,
this recipe's version) and reused while an image with that tag exists; a server image is built
by the engine's layer cache (requirements first, app code last) and labelled with the hash of
its inputs, so a run can tell an image that is out of date from one that is not.
Tags: pywebbench/<id>:<server version>-<git commit> and pywebbench/<id>:latest; on PYTHON=<name>
the same with -py<name> after them (pywebbench/<id>:latest-py3.14t), side by side in one repo.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bench.core.registry import ROOT, ServerSpec
from bench.host.docker import EngineError, docker_binary, image_inspect
from bench.host.venv import PYTHONS, VenvError, interpreter

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
VARIANT = "minbase"
# python3-venv: uv is bootstrapped with it, as bench/setup.sh does; ca-certificates: PyPI's TLS;
# libpq5: the pure-Python psycopg of the PYTHON=<name> pins (no free-threaded psycopg-binary
# wheel exists) loads libpq with ctypes, as it loads the host's natively.
PACKAGES = ("python3", "python3-venv", "ca-certificates", "libpq5")
RECIPE = 2  # bump when the way the base is made changes (a new hash, a new base)
# The base trusts what the host trusts: the host's CA bundle replaces Debian's in the image, so
# that a site's TLS-inspecting proxy in front of PyPI (this project's machines have one) works
# in the image as it does for the host's uv and pip. Its content is part of the base's inputs.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DOCKERFILE = ROOT / "compose" / "Dockerfile"
# PYTHON=<name>: the interpreter's own image, FROM the base (its inputs hashed as the base's).
PYTHON_DOCKERFILE = ROOT / "compose" / "python.Dockerfile"
# The standard library's own test suite (lib/python3.X/test: about a third of a build's
# prefix) is never imported by a server: not copied into the image.
LEFT_OUT = ("test",)
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


def python_prefix(python: str) -> Path:
    """Where bench/python-build.sh installed PYTHON=python: the real path (.bench/tools may
    be a link), which is compiled into the interpreter and is where the image holds it."""
    return (PYTHONS / python).resolve()


def python_build(python: str) -> str:
    """The build's stamp (bench/python-build.sh's .build: version, sha256, flags); '' when
    it is not built."""
    stamp = PYTHONS / python / ".build"
    return stamp.read_text().strip() if stamp.is_file() else ""


def python_inputs_hash(python: str, arch: str) -> str:
    """The hash of an interpreter image's inputs: the base, its Dockerfile, the name, the
    prefix, the build's stamp and what is left out."""
    digest = hashlib.sha256(base_tag(arch).encode() + b"\0")
    _hash_files([PYTHON_DOCKERFILE], digest)
    text = f"{python}|{python_prefix(python)}|{python_build(python)}|{','.join(LEFT_OUT)}"
    digest.update(text.encode())
    return digest.hexdigest()[:12]


def python_tag(python: str, arch: str) -> str:
    """The interpreter image's tag: its inputs' hash in it."""
    return f"pywebbench/python:{python}-{arch}-{python_inputs_hash(python, arch)}"


def from_tag(arch: str, python: str | None = None) -> str:
    """What a server image is built FROM: the base, or the interpreter image on PYTHON=."""
    return base_tag(arch) if python is None else python_tag(python, arch)


def server_inputs_hash(spec: ServerSpec, arch: str, python: str | None = None) -> str:
    """The hash of a server image's inputs: what it is built FROM (the base, or on PYTHON=
    the interpreter's image, which holds the build's stamp), the Dockerfile, its folder, the
    app."""
    digest = hashlib.sha256(from_tag(arch, python).encode() + b"\0")
    _hash_files([DOCKERFILE], digest)
    _hash_files(spec.folder.rglob("*"), digest)
    _hash_files(APP_DIR.rglob("*"), digest)
    return digest.hexdigest()[:16]


def image_repo(spec: ServerSpec) -> str:
    """pywebbench/<id>."""
    return f"pywebbench/{spec.id}"


def tag_suffix(python: str | None) -> str:
    """What a tag of the server's image on PYTHON=<name> ends with: -py<name> ('' unset)."""
    return "" if python is None else f"-py{python}"


def image_ref(spec: ServerSpec, python: str | None = None) -> str:
    """The ref a run uses: pywebbench/<id>:latest, pywebbench/<id>:latest-py3.14t."""
    return f"{image_repo(spec)}:latest{tag_suffix(python)}"


def images_command(spec_ids: Iterable[str], python: str | None = None) -> str:
    """The make command that builds these servers' images (on PYTHON=)."""
    return f"make images SERVER={','.join(spec_ids)}" + (f" PYTHON={python}" if python else "")


def server_version(spec: ServerSpec, python: str | None = None) -> str:
    """The server package's pinned version in the requirements its image is made from
    ('unpinned' if absent)."""
    package = re.escape(spec.package or spec.id).replace(r"\-", "[-_]")
    requirements = spec.requirements_on(python) if spec.runs_on(python) else None
    if requirements is not None:
        for line in requirements.read_text().splitlines():
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


def not_buildable(spec: ServerSpec, python: str | None = None) -> str | None:
    """Why a server has no image (not a Python server; on PYTHON=, one that cannot run on
    it: its server.toml says why), or None."""
    if spec.requirements is None:
        return f"{spec.id} is not a Python server (no requirements.txt): it has no image"
    if python is not None and not spec.runs_on(python):
        return f"{spec.id} cannot run on PYTHON={python}: {spec.why_not_on(python)}"
    return None


@dataclass(frozen=True)
class Image:
    """A server's built image."""

    ref: str  # pywebbench/<id>:latest (PYTHON=3.14t: pywebbench/<id>:latest-py3.14t)
    id: str  # sha256:...
    tags: tuple[str, ...]
    inputs: str


def image_for(spec: ServerSpec, arch: str, python: str | None = None) -> Image:
    """The server's current image (on PYTHON=python: its image on that interpreter);
    ImageError naming `make images SERVER=<id> [PYTHON=<name>]` when it is missing or built
    from other inputs than the checkout's and the interpreter's build."""
    problem = not_buildable(spec, python)
    if problem is not None:
        raise ImageError(f"RUNTIME=docker: {problem}")
    ref = image_ref(spec, python)
    data = image_inspect(ref)
    command = images_command([spec.id], python)
    on = "" if python is None else f" on PYTHON={python}"
    if data is None:
        raise ImageError(f"RUNTIME=docker: no image of {spec.id}{on}; run `{command}`")
    labels = (data.get("Config") or {}).get("Labels") or {}
    if labels.get(INPUTS_LABEL) != server_inputs_hash(spec, arch, python):
        changed = "its base" if python is None else f"its base or the {python} build"
        raise ImageError(
            f"RUNTIME=docker: the image of {spec.id}{on} is out of date (servers/{spec.id}/, "
            f"app_common/ or {changed} changed); run `{command}`"
        )
    return Image(ref, data["Id"], tuple(data.get("RepoTags") or ()), labels[INPUTS_LABEL])


def _feed(write: Callable[[BinaryIO], None], stdin: BinaryIO) -> None:
    """`write` into a child's stdin, closed after; a child that stopped reading (it failed:
    its status says so) ends the writing."""
    try:
        write(stdin)
    except OSError:  # BrokenPipeError: the child exited
        pass
    finally:
        with contextlib.suppress(OSError):
            stdin.close()


def _stream(
    argv: list[str],
    say: Say,
    show: Callable[[str], str | None],
    log: Path,
    feed: Callable[[BinaryIO], None] | None = None,
    **kw,
) -> None:
    """Run argv, its output to log, the lines `show` keeps as progress (with `feed`: what it
    writes is the child's stdin, from a thread of its own while the output is read);
    ImageError on failure with the log's tail."""
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if feed is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            **kw,
        )
        assert proc.stdout is not None
        writer = None
        if feed is not None:
            assert proc.stdin is not None
            writer = threading.Thread(target=_feed, args=(feed, proc.stdin.buffer), daemon=True)
            writer.start()
        for line in proc.stdout:
            out.write(line)
            shown = show(line.rstrip("\n"))
            if shown:
                say(shown)
        code = proc.wait()
        if writer is not None:
            writer.join()
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


def _steps(name: str) -> Callable[[str], str | None]:
    """The progress lines of a legacy build: its "Step 3/9 : RUN ..." and whether the cache
    served it."""

    def step(line: str) -> str | None:
        if line.startswith("Step "):
            return f"{name}: {line[:110]}"
        if "Using cache" in line:
            return f"{name}:   (cached)"
        return None

    return step


def _left_out(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """The tar filter of an interpreter's prefix (under python/): without the standard
    library's test suite."""
    parts = Path(info.name).parts  # python/lib/python3.14t/test/...
    stdlib = len(parts) >= 4 and parts[1] == "lib" and parts[2].startswith("python")
    return None if stdlib and parts[3] in LEFT_OUT else info


def write_python_context(python: str, out: BinaryIO) -> None:
    """The interpreter image's build context as a tar stream: compose/python.Dockerfile as its
    Dockerfile, the build's prefix under python/ (LEFT_OUT left out)."""
    # GNU, not tarfile's default PAX: the docker CLI tells a tar on stdin from a Dockerfile by
    # reading its first 512-byte header alone, and PAX puts an extended header first (every
    # member's float mtime), which it then takes for a Dockerfile.
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        tar.add(PYTHON_DOCKERFILE, arcname="Dockerfile")
        tar.add(python_prefix(python), arcname="python", filter=_left_out)


def ensure_python(python: str, arch: str, base: str, say: Say, log: Path) -> str:
    """The interpreter image's tag for PYTHON=python, FROM the base, built unless an image
    with its inputs' hash exists; the interpreter is built first when it is not (minutes:
    bench/python-build.sh, as make setup PYTHON= does)."""
    try:
        interpreter(python, log)
    except VenvError as exc:
        raise ImageError(str(exc)) from None
    tag = python_tag(python, arch)
    if image_inspect(tag) is not None:
        say(f"python {tag}: reused (its build is unchanged)")
        return tag
    prefix = python_prefix(python)
    say(f"python {tag}: {prefix} ({python_build(python)}) into the base")
    argv = [
        docker_binary() or "docker",
        "build",
        # Nothing is fetched: the interpreter's check runs without a network.
        "--network=none",
        "--force-rm",
        "--build-arg",
        f"BASE={base}",
        "--build-arg",
        f"PREFIX={prefix}",
        "--label",
        f"{INPUTS_LABEL}={python_inputs_hash(python, arch)}",
        "--label",
        f"pywebbench.python={python}",
        "--label",
        f"pywebbench.python_build={python_build(python)}",
        "--tag",
        tag,
        # The context is the tar on stdin: the prefix lives outside the checkout (a worktree's
        # .bench/tools is a link), where .dockerignore and a directory context cannot reach.
        "-",
    ]
    feed = functools.partial(write_python_context, python)
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    _stream(argv, say, _steps(f"python {python}"), log, feed, env=env)
    if image_inspect(tag) is None:
        raise ImageError(f"python {python}: the build ended but no image {tag} exists")
    return tag


def server_build_args(spec: ServerSpec, python: str | None) -> list[str]:
    """compose/Dockerfile's build arguments beyond BASE: the server, its install flags, and on
    PYTHON= the pinned file of its [pythons."<name>"] and the interpreter (Debian's python3
    otherwise: the Dockerfile's defaults)."""
    values = {"SERVER": spec.id, "INSTALL_FLAGS": " ".join(spec.install_flags)}
    if python is not None:
        values["REQUIREMENTS"] = spec.pythons[python]
        values["PYTHON_BIN"] = str(python_prefix(python) / "bin" / "python3")
    return [arg for key, value in values.items() for arg in ("--build-arg", f"{key}={value}")]


def build_server(
    spec: ServerSpec,
    arch: str,
    base: str,
    commit: str,
    say: Say,
    log: Path,
    python: str | None = None,
) -> str:
    """One server's image from compose/Dockerfile FROM `base` (on PYTHON=: the interpreter's
    image, from_tag); its id."""
    version = server_version(spec, python)
    suffix = tag_suffix(python)
    tags = [f"{image_repo(spec)}:{version}-{commit}{suffix}", image_ref(spec, python)]
    inputs = server_inputs_hash(spec, arch, python)
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
        *server_build_args(spec, python),
        "--label",
        f"{INPUTS_LABEL}={inputs}",
        "--label",
        f"pywebbench.server={spec.id}",
        "--label",
        f"pywebbench.server_version={version}",
        "--label",
        f"pywebbench.commit={commit}",
        *(["--label", f"pywebbench.python={python}"] if python is not None else []),
        *[arg for tag in tags for arg in ("--tag", tag)],
        str(ROOT),
    ]
    # The legacy builder (this engine has no buildx); it says so once on stderr.
    _stream(argv, say, _steps(spec.id), log, env={**os.environ, "DOCKER_BUILDKIT": "0"})
    data = image_inspect(tags[-1])
    if data is None:
        raise ImageError(f"{spec.id}: the build ended but no image {tags[-1]} exists")
    say(f"{spec.id}: built {', '.join(tags)} ({data['Id'][7:19]})")
    return data["Id"]


def build_images(
    specs: list[ServerSpec], arch: str, say: Say, log: Path, python: str | None = None
) -> dict[str, str | None]:
    """The base (on PYTHON=: then the interpreter's image), then each server's image; server
    id -> image id (None: it failed, the reason said)."""
    if docker_binary() is None:
        raise ImageError("make images needs a Docker engine: the docker CLI is not installed")
    started = time.monotonic()
    base = ensure_base(arch, say, log)
    say(f"base ready after {time.monotonic() - started:.0f} s")
    if python is not None:
        base = ensure_python(python, arch, base, say, log)
        say(f"python {python} ready after {time.monotonic() - started:.0f} s")
    commit = git_commit()
    built: dict[str, str | None] = {}
    for spec in specs:
        began = time.monotonic()
        try:
            built[spec.id] = build_server(spec, arch, base, commit, say, log, python)
        except (ImageError, EngineError) as exc:
            say(f"{spec.id}: FAILED: {exc}")
            built[spec.id] = None
            continue
        say(f"{spec.id}: {time.monotonic() - began:.0f} s")
    return built
