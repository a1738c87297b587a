"""bench/host/images.py without an engine, on a built interpreter (PYTHON=, issue 33): the
image a RUNTIME=docker PYTHON=<name> run uses, what makes it current (the build's stamp among
its inputs), the refusal naming `make images SERVER=<id> PYTHON=<name>`, the interpreter
image's build context, the Dockerfile's arguments, and the container site keying its images
as the native venvs. The engine is faked at bench.host.images.image_inspect; the real builds
are tests/integration/test_containers.py's (the usual interpreter) and the proof run in the
report of branch ftdocker (a built interpreter: minutes, never part of the unit tests)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from bench.core.registry import load_all
from bench.host import images

ROOT = Path(__file__).resolve().parents[2]
ARCH = "amd64"
SERVER = "gunicorn-gthread"  # declares [pythons."3.13t"]
NAME = "3.13t"


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake build of 3.13t under a fake .bench/tools/python: its prefix (with a stamp, a
    stdlib module and the stdlib's test suite)."""
    prefix = tmp_path / "python" / NAME
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python3").write_text("#!/bin/sh\n")
    (prefix / "bin" / "python3").chmod(0o755)
    (prefix / "lib" / "python3.13t" / "test").mkdir(parents=True)
    (prefix / "lib" / "python3.13t" / "os.py").write_text("# os\n")
    (prefix / "lib" / "python3.13t" / "test" / "test_os.py").write_text("# test\n")
    (prefix / "lib" / "python3.13t" / "json" / "tests").mkdir(parents=True)
    (prefix / "lib" / "python3.13t" / "json" / "tests" / "kept.py").write_text("# kept\n")
    (prefix / ".build").write_text("3.13.5 93e5 --without-ensurepip --disable-gil\n")
    monkeypatch.setattr(images, "PYTHONS", tmp_path / "python")
    return prefix


def _engine(monkeypatch: pytest.MonkeyPatch, held: dict[str, dict]) -> None:
    """The engine holds `held` (ref -> inspect data) and nothing else."""
    monkeypatch.setattr(images, "image_inspect", lambda ref: held.get(ref))


def _image(inputs: str) -> dict:
    return {
        "Id": "sha256:" + "ab" * 32,
        "RepoTags": [],
        "Config": {"Labels": {images.INPUTS_LABEL: inputs}},
    }


def test_an_interpreters_image_sits_beside_the_usual_one_in_the_servers_repo() -> None:
    """Unset, the usual ref as before; on PYTHON=3.13t the same repo with -py3.13t after the
    tag; the command that builds it names the interpreter."""
    spec = load_all()[SERVER]
    assert images.image_ref(spec) == f"pywebbench/{SERVER}:latest"
    assert images.image_ref(spec, NAME) == f"pywebbench/{SERVER}:latest-py3.13t"
    assert images.images_command([SERVER]) == f"make images SERVER={SERVER}"
    assert images.images_command([SERVER], NAME) == f"make images SERVER={SERVER} PYTHON=3.13t"
    # a valid docker tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    assert re.fullmatch(r"[\w][\w.-]{0,127}", images.image_ref(spec, NAME).split(":")[1])


def test_the_builds_stamp_is_among_the_images_inputs(built: Path) -> None:
    """The server's image on 3.13t is built FROM the interpreter's image, whose tag holds the
    hash of the build's stamp and prefix: a rebuilt interpreter changes both hashes; the usual
    image's inputs do not depend on it; two interpreters never share a hash."""
    spec = load_all()[SERVER]
    usual = images.server_inputs_hash(spec, ARCH)
    on_build = images.server_inputs_hash(spec, ARCH, NAME)
    tag = images.python_tag(NAME, ARCH)
    assert tag.startswith(f"pywebbench/python:{NAME}-{ARCH}-") and on_build != usual
    assert images.from_tag(ARCH) == images.base_tag(ARCH) and images.from_tag(ARCH, NAME) == tag
    (built / ".build").write_text("3.13.5 93e5 --without-ensurepip --disable-gil --other\n")
    assert images.python_tag(NAME, ARCH) != tag
    assert images.server_inputs_hash(spec, ARCH, NAME) != on_build
    assert images.server_inputs_hash(spec, ARCH) == usual
    assert images.server_inputs_hash(spec, ARCH, "3.13") != images.server_inputs_hash(
        spec, ARCH, NAME
    )


def test_a_run_on_a_build_uses_its_current_image_or_names_the_command(
    built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No image on 3.13t: refused in one line naming make images SERVER=<id> PYTHON=3.13t; the
    usual image (current for the usual interpreter) is not taken for it; an image built from
    another build of the interpreter is out of date; the current one is used."""
    spec = load_all()[SERVER]
    usual = images.image_ref(spec)
    _engine(monkeypatch, {usual: _image(images.server_inputs_hash(spec, ARCH))})
    assert images.image_for(spec, ARCH).ref == usual
    with pytest.raises(images.ImageError) as missing:
        images.image_for(spec, ARCH, NAME)
    text = str(missing.value)
    assert text == (
        f"RUNTIME=docker: no image of {SERVER} on PYTHON=3.13t; "
        f"run `make images SERVER={SERVER} PYTHON=3.13t`"
    )
    ref = images.image_ref(spec, NAME)
    current = images.server_inputs_hash(spec, ARCH, NAME)
    (built / ".build").write_text("3.13.5 93e5 --without-ensurepip\n")  # rebuilt since
    _engine(monkeypatch, {ref: _image(current)})
    with pytest.raises(images.ImageError, match=r"out of date .*the 3\.13t build") as stale:
        images.image_for(spec, ARCH, NAME)
    assert "\n" not in str(stale.value) and "PYTHON=3.13t`" in str(stale.value)
    now = images.server_inputs_hash(spec, ARCH, NAME)
    _engine(monkeypatch, {ref: _image(now), usual: _image(now)})
    image = images.image_for(spec, ARCH, NAME)
    assert image.ref == ref and image.inputs == now
    with pytest.raises(images.ImageError, match="out of date"):
        images.image_for(spec, ARCH)  # the usual ref carrying the 3.13t inputs: not current


def test_a_server_that_cannot_run_on_the_build_has_no_image_on_it(built: Path) -> None:
    """gevent's server declares why it cannot run on 3.13t: no image, its reason said."""
    spec = load_all()["gunicorn-gevent"]
    problem = images.not_buildable(spec, NAME)
    assert problem is not None and problem.startswith("gunicorn-gevent cannot run on PYTHON=3.13t")
    assert spec.python_why[NAME] in problem
    assert images.not_buildable(spec) is None
    with pytest.raises(images.ImageError, match=r"cannot run on PYTHON=3\.13t"):
        images.image_for(spec, ARCH, NAME)


def test_the_interpreter_images_context_is_its_dockerfile_and_the_prefix(built: Path) -> None:
    """The tar streamed to `docker build -`: compose/python.Dockerfile as Dockerfile, the
    prefix under python/ with its stamp and modules, without the stdlib's test suite (a
    package's own tests folder stays)."""
    out = io.BytesIO()
    images.write_python_context(NAME, out)
    # docker's CLI reads the first 512-byte header alone to tell a tar from a Dockerfile: a
    # plain file's header (type "0"), not a PAX extended one (type "x").
    first = tarfile.TarInfo.frombuf(out.getvalue()[:512], "utf-8", "surrogateescape")
    assert first.name == "Dockerfile" and first.type == tarfile.REGTYPE
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as tar:
        names = set(tar.getnames())
        dockerfile = tar.extractfile("Dockerfile")
        assert dockerfile is not None
        assert dockerfile.read() == images.PYTHON_DOCKERFILE.read_bytes()
    assert {"python/bin/python3", "python/.build", "python/lib/python3.13t/os.py"} <= names
    assert "python/lib/python3.13t/json/tests/kept.py" in names
    assert not any("/test/" in n or n.endswith("/test") for n in names)


def test_the_dockerfiles_arguments_and_their_defaults_agree() -> None:
    """Unset, only SERVER and INSTALL_FLAGS are passed: the Dockerfile's defaults are
    requirements.txt and Debian's python3 (the usual image as before); on 3.13t, the server's
    [pythons."3.13t"] file and the build's python3 at its real prefix. Every argument passed
    is declared by compose/Dockerfile, and python.Dockerfile copies to PREFIX."""
    spec = load_all()[SERVER]
    usual = images.server_build_args(spec, None)
    assert usual[::2] == ["--build-arg"] * 2
    assert [a.split("=")[0] for a in usual[1::2]] == ["SERVER", "INSTALL_FLAGS"]
    on = dict(a.split("=", 1) for a in images.server_build_args(spec, NAME)[1::2])
    assert on["REQUIREMENTS"] == spec.pythons[NAME] and (spec.folder / on["REQUIREMENTS"]).is_file()
    assert on["PYTHON_BIN"] == str((images.PYTHONS / NAME).resolve() / "bin" / "python3")
    text = images.DOCKERFILE.read_text()
    declared = dict(re.findall(r"^ARG (\w+)(?:=(.*))?$", text, re.MULTILINE))
    assert set(on) <= set(declared)
    assert declared["REQUIREMENTS"] == "requirements.txt"
    assert declared["PYTHON_BIN"] == "/usr/bin/python3"
    assert "COPY python/ ${PREFIX}/" in images.PYTHON_DOCKERFILE.read_text()


def test_the_container_site_keys_images_as_the_native_venvs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ContainerSite.prepare on 3.13t asks for each server's image on it and keys it
    <id>@3.13t (as bench.harness.run.env_of looks it up); its container facts name that image;
    an image it cannot use is that server's Unavailable, under the same key."""
    from bench.host import docker
    from bench.host.prepare import Environment, Unavailable
    from bench.stack import containers

    asked: list[tuple[str, str | None]] = []

    def image_for(spec, arch: str, python: str | None = None) -> images.Image:
        asked.append((spec.id, python))
        if spec.id == "granian":
            raise images.ImageError(f"RUNTIME=docker: no image of granian on PYTHON={python}")
        ref = images.image_ref(spec, python)
        return images.Image(ref, "sha256:" + "cd" * 32, (ref,), "hash")

    monkeypatch.setattr(containers, "image_for", image_for)
    monkeypatch.setattr(containers, "image_packages", lambda image: ({"gunicorn": "23"}, "3.13.5"))
    site = object.__new__(containers.ContainerSite)
    site.images, site.limits, site.bridge, site.engine = {}, docker.Limits(), None, {}
    specs = load_all()
    prepared = site.prepare([specs[SERVER], specs["granian"]], ARCH, lambda _: None, NAME)
    assert asked == [(SERVER, NAME), ("granian", NAME)]
    env = prepared[f"{SERVER}@3.13t"]
    assert isinstance(env, Environment) and env.python_version == "3.13.5"
    assert isinstance(prepared["granian@3.13t"], Unavailable)
    facts = site.container_facts(SERVER, NAME)
    assert facts["image"] == f"pywebbench/{SERVER}:latest-py3.13t"
    assert site.container_facts(SERVER)["image"] is None  # no usual image was prepared


def test_a_container_on_a_bridge_is_asked_its_interpreter_at_its_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The record's interpreter is read inside the container's server: at 127.0.0.1 on the
    host network, at the container's own address on a bridge (loopback there is not it)."""
    import ipaddress

    from bench.host import docker
    from bench.stack import containers
    from bench.stack.components import RunningServer

    asked: list[tuple[int, str]] = []
    answer = {"version": "3.13.5", "build": "free-threaded", "gil_enabled": False}

    def read(port: int, host: str, client: object) -> dict:
        asked.append((port, host))
        return answer

    monkeypatch.setattr(containers, "read_interpreter", read)
    server = RunningServer(load_all()[SERVER], 8123, object(), [], {})  # type: ignore[arg-type]
    bridge = docker.Bridge("pwb-1-bridge-1", ipaddress.IPv4Network("198.19.3.0/24"))
    for on, host in ((None, "127.0.0.1"), (bridge, "198.19.3.2")):
        served = containers.ContainerServed(server, None, lambda: None, bridge=on)  # type: ignore[arg-type]
        assert served.interpreter() == answer and asked[-1] == (8123, host)


@pytest.mark.parametrize(
    ("variables", "code", "words"),
    [
        ({"PYTHON": NAME, "SERVER": "uwsgi"}, 2, "SERVER=uwsgi cannot run on PYTHON=3.13t"),
        ({"PYTHON": "3.12t", "SERVER": SERVER}, 2, "valid: 3.13, 3.13t"),
        ({"PYTHON": NAME, "SERVER": "all"}, 0, ""),
        ({"PYTHON": NAME, "SERVER": SERVER}, 0, ""),
    ],
)
def test_make_images_on_a_build_is_checked_before_set_up(
    variables: dict[str, str], code: int, words: str
) -> None:
    """make images PYTHON=…: the pre-check (no site-packages) refuses an unknown name and a
    server that cannot run on it in one line; SERVER=all takes those that can."""
    env = {k: v for k, v in os.environ.items() if k not in variables} | variables
    done = subprocess.run(
        [sys.executable, "-S", "-m", "bench.precheck", "images"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == code, done.stderr
    assert words in done.stderr and done.stderr.count("\n") == (1 if code else 0)


def test_a_docker_run_on_a_build_passes_the_pre_check() -> None:
    """RUNTIME=docker PYTHON=3.13t was refused ("the images carry the usual python3"): it is
    taken now; PYTHON with TARGET or APP still is not."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "RUNTIME", "TARGET")}
    for variables, code in (
        ({"PYTHON": NAME, "RUNTIME": "docker", "SERVER": SERVER}, 0),
        ({"PYTHON": NAME, "TARGET": "http://127.0.0.1:9", "SERVER": SERVER}, 2),
    ):
        done = subprocess.run(
            [sys.executable, "-S", "-m", "bench.precheck", "run"],
            cwd=ROOT,
            env=base | variables,
            capture_output=True,
            text=True,
        )
        assert done.returncode == code, (variables, done.stderr)


def test_make_images_refuses_a_server_off_the_build_before_building(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """python -m bench images --python=3.13t with a server that cannot run on it: exit 2, one
    line with its server.toml's reason, before the base or the interpreter is touched."""
    import bench.cli

    monkeypatch.setattr(bench.cli, "remove_leftovers", lambda: None)
    monkeypatch.setattr(images, "build_images", lambda *a, **k: pytest.fail("built"))
    code = bench.cli.main(["images", "--server=gunicorn-gevent", f"--python={NAME}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("bench: gunicorn-gevent cannot run on PYTHON=3.13t: ")
