"""The container path: compose/compose.yaml through docker-compose's own parser, the stack's
shell scripts and the app's entrypoint against the repository's files, and (where a Docker
engine answers) the real thing: the stack image built FROM the locally imported base,
`docker-compose up` with granian's image, one verified benchmark through nginx, then `down`
leaving no container, network or volume."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core import registry
from bench.host import docker, images

COMPOSE = registry.ROOT / "compose"
SERVICES = {"postgres", "pgbouncer", "upstream", "app", "nginx"}
# Only nginx may publish a port, and only on loopback.
PUBLISHED = {"nginx"}
INSTALL_HINT = (
    "docker-compose (the validator of compose/compose.yaml) is missing: "
    "run `PYWEBBENCH_TEST=1 bash bench/setup.sh` (what `make test` does) "
    "or `sudo apt-get install docker-compose`"
)
PASSWORD = {"DB_PASSWORD": "not-a-secret", "BASE": "pywebbench/base:test"}


# -- compose.yaml through the real validator ------------------------------------------------------
def _compose(*args: str, project: str | None = None, **env: str) -> subprocess.CompletedProcess:
    tool = shutil.which("docker-compose")
    assert tool, INSTALL_HINT
    return subprocess.run(
        [tool, *(["-p", project] if project else []), "-f", str(COMPOSE / "compose.yaml"), *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=900,
    )


def _config(**env: str) -> dict:
    """The validated, interpolated file, parsed by the validator's own interpreter (it has
    PyYAML; the harness venv need not)."""
    result = _compose("config", **env)
    assert result.returncode == 0, result.stderr
    tool = shutil.which("docker-compose")
    first = Path(tool).read_bytes().split(b"\n", 1)[0].decode(errors="replace")
    assert first.startswith("#!"), f"{tool} is not a Python script: cannot parse its output"
    parsed = subprocess.run(
        [
            *first[2:].split(),
            "-c",
            "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)",
        ],
        input=result.stdout,
        capture_output=True,
        text=True,
    )
    assert parsed.returncode == 0, parsed.stderr
    return json.loads(parsed.stdout)


@pytest.mark.parametrize(
    "env",
    [PASSWORD, {**PASSWORD, "SERVER": "uvicorn", "WORKERS": "3"}],
    ids=["defaults", "uvicorn"],
)
def test_compose_file_passes_the_validator(env: dict[str, str]) -> None:
    """`docker-compose config -q` accepts the file, with the defaults and with knobs set."""
    result = _compose("config", "-q", **env)
    assert result.returncode == 0, result.stderr


def test_every_service_has_a_healthcheck_on_our_own_network() -> None:
    """postgres, pgbouncer, upstream, app and nginx, each with a real healthcheck, all on the
    compose file's own network in 198.18.0.0/15 (never host networking, never the engine's
    default bridge), each labelled with its owner."""
    config = _config(**PASSWORD)
    services = config["services"]
    assert set(services) == SERVICES
    for name, service in services.items():
        check = service.get("healthcheck", {})
        assert check.get("test") and check["test"][0] != "NONE", f"{name} has no healthcheck"
        assert service.get("network_mode") is None, f"{name} leaves the compose network"
        assert list(service["networks"]) == ["bench"], name
        assert service["labels"][docker.OWNER_LABEL] == "0", name
    subnet = config["networks"]["bench"]["ipam"]["config"][0]["subnet"]
    assert subnet.startswith("198.18.") or subnet.startswith("198.19."), subnet


def test_every_image_is_built_here_from_the_local_base() -> None:
    """No FROM names a registry image: both Dockerfiles start FROM the base `make images`
    imported (ARG BASE); the stack is built with BASE, the app is the image `make images`
    built (pywebbench/<id>:latest, the one RUNTIME=docker runs)."""
    for name in ("Dockerfile", "stack.Dockerfile"):
        froms = re.findall(r"(?m)^FROM\s+(\S+)", (COMPOSE / name).read_text())
        assert froms == ["${BASE}"], (name, froms)
    services = _config(**PASSWORD, SERVER="uvicorn")["services"]
    assert services["app"]["image"] == "pywebbench/uvicorn:latest"
    assert "build" not in services["app"]
    for name in SERVICES - {"app"}:
        assert services[name]["image"] == "pywebbench/stack:latest", name
        assert services[name]["build"]["args"]["BASE"] == "pywebbench/base:test"
    missing = _compose("config", "-q", DB_PASSWORD="x")
    assert missing.returncode != 0 and "BASE must be set" in missing.stderr


def test_only_nginx_publishes_a_port_on_loopback() -> None:
    """Nothing but nginx is reachable from the host, and only on 127.0.0.1."""
    services = _config(**PASSWORD)["services"]
    for name, service in services.items():
        ports = service.get("ports", [])
        if name not in PUBLISHED:
            assert not ports, f"{name} publishes {ports}"
            continue
        assert ports, f"{name} publishes nothing"
        for port in ports:
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1", f"{name}: {port}"


def test_knobs_come_from_the_environment() -> None:
    """SERVER picks the image; WORKERS etc. reach the app; the resource limits of source 000
    are the defaults and can be changed."""
    app = _config(**PASSWORD, SERVER="uvicorn", WORKERS="3", APP_CPUS="3", APP_MEM="1g")[
        "services"
    ]["app"]
    assert app["environment"]["SERVER"] == "uvicorn"
    assert app["environment"]["WORKERS"] == "3"
    assert app["environment"]["THREADS"] == ""  # empty: the entrypoint uses server.toml's
    assert float(app["cpus"]) == 3 and str(app["mem_limit"]).lower() in ("1g", str(2**30))
    default = _config(**PASSWORD)["services"]["app"]
    assert float(default["cpus"]) == 1.5 and str(default["mem_limit"]).lower() in ("2g", str(2**31))


def test_compose_refuses_to_start_without_a_password() -> None:
    """No password is written in the repository: without DB_PASSWORD the file is refused."""
    result = _compose("config", "-q", BASE="x")
    assert result.returncode != 0 and "DB_PASSWORD must be set" in result.stderr


def test_nginx_fills_exactly_the_templates_names() -> None:
    """compose/nginx.sh substitutes every ${NAME} of proxy/site.conf.template (and only
    those: nginx's own $variables pass through), each set in the nginx service."""
    env = _config(**PASSWORD)["services"]["nginx"]["environment"]
    template = re.sub(
        r"(?m)^\s*#.*\n", "", (registry.ROOT / "proxy" / "site.conf.template").read_text()
    )
    names = set(re.findall(r"\$\{(\w+)\}", template))
    script = (COMPOSE / "nginx.sh").read_text()
    listed = set(re.findall(r"\$\{(\w+)\}", script.split("vars=", 1)[1].splitlines()[0]))
    assert names and listed == names and names <= set(env)
    filled = subprocess.run(
        ["envsubst", " ".join(f"${{{n}}}" for n in sorted(names))],
        input=template,
        capture_output=True,
        text=True,
        env={k: str(v) for k, v in env.items()},
    )
    if filled.returncode == 0:  # gettext-base on the host: check the result as the image does
        assert "${" not in filled.stdout and "server app:8000;" in filled.stdout
    main = re.sub(r"(?m)^\s*#.*\n", "", (COMPOSE / "nginx.conf").read_text())
    assert "access_log" not in main and "include /etc/nginx/conf.d/*.conf;" in main


# -- the real thing: build, up, one verified benchmark, down --------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def compose_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """granian's image and the stack image (cached after their first build), then
    `docker-compose up` under a harness-style project name owned by this process; `down -v`
    at the end, whatever happened."""
    problem = docker.engine_problem()
    if problem is not None:
        pytest.skip(f"no Docker engine: {problem}")
    from bench.host.arch import host_arch
    from tests.conftest import TOKEN

    spec = registry.load_all()["granian"]
    log = tmp_path_factory.mktemp("compose") / "images.log"
    assert images.build_images([spec], host_arch(), lambda text: None, log)["granian"], (
        log.read_text()[-3000:]
    )
    project = f"{docker.PREFIX}-{os.getpid()}-compose"
    port = _free_port()
    env = {
        "DB_PASSWORD": "compose-test",
        "BASE": images.base_tag(host_arch()),
        "SERVER": "granian",
        "NGINX_PORT": str(port),
        "PWB_OWNER": str(os.getpid()),
        "PWB_TOKEN": TOKEN,
        "APP_CPUS": "1",
        "DOCKER_BUILDKIT": "0",
        "COMPOSE_DOCKER_CLI_BUILD": "0",
        "SUBNET": "198.18.224.0/24",
    }
    try:
        up = _compose("up", "-d", "--build", project=project, **env)
        assert up.returncode == 0, (up.stdout + up.stderr)[-4000:]
        yield project, port
    finally:
        down = _compose("down", "-v", "--remove-orphans", project=project, **env)
        assert down.returncode == 0, down.stderr[-2000:]


def test_compose_up_serves_a_verified_benchmark_and_down_leaves_nothing(
    compose_up: tuple[str, int], tmp_path: Path
) -> None:
    """Through nginx on 127.0.0.1: the harness verifies every route (TARGET=: rows by shape)
    and measures /db for a second, an ok record with runtime compose; then (the fixture's
    `down`, checked in the next test) nothing of the project remains."""
    _, port = compose_up
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                break
        except OSError:
            time.sleep(1)
    results = tmp_path / "results"
    run = subprocess.run(
        [sys.executable, "-m", "bench", "run", f"--target=http://127.0.0.1:{port}",
         "--runtime=compose", "--scenario=db", "--concurrency=2", "--duration=1",
         "--warmup=0", "--trials=1", f"--results={results}"],
        cwd=registry.ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    (path,) = (results / "records").glob("*.json")
    rec = json.loads(path.read_text())
    assert rec["status"] == "ok" and rec["metadata"]["runtime"] == "compose"
    assert rec["verify"]["checked"] and rec["requests"] > 0 and rec["errors"]["non_2xx"] == 0


def test_compose_down_leaves_no_container_network_or_volume(compose_up: tuple[str, int]) -> None:
    """`down -v` removes every container and the network of the project (the module's
    fixture runs it again at the end: it must be idempotent)."""
    project, _ = compose_up
    env = {"DB_PASSWORD": "x", "BASE": "x"}
    assert _compose("down", "-v", "--remove-orphans", project=project, **env).returncode == 0
    listed = subprocess.run(
        ["docker", "ps", "--all", "--filter", f"label=com.docker.compose.project={project}",
         "--format", "{{.Names}}"], capture_output=True, text=True, timeout=60,
    ).stdout.split()  # fmt: skip
    networks = subprocess.run(
        ["docker", "network", "ls", "--filter", f"label=com.docker.compose.project={project}",
         "--format", "{{.Name}}"], capture_output=True, text=True, timeout=60,
    ).stdout.split()  # fmt: skip
    assert listed == [] and networks == []


# -- pgbouncer: db/pgbouncer.ini filled for the container network --------------------------------
def _pgbouncer(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "pgbouncer"
    fake.write_text('#!/bin/sh\necho "pgbouncer $*"\n')
    fake.chmod(0o755)
    return subprocess.run(
        ["sh", str(COMPOSE / "pgbouncer.sh")],
        capture_output=True,
        text=True,
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "PGBOUNCER_TEMPLATE": str(registry.ROOT / "db" / "pgbouncer.ini"),
            "PGBOUNCER_RUN_DIR": str(tmp_path),
            **env,
        },
    )


def test_pgbouncer_config_is_the_native_one_for_the_network(tmp_path: Path) -> None:
    """Every {placeholder} of db/pgbouncer.ini is filled: postgres by its service name,
    listening on all interfaces, transaction mode, pool 20 unless POOL_SIZE says otherwise."""
    result = _pgbouncer(tmp_path, DB_PASSWORD="s3cret", POOL_SIZE="35")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"pgbouncer {tmp_path}/pgbouncer.ini"
    ini = (tmp_path / "pgbouncer.ini").read_text()
    assert not re.search(r"\{\w+\}", ini), ini
    assert "bench = host=postgres port=5432 dbname=bench user=bench" in ini
    assert "listen_addr = 0.0.0.0" in ini and "listen_port = 6432" in ini
    assert "pool_mode = transaction" in ini and "default_pool_size = 35" in ini
    assert (tmp_path / "userlist.txt").read_text() == '"bench" "s3cret"\n'
    assert _pgbouncer(tmp_path, DB_PASSWORD="x").returncode == 0
    assert "default_pool_size = 20" in (tmp_path / "pgbouncer.ini").read_text()


def test_pgbouncer_refuses_bad_input(tmp_path: Path) -> None:
    """No password or a pool size that is not a number: a message, no pgbouncer started."""
    assert "DB_PASSWORD must be set" in _pgbouncer(tmp_path).stderr
    bad = _pgbouncer(tmp_path, DB_PASSWORD="x", POOL_SIZE="2;x")
    assert bad.returncode == 2 and "POOL_SIZE" in bad.stderr and "pgbouncer" not in bad.stdout


# -- the app container's entrypoint ----------------------------------------------------------------
def _entrypoint():
    spec = importlib.util.spec_from_file_location("compose_entrypoint", COMPOSE / "entrypoint.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_entrypoint_imports_without_side_effects() -> None:
    """Importing (and rendering) changes neither sys.path nor sys.modules' bench entries."""
    path, modules = list(sys.path), set(sys.modules)
    entry = _entrypoint()
    entry.render("granian", {}, cpus=2)
    assert sys.path == path
    assert {
        m for m in set(sys.modules) - modules if "registry" in m or m.startswith("bench")
    } == set()


@pytest.mark.parametrize("server", registry.server_ids())
def test_every_server_renders_for_its_container(server: str, tmp_path: Path) -> None:
    """Each Python server's argv and [env], rendered from server.toml with WORKERS, THREADS,
    CONNECTIONS and BACKLOG from the environment, have no placeholder left and listen on all
    interfaces; a server without requirements (nginx-static) is refused with a message."""
    spec = registry.load_spec(registry.SERVERS_DIR / server / "server.toml")
    entry = _entrypoint()
    if spec.requirements is None:
        with pytest.raises(SystemExit, match="not a Python server"):
            entry.render(server, {}, run_dir=tmp_path, cpus=2)
        return
    environ = {"WORKERS": "3", "THREADS": "5", "CONNECTIONS": "7", "BACKLOG": "911", "PORT": "8000"}
    argv, env = entry.render(server, environ, run_dir=tmp_path, cpus=2)
    text = " ".join(argv) + " " + " ".join(env.values())
    assert not re.search(r"\{\w+\}", text), text
    assert "127.0.0.1" not in text and "0.0.0.0" in text and "8000" in text
    assert argv[0] == sys.executable
    expected = {"workers": "3", "threads": "5", "connections": "7", "backlog": "911"}
    for knob, value in expected.items():
        if knob in spec.knobs:
            assert value in argv or value in env.values(), (knob, argv, env)
    knobs = registry.resolve_knobs(
        spec, 2, {"workers": 3, "threads": 5, "connections": 7, "backlog": 911}
    )
    assert env == registry.render_env(spec, {**knobs, "port": 8000})


def test_knob_defaults_come_from_server_toml() -> None:
    """Unset or empty knobs take server.toml's defaults, "cpus" the CPUs the container may use."""
    entry = _entrypoint()
    argv, env = entry.render("granian", {"WORKERS": "", "THREADS": " "}, cpus=2)
    assert argv[argv.index("--workers") + 1] == "2"
    assert argv[argv.index("--blocking-threads") + 1] == "4"
    assert argv[argv.index("--backlog") + 1] == "1024"
    assert env == {"APP_POOL_SIZE": "4"}


@pytest.mark.parametrize("bad", ["abc", "0", "-2", "1.5"])
def test_bad_knob_values_are_refused(bad: str) -> None:
    """A knob that is not a positive integer stops the container with the variable's name."""
    with pytest.raises(SystemExit, match=f"WORKERS={bad!r}"):
        _entrypoint().render("granian", {"WORKERS": bad}, cpus=2)


def test_unknown_server_is_refused() -> None:
    """SERVER naming no folder stops the container and lists the servers."""
    with pytest.raises(SystemExit, match="granian-asgi"):
        _entrypoint().render("nope", {}, cpus=2)


@pytest.mark.parametrize(
    ("cpu_max", "cap"), [("150000 100000\n", 2), ("50000 100000\n", 1), ("max 100000\n", None)]
)
def test_cpus_follow_the_container_quota(tmp_path: Path, cpu_max: str, cap: int | None) -> None:
    """`cpus: 1.5` in compose gives 2 workers by default, not one per host CPU."""
    (tmp_path / "cpu.max").write_text(cpu_max)
    affinity = len(os.sched_getaffinity(0))
    want = affinity if cap is None else min(cap, affinity)
    assert _entrypoint().usable_cpus(tmp_path / "cpu.max", tmp_path) == want
    assert _entrypoint().usable_cpus(tmp_path / "absent", tmp_path / "absent") == affinity
    # cgroup v1 (this project's machine): cpu.cfs_quota_us / cpu.cfs_period_us, -1 = none.
    quota, period = cpu_max.split()
    (tmp_path / "cpu.cfs_quota_us").write_text("-1\n" if quota == "max" else quota + "\n")
    (tmp_path / "cpu.cfs_period_us").write_text(period + "\n")
    assert _entrypoint().usable_cpus(tmp_path / "absent", tmp_path) == want


def test_config_files_are_rendered_for_the_container(tmp_path: Path) -> None:
    """A declaration with a native config file gets it rendered into the run dir, listening
    on all interfaces, and {config} points at it (as bench/stack/components.py does natively)."""
    root = tmp_path / "root"
    (root / "bench" / "core").mkdir(parents=True)
    shutil.copy(
        registry.ROOT / "bench" / "core" / "registry.py", root / "bench" / "core" / "registry.py"
    )
    folder = root / "servers" / "confd"
    folder.mkdir(parents=True)
    (folder / "requirements.txt").write_text("")
    (folder / "srv.conf").write_text("bind 127.0.0.1:{port}\nworkers {workers}\n{ braces }\n")
    (folder / "server.toml").write_text(
        'description = "x"\napp = "wsgi"\nconfig = "srv.conf"\n'
        'argv = ["{python}", "-m", "srv", "-c", "{config}"]\n'
        '[knobs.workers]\ndefault = "cpus"\nserver_default = "cpus"\n'
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    argv, env = _entrypoint().render("confd", {"WORKERS": "6"}, root=root, run_dir=run_dir)
    config = run_dir / "confd-srv.conf"
    assert argv[-1] == str(config) and env == {}
    assert config.read_text() == "bind 0.0.0.0:8000\nworkers 6\n{ braces }\n"


def test_main_execs_the_server_with_its_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() replaces itself by the server (PID 1), with the declaration's [env] added."""
    entry = _entrypoint()
    seen = {}
    monkeypatch.setattr(entry, "usable_cpus", lambda: 2)
    monkeypatch.setattr(entry.os, "execvpe", lambda f, a, e: seen.update(file=f, argv=a, env=e))
    monkeypatch.setenv("SERVER", "gunicorn-gthread")
    monkeypatch.setenv("THREADS", "6")
    entry.main()
    assert seen["file"] == sys.executable and "gunicorn" in seen["argv"]
    assert "0.0.0.0:8000" in seen["argv"]
    assert seen["env"]["APP_POOL_SIZE"] == "6" and seen["env"]["SERVER"] == "gunicorn-gthread"


def test_the_app_container_holds_every_harness_module_the_registry_imports() -> None:
    """compose.yaml mounts bench/core/registry.py into the app container (the entrypoint
    renders argv with it); each bench module it imports must be mounted beside it, or the
    container cannot start (PROTOCOL='s bench/core/protocol.py was not, and compose up found
    the app unhealthy)."""
    import ast

    source = (registry.ROOT / "bench/core/registry.py").read_text()
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bench")
    }
    mounted = (registry.ROOT / "compose/compose.yaml").read_text()
    for module in imported:
        path = module.replace(".", "/") + ".py"
        assert f"../{path}:/app/{path}:ro" in mounted, module
