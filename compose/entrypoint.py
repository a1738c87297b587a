"""Start the server under test in its container, from servers/$SERVER/server.toml.

Input: the environment (SERVER, PORT, WORKERS, THREADS, CONNECTIONS, BACKLOG, and the app's
APP_DATABASE_URL / APP_UPSTREAM_URL). Output: exec of the server's argv, rendered by the
harness's own bench/core/registry.py (stdlib only: tomllib) exactly as
bench/stack/components.py does, with the declaration's [env] set and its config file rendered,
listening on all interfaces (a
container is reached through its network, not loopback).

Importing this module has no side effect (the tests call `render`); only `main` execs.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
# make's variable for each overridable knob (bench/core/registry.py OVERRIDABLE).
KNOB_ENV = {
    "workers": "WORKERS",
    "threads": "THREADS",
    "connections": "CONNECTIONS",
    "backlog": "BACKLOG",
}
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")


def load_registry(root: Path = ROOT) -> ModuleType:
    """bench/core/registry.py of `root`, loaded by path: sys.path and sys.modules stay untouched."""
    spec = importlib.util.spec_from_file_location(
        "_compose_registry", root / "bench/core/registry.py"
    )
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the class body runs.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def usable_cpus(cpu_max: Path = CGROUP_CPU_MAX, cfs_dir: Path = CGROUP_V1_CPU) -> int:
    """The CPUs this container may use: its affinity, capped by its CPU quota rounded up
    (`cpus: 1.5` -> 2), as the native path counts the CPUs a server may use. The quota is
    cgroup v2's cpu.max, or v1's cpu.cfs_quota_us / cpu.cfs_period_us (-1: none)."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = cpu_max.read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (cfs_dir / "cpu.cfs_quota_us").read_text().strip()
            period = (cfs_dir / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return cpus
    if quota in ("max", "-1"):
        return cpus
    return max(1, min(cpus, math.ceil(int(quota) / int(period))))


def knob_overrides(environ: dict[str, str]) -> dict[str, int]:
    """WORKERS=, THREADS=, ... as positive integers; empty means the declaration's default."""
    overrides = {}
    for name, var in KNOB_ENV.items():
        raw = environ.get(var, "").strip()
        if not raw:
            continue
        if not (raw.isdigit() and int(raw) > 0):
            raise SystemExit(f"{var}={raw!r}: must be a positive integer (or empty: the default)")
        overrides[name] = int(raw)
    return overrides


def render(
    server: str,
    environ: dict[str, str],
    root: Path = ROOT,
    run_dir: Path = Path("/tmp"),
    cpus: int | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(argv, extra environment) of `server` for this container; a declared config file is
    written into run_dir."""
    registry = load_registry(root)
    toml = registry.SERVERS_DIR / server / "server.toml"
    if not toml.is_file():
        known = ", ".join(registry.server_ids())
        raise SystemExit(f"SERVER={server!r}: no {toml} (servers: {known})")
    spec = registry.load_spec(toml)
    if spec.requirements is None:
        # nginx-static has no Python venv and this image has no nginx: the Dockerfile refuses
        # it too, so that nobody measures a container that is not what it says.
        raise SystemExit(f"{server} is not a Python server: no container for it")
    knobs = registry.resolve_knobs(
        spec, cpus if cpus is not None else usable_cpus(), knob_overrides(environ)
    )
    port = environ.get("PORT", "8000").strip()
    if not port.isdigit():
        raise SystemExit(f"PORT={port!r}: must be a port number")
    fill: dict[str, object] = {
        **knobs,
        "python": sys.executable,
        "port": int(port),
        "app": registry.APPS[spec.app],
        "run_dir": run_dir,
        "root": registry.ROOT,
        "venv": Path(sys.executable).parent.parent,
    }
    if spec.config is not None:
        config = run_dir / f"{spec.id}-{spec.config}"
        template = (spec.folder / spec.config).read_text()
        config.write_text(registry.render_config(template, fill).replace("127.0.0.1", "0.0.0.0"))
        fill["config"] = config
    argv = [arg.replace("127.0.0.1", "0.0.0.0") for arg in registry.render_argv(spec, fill)]
    return argv, registry.render_env(spec, fill)


def main() -> None:
    """Render and exec (PID 1 becomes the server: signals reach it directly)."""
    argv, extra = render(os.environ.get("SERVER", "granian"), dict(os.environ))
    print("starting:", " ".join(argv), flush=True)
    os.execvpe(argv[0], argv, {**os.environ, **extra})


if __name__ == "__main__":
    main()
