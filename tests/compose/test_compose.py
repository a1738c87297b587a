"""The container path, checked without a Docker engine (this machine has none): the compose
file through docker-compose's own parser, the Dockerfile's shell steps run against the
repository's files with a stand-in for uv, the entrypoint's rendering of every server.toml,
and the images' inputs against the native path's."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core import registry, seed

COMPOSE = registry.ROOT / "compose"
DOCKERFILE = (COMPOSE / "Dockerfile").read_text()
SERVICES = {"postgres", "pgbouncer", "upstream", "app", "nginx", "locust-master", "locust-worker"}
# Only these may publish a port, and only on loopback.
PUBLISHED = {"nginx", "locust-master"}
INSTALL_HINT = (
    "docker-compose (the validator of compose/compose.yaml) is missing: "
    "run `PYWEBBENCH_TEST=1 bash bench/setup.sh` (what `make test` does) "
    "or `sudo apt-get install docker-compose`"
)
PASSWORD = {"DB_PASSWORD": "not-a-secret"}


# -- compose.yaml through the real validator ------------------------------------------------------
def _compose(*args: str, **env: str) -> subprocess.CompletedProcess:
    tool = shutil.which("docker-compose")
    assert tool, INSTALL_HINT
    return subprocess.run(
        [tool, "-f", str(COMPOSE / "compose.yaml"), "--profile", "load", *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
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


def test_every_service_is_there_with_a_healthcheck() -> None:
    """postgres, pgbouncer, upstream, app, nginx and Locust (master and workers) are declared,
    each with a real healthcheck test, all on the compose network (no host networking)."""
    services = _config(**PASSWORD)["services"]
    assert set(services) >= SERVICES
    for name, service in services.items():
        check = service.get("healthcheck", {})
        assert check.get("test") and check["test"][0] != "NONE", f"{name} has no healthcheck"
        assert not check.get("disable"), name
        assert service.get("network_mode") is None, f"{name} leaves the compose network"


def test_only_nginx_and_locust_publish_ports_on_loopback() -> None:
    """Nothing but nginx and Locust's web UI is reachable from the host, and only on 127.0.0.1."""
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
    """SERVER picks the build argument and the image; WORKERS etc. reach the app; the
    resource limits of source 000 are the defaults and can be changed."""
    app = _config(**PASSWORD, SERVER="uvicorn", WORKERS="3", APP_CPUS="3", APP_MEM="1g")[
        "services"
    ]["app"]
    assert app["build"]["args"]["SERVER"] == "uvicorn"
    assert app["image"] == "pywebbench/app-uvicorn"
    assert app["environment"]["SERVER"] == "uvicorn"
    assert app["environment"]["WORKERS"] == "3"
    assert app["environment"]["THREADS"] == ""  # empty: the entrypoint uses server.toml's
    assert float(app["cpus"]) == 3 and str(app["mem_limit"]).lower() in ("1g", str(2**30))
    default = _config(**PASSWORD)["services"]["app"]
    assert default["build"]["args"]["SERVER"] == "granian"
    assert float(default["cpus"]) == 1.5 and str(default["mem_limit"]).lower() in ("2g", str(2**31))


def test_compose_refuses_to_start_without_a_password() -> None:
    """No password is written in the repository: without DB_PASSWORD the file is refused."""
    result = _compose("config", "-q")
    assert result.returncode != 0 and "DB_PASSWORD must be set" in result.stderr


def test_locust_worker_scales() -> None:
    """locust-worker has no container name or published port, so --scale N can start N."""
    worker = _config(**PASSWORD)["services"]["locust-worker"]
    assert "container_name" not in worker and not worker.get("ports")
    assert "--worker" in worker["command"]


# -- nginx: the image fills proxy/site.conf.template ---------------------------------------------
def test_nginx_template_is_filled_by_the_image() -> None:
    """Every ${NAME} of proxy/site.conf.template is set in the nginx service and passes the
    image's NGINX_ENVSUBST_FILTER; substituting as the image does leaves no ${...}; the main
    config replaces the image's (which logs every request)."""
    nginx = _config(**PASSWORD)["services"]["nginx"]
    env = nginx["environment"]
    # `config` keeps compose's $$ escape; the container sees a single $.
    pattern = re.compile(env["NGINX_ENVSUBST_FILTER"].replace("$$", "$"))
    template = (registry.ROOT / "proxy" / "site.conf.template").read_text()
    # its header comment explains ${NAME}: only directives count
    template = re.sub(r"(?m)^\s*#.*\n", "", template)
    names = set(re.findall(r"\$\{(\w+)\}", template))
    assert names and names <= set(env), names - set(env)
    assert all(pattern.search(n) for n in names)
    assert not any(pattern.search(n) for n in ("PATH", "HOSTNAME", "HOME", "NGINX_VERSION"))
    filled = re.sub(
        r"\$\{(\w+)\}", lambda m: str(env[m[1]]) if pattern.search(m[1]) else m[0], template
    )
    assert "${" not in filled and "server app:8000;" in filled
    mounts = {v.split(":")[1]: v.split(":")[0] for v in nginx["volumes"]}
    assert Path(mounts["/etc/nginx/nginx.conf"]) == COMPOSE / "nginx.conf"
    assert Path(mounts["/etc/nginx/templates/default.conf.template"]) == (
        registry.ROOT / "proxy" / "site.conf.template"
    )
    main = re.sub(r"(?m)^\s*#.*\n", "", (COMPOSE / "nginx.conf").read_text())
    assert "access_log" not in main and "include /etc/nginx/conf.d/*.conf;" in main


# -- the Dockerfile, stage by stage ---------------------------------------------------------------
def _stages(text: str = DOCKERFILE) -> dict[str, list[str]]:
    """stage name -> its instructions (continuations joined, comments dropped)."""
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        instruction = (pending + line).strip()
        pending = ""
        found = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", instruction, re.IGNORECASE)
        if found:
            current = stages.setdefault(found.group(1), [])
        current.append(instruction)
    return stages


def _run_step(stage: str, needle: str, tmp_path: Path, env: dict[str, str]):
    """Run the RUN step of `stage` containing `needle` with /src/ moved under tmp_path and
    uv replaced by a stand-in that logs its arguments."""
    step = next(i for i in _stages()[stage] if i.startswith("RUN ") and needle in i)
    script = step[4:].replace("/src/", f"{tmp_path}/src/")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "uv.log"
    uv = bin_dir / "uv"
    uv.write_text(
        f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done >> {log}\necho -- >> {log}\n'
    )
    uv.chmod(0o755)
    python3 = bin_dir / "python3"
    python3.symlink_to(sys.executable)
    result = subprocess.run(
        ["sh", "-c", script],
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", **env},
    )
    calls = log.read_text().split("--\n")[:-1] if log.exists() else []
    return result, [c.splitlines() for c in calls]


def test_every_stage_is_there_on_a_multi_arch_base() -> None:
    """app, upstream, postgres, pgbouncer and locust stages; bases are multi-arch images,
    nothing names an architecture; the app runs as a non-root user."""
    stages = _stages()
    assert set(stages) >= {"build", "seed", "postgres", "pgbouncer", "upstream", "locust", "app"}
    assert not re.search(r"amd64|arm64|x86_64|aarch64", DOCKERFILE.split("FROM", 1)[1])
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in DOCKERFILE
    for name in ("app", "upstream", "locust"):
        users = [i for i in stages[name] if i.startswith("USER ")]
        assert users and users[-1] != "USER root", name
    upstream_cmd = next(i for i in stages["upstream"] if i.startswith("CMD "))
    assert json.loads(upstream_cmd[4:]) == [
        "python", "-m", "app_common.upstream", "--host", "0.0.0.0", "--port", "9000"
    ]  # fmt: skip


@pytest.mark.parametrize("server", registry.server_ids())
def test_builder_installs_the_native_requirements(server: str, tmp_path: Path) -> None:
    """The builder stage, run for each server: it copies servers/<id>/ and installs exactly
    servers/<id>/requirements.txt (the file bench/host/venv.py installs natively) with the
    server's install_flags; a server without one (nginx-static) stops the build with a message."""
    stages = _stages()
    assert "ARG SERVER=granian" in stages["build"]
    assert "COPY servers/${SERVER}/ /src/servers/${SERVER}/" in stages["build"]
    shutil.copytree(registry.SERVERS_DIR / server, tmp_path / "src" / "servers" / server)
    spec = registry.load_spec(registry.SERVERS_DIR / server / "server.toml")
    result, calls = _run_step("build", "requirements.txt", tmp_path, {"SERVER": server})
    if spec.requirements is None:
        assert spec.app == "static"
        assert result.returncode != 0 and "not a Python server, no app image" in result.stderr
        assert calls == []
        return
    assert result.returncode == 0, result.stderr
    installed = tmp_path / "src" / "servers" / server / "requirements.txt"
    assert calls == [
        ["venv", "/venv", "--python", "/usr/local/bin/python3"],
        ["pip", "install", "--no-cache", "--python", "/venv/bin/python",
         *spec.install_flags, "-r", str(installed)],
    ]  # fmt: skip
    # The native path: bench/host/venv.py installs spec.requirements (servers/<id>/...txt).
    assert spec.requirements == registry.SERVERS_DIR / server / "requirements.txt"
    assert installed.read_bytes() == spec.requirements.read_bytes()


def test_native_path_installs_the_same_file() -> None:
    """bench/host/venv.py installs spec.requirements with the same uv subcommand and flag order."""
    source = (registry.ROOT / "bench" / "host" / "venv.py").read_text()
    assert "make_venv(spec.id, spec.requirements, tuple(spec.install_flags)" in source
    assert '"pip", "install", "-q", "--python", str(python), *flags, "-r"' in source


def test_uv_is_pinned_as_in_setup() -> None:
    """The builder's uv comes from PyPI at the version bench/setup.sh pins."""
    assert 'pip install --no-cache-dir "uv==${UV_VERSION}"' in DOCKERFILE
    uv_pin = re.search(r"ARG UV_VERSION=(\S+)", DOCKERFILE).group(1)
    assert f"uv_version={uv_pin}" in (registry.ROOT / "bench" / "setup.sh").read_text()


def test_seed_stage_writes_the_native_rows(tmp_path: Path) -> None:
    """The postgres image's init script is bench/core/seed.py's own output: the same 10,000 world
    rows from the fixed seed and the same fortunes as the native cluster."""
    (tmp_path / "src" / "bench" / "core").mkdir(parents=True)
    for name in ("__init__.py", "core/__init__.py", "core/seed.py"):
        shutil.copy(registry.ROOT / "bench" / name, tmp_path / "src" / "bench" / name)
    shutil.copytree(registry.ROOT / "db", tmp_path / "src" / "db")
    step = next(i for i in _stages()["seed"] if i.startswith("RUN "))
    script = step[4:].replace("/src", f"{tmp_path}/src").replace("> /seed.sql", "")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    result = subprocess.run(
        ["sh", "-c", script],
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == seed.seed_script()
    assert len(re.findall(r"^\d+\t\d+$", result.stdout, re.MULTILINE)) >= seed.WORLD_ROWS
    assert "COPY --from=seed /seed.sql /docker-entrypoint-initdb.d/" in DOCKERFILE


def test_bake_file_has_a_target_per_python_server() -> None:
    """compose/docker-bake.hcl builds an app image for every server with requirements."""
    hcl = (COMPOSE / "docker-bake.hcl").read_text()
    matrix = re.search(r"server = \[(.*?)\]", hcl, re.DOTALL).group(1)
    listed = re.findall(r'"([a-z0-9-]+)"', matrix)
    python_servers = [
        sid
        for sid in registry.server_ids()
        if (registry.SERVERS_DIR / sid / "requirements.txt").exists()
    ]
    assert listed == python_servers
    assert 'default = "linux/amd64,linux/arm64"' in hcl


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
    assert _entrypoint().usable_cpus(tmp_path / "cpu.max") == want
    assert _entrypoint().usable_cpus(tmp_path / "absent") == affinity


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
