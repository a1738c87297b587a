"""The Docker engine, as the harness uses it: names, labels, run/stop/remove, leftovers, inspect.

Input: what to run (an image, argv, limits) and the harness's own pid. Output: the `docker run`
command line of a harness-owned container, its inspected facts (host pid of its init, image
id, limits), and its removal by name. Every container (and network) the harness makes is named
`pwb-<harness pid>-<what>-<n>` and carries the label `pywebbench.owner=<harness pid>`: a
harness that was killed leaves them under a name that says whose they were, and the next start
removes those whose owner is gone (remove_leftovers). Nothing is ever removed by a broad query:
only names listed under our own label, one by one.

Engine facts relied on (docker run --help, Docker 20.10 docs "Runtime options with Memory,
CPUs"): `--cpus=N` sets the CFS quota to N × the 100 ms period; `--memory=N[b|k|m|g]` is the
hard limit (at least 6 MiB); `--network host` shares the host's network stack (127.0.0.1 is the
host's loopback, no port mapping, no bridge); `--rm` removes the container when it exits.
NETWORK=bridge (docker network create --help, Docker's "Bridge network driver" page): a
user-defined bridge with `--subnet` and `--gateway` gets a Linux bridge holding the gateway
address on the host as soon as it is created (so host processes can listen on it before any
container attaches); `--internal` keeps its containers off every other network (the engine's
isolation rules drop what would leave the bridge), and
`com.docker.network.bridge.enable_ip_masquerade=false` adds no NAT rule; `docker run --ip`
gives the container a fixed address on it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count

import psutil

from bench.core.validate import CPUS_MIN, parse_cpus, parse_memory

__all__ = ["CPUS_MIN", "parse_cpus", "parse_memory"]  # the engine's syntax, kept in core

PREFIX = "pwb"
OWNER_LABEL = "pywebbench.owner"
# The test suite's session token (bench.procs.OWNER_ENV), so it finds what it left behind.
TOKEN_LABEL = "pywebbench.token"
NAME_RE = re.compile(rf"^{PREFIX}-(\d+)-")
TIMEOUT_S = 60  # one engine command (inspect, rm, stop): bounded
# NETWORK=bridge: the harness's bridges take a /24 of 198.19.0.0/16, the upper half of the
# benchmarking range 198.18.0.0/15 (RFC 2544), never the engine's 172.17.0.0/16; compose/
# keeps 198.18.0.0/24 and its test 198.18.224.0/24, in the lower half.
BENCHMARK_RANGE = ipaddress.IPv4Network("198.18.0.0/15")
BRIDGE_POOL = ipaddress.IPv4Network("198.19.0.0/16")
BRIDGE_PREFIX = 24
BRIDGE_ATTEMPTS = 8  # another harness may take the same free /24 at the same moment
_numbers = count(1)


class EngineError(RuntimeError):
    """The engine is absent, refused a command, or answered something unreadable."""


def docker_binary() -> str | None:
    """The docker CLI, or None."""
    return shutil.which("docker")


def _docker(*args: str, timeout_s: float = TIMEOUT_S, check: bool = True) -> str:
    binary = docker_binary()
    if binary is None:
        raise EngineError("the docker CLI is not installed")
    try:
        result = subprocess.run(
            [binary, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise EngineError(f"docker {args[0]} did not answer within {timeout_s:g} s") from None
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise EngineError(f"docker {' '.join(args[:2])}: {detail[-1] if detail else 'failed'}")
    return result.stdout


def engine_problem() -> str | None:
    """Why no container can run here (one line), or None when the engine answers."""
    if docker_binary() is None:
        return "RUNTIME=docker needs a Docker engine: the docker CLI is not installed"
    try:
        _docker("version", "--format", "{{.Server.Version}}", timeout_s=20)
    except EngineError as exc:
        return f"RUNTIME=docker needs a running Docker engine: {exc}"
    return None


def engine_facts() -> dict[str, str]:
    """The engine's version, cgroup driver and version (the record's metadata)."""
    text = _docker(
        "info",
        "--format",
        "{{.ServerVersion}}\t{{.CgroupDriver}}\t{{.CgroupVersion}}",
        timeout_s=20,
    )
    version, driver, cgroup_version = [*text.strip().split("\t"), "", "", ""][:3]
    return {"version": version, "cgroup_driver": driver, "cgroup_version": cgroup_version}


def container_name(what: str, owner: int | None = None) -> str:
    """A new harness-owned name: pwb-<owner pid>-<what>-<n>."""
    safe = re.sub(r"[^a-zA-Z0-9_.-]+", "-", what)
    return f"{PREFIX}-{owner if owner is not None else os.getpid()}-{safe}-{next(_numbers)}"


def owner_labels(owner: int | None = None) -> dict[str, str]:
    """The labels that say whose a container or network is."""
    labels = {OWNER_LABEL: str(owner if owner is not None else os.getpid())}
    from bench.host.procs import OWNER_ENV

    token = os.environ.get(OWNER_ENV)
    if token:
        labels[TOKEN_LABEL] = token
    return labels


@dataclass(frozen=True)
class Limits:
    """The engine's limits on one container: CPUs (`--cpus`) and memory (`--memory`)."""

    cpus: float | None = None
    memory_bytes: int | None = None

    def flags(self) -> list[str]:
        """docker run's flags for these limits."""
        flags = []
        if self.cpus is not None:
            flags.append(f"--cpus={self.cpus:g}")
        if self.memory_bytes is not None:
            # No swap beyond the limit (memory-swap = memory): a limit that binds kills, as in
            # a Kubernetes pod, instead of paging.
            flags += [f"--memory={self.memory_bytes}b", f"--memory-swap={self.memory_bytes}b"]
        return flags


def run_argv(
    name: str,
    image: str,
    argv: list[str],
    *,
    limits: Limits,
    env: dict[str, str],
    mounts: list[str],
    workdir: str,
    labels: dict[str, str],
    network: str = "host",
    ip: str | None = None,
    stop_signal: str = "SIGTERM",
    stop_timeout_s: int = 10,
) -> list[str]:
    """`docker run` for one harness-owned server container, attached (its output is the log,
    its exit status the server's), removed when it exits."""
    command = [
        docker_binary() or "docker",
        "run",
        "--rm",
        f"--name={name}",
        f"--network={network}",
        *([f"--ip={ip}"] if ip else []),
        # The server's own stop signal (server.toml), SIGKILL after the timeout.
        f"--stop-signal={stop_signal}",
        f"--stop-timeout={stop_timeout_s}",
        f"--workdir={workdir}",
        # No --ulimit: the engine's own open-files limit stands (raising it is refused in an
        # unprivileged engine, as on this project's machines: "error setting rlimit type 7").
        *limits.flags(),
    ]
    for key, value in sorted(labels.items()):
        command.append(f"--label={key}={value}")
    for mount in mounts:
        command.append(f"--volume={mount}")
    for key, value in sorted(env.items()):
        command.append(f"--env={key}={value}")
    return [*command, image, *argv]


def inspect(name: str) -> dict:
    """`docker inspect` of one container or image, parsed; EngineError when unknown."""
    text = _docker("inspect", "--type=container", name)
    data = json.loads(text)
    if not data:
        raise EngineError(f"no container {name}")
    return data[0]


def image_inspect(ref: str) -> dict | None:
    """The image's inspect data, or None when the engine has no such image."""
    text = _docker("image", "inspect", ref, check=False)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data[0] if data else None


def container_pid(name: str) -> int | None:
    """The host pid of the container's first process, or None while it is not running."""
    with_state = inspect(name)
    pid = int(with_state.get("State", {}).get("Pid") or 0)
    return pid or None


def remove_container(name: str) -> None:
    """Stop (SIGKILL) and remove one container by name; nothing when it is already gone."""
    _docker("rm", "--force", name, check=False)


def stop_container(name: str, grace_s: int = 10) -> None:
    """The container's stop signal, SIGKILL after grace_s, then its removal."""
    _docker("stop", f"--time={grace_s}", name, timeout_s=grace_s + TIMEOUT_S, check=False)
    remove_container(name)


def owned(kind: str = "container") -> list[tuple[str, int]]:
    """(name, owner pid) of every container (or network) carrying our owner label."""
    if kind == "container":
        args, field = ["ps", "--all", "--filter", f"label={OWNER_LABEL}"], ".Names"
    else:
        args, field = ["network", "ls", "--filter", f"label={OWNER_LABEL}"], ".Name"
    text = _docker(*args, "--format", f'{{{{{field}}}}}\t{{{{.Label "{OWNER_LABEL}"}}}}')
    found = []
    for line in text.splitlines():
        name, _, owner = line.partition("\t")
        if owner.strip().isdigit() and NAME_RE.match(name):
            found.append((name, int(owner)))
    return found


def leftovers(
    listed: list[tuple[str, int]], alive: Callable[[int], bool] = psutil.pid_exists
) -> list[str]:
    """The names among `listed` whose owner pid is gone (never one of a live harness)."""
    return [name for name, owner in listed if owner != os.getpid() and not alive(owner)]


def remove_leftovers() -> list[str]:
    """Remove the containers and networks a killed harness left behind; their names. Nothing
    when there is no engine."""
    if docker_binary() is None:
        return []
    removed = []
    try:
        for name in leftovers(owned("container")):
            remove_container(name)
            removed.append(name)
        for name in leftovers(owned("network")):
            remove_network(name)
            removed.append(name)
    except EngineError:
        return removed
    return removed


@dataclass(frozen=True)
class Bridge:
    """A harness-made bridge network: its name, subnet, the host's address on it (the
    gateway) and the address the server's container takes."""

    name: str
    subnet: ipaddress.IPv4Network

    @property
    def gateway(self) -> str:
        """The host's own address on the bridge (the first of the subnet)."""
        return str(self.subnet.network_address + 1)

    @property
    def server_address(self) -> str:
        """The server container's fixed address (the second of the subnet)."""
        return str(self.subnet.network_address + 2)


def choose_subnet(
    used: list[ipaddress.IPv4Network], pool: ipaddress.IPv4Network = BRIDGE_POOL
) -> ipaddress.IPv4Network:
    """The first /24 of `pool` that overlaps none of `used`; EngineError when none is free."""
    for candidate in pool.subnets(new_prefix=BRIDGE_PREFIX):
        if not any(candidate.overlaps(other) for other in used):
            return candidate
    raise EngineError(f"no free /{BRIDGE_PREFIX} left in {pool} for a bridge network")


def host_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks of the host's own interfaces."""
    found = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family.name == "AF_INET" and address.netmask:
                found.append(
                    ipaddress.IPv4Network(f"{address.address}/{address.netmask}", strict=False)
                )
    return found


def parse_subnets(inspected: list[dict]) -> list[ipaddress.IPv4Network]:
    """The IPv4 subnets of `docker network inspect`'s networks."""
    found = []
    for network in inspected:
        for config in (network.get("IPAM") or {}).get("Config") or []:
            with contextlib.suppress(ValueError):
                subnet = ipaddress.ip_network(config.get("Subnet") or "", strict=False)
                if isinstance(subnet, ipaddress.IPv4Network):
                    found.append(subnet)
    return found


def subnets_in_use() -> list[ipaddress.IPv4Network]:
    """Every subnet the engine's networks and the host's interfaces hold."""
    ids = _docker("network", "ls", "--quiet").split()
    inspected = json.loads(_docker("network", "inspect", *ids)) if ids else []
    return parse_subnets(inspected) + host_networks()


def network_argv(name: str, subnet: ipaddress.IPv4Network, labels: dict[str, str]) -> list[str]:
    """`docker network create` of one harness-owned bridge: internal, no NAT."""
    command = [
        "network",
        "create",
        "--driver=bridge",
        f"--subnet={subnet}",
        f"--gateway={subnet.network_address + 1}",
        "--internal",
        "--opt=com.docker.network.bridge.enable_ip_masquerade=false",
    ]
    command += [f"--label={key}={value}" for key, value in sorted(labels.items())]
    return [*command, name]


def create_bridge(owner: int | None = None) -> Bridge:
    """A new harness-owned bridge network in BRIDGE_POOL (named and labelled like the
    containers, so a killed harness's is removed at the next start); EngineError if none."""
    used = subnets_in_use()
    for _ in range(BRIDGE_ATTEMPTS):
        bridge = Bridge(container_name("bridge", owner), choose_subnet(used))
        try:
            _docker(*network_argv(bridge.name, bridge.subnet, owner_labels(owner)))
        except EngineError as exc:
            if "overlap" not in str(exc):
                raise
            used.append(bridge.subnet)  # taken meanwhile: the next one
            continue
        return bridge
    raise EngineError(f"no bridge network could be created in {BRIDGE_POOL}")


def remove_network(name: str) -> None:
    """Remove one network by name; nothing when it is already gone."""
    _docker("network", "rm", name, check=False)
