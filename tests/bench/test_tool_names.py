"""Only bench/load/ knows the load tools: no other module of bench/ names a tool or its files.

A string constant (docstrings and comments excluded: they explain, they do not branch) that is
a tool's name ("wrk", "oha", "locust": what LOAD= takes) or a tool's file (`oha.json`,
`.wrk.txt`, `locust_stats.csv`, `locust/saas.py`, a tool's per-request file) fails the test:
the rest of the harness asks bench.load what a tool is (open or closed loop, one URL or a mix,
its per-request file) instead of testing for it. Prose naming a tool in a report's text is not
caught: it explains, it does not decide.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from bench import load

BENCH = Path(__file__).resolve().parents[2] / "bench"
# The tools the issue names, and every tool the registry finds (a new one is covered too).
NAMES = sorted({"wrk", "oha", "locust", *load.names()})
# Every tool a record may name (the race pattern included): its files are the tool's too.
FILE_OWNERS = sorted({*NAMES, *load.kinds()})
EXTENSIONS = "txt|json|csv|gz|db|log|lua|py"
# A pointer into the load package itself ("bench/load/race.py" in a report's prose) is not a
# tool's file: it names the code that knows.
FILE = re.compile(
    rf"(?<![A-Za-z])(?<!load/)({'|'.join(FILE_OWNERS)})([._/-][\w./-]*)?\.({EXTENSIONS})(?![A-Za-z])"
)


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring constants of the module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(id(first.value))
    return found


def offences(text: str) -> list[tuple[int, str]]:
    """(line, constant) of every string constant of this source that names a tool or a
    tool's file (docstrings excluded)."""
    tree = ast.parse(text)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            value = node.value
            if value.strip() in NAMES or FILE.search(value) or _per_request_file(value):
                found.append((node.lineno, value))
    return sorted(found)


def _per_request_file(value: str) -> bool:
    suffixes = [kind.per_request for kind in load.kinds().values() if kind.per_request]
    return any(suffix in value for suffix in suffixes)


def scan(root: Path) -> list[str]:
    """`path:line: constant` for every offence under root (a bench/ tree), bench/load/ left out."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "load":
            continue
        out += [f"bench/{rel}:{line}: {value!r}" for line, value in offences(path.read_text())]
    return out


def test_no_module_outside_bench_load_names_a_tool_or_its_files() -> None:
    """Tool names and tool files appear in bench/load/ only."""
    assert scan(BENCH) == []


def test_the_scan_catches_names_and_files_and_spares_docstrings() -> None:
    """The check can fail: a comparison with a name, a raw file name and a data path are
    caught; a docstring, a comment and a make variable (LOCUST_WORKERS) are not."""
    source = '''"""Module docstring naming wrk and oha.json: allowed."""
def f(rec):
    """Function docstring: locust_stats.csv is fine here."""
    # a comment: wrk
    if rec.load_tool == "wrk":
        return "x.oha.requests.csv.gz"
    return ("locust/saas.py", ".bare.wrk.txt", "race.json", "oha", "LOCUST_WORKERS")
'''
    assert sorted(value for _, value in offences(source)) == [
        ".bare.wrk.txt",
        "locust/saas.py",
        "oha",
        "race.json",
        "wrk",
        "x.oha.requests.csv.gz",
    ]
