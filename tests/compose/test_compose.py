"""The container path, checked without a Docker engine (this machine has none): the compose
file through docker-compose's own parser, the images' inputs against the native path's."""

import importlib.util
import re
import shutil
import subprocess

import pytest

from bench import registry

COMPOSE = registry.ROOT / "compose"
DOCKERFILE = (COMPOSE / "Dockerfile").read_text()
SERVICES = {"postgres", "pgbouncer", "upstream", "app", "nginx", "locust-master", "locust-worker"}


def _config(**env: str) -> subprocess.CompletedProcess:
    tool = shutil.which("docker-compose")
    assert tool, "docker-compose is missing: `make test` installs it (bench/setup.sh)"
    return subprocess.run(
        [tool, "-f", str(COMPOSE / "compose.yaml"), "--profile", "load", "config"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
    )


def test_compose_file_is_valid_and_names_every_service() -> None:
    """docker-compose's parser accepts it; every service has a healthcheck; the knobs come
    from the environment (SERVER picks the image, WORKERS reaches the app)."""
    result = _config(DB_PASSWORD="not-a-secret", SERVER="uvicorn", WORKERS="3")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    services = re.findall(r"^  ([a-z-]+):$", text.split("services:\n", 1)[1], re.MULTILINE)
    assert set(services) >= SERVICES
    assert text.count("healthcheck:") >= len(SERVICES)
    assert "pywebbench/app-uvicorn" in text and "WORKERS: '3'" in text
    assert "SERVER: uvicorn" in text


def test_compose_refuses_to_start_without_a_password() -> None:
    """No password is written in the repository: without DB_PASSWORD the file is refused."""
    result = _config()
    assert result.returncode != 0 and "DB_PASSWORD must be set" in result.stderr


def test_dockerfile_installs_the_native_path_requirements() -> None:
    """The app image's venv comes from servers/${SERVER}/requirements.txt with the server's
    install_flags, as bench/venv.py does; Locust from bench/locust/requirements.txt; the seed
    from bench/seed.py; nginx's site from proxy/."""
    assert "COPY servers/${SERVER}/ /src/servers/${SERVER}/" in DOCKERFILE
    assert "req=/src/servers/${SERVER}/requirements.txt" in DOCKERFILE
    assert 'uv pip install --no-cache --python /venv/bin/python $flags -r "$req"' in DOCKERFILE
    assert "install_flags" in DOCKERFILE
    assert "COPY bench/locust/requirements.txt" in DOCKERFILE
    assert "seed.seed_script()" in DOCKERFILE
    assert "../proxy/site.conf.template" in (COMPOSE / "compose.yaml").read_text()
    assert "uv==${UV_VERSION}" in DOCKERFILE
    uv_pin = re.search(r"ARG UV_VERSION=(\S+)", DOCKERFILE).group(1)
    assert f"uv_version={uv_pin}" in (registry.ROOT / "bench" / "setup.sh").read_text()


def _entrypoint():
    spec = importlib.util.spec_from_file_location("entrypoint", COMPOSE / "entrypoint.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("server", registry.server_ids())
def test_every_server_renders_for_its_container(server: str) -> None:
    """Each Python server's argv, rendered by the container's entrypoint from server.toml,
    has no placeholder left, listens on all interfaces and honours WORKERS; a server without
    requirements (nginx-static) is refused with a message, as its image build is."""
    spec = registry.load_spec(registry.SERVERS_DIR / server / "server.toml")
    entry = _entrypoint()
    if spec.requirements is None:
        with pytest.raises(SystemExit, match="not a Python server"):
            entry.render(server, {})
        assert "not a Python server, no app image" in DOCKERFILE
        return
    argv, env = entry.render(server, {"WORKERS": "3", "PORT": "8000"})
    text = " ".join(argv) + " " + " ".join(env.values())
    assert not re.search(r"\{\w+\}", text), text
    assert "127.0.0.1" not in text and "0.0.0.0" in text and "8000" in text
    if "workers" in spec.knobs:
        assert "3" in argv
