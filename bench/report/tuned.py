"""make tune's answer on disk: the tuned configuration of a server at one point, per machine.

Input: a search's answer as a JSON-ready dict (bench.harness.tuner builds it), the host's
metadata (bench.host.metadata), records. Output:
RESULTS/tuned/<machine>/<server>_<scenario>_c<N>.json (written atomically, replaced by the
next make tune of that point), the lookup make bench
uses (`find`: the file for this machine, server, point and runtime, or None), the lines to
paste (make's variables and the server's own command line), the answer's lines on stdout and
the summary's line saying of each configuration measured whether it was tuned or declared.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from pathlib import Path

from bench.core import plan
from bench.core.record import TUNED_DIR, Record
from bench.core.registry import OVERRIDABLE
from bench.report.cells import knobs_label
from bench.report.decision import margin_text, ratio_interval
from bench.report.recommend import command_line

DIR = TUNED_DIR
FORMAT = 1  # the answer file's own format (1: issue 31)
# What a tuned configuration holds for: the same machine (identity and CPUs) and runtime.
IDENTITY_KEYS = ("machine_id", "cpu_model", "cpus_usable")


def machine_identity(host: dict) -> dict[str, object]:
    """The machine a tuned configuration holds for, from the records' host metadata."""
    keys = ("machine_label", "hostname", "machine_id", "cpu_model", "cpu_count", "cpus_usable")
    return {key: host.get(key) for key in keys}


def runtime_of(opts: plan.Options) -> dict[str, object]:
    """The runtime and limits a tuned configuration holds for, and its interpreter (PYTHON=;
    absent where unset, as in every answer before it)."""
    held = {"runtime": opts.mode.runtime, "cpus": opts.cpus, "memory_bytes": opts.memory_bytes}
    return held | ({"python": opts.python} if opts.python is not None else {})


def machine_dir(identity: dict) -> str:
    """The machine's folder name: its label (or hostname) and the start of its identity."""
    name = str(identity.get("machine_label") or identity.get("hostname") or "host")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return f"{name}-{str(identity.get('machine_id') or '')[:8]}"


def answer_path(
    results: Path, identity: dict, server: str, scenario: str, conc: int, python: str | None = None
) -> Path:
    """Where the tuned configuration of `server` at `scenario` c`conc` lives (on PYTHON=:
    `<server>@<python>_…`, beside the usual interpreter's)."""
    name = server if python is None else f"{server}@{python}"
    return results / DIR / machine_dir(identity) / f"{name}_{scenario}_c{conc}.json"


def write(path: Path, data: dict) -> None:
    """The answer, atomically: a temporary file beside it, then renamed over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=2, sort_keys=True)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def find(
    results: Path, host: dict, server: str, scenario: str, conc: int, runtime: dict
) -> tuple[Path, dict[str, int]] | None:
    """The tuned configuration for this machine, server, point and runtime (limits
    included), or None: the file and the knobs to measure."""
    identity = machine_identity(host)
    python = runtime.get("python")
    path = answer_path(results, identity, server, scenario, conc, str(python) if python else None)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    held = data.get("machine") or {}
    if any(held.get(k) != identity.get(k) for k in IDENTITY_KEYS):
        return None
    if data.get("runtime") != runtime or not isinstance(data.get("recommended"), dict):
        return None
    knobs = data["recommended"].get("knobs")
    if not isinstance(knobs, dict) or not all(isinstance(v, int) for v in knobs.values()):
        return None
    return path, dict(knobs)


def make_line(server: str, scenario: str, conc: int, knobs: dict[str, int]) -> str:
    """The make command that measures this configuration anywhere (its knobs as make's
    variables, where the knob has one)."""
    parts = [f"make bench SERVER={server} SCENARIO={scenario} CONCURRENCY={conc}"]
    parts += [f"{k.upper()}={v}" for k, v in sorted(knobs.items()) if k in OVERRIDABLE]
    return " ".join(parts)


def paste(
    server: str, scenario: str, conc: int, knobs: dict[str, int], resolved: dict[str, int]
) -> dict[str, str]:
    """The lines to paste: make's (the searched knobs) and the server's own command line
    (`resolved`: every knob as the server was started)."""
    return {
        "make": make_line(server, scenario, conc, knobs),
        "argv": command_line(server, {**resolved, **knobs}),
    }


def ratio_text(entry: dict | None) -> str:
    """An entry against the best, as every other ratio of the summary is written:
    "1.21× [1.12–1.30] (separated)" (it was "1.210x [1.120, 1.300]")."""
    if not entry or entry.get("ratio") is None:
        return "no paired rounds"
    low, high = entry.get("low"), entry.get("high")
    if low is not None and high is not None:
        shown = ratio_interval(entry["ratio"], low, high, lambda x: f"{x:.2f}")
    else:
        shown = f"{entry['ratio']:.2f}×"
    return f"{shown} ({entry['state']})"


def _declared_line(data: dict) -> str:
    """The declared configuration against the best: tuned vs declared, on paired rounds."""
    if "declared" not in data:
        return "not raced (an answer written before the declared configuration raced)"
    declared = data["declared"]
    if not declared:
        return "not measured (the budget ended before the final race)"
    if declared["state"] == "best":
        return f"{declared['label']}: it is the best"
    if declared["state"] == "out":
        return f"{declared['label']}: out: {declared['reason']}"
    return f"{declared['label']}: best/it {ratio_text(declared)}"


def answer_lines(data: dict, path: Path) -> list[str]:
    """The answer on stdout: best, runner-up, equivalents, the recommendation, the lines."""
    best, rec = data["best"], data["recommended"]
    point = f"{data['scenario']} c{data['concurrency']}"
    lines = [
        f"tune {data['server']} {point} ({data['objective']}): {data['why']} after "
        f"{data['rounds']} round(s), {data['minutes']:.1f} min, {len(data['configurations'])} "
        f"configuration(s) of {data['space_size']} in the grid tried: {data['line']}",
        f"  best: {best['label']}"
        + (f" ({best['figure']:.1f} {data['unit']})" if best.get("figure") else ""),
    ]
    runner = data.get("runner_up")
    if runner:
        lines.append(f"  runner-up: {runner['label']}: best/it {ratio_text(runner)}")
    lines.append(f"  declared (server.toml): {_declared_line(data)}")
    same = [c["label"] for c in data["configurations"] if c["state"] == "equivalent"]
    margin = margin_text(data["margin"])
    lines.append(f"  equivalent within {margin}: {', '.join(same) if same else 'none'}")
    rss = f", {rec['rss_mb']:.0f} MB RSS" if rec.get("rss_mb") is not None else ""
    lines.append(f"  recommended (least memory among these): {rec['label']}{rss}")
    for entry in data["configurations"]:
        if entry["state"] == "out":
            lines.append(f"  out: {entry['label']}: {entry['reason']}")
    lines += [f"  paste: {rec['paste']['make']}", f"  server: {rec['paste']['argv']}"]
    lines.append(f"  saved: {path}")
    return lines


def summary_lines(records: list[Record]) -> list[str]:
    """The summary's line on whether each configuration make bench measured was tuned (and
    from which file) or declared (records of format 11 on; empty without any)."""
    seen: set[tuple] = set()
    for rec in records:
        meta = rec.metadata
        searched = "tune" in meta  # make tune's own runs: a search, neither tuned nor declared
        if "tuned" not in meta or searched or meta.get("warmup_start") or rec.status != "ok":
            continue
        seen.add((rec.server, knobs_label(rec.knobs or {}), meta.get("tuned") or ""))
    if not seen:
        return []
    items = []
    for server, knobs, source in sorted(seen):
        how = f"tuned ({source})" if source else "declared"
        # a server without knobs (daphne, flask-dev) is its name alone, never "daphne : …"
        items.append(f"{' '.join(part for part in (server, knobs) if part)}: {how}")
    return [
        "**Configurations** (`w` workers, `t` threads, `b` backlog; tuned: the one `make tune` "
        "found for this machine, scenario and concurrency; declared: server.toml's, with "
        "`TUNED=0` or nothing tuned): " + "; ".join(items),
        "",
    ]


def answers_summary(results: Path) -> list[str]:
    """The summary's lines on make tune's answers under RESULTS/tuned/: each search's standing
    and the configuration it recommends, with the make line to paste (empty without any; an
    unreadable file is named, never fatal)."""
    found = []
    for path in sorted((results / DIR).glob("*/*.json")):
        try:
            data = json.loads(path.read_text())
            rec = data["recommended"]
            found.append(
                f"- {data['server']} {data['scenario']} c{data['concurrency']} on "
                f"{path.parent.name}: {data['line']} ({data['why']} after {data['rounds']} "
                f"round(s), {data['minutes']:.1f} min); recommended {rec['label']}: "
                f"`{rec['paste']['make']}`; declared: {_declared_line(data)}"
            )
        except (OSError, ValueError, KeyError, TypeError):
            found.append(f"- {path.relative_to(results)}: unreadable, left out")
    if not found:
        return []
    return [
        "**Tuned by `make tune`** (RESULTS/tuned/: each search's standing and the "
        "configuration it recommends, the least memory among the best and those within "
        "±MARGIN of it; `make bench` measures it on that machine and point unless `TUNED=0`):",
        "",
        *found,
        "",
    ]
