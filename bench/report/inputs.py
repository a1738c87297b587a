"""Why a report cannot be made: a results directory (RESULTS, BASE, HEAD) with no record in it.

Input: the directory as the user named it, and what bench.core.record.load_records found there
(or only which record files exist, for the pre-check). Output: nothing when there is a record to
report, else a UsageError whose one line says why, and on a fresh clone (nothing measured yet)
where the shipped reference is. Standard library only: bench/precheck.py runs it before set-up.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.core import speedclass
from bench.core.record import REFERENCE_DIR, Record, load_records, pending
from bench.core.validate import UsageError

# Where a fresh clone's answer already is (the reference run of this project's machine).
REFERENCE_SUMMARY = f"results/{REFERENCE_DIR}/summary.md"


def nothing_measured(name: str, raw: str) -> str:
    """The line for a results directory with no record file: what to run, where to look."""
    return (
        f"nothing measured yet: {name}={raw!r} holds no records (make bench writes them); "
        f"the shipped reference run is {REFERENCE_SUMMARY} (REFERENCE=1 merges it into yours)"
    )


def has_record_files(path: Path, with_reference: bool = False) -> bool:
    """Whether `path` holds a file load_records would read (without reading any: the
    pre-check's quick look; raw tool output and, unless asked, the reference do not count)."""
    for found in path.rglob("*.json"):
        parts = found.relative_to(path).parts
        if found.name.startswith(".tmp-") or "raw" in parts[:-1]:
            continue
        if (parts[0] == REFERENCE_DIR and not with_reference) or pending(parts):
            continue
        return True
    return False


def require_records(
    name: str, raw: str, records: list[Record], problems: list[str], purpose: str = "report"
) -> None:
    """UsageError (one line) when `records` is empty: every file unreadable (how many, the
    first one's problem) or none at all (for `report`: nothing measured yet, and where the
    reference is)."""
    if records:
        return
    if problems:
        raise UsageError(
            f"{name}={raw!r} holds no readable record: {len(problems)} file(s) skipped "
            f"(first: {problems[0].removesuffix(', skipped')})"
        )
    if purpose == "report":
        raise UsageError(nothing_measured(name, raw))
    raise UsageError(f"{name}={raw!r} holds no records to {purpose} (<dir>/records/*.json)")


def check_report(results: Path, raw: str) -> None:
    """make report's RESULTS: UsageError unless it holds a readable record (REFERENCE=1
    counts the shipped reference, as the summary then merges it)."""
    with_reference = os.environ.get("PYWEBBENCH_REFERENCE") == "1"
    require_readable("RESULTS", raw, results)
    records, problems = load_records(results, with_reference)
    require_records("RESULTS", raw, records, problems)


def require_record_files(raw: str, env: dict[str, str]) -> None:
    """The pre-check's make report: UsageError when RESULTS holds no record file at all
    (REFERENCE=1 in `env` counts the reference's)."""
    reference = "1" in (env.get("REFERENCE"), env.get("PYWEBBENCH_REFERENCE"))
    require_readable("RESULTS", raw, Path(raw))
    if Path(raw).is_dir() and not has_record_files(Path(raw), reference):
        raise UsageError(nothing_measured("RESULTS", raw))


def require_readable(name: str, raw: str, path: Path) -> None:
    """UsageError when an existing directory cannot be listed: a walk would find nothing in
    it and call it empty (root reads every directory; another user may not)."""
    if path.is_dir() and not os.access(path, os.R_OK | os.X_OK):
        raise UsageError(f"{name}={raw!r} is not readable by this user: nothing to report")


def result_set(
    name: str, raw: str, other: str | None = None, purpose: str = "compare"
) -> tuple[list[Record], list[str]]:
    """The records of an existing results directory (BASE=, HEAD=, export's RESULTS) without
    those of the `other` set when it is nested inside this one (results and results/after),
    and a line per file skipped; UsageError when none is readable (the pre-check and the
    harness say the same)."""
    path = Path(raw)
    if not path.is_dir():
        raise UsageError(f"{name}={raw!r} is not a directory of results")
    inner = Path(other).resolve() if other else None
    nested = inner is not None and inner != path.resolve() and inner.is_relative_to(path.resolve())
    with_reference = purpose == "export" and os.environ.get("PYWEBBENCH_REFERENCE") == "1"
    records, problems = speedclass.load(path, with_reference, exclude=inner if nested else None)
    require_records(name, raw, records, problems, purpose)
    return records, problems
