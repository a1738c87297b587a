"""RUNTIME=docker: the server under test in its image, the rest of the stack as for native.

Input: the options' limits (CPUS=, MEMORY=), the network (NETWORK=), the images `make images`
built, the shared stack of bench.site.LocalSite. Output: a ContainerSite whose serve() starts
the server's container (`docker run --network host` or on a bridge of its own, the engine's
--cpus/--memory), waits until it answers, verifies
it exactly as a native server, and hands bench.measure a ContainerServed: the watchdog follows
the processes of the container's cgroup, the sampler the container's process tree, and the
observers its cgroup (CPU, throttling, memory, OOM kills).

Why the host network: the server reaches pgbouncer and the upstream stub on 127.0.0.1 as the
native server does, the load tool reaches it on 127.0.0.1, and no bridge or NAT hop is added
to what is measured; the container keeps its own cgroup limits, filesystem and pid namespace.
NETWORK=bridge measures what that hop costs: a bridge the harness creates in 198.19.0.0/16
(bench.host.docker.create_bridge), the server's container at its second address, and
pgbouncer and the upstream stub listening on its gateway (the host's address on it; pgbouncer
on loopback too, for the harness's own probes); the load tool stays on the host and sends to
the container's address, through the veth pair and the bridge, without NAT or the engine's
userland proxy. The server's listening socket is then in the container's network namespace:
its accept queue and backlog are read there (bench.host.netns.call_in).
The container is named and labelled by the harness (bench.host.docker) and removed on every
exit path: by the site when the server stops, by the process table's clean-up otherwise, and
at the next start when the harness was killed.
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.plan import Options
from bench.core.protocol import WEBSOCKET
from bench.core.registry import APPS, ServerSpec, render_argv, render_env
from bench.host import docker, netns, ready
from bench.host.container_cgroup import ContainerCgroup, ContainerCgroupError
from bench.host.images import Image, ImageError, image_for
from bench.host.prepare import Environment, Prepared, Unavailable
from bench.host.procs import ProcessTable, StartError, listeners
from bench.host.venv import venv_name
from bench.observe import sample
from bench.observe.sample import Sampler
from bench.stack.components import RunningServer
from bench.stack.site import LocalServed, LocalSite, ServeError, read_log
from bench.stack.verify import VerifyError, read_interpreter, verify_server

APP_ROOT = "/app"  # where compose/Dockerfile puts app_common/ and servers/
VENV = "/venv"
# Asks the image's own interpreter what is installed: the record's packages, as native.
PACKAGES_PY = (
    "import importlib.metadata as m, json, platform; print(json.dumps({'python': "
    "platform.python_version(), 'packages': {d.metadata['Name'].lower(): d.version "
    "for d in m.distributions()}}))"
)


def container_cpus(cpus: float | None, usable: int) -> int:
    """The CPUs a container may use, as the native rule counts them (one worker each): the
    CPUs it may run on, capped by its quota rounded up (CPUS=0.5 -> 1, 1.5 -> 2)."""
    if cpus is None:
        return usable
    return max(1, min(usable, math.ceil(cpus - 1e-9)))


def image_packages(image: Image, timeout_s: float = 120) -> tuple[dict[str, str], str | None]:
    """(packages, Python version) inside the image, from a short harness-owned container with
    no network."""
    name = docker.container_name("packages")
    labels = ",".join(f"{k}={v}" for k, v in docker.owner_labels().items())
    argv = [
        docker.docker_binary() or "docker",
        "run",
        "--rm",
        f"--name={name}",
        "--network=none",
        *[f"--label={item}" for item in labels.split(",")],
        image.ref,
        f"{VENV}/bin/python",
        "-c",
        PACKAGES_PY,
    ]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        docker.remove_container(name)
        raise ImageError(f"{image.ref}: listing its packages took over {timeout_s:g} s") from None
    if result.returncode != 0:
        raise ImageError(f"{image.ref}: cannot list its packages: {result.stderr.strip()}")
    data = json.loads(result.stdout)
    return data["packages"], data["python"]


@dataclass
class ContainerServed(LocalServed):
    """A server in its container: the processes, sampler and cgroup are the container's."""

    container: str = ""
    image: Image | None = None
    limits: docker.Limits = field(default_factory=docker.Limits)
    init_pid: int | None = None
    container_cgroup: ContainerCgroup | None = None
    bridge: docker.Bridge | None = None  # NETWORK=bridge: the server is at its address
    oom_kills_seen: int | None = None  # the cgroup's OOM kills when the watchdog last looked

    @property
    def host(self) -> str:
        """The server's address as the load tool reaches it."""
        return self.bridge.server_address if self.bridge else "127.0.0.1"

    @property
    def base_url(self) -> str:
        """The server (PROXY= is refused with NETWORK=bridge)."""
        if self.bridge is None or self.proxy is not None:
            return super().base_url
        return f"http://{self.host}:{self.server.port}"

    def interpreter(self) -> dict | None:
        """app_common's /interpreter, asked of the container where the load reaches it (on a
        bridge its own address: loopback there is the container's)."""
        if self.app_name is not None or self.server.spec.app == "static":
            return None
        return read_interpreter(self.server.port, self.host, self.server.client)

    def listen_state(self, port: int) -> tuple[int, int] | None:
        """(accept queue, backlog) of the server's listener, in its network namespace."""
        if self.bridge is None or self.init_pid is None:
            return sample.listen_state(port)
        handle = Path(f"/proc/{self.init_pid}/ns/net")
        try:
            return netns.call_in(handle, lambda: sample.listen_state(port))
        except (OSError, netns.NetnsError):
            return None  # the container is gone: the watchdog says so

    def _container_pids(self) -> set[int]:
        group = self.container_cgroup
        return group.pids() if group is not None else set()

    def read_oom_kills(self) -> int | None:
        """The cgroup's OOM kills since the container started (kept: once the container has
        exited its cgroup is gone, and the last figure read is what a failed record says)."""
        group = self.container_cgroup
        if group is not None:
            with contextlib.suppress(ContainerCgroupError):
                self.oom_kills_seen = group.oom_kills()
        return self.oom_kills_seen

    def watch(self, leaders_only: bool = False, when: str = " during load") -> str | None:
        """As native; under a memory limit a worker the kernel OOM-kills is the behaviour
        measured, not a broken run: its master respawns it (Gunicorn, Uvicorn) or exits
        (then the container does), so only the container's first process is followed, and the
        kills are counted from the cgroup (the window's oom_kills) and the requests they cut
        off by the load tool."""
        self.read_oom_kills()
        memory_limited = self.limits.memory_bytes is not None
        reason = super().watch(leaders_only or memory_limited, when)
        if reason is not None and self.oom_kills_seen:
            reason += f" ({self.oom_kills_seen} OOM kill(s) in the container's cgroup)"
        return reason

    def wait_idle(self, timeout_s: float = 60.0) -> None:
        """As native (the accept queue read where the listener is: the host's network, or
        the container's on a bridge); then the container's processes are the ones the
        watchdog follows."""
        port = self.server.port
        ready.wait_until(
            lambda: ((self.listen_state(port) or (0, 0))[0]) == 0,
            "draining its accept queue",
            self.server.proc,
            timeout_s,
        )
        spec = self.server.spec
        ready.wait_http(self.server.proc, port, spec.ready_path, timeout_s, host=self.host)
        self._pids = self._container_pids()

    def sampler(self) -> Sampler:
        """The container's process tree (from its first process), sockets, pools."""
        return Sampler(
            self.init_pid,
            self.server.port,
            proxy_pid=self.proxy.proc.pid if self.proxy else None,
            proxy_port=self.proxy.port if self.proxy else None,
            pool_probe=self.pool_probe or self.db.pgbouncer_pools,
            db_port=self.db.pgbouncer_port,
            listen_probe=self.listen_state,
        )

    def facts(self) -> dict[str, object]:
        """The record's `container` keys known now (the window adds its own): a failed
        run's record keeps the OOM kills counted until the watchdog last looked."""
        facts = container_facts(self.image, self.limits, self.container, self.bridge)
        return facts | {"oom_kills_total": self.oom_kills_seen}


def bind_to(argv: list[str], bridge: docker.Bridge | None) -> list[str]:
    """The server's argv as declared (it binds 127.0.0.1), or on a bridge the same argv bound
    to the container's address there: loopback inside the container is not reachable from the
    host, and the declarations (hashed into the images) stay as they are."""
    if bridge is None:
        return argv
    return [arg.replace("127.0.0.1", bridge.server_address) for arg in argv]


def container_facts(
    image: Image | None,
    limits: docker.Limits,
    name: str | None,
    bridge: docker.Bridge | None = None,
) -> dict:
    """runtime facts of a container run: image, limits, network (with a bridge: its subnet
    and the server's address on it), name."""
    return {
        "image": image.ref if image else None,
        "image_id": image.id if image else None,
        "image_tags": list(image.tags) if image else [],
        "cpus": limits.cpus,
        "memory_bytes": limits.memory_bytes,
        "network": "bridge" if bridge else "host",
        "subnet": str(bridge.subnet) if bridge else None,
        "address": bridge.server_address if bridge else None,
        "name": name,
    }


class ContainerSite(LocalSite):
    """The shared stack here, each server in its container."""

    def __init__(
        self,
        table: ProcessTable,
        run_dir: Path,
        placement,
        limits: docker.Limits,
        network: str = "host",
    ) -> None:
        super().__init__(table, run_dir, placement)
        self.limits = limits
        self.network = network
        self.bridge: docker.Bridge | None = None
        self.images: dict[str, Image] = {}  # by venv_name: <id>, or <id>@<python>
        self.engine: dict[str, str] | None = None

    def container_facts(self, server: str, python: str | None = None) -> dict[str, object]:
        """The record's `container` keys before the server starts: image (on PYTHON=, the
        server's image on it), limits, engine."""
        if self.engine is None:
            self.engine = docker.engine_facts()
        image = self.images.get(venv_name(server, python))
        facts = container_facts(image, self.limits, None, self.bridge)
        return facts | {"engine": self.engine}

    def open(self) -> None:
        """Containers and networks a killed harness left behind are removed; NETWORK=bridge:
        the bridge is made (removed on every exit path, after the containers); then the
        native stack, pgbouncer and the stub also on the bridge's gateway."""
        for name in docker.remove_leftovers():
            print(f"bench: removed {name} left by a harness that is gone", file=sys.stderr)
        if self.network == "bridge":
            try:
                bridge = docker.create_bridge()
            except docker.EngineError as exc:
                raise ServeError(f"stack did not start: {exc}", {}) from None
            # Cleanups run last-registered first: every container's removal comes before.
            self.table.on_stop(lambda: docker.remove_network(bridge.name))
            self.bridge = bridge
            self.stack.extra_listen = (bridge.gateway,)
            self.stack.upstream_host = bridge.gateway
        super().open()

    def cpus(self) -> int:
        """ "cpus" in a declaration: the CPUs the container may use (CPUS= rounded up)."""
        return container_cpus(self.limits.cpus, len(self.placement.server_cpus))

    def prepare(
        self,
        specs: list[ServerSpec],
        arch: str,
        say: Callable[[str], None],
        python: str | None = None,
    ) -> dict[str, Prepared]:
        """Each server's image (built by make images; on PYTHON=, its image on that
        interpreter) and what is installed in it, keyed as the native venvs (venv_name)."""
        prepared: dict[str, Prepared] = {}
        for spec in specs:
            key = venv_name(spec.id, python)
            try:
                image = image_for(spec, arch, python)
                say(f"{spec.id}: image {image.ref} ({image.id[7:19]})")
                packages, version = image_packages(image)
            except (ImageError, docker.EngineError) as exc:
                prepared[key] = Unavailable(str(exc))
                continue
            self.images[key] = image
            prepared[key] = Environment(Path(f"{VENV}/bin/python"), packages, version)
        return prepared

    def serve(
        self,
        spec: ServerSpec,
        knobs: dict[str, int],
        environment: Environment,
        opts: Options,
        log_name: str,
    ) -> ContainerServed:
        """Start the server's container, check it answers from inside it, verify it, and
        (PROXY=nginx) front it; ServeError if any fails."""
        assert self.db is not None
        port = ready.free_port()
        argv, env = self._command(spec, knobs, environment, opts, port)
        image = self.images[venv_name(spec.id, opts.python)]
        served = self._start(spec, image, knobs, argv, env, port, self.run_dir / log_name)
        try:
            self._check_container(served)
            if opts.proxy is not None:
                self._front(served, opts)  # LocalSite's: PIN is refused with RUNTIME=docker
        except BaseException as exc:
            kills = self._kills_so_far(served)
            self.stop(served)
            if isinstance(exc, ServeError) and kills is not None:
                # Workers killed at start or during verification: the count says why.
                why = (
                    f"{exc} ({kills} OOM kill(s) in the container's cgroup)" if kills else str(exc)
                )
                raise ServeError(why, exc.logs, exc.argv, {"oom_kills_total": kills}) from None
            raise
        return served

    def _kills_so_far(self, served: ContainerServed) -> int | None:
        """The OOM kills of a container that failed to start or verify, read before it is
        removed (its cgroup is found here when the failure came before it was: a server that
        never answered, its workers killed or thrashing at the memory limit)."""
        if served.container_cgroup is None:
            with contextlib.suppress(docker.EngineError, ContainerCgroupError):
                pid = docker.container_pid(served.container)
                if pid is not None:
                    served.container_cgroup = ContainerCgroup.of_pid(pid)
        return served.read_oom_kills()

    def _command(
        self,
        spec: ServerSpec,
        knobs: dict[str, int],
        environment: Environment,
        opts: Options,
        port: int,
    ) -> tuple[list[str], dict[str, str]]:
        """The server's argv inside the image and its environment."""
        assert self.db is not None
        fill: dict[str, object] = {
            **knobs,
            "python": f"{VENV}/bin/python",
            "port": port,
            "app": APPS[spec.app],
            "run_dir": self.run_dir,
            "root": APP_ROOT,
            "venv": VENV,
        }
        home = self.run_dir / "home"
        home.mkdir(exist_ok=True)
        # On a bridge the host (pgbouncer, the stub) is the gateway; else loopback.
        host = self.bridge.gateway if self.bridge else "127.0.0.1"
        env = {
            "HOME": str(home),
            "APP_DATABASE_URL": self.db.app_url_at(host),
            "APP_UPSTREAM_URL": f"http://{host}:{self.stack.upstream_port}",
            **render_env(spec, fill),
            **environment.env,
            **opts.study.app_env,
        }
        return bind_to(render_argv(spec, fill), self.bridge), env

    def _start(
        self,
        spec: ServerSpec,
        image: Image,
        knobs: dict[str, int],
        argv: list[str],
        env: dict[str, str],
        port: int,
        log_path: Path,
    ) -> ContainerServed:
        """`docker run` under the harness's name and labels, removed on every exit path."""
        assert self.db is not None
        name = docker.container_name(spec.id)
        command = docker.run_argv(
            name,
            image.ref,
            argv,
            limits=self.limits,
            env=env,
            # The run directory at the same path: HOME and anything the server writes there.
            mounts=[f"{self.run_dir}:{self.run_dir}"],
            workdir=APP_ROOT,
            labels=docker.owner_labels(),
            network=self.bridge.name if self.bridge else "host",
            ip=self.bridge.server_address if self.bridge else None,
            stop_signal=spec.stop_signal,
        )
        # On any exit path the container goes, by name (stop_all runs this after the CLI).
        self.table.on_stop(lambda: docker.remove_container(name))
        try:
            proc = self.table.start(
                spec.id, command, log_path, stop_signal=getattr(signal, spec.stop_signal)
            )
        except StartError as exc:
            raise ServeError(f"server did not start: {exc}", {}) from None
        return ContainerServed(
            RunningServer(spec, port, proc, argv, knobs),
            self.db,
            self.problem,
            name=spec.id,
            pool_probe=self.pools.pools if self.pools is not None else None,
            container=name,
            image=image,
            limits=self.limits,
            bridge=self.bridge,
        )

    def _check_container(self, served: ContainerServed) -> None:
        """Ready, answered from inside its container (its cgroup found), every route
        verified, its backlog read; ServeError with the server's log."""
        server, name, host = served.server, served.container, served.host
        assert server is not None and self.db is not None
        port, log_path = server.port, server.proc.log_path
        try:
            ready.wait_http(server.proc, port, server.spec.ready_path, timeout_s=60, host=host)
            served.init_pid = docker.container_pid(name)
            if served.init_pid is None:
                raise StartError(f"container {name} is not running")
            served.container_cgroup = ContainerCgroup.of_pid(served.init_pid)
            # On a bridge the address is the container's own: no other program can hold it.
            owners = listeners(port) if served.bridge is None else set()
            if owners and not owners & served._container_pids():
                raise StartError(
                    f"port {port} is answered by pid(s) {sorted(owners)}, not by the "
                    f"container {name}; another program took the port"
                )
        except (StartError, docker.EngineError, ContainerCgroupError) as exc:
            reason = f"server did not start: {str(exc).splitlines()[0]}"
            raise ServeError(reason, {"server.log": read_log(log_path)}, server.argv) from None
        served._pids = served._container_pids()
        try:
            # Every route, as for a native server (a container holds a Python server only).
            websocket = server.spec.speaks(WEBSOCKET)
            checked = verify_server(port, self.db, host, websocket=websocket)
            served.verification = {"checked": checked.checked, "warnings": checked.warnings}
        except (VerifyError, OSError) as exc:
            logs = {"server.log": read_log(log_path)}
            raise ServeError(f"verification failed: {exc}", logs, server.argv) from None
        state = served.listen_state(port)
        served.backlog = state[1] if state else None

    def stop(self, served: LocalServed) -> None:
        """nginx, then the container (its stop signal, SIGKILL after the grace), by name."""
        if served.proxy is not None:
            self.table.stop(served.proxy.proc)
        if isinstance(served, ContainerServed):
            docker.stop_container(served.container)
        self.stack.stop_server(served.server)
