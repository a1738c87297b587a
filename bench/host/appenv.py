"""The user's app in a server's environment: the server's pinned requirements with the app's
layered on top, in one venv per (server, app requirements), and the app's entry points
probed there (importable? a WSGI or an ASGI callable?).

Input: a ServerSpec and an AppSpec. Output: the venv's python (.bench/venvs/<server>+app-<sha>),
or AppEnvError naming the problem in one line (a requirement that does not resolve, on its
own or against the server's pins); probe_entries() -> AppSpec with each entry's kind and
framework, or AppEnvError (an import error, a callable that is neither WSGI nor ASGI).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from bench.core.app import AppSpec, Entry, app_env
from bench.core.registry import ROOT, ServerSpec
from bench.host.state import STATE
from bench.host.venv import VenvError, make_venv, requirements_stamp

APPS_STATE = STATE / "apps"
PROBE_TIMEOUT_S = 120
# Run in the app's environment: import the entry, tell WSGI (environ, start_response) from
# ASGI (async scope, receive, send). Prints one JSON line; never starts serving.
PROBE = r"""
import importlib, inspect, json, sys, traceback
module, name = sys.argv[1], sys.argv[2]
def out(**kw):
    print("PROBE " + json.dumps(kw)); sys.exit(0)
try:
    mod = importlib.import_module(module)
except BaseException as exc:
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    out(error=f"cannot import {module}: {last}")
if not hasattr(mod, name):
    out(error=f"{module} has no attribute {name!r}")
obj = getattr(mod, name)
framework = (type(obj).__module__ or "").split(".")[0]
if inspect.isfunction(obj) or inspect.ismethod(obj):
    framework = None
if inspect.isclass(obj) or not callable(obj):
    what = "a class" if inspect.isclass(obj) else f"a {type(obj).__name__}, not callable"
    out(error=f"{module}:{name} is {what}: neither a WSGI nor an ASGI callable")
fn = obj if (inspect.isfunction(obj) or inspect.ismethod(obj)) else type(obj).__call__
is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(obj)
try:
    params = [p for p in inspect.signature(obj).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    count = len(params)
except (TypeError, ValueError):
    count = None
if is_async and count in (3, None):
    out(kind="asgi", framework=framework)
if not is_async and count == 2:
    out(kind="wsgi", framework=framework)
out(undetected=f"{module}:{name} takes {count} positional argument(s)"
    + (" and is async" if is_async else "")
    + ": neither WSGI (environ, start_response) nor ASGI (async scope, receive, send)")
"""


class AppEnvError(RuntimeError):
    """The app cannot run in a server's environment: one line saying why."""


def _uv_reason(message: str) -> str:
    """uv's own explanation, in one line."""
    text = message.split(": installing requirements failed: ", 1)[-1]
    parts = [p.strip(" ╰─▶×") for p in text.split(" / ") if p.strip(" ╰─▶×")]
    because = [p for p in parts if "Because" in p or "not found" in p or "No solution" in p]
    return (because or parts or [text])[-1]


def ensure_app_venv(spec: ServerSpec, app: AppSpec, log: Path | None = None) -> Path:
    """The python of the server's venv with the app's requirements on top of its pins (one
    resolution, so a conflict fails here), created with uv when absent or stale."""
    if spec.requirements is None:
        raise AppEnvError(f"{spec.id} is not a Python server: it cannot serve APP")
    if app.requirements is None:
        try:
            return make_venv(spec.id, spec.requirements, tuple(spec.install_flags), log)
        except VenvError as exc:
            raise AppEnvError(str(exc)) from None
    # The stamp of the combined file covers both files' contents, so a change to either
    # rebuilds the venv; the name keeps venvs of different requirements apart.
    stamp = requirements_stamp(spec.requirements, ()) + requirements_stamp(app.requirements, ())
    folder = APPS_STATE / (app.requirements_sha256 or "none")[:12]
    folder.mkdir(parents=True, exist_ok=True)
    combined = folder / f"{spec.id}.txt"
    combined.write_text(
        f"# {spec.id}'s pins with the app's requirements on top (stamp {stamp})\n"
        f"-r {spec.requirements}\n-r {app.requirements}\n"
    )
    name = f"{spec.id}+app-{(app.requirements_sha256 or 'none')[:12]}"
    try:
        return make_venv(name, combined, tuple(spec.install_flags), log)
    except VenvError as exc:
        raise AppEnvError(
            f"APP_REQUIREMENTS={app.requirements} does not resolve on top of {spec.id}'s pins: "
            f"{_uv_reason(str(exc))}"
        ) from None


def probe_env(entry: Entry) -> dict[str, str]:
    """What the probe imports the app with: as a server would, with a database URL nothing
    listens on (importing an app must not connect to its database)."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "LANG": "C.UTF-8",
        "HOME": str(APPS_STATE),
        "PYTHONPATH": f"{entry.root}:{ROOT}",
        "PYTHONDONTWRITEBYTECODE": "1",
        **app_env("postgresql://bench:probe@127.0.0.1:1/bench", "probe-only-not-a-secret"),
    }


def probe_entry(python: Path, entry: Entry) -> tuple[str | None, str | None, str | None]:
    """(kind, framework, why undetected) of one entry; AppEnvError on an import error or a
    callable that is neither WSGI nor ASGI."""
    try:
        result = subprocess.run(
            [str(python), "-c", PROBE, entry.module, entry.callable],
            capture_output=True,
            text=True,
            env=probe_env(entry),
            cwd=entry.root,
            timeout=PROBE_TIMEOUT_S,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        raise AppEnvError(
            f"APP={entry.given}: importing it took over {PROBE_TIMEOUT_S} s"
        ) from None
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("PROBE ")), None)
    if line is None:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise AppEnvError(f"APP={entry.given}: importing it failed: {last}")
    found = json.loads(line[len("PROBE ") :])
    if "error" in found:
        raise AppEnvError(f"APP={entry.given}: {found['error']}")
    return found.get("kind"), found.get("framework"), found.get("undetected")


def probe_entries(python: Path, app: AppSpec) -> AppSpec:
    """Every entry imported in `python`'s environment; kinds detected where not declared
    (a declared kind is kept, the import is still checked)."""
    found: dict[str, tuple[str, str | None]] = {}
    for entry in app.entries:
        kind, framework, undetected = probe_entry(python, entry)
        if entry.kind is None and kind is None:
            raise AppEnvError(f"APP={entry.given}: {undetected}; set APP_KIND=wsgi or asgi")
        found[entry.given] = (entry.kind or kind, framework)  # type: ignore[assignment]
    return app.with_kinds(found)


def resolve_app(app: AppSpec, specs: list[ServerSpec], say: object = None) -> AppSpec:
    """Before anything starts: the app's entries probed in the first Python server's layered
    environment, then the layered environment of every server that can serve one of them
    built (a conflict with any server's pins fails here). AppEnvError in one line."""
    python_specs = [s for s in specs if s.requirements is not None]
    if not python_specs:
        raise AppEnvError("APP needs a Python server; SERVER names none")
    log = APPS_STATE / "venv.log"
    APPS_STATE.mkdir(parents=True, exist_ok=True)
    if callable(say):
        say(f"APP {app.name}: importing it in {python_specs[0].id}'s environment")
    app = probe_entries(ensure_app_venv(python_specs[0], app, log), app)
    for spec in python_specs[1:]:
        if app.entry_for(spec.app) is not None:
            if callable(say):
                say(f"APP {app.name}: preparing {spec.id}'s environment")
            ensure_app_venv(spec, app, log)
    return app
