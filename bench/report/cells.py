"""Cells of the summary's tables: numbers, medians, labels of servers, knobs and machines.

Input: records and figures. Output: short strings for table cells, shared by every section
of the summary (bench.report.summary, bench.report.openloop).
"""

from __future__ import annotations

import re
import statistics

from bench.core import speedclass
from bench.core.record import Record, flavor_of, gil_came_back, python_of, session_of
from bench.core.registry import RAW


def num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def figure(value: float | None) -> str:
    """A measured figure (a latency, a rate, a ratio of them): whole numbers from 100 up, three
    significant digits below (7.44, 83.8, 0.0123), so 3,000 ms never reads "3,000.00"; –
    for none. Every table and bar label prints figures through this."""
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def machine(rec: Record) -> str:
    """A table block's heading: machine, arch and session (trials never pool across them)."""
    label = f"{host_of(rec)} ({rec.arch}"
    return label + (", emulated)" if rec.emulated else ")") + f" · {session_label(rec)}"


def server_version(meta: dict) -> str:
    """The server package's version from a record's metadata, "?" when it was not recorded."""
    # server_version is a shortcut run.py writes; packages[server_package] is the source, and
    # the only one in records written by other tools or by hand.
    version = meta.get("server_version")
    if not version:
        packages = meta.get("packages") or {}
        version = packages.get(meta.get("server_package") or "")
    return version or "?"


def app_label(rec: Record) -> str:
    """APP= runs: the app's entry and version (` · wsgi django@1a2b3c4d`), so two versions of
    one app read apart; '' for app_common's runs."""
    app = getattr(rec, "user_app", None)
    if not app:
        return ""
    return f" · {app.get('kind') or '?'} {app.get('name')}@{str(app.get('sha256'))[:8]}"


def section_value(rec: Record, section: str, key: str) -> float | None:
    values = getattr(rec, section) or {}
    return values.get(key)


def cpu_tag(model: object) -> str:
    """A CPU model, short: trademarks, "CPU", "Processor" and the clock left out
    ("Intel(R) Xeon(R) Processor" -> "Intel Xeon")."""
    text = re.sub(r"\((R|TM|tm|r)\)|\bCPU\b|\bProcessor\b|@\s*[\d.]+\s*GHz", " ", str(model))
    return " ".join(text.split())


def host_of(rec: Record) -> str:
    """The machine a record comes from, as the summary names it: the user's MACHINE= label or
    the hostname, with the first characters of its stable identity (format 5) so that two
    hosts of one name never merge, and its CPU model, so that one label never spans two CPU
    models (a cloud image's identity travels with it to another host type). Older records
    have no identity: their kernel build stands in for it, so two sessions on different boots
    of a same-named host stay apart."""
    meta = rec.metadata
    name = str(meta.get("machine_label") or meta.get("hostname", "?"))
    ident = meta.get("machine_id")
    cpu = cpu_tag(meta["cpu_model"]) if meta.get("cpu_model") else ""
    speed = speedclass.label(meta)  # " @0.31" where the machine ran at two speeds or more
    if ident:
        return f"{name}·{str(ident)[:4]}" + (f" [{cpu}]" if cpu else "") + speed
    kernel = meta.get("kernel")
    inside = ", ".join(part for part in (f"kernel {kernel}" if kernel else "", cpu) if part)
    return (f"{name} [{inside}]" if inside else name) + speed


def session_label(rec: Record) -> str:
    """A record's session, short, as tables name it: `session 1a2b3c` (`legacy 4d5e6f` for a
    pseudo-session derived from a record older than format 10, bench.core.record.session_of)."""
    session = session_of(rec)
    if session.startswith("legacy-"):
        return f"legacy {session.removeprefix('legacy-')[:6]}"
    return f"session {session[:6]}"


def scope_label(rec: Record) -> str:
    """The machine and session of a record: the scope inside which trials pool and rank."""
    return f"{host_of(rec)} · {session_label(rec)}"


KNOB_CODES = {"workers": "w", "threads": "t", "connections": "c", "backlog": "b"}


def knobs_label(knobs: dict) -> str:
    """The knobs users vary, short: `w2 t4 b2048`."""
    return " ".join(f"{code}{knobs[name]}" for name, code in KNOB_CODES.items() if name in knobs)


def via_label(rec: Record) -> str:
    """How the load reached the server: direct or through nginx, keep-alive when off, and the
    protocol when it is not HTTP/1.1 in clear text (with HTTP/2's streams per connection)."""
    keepalive = rec.keepalive or {}
    via = rec.proxy or "direct"
    box = rec.container
    if box:  # RUNTIME=docker: the image, its limits and network
        limits = [f"--cpus={box['cpus']:g}"] if box.get("cpus") is not None else []
        if box.get("memory_bytes") is not None:
            limits.append(f"--memory={box['memory_bytes'] // 2**20}m")
        if box.get("network") == "bridge":
            limits.append("bridge")
        via += ", docker" + (" " + " ".join(limits) if limits else "")
    if keepalive.get("client") is False:
        via += ", keepalive off"
    elif keepalive.get("upstream") is False:
        via += ", upstream keepalive off"
    if rec.protocol not in (None, "http1"):  # PROTOCOL=: two protocols are two rows
        streams = rec.streams or 1
        via += f", {rec.protocol}" + (f" ×{streams} streams" if streams > 1 else "")
    if python_of(rec) is not None:  # PYTHON=: two interpreters are two rows
        via += f", Python {python_of(rec)}"
    if gil_came_back(rec):
        via += " (GIL came back: an extension turned it on while serving)"
    if flavor_of(rec) == RAW:  # APP_FLAVOR=raw: the app with no framework, a row of its own
        via += ", raw app"
    return via
