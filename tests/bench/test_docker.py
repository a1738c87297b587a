"""bench.host.docker without an engine: names, labels, limits in docker's syntax, the run
command line, and which leftovers are removed (only those whose owner pid is gone)."""

import ipaddress
import os
import re

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


def test_run_command_line_on_a_bridge_takes_a_fixed_address() -> None:
    """NETWORK=bridge: the harness's network by name and the server's fixed address."""
    argv = docker.run_argv(
        "pwb-1-granian-1",
        "pywebbench/granian:latest",
        ["true"],
        limits=docker.Limits(),
        env={},
        mounts=[],
        workdir="/app",
        labels={},
        network="pwb-1-bridge-2",
        ip="198.19.0.2",
    )
    assert "--network=pwb-1-bridge-2" in argv and "--ip=198.19.0.2" in argv
    assert "--network=host" not in argv
    host = docker.run_argv(
        "n", "i", [], limits=docker.Limits(), env={}, mounts=[], workdir="/", labels={}
    )
    assert not any(arg.startswith("--ip") for arg in host)


def test_bridge_subnets_are_in_the_benchmarking_range_and_avoid_used_ones() -> None:
    """The pool is inside 198.18.0.0/15 (never the engine's 172.17.0.0/16, never compose's
    198.18.0.0/24); the first /24 that overlaps nothing in use is taken."""
    benchmarking = ipaddress.IPv4Network("198.18.0.0/15")
    assert docker.BRIDGE_POOL.subnet_of(benchmarking)
    assert not docker.BRIDGE_POOL.overlaps(ipaddress.IPv4Network("172.17.0.0/16"))
    assert not docker.BRIDGE_POOL.overlaps(ipaddress.IPv4Network("198.18.0.0/24"))
    assert docker.choose_subnet([]) == ipaddress.IPv4Network("198.19.0.0/24")
    used = [
        ipaddress.IPv4Network("172.17.0.0/16"),
        ipaddress.IPv4Network("198.19.0.0/24"),
        ipaddress.IPv4Network("198.19.1.128/25"),  # a host interface's smaller network
    ]
    chosen = docker.choose_subnet(used)
    assert chosen == ipaddress.IPv4Network("198.19.2.0/24") and chosen.subnet_of(benchmarking)
    # A network that holds the whole pool leaves nothing: one clear error, no range outside.
    with pytest.raises(docker.EngineError, match=re.escape("no free /24 left in 198.19.0.0/16")):
        docker.choose_subnet([ipaddress.IPv4Network("198.18.0.0/15")])


def test_bridge_addresses_names_and_its_create_command() -> None:
    """The gateway is the subnet's first address (the host's, where pgbouncer and the stub
    listen), the server the second; the network is internal, without NAT, labelled."""
    bridge = docker.Bridge("pwb-7-bridge-1", ipaddress.IPv4Network("198.19.4.0/24"))
    assert (bridge.gateway, bridge.server_address) == ("198.19.4.1", "198.19.4.2")
    argv = docker.network_argv(bridge.name, bridge.subnet, {docker.OWNER_LABEL: "7"})
    assert argv[:2] == ["network", "create"] and argv[-1] == "pwb-7-bridge-1"
    assert "--subnet=198.19.4.0/24" in argv and "--gateway=198.19.4.1" in argv
    assert "--internal" in argv and "--driver=bridge" in argv
    assert "--opt=com.docker.network.bridge.enable_ip_masquerade=false" in argv
    assert f"--label={docker.OWNER_LABEL}=7" in argv
    assert docker.NAME_RE.match(docker.container_name("bridge", owner=7)).group(1) == "7"


def test_subnets_in_use_are_read_from_the_engines_inspect() -> None:
    """IPv4 subnets of every network's IPAM config; IPv6 and empty configs are skipped."""
    inspected = [
        {"IPAM": {"Config": [{"Subnet": "172.17.0.0/16", "Gateway": "172.17.0.1"}]}},
        {"IPAM": {"Config": [{"Subnet": "fd00::/64"}, {"Subnet": "198.19.0.0/24"}]}},
        {"IPAM": {"Config": None}},
        {},
    ]
    assert docker.parse_subnets(inspected) == [
        ipaddress.IPv4Network("172.17.0.0/16"),
        ipaddress.IPv4Network("198.19.0.0/24"),
    ]


def test_records_say_which_network_and_which_subnet() -> None:
    """container.network is "host" without a bridge (subnet and address null), "bridge" with
    one, with its subnet and the server's address."""
    from bench.stack.containers import container_facts

    host = container_facts(None, docker.Limits(), "pwb-1-granian-1")
    assert (host["network"], host["subnet"], host["address"]) == ("host", None, None)
    bridge = docker.Bridge("pwb-1-bridge-2", ipaddress.IPv4Network("198.19.3.0/24"))
    facts = container_facts(None, docker.Limits(cpus=1.0), "pwb-1-granian-3", bridge)
    assert (facts["network"], facts["subnet"], facts["address"]) == (
        "bridge",
        "198.19.3.0/24",
        "198.19.3.2",
    )


def test_on_a_bridge_the_server_binds_its_address_there() -> None:
    """A declaration binds 127.0.0.1: in a bridged container that would be unreachable from
    the host, so the argv binds the container's address instead (never 0.0.0.0)."""
    from bench.stack.containers import bind_to

    argv = ["gunicorn", "--bind", "127.0.0.1:8000", "--host", "127.0.0.1", "app:app"]
    assert bind_to(argv, None) == argv
    bridge = docker.Bridge("pwb-1-bridge-1", ipaddress.IPv4Network("198.19.5.0/24"))
    assert bind_to(argv, bridge) == [
        "gunicorn",
        "--bind",
        "198.19.5.2:8000",
        "--host",
        "198.19.5.2",
        "app:app",
    ]
