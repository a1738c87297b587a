"""The harness's layers: every import inside bench/ points down (or stays in its own folder).

core < host < observe < load | stack < report < harness < studies < the entry points
(bench/*.py). Studies sit above the harness: a study's arms are run by it (its lock, signal
handling and run directory; records through its Recorder), while the harness knows nothing of
studies (their sections reach it as a callback). Two folders on one level (load and stack)
may not import each other, and no module imports another module's private (`_name`) helpers.
"""

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
# Folder -> level. Top-level modules (cli, overhead, __main__) are the entry points, above all.
LEVELS = {
    "core": 0,
    "host": 1,
    "observe": 2,
    "load": 3,
    "stack": 3,
    "report": 4,
    "harness": 5,
    "studies": 6,
    "cli": 7,  # the entry point's own folder (parser, options, commands, cleanup)
}
TOP = 7


def folder_of(module: str) -> str:
    """`bench.host.procs` -> `host`; `bench.cli` -> `` (an entry point)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LEVELS) else ""


def level_of(module: str) -> int:
    """The level of a dotted bench module."""
    return LEVELS.get(folder_of(module), TOP)


def module_name(path: Path, root: Path = BENCH) -> str:
    """bench/host/procs.py -> bench.host.procs."""
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, imported bench module, names taken from it) for every import, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.startswith("bench.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bench":
            names = [a.name for a in node.names]
            if node.module in {"bench"} | {f"bench.{f}" for f in LEVELS}:
                # `from bench.host import procs`: each name is a module of that folder
                out += [(node.lineno, f"{node.module}.{n}", []) for n in names]
            else:
                out.append((node.lineno, str(node.module), names))
    return out


def violations(root: Path = BENCH) -> list[str]:
    """Every import that points up, across two folders of one level, or at a private name."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        here = module_name(path, root)
        for line, target, names in imports_of(path):
            where = f"{path.relative_to(root.parent)}:{line}"
            same = folder_of(here) == folder_of(target) and folder_of(here) != ""
            if not same and level_of(target) > level_of(here):
                bad.append(f"{where} {here} imports {target}: up")
            elif not same and level_of(target) == level_of(here) and level_of(here) != TOP:
                bad.append(f"{where} {here} imports {target}: across one level")
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    bad.append(f"{where} {here} imports the private {target}.{name}")
    return bad


def test_every_import_points_down() -> None:
    """No module in bench/ imports a higher level, a sibling folder, or a private name."""
    assert violations() == []


def test_every_folder_has_a_level() -> None:
    """A new folder in bench/ must be placed in the order before it holds code."""
    folders = {p.name for p in BENCH.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= set(LEVELS), f"place {sorted(folders - set(LEVELS))} in LEVELS"


@pytest.mark.parametrize(
    ("folder", "source", "why"),
    [
        ("core", "from bench.harness import run\n", "up"),
        ("load", "from bench.stack import site\n", "across one level"),
        ("report", "from bench.host.netns import _libc\n", "private"),
        ("harness", "from bench.studies import runner\n", "up"),
    ],
)
def test_the_check_catches_a_bad_import(tmp_path: Path, folder: str, source: str, why: str) -> None:
    """An upward, sideways or private import planted in a copy of a folder is reported."""
    pkg = tmp_path / "bench" / folder
    pkg.mkdir(parents=True)
    (tmp_path / "bench" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "planted.py").write_text(source)
    found = violations(tmp_path / "bench")
    assert len(found) == 1 and why in found[0], found
