"""The user's own app (APP=, APP_ROUTES=, APP_REQUIREMENTS=, APP_KIND=): parsed and identified.

Input: the make variables as strings. Output: an AppSpec — its entry points (module:callable,
the folder that goes on sys.path, WSGI or ASGI where declared or once detected), the route
list the harness verifies and loads, its requirements, and its identity (a name and a sha256
of its files and requirements, so two apps or two versions never merge in a summary) — or
AppError naming the problem in one line. Nothing is imported or started here: kind detection
runs the app in its own environment (bench.host.appenv).
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

KINDS = ("wsgi", "asgi")
# What a load tool here sends: GET requests to one path (wrk, oha). Other methods are verified.
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
LOADED_METHODS = ("GET",)
ROUTE_KEYS = {"name", "method", "path", "status", "body", "weight"}
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# Folders that are never the app's own source (caches, environments, VCS, our own state).
SKIP_DIRS = {
    ".git",
    ".hg",
    "__pycache__",
    ".venv",
    "venv",
    "node_modules",
    ".bench",
    "results",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
}
MAX_FILES = 20_000  # an app folder larger than this is likely a home directory, not an app
DEFAULT_REQUIREMENTS = "requirements.txt"  # beside the app's folder when APP_REQUIREMENTS is unset
DEFAULT_ROUTES = "routes.toml"


class AppError(ValueError):
    """Bad APP / APP_ROUTES / APP_REQUIREMENTS / APP_KIND: one line, exit status 2."""


@dataclass(frozen=True)
class Entry:
    """One entry point: `module:callable` importable with `root` on sys.path."""

    given: str  # as the user wrote it
    module: str
    callable: str
    root: Path
    kind: str | None = None  # wsgi / asgi: declared (APP_KIND) or detected; None: not yet
    framework: str | None = None  # the package the callable's type comes from (django, flask)

    @property
    def target(self) -> str:
        """What a server's command line takes: module:callable."""
        return f"{self.module}:{self.callable}"


@dataclass(frozen=True)
class Route:
    """One route of APP_ROUTES: what to send, what must come back, how much load it gets."""

    name: str
    method: str
    path: str
    status: int
    body: str | None
    weight: int

    @property
    def loaded(self) -> bool:
        """Measured under load (weight > 0), not only verified."""
        return self.weight > 0


@dataclass(frozen=True)
class AppSpec:
    """The user's app: entry points, routes, requirements and identity."""

    name: str
    entries: tuple[Entry, ...]
    routes: tuple[Route, ...]
    routes_file: Path
    requirements: Path | None
    files: int
    files_sha256: str
    requirements_sha256: str | None

    @property
    def sha256(self) -> str:
        """The app's version: its files and its requirements, hashed together."""
        digest = hashlib.sha256(self.files_sha256.encode())
        digest.update((self.requirements_sha256 or "").encode())
        return digest.hexdigest()

    @property
    def root(self) -> Path:
        """The folder on sys.path (the first entry's; every entry must share it)."""
        return self.entries[0].root

    def entry_for(self, kind: str) -> Entry | None:
        """The entry a server of this interface (wsgi/asgi) serves, or None."""
        return next((e for e in self.entries if e.kind == kind), None)

    def scenario(self, route: Route) -> str:
        """A route's scenario name in records: the app's name, then the route's."""
        return f"{self.name}:{route.name}"

    @property
    def loaded_routes(self) -> tuple[Route, ...]:
        """Routes measured under load, the heaviest first (ties in file order)."""
        return tuple(sorted((r for r in self.routes if r.loaded), key=lambda r: -r.weight))

    @property
    def ready_path(self) -> str:
        """The path a started server must answer 200 on: the first GET route expecting 200."""
        return next(r.path for r in self.routes if r.method == "GET" and r.status == 200)

    def with_kinds(self, found: dict[str, tuple[str, str | None]]) -> AppSpec:
        """The same app with each entry's detected kind and framework (by `given`)."""
        entries = tuple(
            replace(e, kind=e.kind or found[e.given][0], framework=found[e.given][1])
            if e.given in found
            else e
            for e in self.entries
        )
        kinds = [e.kind for e in entries]
        if len(set(kinds)) != len(kinds):
            raise AppError(
                f"APP gives two {kinds[0]} entries; give at most one WSGI and one ASGI entry"
            )
        return replace(self, entries=entries)

    def identity(self, kind: str | None) -> dict[str, object]:
        """The record's `user_app`: which app, which version, which entry served."""
        entry = self.entry_for(kind) if kind else None
        return {
            "name": self.name,
            "sha256": self.sha256,
            "files_sha256": self.files_sha256,
            "files": self.files,
            "requirements_sha256": self.requirements_sha256,
            "entry": entry.target if entry else None,
            "kind": entry.kind if entry else None,
            "framework": entry.framework if entry else None,
            "routes": [r.name for r in self.loaded_routes],
        }


def _root_of(file: Path) -> tuple[Path, str]:
    """The folder to put on sys.path and the dotted module of `file` (a .py file or a
    package's __init__.py): walk up while the folder is a package."""
    parts = [] if file.name == "__init__.py" else [file.stem]
    folder = file.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(parts)


def parse_entry(raw: str, cwd: Path) -> Entry:
    """`path/to/module.py:callable`, `path/to/package:callable` or `dotted.module:callable`."""
    target, sep, name = raw.strip().rpartition(":")
    if not sep or not target or not IDENT_RE.match(name):
        raise AppError(
            f"APP={raw!r} is not <path or module>:<callable> "
            "(e.g. examples/django/benchsite/wsgi.py:application or mysite.wsgi:application)"
        )
    if "/" in target or target.endswith(".py"):
        path = (cwd / target).resolve()
        file = path / "__init__.py" if path.is_dir() else path
        if not file.is_file() or file.suffix != ".py":
            raise AppError(f"APP={raw!r}: {target} is neither a .py file nor a package folder")
    else:
        if not IDENT_RE.match(target):
            raise AppError(f"APP={raw!r}: {target!r} is not a dotted module name")
        base = cwd.joinpath(*target.split("."))
        candidates = [base.with_suffix(".py"), base / "__init__.py"]
        file = next((c for c in candidates if c.is_file()), None)  # type: ignore[assignment]
        if file is None:
            raise AppError(
                f"APP={raw!r}: no module {target} under {cwd} (give a path: dir/module.py:callable)"
            )
        file = file.resolve()
    root, module = _root_of(file)
    if not module:
        raise AppError(f"APP={raw!r}: {file} is not inside an importable module")
    check_source(raw, file, name)
    return Entry(raw.strip(), module, name, root)


def _top_names(body: list[ast.stmt]) -> set[str] | None:
    """The names a module's top level binds (into if/try/with blocks too), or None when it
    may bind any (`from x import *`, a module __getattr__, globals())."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        for block in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, block, None)
            if isinstance(node, ast.If | ast.Try | ast.With) and isinstance(inner, list):
                found = _top_names(inner)  # type: ignore[arg-type]
                if found is None:
                    return None
                names |= found
    return names


def check_source(raw: str, file: Path, name: str) -> None:
    """The entry's file compiles (ast.parse: nothing imported or run) and binds `name` at its
    top level; AppError otherwise (said before set-up builds each server's environment)."""
    try:
        source = file.read_text()
        tree = ast.parse(source, filename=str(file))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AppError(f"APP={raw!r}: {file} cannot be read ({exc})") from None
    except SyntaxError as exc:
        raise AppError(
            f"APP={raw!r}: {file} does not compile: {exc.msg} (line {exc.lineno})"
        ) from None
    names = _top_names(tree.body)
    if names is None or "__getattr__" in names or "globals()" in source:
        return
    if name not in names:
        raise AppError(
            f"APP={raw!r}: {file} binds no {name!r} at its top level; valid: the name of "
            "its WSGI or ASGI callable (e.g. app, application)"
        )


def parse_kinds(raw: str | None, count: int) -> list[str | None]:
    """APP_KIND: one of wsgi/asgi per entry (a comma list in APP's order), or unset."""
    if not raw:
        return [None] * count
    kinds = [k.strip().lower() for k in raw.split(",")]
    bad = [k for k in kinds if k not in KINDS]
    if bad or len(kinds) != count:
        raise AppError(
            f"APP_KIND={raw!r}: give one of {', '.join(KINDS)} per APP entry ({count}), "
            "comma-separated"
        )
    return kinds  # type: ignore[return-value]


def _route(file: Path, index: int, raw: object) -> Route:
    where = f"APP_ROUTES={file}: route {index + 1}"
    if not isinstance(raw, dict):
        raise AppError(f"{where} is not a table ([[route]])")
    unknown = set(raw) - ROUTE_KEYS
    if unknown:
        raise AppError(f"{where}: unknown keys {sorted(unknown)}; valid: {sorted(ROUTE_KEYS)}")
    path = raw.get("path")
    if not isinstance(path, str) or not path.startswith("/") or any(c.isspace() for c in path):
        raise AppError(f"{where}: path must be a string starting with / and without spaces")
    method = raw.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise AppError(f"{where}: method {method!r}; valid: {', '.join(METHODS)}")
    status = raw.get("status", 200)
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        raise AppError(f"{where}: status must be an HTTP status (100..599), got {status!r}")
    body = raw.get("body")
    if body is not None and (not isinstance(body, str) or not body):
        raise AppError(f"{where}: body must be a non-empty string (a substring of the answer)")
    weight = raw.get("weight", 1)
    if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= 1000:
        raise AppError(f"{where}: weight must be a whole number 0..1000, got {weight!r}")
    default_name = re.sub(r"[^a-z0-9_-]+", "-", path.strip("/").split("?")[0].lower()).strip("-")
    name = raw.get("name", default_name or "root")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise AppError(f"{where}: name {name!r} must match {NAME_RE.pattern}")
    if weight > 0 and method.upper() not in LOADED_METHODS:
        raise AppError(
            f"{where} ({method.upper()} {path}): the load tools here send GET only; give it "
            "weight = 0 to verify it without load"
        )
    return Route(name, method.upper(), path, status, body, weight)


def parse_routes(file: Path) -> tuple[Route, ...]:
    """APP_ROUTES: a TOML file of [[route]] tables (name, method, path, status, body, weight)."""
    try:
        data = tomllib.loads(file.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise AppError(f"APP_ROUTES={file}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AppError(f"APP_ROUTES={file}: cannot be read: {exc}") from None
    unknown = set(data) - {"route"}
    if unknown:
        raise AppError(f"APP_ROUTES={file}: unknown keys {sorted(unknown)}; valid: [[route]]")
    raw = data.get("route")
    if not isinstance(raw, list) or not raw:
        raise AppError(f"APP_ROUTES={file}: no [[route]] tables")
    routes = tuple(_route(file, i, r) for i, r in enumerate(raw))
    names = [r.name for r in routes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise AppError(f"APP_ROUTES={file}: route names {dupes} repeat; give each a name")
    if not any(r.loaded for r in routes):
        raise AppError(f"APP_ROUTES={file}: no route with weight > 0: nothing to measure")
    if not any(r.method == "GET" and r.status == 200 for r in routes):
        raise AppError(f"APP_ROUTES={file}: no GET route expecting 200 to tell the app is up")
    return routes


def hash_files(root: Path) -> tuple[int, str]:
    """(file count, sha256) of every file below root but caches, environments and VCS,
    each path and content hashed in path order."""
    files: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        files += [Path(folder) / n for n in names if not n.endswith((".pyc", ".pyo"))]
        if len(files) > MAX_FILES:
            raise AppError(
                f"APP: {root} holds more than {MAX_FILES} files; point APP at your project's "
                "own folder"
            )
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            continue  # a socket or a file that vanished: not source
    return len(files), digest.hexdigest()


def parse_app(
    app: str,
    routes: str | None = None,
    requirements: str | None = None,
    kind: str | None = None,
    cwd: Path | None = None,
) -> AppSpec:
    """APP and its companions -> AppSpec (kinds still None where not declared)."""
    cwd = cwd or Path.cwd()
    raws = [part for part in app.split(",") if part.strip()]
    if not raws or len(raws) > 2:
        raise AppError(
            f"APP={app!r}: give one entry <path or module>:<callable>, or two (a WSGI and an "
            "ASGI one of the same app), comma-separated"
        )
    entries = [parse_entry(raw, cwd) for raw in raws]
    kinds = parse_kinds(kind, len(entries))
    entries = [replace(e, kind=k) for e, k in zip(entries, kinds, strict=True)]
    if len({e.root for e in entries}) != 1:
        raise AppError(f"APP={app!r}: both entries must live in the same project folder")
    if kinds[0] is not None and len(set(kinds)) != len(kinds):
        raise AppError(f"APP_KIND={kind!r}: give at most one WSGI and one ASGI entry")
    root = entries[0].root
    routes_file = Path(routes) if routes else root / DEFAULT_ROUTES
    if not routes and not routes_file.is_file():
        raise AppError(f"APP_ROUTES is required (no {DEFAULT_ROUTES} in {root})")
    routes_file = (cwd / routes_file).resolve()
    if not routes_file.is_file():
        raise AppError(f"APP_ROUTES={routes}: no such file")
    req: Path | None
    if requirements:
        req = (cwd / requirements).resolve()
        if not req.is_file():
            raise AppError(f"APP_REQUIREMENTS={requirements}: no such file")
    else:
        req = root / DEFAULT_REQUIREMENTS if (root / DEFAULT_REQUIREMENTS).is_file() else None
    count, files_sha = hash_files(root)
    return AppSpec(
        name=re.sub(r"[^a-z0-9_-]+", "-", root.name.lower()).strip("-") or "app",
        entries=tuple(entries),
        routes=parse_routes(routes_file),
        routes_file=routes_file,
        requirements=req,
        files=count,
        files_sha256=files_sha,
        requirements_sha256=hashlib.sha256(req.read_bytes()).hexdigest() if req else None,
    )


def app_env(db_url: str, secret: str) -> dict[str, str]:
    """The environment the app gets beside the server's: the harness's pgbouncer as a URL
    (APP_DATABASE_URL, DATABASE_URL) and as libpq's own variables (PGHOST, PGPORT, PGUSER,
    PGPASSWORD, PGDATABASE), and a secret key generated per run (APP_SECRET_KEY)."""
    from urllib.parse import unquote, urlsplit

    url = urlsplit(db_url)
    return {
        "APP_DATABASE_URL": db_url,
        "DATABASE_URL": db_url,
        "PGHOST": url.hostname or "127.0.0.1",
        "PGPORT": str(url.port or 5432),
        "PGUSER": unquote(url.username or ""),
        "PGPASSWORD": unquote(url.password or ""),
        "PGDATABASE": url.path.lstrip("/"),
        "APP_SECRET_KEY": secret,
    }
