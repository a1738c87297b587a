"""bench.host.docker without an engine: names, labels, limits in docker's syntax, the run
command line, and which leftovers are removed (only those whose owner pid is gone)."""

import os

import pytest

from bench.host import docker


@pytest.mark.parametrize(
    ("raw", "size"),
    [
        ("512m", 512 * 2**20),
        ("1g", 2**30),
        ("1.5g", int(1.5 * 2**30)),
        ("6m", 6 * 2**20),
        ("7000000", 7_000_000),
        ("8192k", 8192 * 2**10),
        ("2G", 2 * 2**30),
    ],
)
def test_memory_is_read_as_docker_reads_it(raw: str, size: int) -> None:
    """b/k/m/g are binary units, a bare number is bytes, the case does not matter."""
    assert docker.parse_memory(raw) == size


@pytest.mark.parametrize("raw", ["12q", "", "abc", "-1m", "5m", "1e9", "m"])
def test_bad_memory_is_refused(raw: str) -> None:
    """Not a size, or below docker's 6 MiB floor: ValueError."""
    with pytest.raises(ValueError):
        docker.parse_memory(raw)


def test_cpus_within_what_the_engine_has() -> None:
    """0.01..the CPUs available, fractions allowed; anything else is refused."""
    assert docker.parse_cpus("0.5", 2) == 0.5
    assert docker.parse_cpus("2", 2) == 2.0
    for raw in ("0", "0.001", "3", "abc", "nan", "inf"):
        with pytest.raises(ValueError):
            docker.parse_cpus(raw, 2)


def test_names_and_labels_say_whose_a_container_is() -> None:
    """pwb-<harness pid>-<what>-<n>, new n each time; the owner label holds the pid."""
    first, second = docker.container_name("granian"), docker.container_name("granian")
    assert first != second
    assert first.startswith(f"pwb-{os.getpid()}-granian-")
    assert docker.NAME_RE.match(first).group(1) == str(os.getpid())
    assert docker.owner_labels()[docker.OWNER_LABEL] == str(os.getpid())
    assert docker.container_name("a b/c", owner=7).startswith("pwb-7-a-b-c-")


def test_leftovers_are_only_those_of_dead_owners() -> None:
    """A container whose owner pid is alive (another harness, this one) is never listed."""
    listed = [
        ("pwb-11-granian-1", 11),
        ("pwb-22-uvicorn-1", 22),
        (f"pwb-{os.getpid()}-x-1", os.getpid()),
    ]
    alive = {22}
    assert docker.leftovers(listed, alive=lambda pid: pid in alive) == ["pwb-11-granian-1"]


def test_run_command_line() -> None:
    """docker run: removed on exit, named, host network, the engine's own limit flags (swap
    equal to memory: a binding limit kills rather than pages), labels, the run dir mounted."""
    argv = docker.run_argv(
        "pwb-1-granian-1",
        "pywebbench/granian:latest",
        ["/venv/bin/python", "-m", "granian"],
        limits=docker.Limits(cpus=0.5, memory_bytes=512 * 2**20),
        env={"A": "1"},
        mounts=["/tmp/run:/tmp/run"],
        workdir="/app",
        labels={docker.OWNER_LABEL: "1"},
    )
    assert argv[1:3] == ["run", "--rm"]
    assert "--name=pwb-1-granian-1" in argv and "--network=host" in argv
    assert "--cpus=0.5" in argv
    assert f"--memory={512 * 2**20}b" in argv and f"--memory-swap={512 * 2**20}b" in argv
    assert f"--label={docker.OWNER_LABEL}=1" in argv
    assert "--volume=/tmp/run:/tmp/run" in argv and "--env=A=1" in argv
    image = argv.index("pywebbench/granian:latest")
    assert argv[image + 1 :] == ["/venv/bin/python", "-m", "granian"]
    assert docker.Limits().flags() == []
