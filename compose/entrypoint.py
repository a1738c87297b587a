"""Start the server under test in its container, from servers/$SERVER/server.toml.

Input: the environment (SERVER, PORT, WORKERS, THREADS, CONNECTIONS, BACKLOG, and the app's
APP_DATABASE_URL / APP_UPSTREAM_URL). Output: exec of the server's argv, rendered by the
harness's own bench/registry.py exactly as the native path does, listening on all interfaces
(a container is reached through its network, not loopback).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import registry  # noqa: E402 (the path above first)

KNOB_ENV = {"workers": "WORKERS", "threads": "THREADS", "connections": "CONNECTIONS"}
KNOB_ENV["backlog"] = "BACKLOG"


def render(server: str, environ: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(argv, extra environment) of `server` for this container."""
    spec = registry.load_spec(registry.SERVERS_DIR / server / "server.toml")
    if spec.requirements is None:
        raise SystemExit(f"{server} is not a Python server: no container for it")
    overrides = {
        name: int(environ[var])
        for name, var in KNOB_ENV.items()
        if environ.get(var, "").strip().isdigit()
    }
    knobs = registry.resolve_knobs(spec, os.cpu_count() or 1, overrides)
    fill: dict[str, object] = {
        **knobs,
        "python": sys.executable,
        "port": int(environ.get("PORT", "8000")),
        "app": registry.APPS[spec.app],
        "run_dir": "/tmp",
        "root": ROOT,
        "venv": Path(sys.executable).parent.parent,
    }
    argv = [arg.replace("127.0.0.1", "0.0.0.0") for arg in registry.render_argv(spec, fill)]
    return argv, registry.render_env(spec, fill)


def main() -> None:
    """Render and exec (PID 1 becomes the server: signals reach it directly)."""
    argv, extra = render(os.environ.get("SERVER", "granian"), dict(os.environ))
    print("starting:", " ".join(argv), flush=True)
    os.execvpe(argv[0], argv, {**os.environ, **extra})


if __name__ == "__main__":
    main()
