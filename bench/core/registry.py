"""Server declarations: servers/<id>/server.toml -> validated ServerSpec.

Input: the servers/ folder. Output: ServerSpec objects, or DeclarationError naming the file
and the field. A server is data: adding one is adding a folder, never changing this module.
"""

from __future__ import annotations

import re
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.protocol import HTTP1, PROTOCOLS, SCENARIO_PROTOCOLS
from bench.core.pythons import names as interpreter_names

ROOT = Path(__file__).resolve().parents[2]
SERVERS_DIR = ROOT / "servers"

APPS = {"wsgi": "app_common.wsgi:app", "asgi": "app_common.asgi:app", "static": ""}
# app -> the framework it is written in (a record's app_framework); static: no Python app.
FRAMEWORKS: dict[str, str | None] = {"wsgi": "flask", "asgi": "quart", "static": None}
# APP_FLAVOR=: which of app_common's apps a server serves: the framework app (APPS) or the
# raw one, a callable with no framework (app_common/raw_*.py), which serves RAW_SCENARIOS'
# routes only. A record's app_flavor; records before it are the framework's.
FRAMEWORK = "framework"
RAW = "raw"
FLAVORS = (FRAMEWORK, RAW)
RAW_APPS = {"wsgi": "app_common.raw_wsgi:app", "asgi": "app_common.raw_asgi:app"}
RAW_SCENARIOS = ("plaintext", "json", "db")


def app_target(app: str, flavor: str = FRAMEWORK) -> str:
    """The `{app}` a server's argv gets: app_common's module:callable of its kind and flavour."""
    # a static server has no Python app of either flavour (APP_FLAVOR=raw refuses it)
    return RAW_APPS.get(app, APPS[app]) if flavor == RAW else APPS[app]


# Placeholders the harness always fills; every other {name} must be a declared knob.
BUILTIN_PLACEHOLDERS = {"python", "port", "app", "run_dir", "root", "venv", "config"}
# Knobs a user may override from make (WORKERS=, THREADS=, CONNECTIONS=, BACKLOG=).
OVERRIDABLE = ("workers", "threads", "connections", "backlog")
# Top-level keys of server.toml -> the TOML type each must have.
TOP_TYPES: dict[str, type] = {
    "description": str,
    "app": str,
    "package": str,
    "argv": list,
    "env": dict,
    "knobs": dict,
    "ready_path": str,
    "stop_signal": str,
    "config": str,
    "scenarios": list,
    "version_argv": list,
    "install_flags": list,
    "reload": dict,
    "recycle": dict,
    "protocols": dict,
    "pythons": dict,
}
TOP_KEYS = set(TOP_TYPES)
_TYPE_NAMES = {str: "a string", list: "a list", dict: "a table"}
KNOB_KEYS = {"default", "server_default", "why", "tune", "ordered", "tune_why"}
# A search-space value (`tune = [...]`): a whole number, "cpus" or "<k>*cpus" (k CPUs' worth).
CPUS_VALUE = re.compile(r"^(?:(\d+)\*)?cpus$")
ID_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class DeclarationError(ValueError):
    """A server.toml that does not follow the declaration format."""


@dataclass(frozen=True)
class Knob:
    """One tunable of a server, its value here and the server's own default."""

    name: str
    default: int | str
    server_default: int | str | None
    why: str | None
    # make tune's search space (bench.harness.knobsearch): the values tried, whether they are
    # ordered (searched upwards one at a time until the figure stops improving) and why.
    tune: tuple[int | str, ...] = ()
    ordered: bool = False
    tune_why: str | None = None


@dataclass(frozen=True)
class ServerSpec:
    """A validated server declaration."""

    id: str
    description: str
    app: str
    package: str | None
    argv: tuple[str, ...]
    env: dict[str, str]
    knobs: dict[str, Knob]
    ready_path: str
    stop_signal: str
    folder: Path
    config: str | None = None
    scenarios: tuple[str, ...] | None = None
    version_argv: tuple[str, ...] | None = None
    install_flags: tuple[str, ...] = ()
    # [reload]: the server's own documented graceful reload (LIFECYCLE=reload), or why it has
    # none. reload_signal None: not supported by the server.
    reload_signal: str | None = None
    reload_why: str = "no [reload] declared"
    # [recycle]: the server's own worker-recycling flags (RECYCLE=), appended to argv; None:
    # not supported by the server (recycle_why says why).
    recycle_argv: tuple[str, ...] | None = None
    recycle_why: str = "no [recycle] declared"
    # [protocols.<name>]: the flags appended to argv to serve each protocol beyond http1
    # (with {certfile} and {keyfile} under TLS); protocol_why: each declared one's why, or
    # why the server cannot speak it.
    protocols: dict[str, tuple[str, ...]] = field(default_factory=dict)
    protocol_why: dict[str, str] = field(default_factory=dict)
    # [pythons."<name>"]: PYTHON=<name> (bench/core/pythons.py): the pinned requirements file
    # beside server.toml that its venv on that interpreter is made from; python_why: each
    # declared one's why, or why the server cannot run on it (no wheel, a C extension that is
    # not free-threaded).
    pythons: dict[str, str] = field(default_factory=dict)
    python_why: dict[str, str] = field(default_factory=dict)

    def runs_on(self, name: str | None) -> bool:
        """Whether the server runs on PYTHON=name (None: the usual interpreter; a server that
        is not Python runs whatever PYTHON says)."""
        return name is None or self.app == "static" or name in self.pythons

    def why_not_on(self, name: str) -> str:
        """Why the server cannot run on PYTHON=name, from its declaration."""
        return self.python_why.get(name, f'no [pythons."{name}"] in its server.toml')

    def requirements_on(self, name: str | None) -> Path | None:
        """The pinned requirements of its venv on PYTHON=name (None: requirements.txt)."""
        if name is None or self.app == "static":
            return self.requirements
        return self.folder / self.pythons[name]

    def speaks(self, name: str) -> bool:
        """Whether the server serves PROTOCOL=name (http1: always, with its own argv)."""
        return name == HTTP1 or name in self.protocols

    def why_not(self, name: str) -> str:
        """Why the server cannot serve PROTOCOL=name, from its declaration."""
        return self.protocol_why.get(name, f"no [protocols.{name}] in its server.toml")

    @property
    def requirements(self) -> Path | None:
        """Pinned requirements file, or None for servers that need no venv."""
        path = self.folder / "requirements.txt"
        return path if path.exists() else None


def placeholders(text: str) -> set[str]:
    """Names of the {placeholders} in a template string."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def validate_knob(path: Path, name: str, raw: object) -> Knob:
    """Check one [knobs.<name>] table."""
    if not isinstance(raw, dict):
        raise DeclarationError(f"{path}: [knobs.{name}] must be a table")
    unknown = set(raw) - KNOB_KEYS
    if unknown:
        raise DeclarationError(f"{path}: [knobs.{name}] unknown keys {sorted(unknown)}")
    if "default" not in raw:
        raise DeclarationError(f"{path}: [knobs.{name}] needs a default")
    default = raw["default"]
    if not (isinstance(default, int) and default > 0) and default != "cpus":
        raise DeclarationError(
            f"{path}: [knobs.{name}] default must be a positive integer or 'cpus', got {default!r}"
        )
    server_default = raw.get("server_default")
    why = raw.get("why")
    # The fairness rule: a value that differs from the server's own default says why.
    if server_default != default and not (isinstance(why, str) and why.strip()):
        raise DeclarationError(
            f"{path}: [knobs.{name}] default {default!r} differs from the server's "
            f"default {server_default!r}: add why = '...'"
        )
    tune, ordered, tune_why = validate_tune(path, name, raw)
    return Knob(name, default, server_default, why, tune, ordered, tune_why)


def validate_tune(
    path: Path, name: str, raw: dict
) -> tuple[tuple[int | str, ...], bool, str | None]:
    """A knob's search space: `tune` a non-empty list of whole numbers, "cpus" or "<k>*cpus",
    `ordered` a boolean, `tune_why` saying why these values (required with `tune`)."""
    tune = raw.get("tune")
    if tune is None:
        if "ordered" in raw or "tune_why" in raw:
            raise DeclarationError(f"{path}: [knobs.{name}] ordered/tune_why need tune = [...]")
        return (), False, None
    good = (
        isinstance(tune, list)
        and tune
        and all(
            (isinstance(v, int) and not isinstance(v, bool) and v > 0)
            or (isinstance(v, str) and CPUS_VALUE.match(v))
            for v in tune
        )
    )
    if not good:
        raise DeclarationError(
            f"{path}: [knobs.{name}] tune must be a list of positive integers, 'cpus' or "
            f"'<k>*cpus', got {tune!r}"
        )
    ordered = raw.get("ordered", False)
    if not isinstance(ordered, bool):
        raise DeclarationError(f"{path}: [knobs.{name}] ordered must be true or false")
    why = raw.get("tune_why")
    if not (isinstance(why, str) and why.strip()):
        raise DeclarationError(f"{path}: [knobs.{name}] tune needs tune_why = '...'")
    return tuple(tune), ordered, why.strip()


def tune_value(value: int | str, cpus: int) -> int:
    """One search-space value on a machine whose server may use `cpus` CPUs."""
    if isinstance(value, int):
        return value
    match = CPUS_VALUE.match(value)
    assert match is not None, value
    return int(match.group(1) or 1) * cpus


def _check_top_level(path: Path, data: dict) -> None:
    """Known top-level keys, the required ones present, each of its TOML type, a known app."""
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise DeclarationError(
            f"{path}: unknown keys {sorted(unknown)} (allowed: {sorted(TOP_KEYS)})"
        )
    for key in ("description", "app", "argv"):
        if key not in data:
            raise DeclarationError(f"{path}: missing required key {key!r}")
    for key, kind in TOP_TYPES.items():
        if key in data and not isinstance(data[key], kind):
            raise DeclarationError(f"{path}: {key} must be {_TYPE_NAMES[kind]}")
    if data["app"] not in APPS:
        raise DeclarationError(f"{path}: app must be one of {sorted(APPS)}, got {data['app']!r}")


def _check_command(path: Path, data: dict) -> set[str]:
    """argv a non-empty list of strings, [env] values strings; the placeholders they use."""
    argv = data["argv"]
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise DeclarationError(f"{path}: argv must be a non-empty list of strings")
    env = data.get("env", {})
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise DeclarationError(f"{path}: [env] values must be strings")
    return set().union(*(placeholders(a) for a in [*argv, *env.values()]))


def _check_placeholders(path: Path, used: set[str], knobs: dict[str, Knob]) -> None:
    """Every placeholder used is a declared knob or one the harness fills."""
    undeclared = used - BUILTIN_PLACEHOLDERS - set(knobs)
    if undeclared:
        raise DeclarationError(
            f"{path}: placeholders {sorted(undeclared)} are neither knobs nor "
            f"built-ins {sorted(BUILTIN_PLACEHOLDERS)}"
        )


def _check_config(path: Path, data: dict, used: set[str]) -> None:
    """The port is bound somewhere; a declared config file exists and {config} has one."""
    config_text = ""
    if isinstance(data.get("config"), str) and (path.parent / data["config"]).is_file():
        config_text = (path.parent / data["config"]).read_text()
    if "port" not in used and "{port}" not in config_text:
        raise DeclarationError(f"{path}: argv, env or the config file must bind to {{port}}")
    config = data.get("config")
    if config is not None and not (path.parent / config).is_file():
        raise DeclarationError(f"{path}: config file {config!r} not found beside it")
    if "config" in used and config is None:
        raise DeclarationError(f"{path}: argv uses {{config}} but no config = '...' is declared")


def _check_options(path: Path, data: dict) -> None:
    """The optional lists and names: scenarios, version_argv, install_flags, stop_signal."""
    scenarios = data.get("scenarios")
    if scenarios is not None and not (
        isinstance(scenarios, list) and scenarios and all(isinstance(x, str) for x in scenarios)
    ):
        raise DeclarationError(f"{path}: scenarios must be a non-empty list of names")
    version_argv = data.get("version_argv")
    if version_argv is not None and not all(isinstance(a, str) for a in version_argv):
        raise DeclarationError(f"{path}: version_argv must be a list of strings")
    if data.get("install_flags", []) not in ([], ["--no-deps"]):
        raise DeclarationError(f"{path}: install_flags may only be ['--no-deps']")
    if data.get("stop_signal", "SIGTERM") not in ("SIGTERM", "SIGINT", "SIGQUIT"):
        raise DeclarationError(f"{path}: stop_signal must be SIGTERM, SIGINT or SIGQUIT")


RELOAD_SIGNALS = ("SIGHUP", "SIGUSR1", "SIGUSR2")


def validate_reload(path: Path, raw: dict) -> tuple[str | None, str]:
    """[reload]: signal = "SIGHUP" with why = "<the server's documentation says ...>", or
    unsupported = "<why the server has no graceful reload>"."""
    keys = set(raw)
    signal_ok = keys == {"signal", "why"} and raw["signal"] in RELOAD_SIGNALS
    if signal_ok and isinstance(raw["why"], str) and raw["why"].strip():
        return str(raw["signal"]), raw["why"].strip()
    if keys == {"unsupported"} and isinstance(raw["unsupported"], str) and raw["unsupported"]:
        return None, raw["unsupported"].strip()
    raise DeclarationError(
        f"{path}: [reload] must be signal = one of {', '.join(RELOAD_SIGNALS)} with why = "
        "'...', or unsupported = '<why>'"
    )


RECYCLE_PLACEHOLDERS = {"max_requests", "max_requests_jitter"}


def validate_recycle(path: Path, raw: dict) -> tuple[tuple[str, ...] | None, str]:
    """[recycle]: argv = [flags with {max_requests} / {max_requests_jitter}] with why, or
    unsupported = "<why>"."""
    if set(raw) == {"unsupported"} and isinstance(raw["unsupported"], str) and raw["unsupported"]:
        return None, raw["unsupported"].strip()
    argv = raw.get("argv")
    if (
        set(raw) == {"argv", "why"}
        and isinstance(argv, list)
        and argv
        and all(isinstance(a, str) for a in argv)
        and isinstance(raw["why"], str)
        and raw["why"].strip()
    ):
        unknown = set().union(*(placeholders(a) for a in argv)) - RECYCLE_PLACEHOLDERS
        if not unknown:
            return tuple(argv), raw["why"].strip()
    raise DeclarationError(
        f"{path}: [recycle] must be argv = [flags using {sorted(RECYCLE_PLACEHOLDERS)}] with "
        "why = '...', or unsupported = '<why>'"
    )


PROTOCOL_PLACEHOLDERS = {"certfile", "keyfile"}


def validate_protocols(
    path: Path, raw: dict, knobs: set[str]
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """[protocols.<name>]: argv = [flags appended to argv] with why = '<the server's docs say
    ...>', or unsupported = '<why not>'; <name> one of PROTOCOLS but http1 (the argv itself),
    or a protocol a scenario carries (websocket: argv = [], the server's own argv serves it,
    since it is started once for every scenario of its block)."""
    spoken: dict[str, tuple[str, ...]] = {}
    why: dict[str, str] = {}
    allowed = PROTOCOL_PLACEHOLDERS | BUILTIN_PLACEHOLDERS | knobs
    for name, table in raw.items():
        if (name not in PROTOCOLS and name not in SCENARIO_PROTOCOLS) or name == HTTP1:
            valid = [p for p in [*PROTOCOLS, *SCENARIO_PROTOCOLS] if p != HTTP1]
            raise DeclarationError(f"{path}: [protocols.{name}]: valid names are {valid}")
        if name in SCENARIO_PROTOCOLS and isinstance(table, dict) and table.get("argv"):
            raise DeclarationError(
                f"{path}: [protocols.{name}] is carried by a scenario: argv = [] (the server's "
                "own argv must serve it beside every other scenario)"
            )
        keys = set(table) if isinstance(table, dict) else set()
        spoken_form = keys == {"argv", "why"}
        text = table.get("why" if spoken_form else "unsupported") if keys else None
        argv = table["argv"] if spoken_form else None
        ok_argv = isinstance(argv, list) and all(isinstance(a, str) for a in argv)
        well_formed = spoken_form or keys == {"unsupported"}
        if (
            not well_formed
            or not (isinstance(text, str) and text.strip())
            or (spoken_form and not ok_argv)
        ):
            raise DeclarationError(
                f"{path}: [protocols.{name}] must be argv = [flags] with why = '...', or "
                "unsupported = '<why>'"
            )
        if argv is not None:
            used = set().union(set(), *(placeholders(a) for a in argv))
            if used - allowed:
                raise DeclarationError(
                    f"{path}: [protocols.{name}] placeholders {sorted(used - allowed)} are unknown"
                )
            if name in PROTOCOLS and PROTOCOLS[name].tls and not used >= PROTOCOL_PLACEHOLDERS:
                raise DeclarationError(
                    f"{path}: [protocols.{name}] is TLS: its argv must use {{certfile}} and "
                    "{keyfile} (the certificate the harness makes per run)"
                )
            spoken[name] = tuple(argv)
        why[name] = text.strip()
    return spoken, why


def validate_pythons(path: Path, raw: dict) -> tuple[dict[str, str], dict[str, str]]:
    """[pythons."<name>"]: requirements = '<a pinned file beside server.toml>' with why =
    '...', or unsupported = '<why the server cannot run on it>'; <name> one PYTHON= takes."""
    files: dict[str, str] = {}
    why: dict[str, str] = {}
    for name, table in raw.items():
        if name not in interpreter_names():
            valid = ", ".join(interpreter_names())
            raise DeclarationError(f'{path}: [pythons."{name}"]: valid names are {valid}')
        keys = set(table) if isinstance(table, dict) else set()
        text = table.get("why" if "requirements" in keys else "unsupported") if keys else None
        file = table.get("requirements") if keys == {"requirements", "why"} else None
        well_formed = keys == {"unsupported"} or (isinstance(file, str) and file.strip())
        if not well_formed or not (isinstance(text, str) and text.strip()):
            raise DeclarationError(
                f"{path}: [pythons.\"{name}\"] must be requirements = '<file>' with why = "
                "'...', or unsupported = '<why>'"
            )
        if file is not None:
            if "/" in file or not (path.parent / file).is_file():
                raise DeclarationError(
                    f'{path}: [pythons."{name}"] requirements {file!r} is not a file beside it'
                )
            files[name] = file
        why[name] = text.strip()
    return files, why


def validate_spec(path: Path, data: dict) -> ServerSpec:
    """Turn one parsed server.toml into a ServerSpec, or raise DeclarationError."""
    server_id = path.parent.name
    if not ID_RE.match(server_id):
        raise DeclarationError(f"{path}: folder name {server_id!r} is not a valid server id")
    _check_top_level(path, data)
    used = _check_command(path, data)
    knobs = {name: validate_knob(path, name, raw) for name, raw in data.get("knobs", {}).items()}
    _check_placeholders(path, used, knobs)
    _check_config(path, data, used)
    _check_options(path, data)
    scenarios = data.get("scenarios")
    version_argv = data.get("version_argv")
    reload_signal, reload_why = (
        validate_reload(path, data["reload"])
        if "reload" in data
        else (None, "no [reload] declared")
    )
    recycle_argv, recycle_why = (
        validate_recycle(path, data["recycle"])
        if "recycle" in data
        else (None, "no [recycle] declared")
    )
    protocols, protocol_why = validate_protocols(path, data.get("protocols", {}), set(knobs))
    pythons, python_why = validate_pythons(path, data.get("pythons", {}))
    return ServerSpec(
        id=server_id,
        description=str(data["description"]),
        app=data["app"],
        package=data.get("package"),
        argv=tuple(data["argv"]),
        env=dict(data.get("env", {})),
        knobs=knobs,
        ready_path=data.get("ready_path", "/plaintext"),
        stop_signal=data.get("stop_signal", "SIGTERM"),
        folder=path.parent,
        config=data.get("config"),
        scenarios=tuple(scenarios) if scenarios else None,
        version_argv=tuple(version_argv) if version_argv else None,
        install_flags=tuple(data.get("install_flags", [])),
        reload_signal=reload_signal,
        reload_why=reload_why,
        recycle_argv=recycle_argv,
        recycle_why=recycle_why,
        protocols=protocols,
        protocol_why=protocol_why,
        pythons=pythons,
        python_why=python_why,
    )


def load_spec(path: Path) -> ServerSpec:
    """Read and validate one server.toml."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise DeclarationError(f"{path}: not valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise DeclarationError(f"{path}: cannot be read: {exc}") from exc
    spec = validate_spec(path, data)
    if spec.app != "static" and spec.requirements is None:
        raise DeclarationError(f"{path.parent}: needs a pinned requirements.txt")
    return spec


# servers_dir None: SERVERS_DIR as it is at call time (a test may point it at a temporary copy).
def server_ids(servers_dir: Path | None = None) -> list[str]:
    """Every declared server id, sorted."""
    servers_dir = servers_dir or SERVERS_DIR
    return sorted(p.parent.name for p in servers_dir.glob("*/server.toml"))


def load_all(servers_dir: Path | None = None) -> dict[str, ServerSpec]:
    """Every declaration, validated."""
    servers_dir = servers_dir or SERVERS_DIR
    return {sid: load_spec(servers_dir / sid / "server.toml") for sid in server_ids(servers_dir)}


def resolve_knobs(spec: ServerSpec, cpus: int, overrides: dict[str, int]) -> dict[str, int]:
    """Knob values for one run: declared defaults, 'cpus' resolved, user overrides applied."""
    values: dict[str, int] = {}
    for name, knob in spec.knobs.items():
        values[name] = cpus if knob.default == "cpus" else int(knob.default)
    for name, value in overrides.items():
        if name in values:
            values[name] = value
    return values


def render_argv(spec: ServerSpec, fill: dict[str, object]) -> list[str]:
    """The server's argv with every placeholder filled."""
    return [arg.format(**fill) for arg in spec.argv]


def render_config(template: str, fill: dict[str, object], pattern: str = r"\{(\w+)\}") -> str:
    """A native config file with {name} (or what `pattern` matches) replaced for known names
    only: nginx's own braces and $variables pass through untouched."""
    return re.sub(
        pattern,
        lambda m: str(fill[m.group(1)]) if m.group(1) in fill else m.group(0),
        template,
    )


def render_env(spec: ServerSpec, fill: dict[str, object]) -> dict[str, str]:
    """The server's extra environment with every placeholder filled."""
    return {key: value.format(**fill) for key, value in spec.env.items()}


def protocol_refusal(
    specs: dict[str, ServerSpec], servers: tuple[str, ...] | list[str], name: str
) -> str | None:
    """The one-line refusal when a server of `servers` cannot serve PROTOCOL=name (its
    server.toml says why), or None when every one can."""
    unable = [s for s in servers if not specs[s].speaks(name)]
    if not unable:
        return None
    able = [s for s, spec in specs.items() if spec.speaks(name)]
    first = unable[0]
    return (
        f"SERVER={','.join(unable)} cannot serve PROTOCOL={name} ({first}: "
        f"{specs[first].why_not(name)}); valid for {name}: SERVER={','.join(able) or 'none'}"
    )


def python_refusal(
    specs: dict[str, ServerSpec], servers: tuple[str, ...] | list[str], name: str | None
) -> str | None:
    """The one-line refusal when a server of `servers` cannot run on PYTHON=name (its
    server.toml says why), or None when every one can."""
    unable = [s for s in servers if not specs[s].runs_on(name)]
    if not unable or name is None:
        return None
    able = [s for s, spec in specs.items() if spec.runs_on(name) and spec.app != "static"]
    first = unable[0]
    return (
        f"SERVER={','.join(unable)} cannot run on PYTHON={name} ({first}: "
        f"{specs[first].why_not_on(name)}); valid on {name}: SERVER={','.join(able) or 'none'}"
    )
