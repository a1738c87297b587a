"""Host speed: a fixed amount of the harness's own CPU work on every usable CPU, timed.

Input: this machine (its usable CPUs, /proc/stat, the clock bench.host.metadata reads).
Output: a probe (probe(): work units per wall second, the CPU-time/wall ratio, steal, clock);
a session's probes (SpeedLog: each record's metadata.speed, the start line against this
machine's last session, RESULTS/raw/speed-<session>.json and one line of the machine's history).
A VM keeps its machine id while its host changes: the same configuration measured 3x apart on
boots of one id (issue 55), and nothing else in a record says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import select
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.defaults import SPEED_TOLERANCE
from bench.core.record import PROBE_VERSION, write_new
from bench.core.registry import ROOT
from bench.host import metadata
from bench.host.state import SPEED_HISTORY

# ≈1 s of one CPU of the project's 2-CPU AMD VM (73,000 units/s there under load, 2026-11-29).
# Changing the work (this count or work() itself) changes PROBE_VERSION: figures of two
# versions are never compared.
WORK_UNITS = 80_000
# The work in this many equal chunks, each timed: a CPU's speed is its best chunk's rate (as
# timeit takes the minimum time): on the project's VM 20 probes of one CPU-second each,
# whole-run rates, spread 33 % (max-min over median) on a quiet machine, the host's own
# frequency and neighbours intruding for part of a second (2026-11-29).
CHUNKS = 8
# A probe between rounds costs about a second of both CPUs: not more often than this, so a
# round of a few seconds (a tune step) is not slowed by a tenth.
BETWEEN_MIN_S = 60.0
# A child that has not answered in this long is stuck (the probe is ~1 s): killed, no probe.
CHILD_TIMEOUT_S = 120.0
# /proc/stat's `cpu` columns in the kernel's order; guest and guest_nice are already counted
# in user and nice, so they are not part of the CPUs' time.
STAT_COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")

Probe = Callable[[], dict]


class SpeedError(RuntimeError):
    """The probe could not be taken (a child failed or hung)."""


def work(units: int) -> int:
    """The probe's fixed work: integer arithmetic, dict updates and tuple hashing, a check value
    (ints only: str hashes are salted per process, their dicts would differ run to run)."""
    check = 0
    for seed in range(units):
        table: dict[int, int] = {}
        x = seed
        for i in range(50):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
            table[x & 255] = table.get(x & 255, 0) + i
        check ^= hash((x, len(table))) & 0xFFFF
    return check


def child_main(cpu: int, units: int) -> None:
    """One probe child: pin to `cpu`, say ready, wait for the go line, work, print the times."""
    os.sched_setaffinity(0, {cpu})
    print("ready", flush=True)
    if not sys.stdin.readline():  # the harness is gone (killed): no work for nobody
        return
    wall, used = time.perf_counter(), time.process_time()
    check, best = 0, 0.0
    for _ in range(CHUNKS):  # the best chunk's rate: what this CPU does when nothing intrudes
        started = time.perf_counter()
        check ^= work(units // CHUNKS)
        best = max(best, (units // CHUNKS) / (time.perf_counter() - started))
    wall, used = time.perf_counter() - wall, time.process_time() - used
    answer = {"cpu": cpu, "wall_s": wall, "cpu_s": used, "check": check, "best_ops_per_s": best}
    print(json.dumps(answer), flush=True)


def cpu_times(text: str) -> dict[str, int]:
    """The aggregate `cpu` line of /proc/stat as {column: jiffies} (columns the kernel does not
    write are left out: steal is absent before Linux 2.6.11)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            return {name: int(v) for name, v in zip(STAT_COLUMNS, parts[1:], strict=False)}
    raise ValueError("no aggregate cpu line in /proc/stat")


def steal_pct(before: dict[str, int], after: dict[str, int]) -> float | None:
    """Steal between two cpu_times() as a percentage of all the CPUs' time between them (None
    where the kernel does not count steal or no time passed)."""
    if "steal" not in before or "steal" not in after:
        return None
    total = sum(after.values()) - sum(before.values())
    if total <= 0:
        return None
    return round(100 * (after["steal"] - before["steal"]) / total, 2)


def _read_stat() -> dict[str, int] | None:
    try:
        return cpu_times(Path("/proc/stat").read_text())
    except (OSError, ValueError):
        return None


def _start(procs: list[subprocess.Popen[str]], cpus: list[int], units: int) -> None:
    """One child per CPU, in the harness's own process group, each added to `procs` as it
    starts (the caller kills them all, also when a later one fails to start)."""
    code = f"from bench.host.speed import child_main; child_main({{cpu}}, {units})"
    for cpu in cpus:
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code.format(cpu=cpu)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
        )


def _timed(procs: list[subprocess.Popen[str]]) -> list[dict]:
    """Wait until every child is ready, start them together, collect their times."""
    for proc in procs:
        assert proc.stdout is not None
        if not select.select([proc.stdout], [], [], CHILD_TIMEOUT_S)[0]:
            raise SpeedError(f"probe child not ready in {CHILD_TIMEOUT_S:g} s")
        if proc.stdout.readline().strip() != "ready":
            raise SpeedError(f"probe child exited with {proc.wait(CHILD_TIMEOUT_S)}")
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    answers = []
    for proc in procs:
        out, _ = proc.communicate(timeout=CHILD_TIMEOUT_S)
        if proc.returncode != 0 or not out.strip():
            raise SpeedError(f"probe child exited with {proc.returncode}")
        answers.append(json.loads(out))
    return answers


def probe(units: int = WORK_UNITS) -> dict:
    """Run work(units) single-threaded in one child per usable CPU at once (≈1 s with
    WORK_UNITS), in CHUNKS timed chunks: the probe dict (median over CPUs of each CPU's best
    chunk's work units per wall second, per CPU too, the median
    CPU-time/wall ratio, steal over the probe, the clock). SpeedError when a child fails."""
    procs: list[subprocess.Popen[str]] = []
    try:
        _start(procs, sorted(os.sched_getaffinity(0)), units)
        stat_before, wall = _read_stat(), time.perf_counter()
        answers = _timed(procs)
        wall, stat_after = time.perf_counter() - wall, _read_stat()
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise SpeedError(f"probe failed: {exc}") from None
    finally:
        for proc in procs:  # every path, an interrupt too: no child outlives the probe
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    per_cpu = [float(a["best_ops_per_s"]) for a in answers]
    steal = steal_pct(stat_before, stat_after) if stat_before and stat_after else None
    return {
        "version": PROBE_VERSION,
        "at": metadata.now_iso(),
        "ops_per_s": round(statistics.median(per_cpu), 1),
        "per_cpu_ops_per_s": [round(v, 1) for v in per_cpu],
        "cpu_wall_ratio": round(statistics.median(a["cpu_s"] / a["wall_s"] for a in answers), 3),
        "steal_pct": steal,
        "mhz": metadata.cpu_mhz(),
        "wall_s": round(wall, 3),
    }


def ratio_text(ratio: float) -> str:
    """A speed ratio as the lines print it: 0.31×."""
    return f"{ratio:.2f}×"


def start_line(earlier: dict, now: dict, tolerance: float = SPEED_TOLERANCE) -> str:
    """The start line: this session's history entry (`now`) against this machine's last one
    (`earlier`), both with start_ops_per_s, `earlier` with session_id and at."""
    ratio = now["start_ops_per_s"] / earlier["start_ops_per_s"]
    session, day = str(earlier["session_id"])[:6], str(earlier["at"])[:10]
    if abs(ratio - 1) > tolerance:
        return (
            f"this host runs at {ratio_text(ratio)} the speed it had in session {session} "
            f"({day}): figures are not comparable with that session's"
        )
    return f"host speed: {ratio_text(ratio)} session {session}'s (within ±{tolerance * 100:g} %)"


def drift_line(start: dict, latest: dict) -> str:
    """The line said once when a later probe of the session is beyond tolerance of its start."""
    ratio = latest["ops_per_s"] / start["ops_per_s"]
    return (
        f"the host changed under this run: it now runs at {ratio_text(ratio)} the speed it had "
        f"at the session's start ({start['at']}): figures before and after are not comparable"
    )


def identity() -> dict[str, object]:
    """What names this machine in the speed file and the history."""
    return {
        "session_id": metadata.SESSION_ID,
        "machine_id": metadata.machine_id(),
        "cpu_model": metadata.cpu_model(),
        "boot_id": metadata.boot_id(),
        "kernel": platform.release(),
    }


def read_history(path: Path) -> list[dict]:
    """The machine's history, oldest first (unreadable lines skipped: a cut-off append)."""
    entries = []
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    entries.append(entry)
    return entries


def last_session(entries: list[dict], now: dict) -> dict | None:
    """The latest entry of another session on this machine (same machine id, CPU model and
    probe version): the one the start line compares with; None when there is none."""
    keys = ("machine_id", "cpu_model", "version")
    same = [
        e
        for e in entries
        if all(e.get(k) == now[k] for k in keys)
        and e.get("session_id") != now["session_id"]
        and e.get("start_ops_per_s")
    ]
    return same[-1] if same else None


def history_entry(ident: dict, probes: list[dict]) -> dict:
    """The history line of a session: who, when and its first and last probe's speed."""
    return {
        "session_id": ident["session_id"],
        "machine_id": ident["machine_id"],
        "cpu_model": ident["cpu_model"],
        "at": probes[0]["at"],
        "start_ops_per_s": probes[0]["ops_per_s"],
        "end_ops_per_s": probes[-1]["ops_per_s"],
        "version": probes[0]["version"],
    }


def beyond(start: dict, latest: dict, tolerance: float = SPEED_TOLERANCE) -> bool:
    """Whether `latest` differs from `start` by more than tolerance (a share of start)."""
    return abs(latest["ops_per_s"] / start["ops_per_s"] - 1) > tolerance


Say = Callable[[str], None]


@dataclass
class SpeedLog:
    """The probes of one harness invocation (one session), in order: the first is its start."""

    probe: Probe = probe  # the tests' fakes pass their own: no second of real work per test
    history: Path = SPEED_HISTORY
    tolerance: float = SPEED_TOLERANCE
    ident: dict[str, object] = field(default_factory=identity)
    probes: list[dict] = field(default_factory=list)
    taken_at: float = 0.0  # monotonic time of the last probe
    drift_said: bool = False

    def checkpoint(self, say: Say, spaced: bool = False) -> dict | None:
        """Probe now (`spaced`: a between-rounds probe, skipped within BETWEEN_MIN_S of the
        last): the first says the start line, a later one beyond tolerance the drift line."""
        if spaced and self.probes and time.monotonic() - self.taken_at < BETWEEN_MIN_S:
            return None
        try:
            taken = self.probe()
        except SpeedError as exc:
            say(f"host speed: not measured ({exc})")
            return None
        self.probes.append(taken)
        self.taken_at = time.monotonic()
        if len(self.probes) == 1:
            now = history_entry(self.ident, self.probes)
            earlier = last_session(read_history(self.history), now)
            if earlier is not None:
                say(start_line(earlier, now, self.tolerance))
        elif not self.drift_said and beyond(self.probes[0], taken, self.tolerance):
            self.drift_said = True
            say(drift_line(self.probes[0], taken))
        return taken

    def changed(self) -> bool:
        """Whether any probe of the session is beyond tolerance of its start."""
        return any(beyond(self.probes[0], p, self.tolerance) for p in self.probes[1:])

    def speed(self) -> dict | None:
        """A record's metadata.speed: the start probe, the latest, their ratio and whether it
        is beyond tolerance; None before the first probe."""
        if not self.probes:
            return None
        start, latest = self.probes[0], self.probes[-1]
        change = round(latest["ops_per_s"] / start["ops_per_s"], 4)
        return {
            "start": start,
            "latest": latest,
            "change": change,
            "changed": abs(change - 1) > self.tolerance,
        }

    def finish(self, results: Path | None) -> Path | None:
        """RESULTS/raw/speed-<session>.json (written once, never over another; none without
        `results`: make overhead records nothing there) and the history line; nothing when no
        probe was taken (the command measured nothing)."""
        if not self.probes:
            return None
        path = None
        if results is not None:
            data = {**self.ident, "probes": self.probes, "changed": self.changed()}
            path = results / "raw" / f"speed-{self.ident['session_id']}.json"
            write_new(path, (json.dumps(data, sort_keys=True, indent=2) + "\n").encode())
        self.history.parent.mkdir(parents=True, exist_ok=True)
        with self.history.open("a") as fh:  # one line per write: appends never interleave
            fh.write(json.dumps(history_entry(self.ident, self.probes), sort_keys=True) + "\n")
        return path


# The command's SpeedLog while it runs (recording()): the harness's checkpoints and records
# read it; empty outside a command (the tests' in-process runs probe nothing unless they
# record with a fake probe).
_RECORDING: list[SpeedLog] = []


@contextlib.contextmanager
def recording(results: Path | None, log: SpeedLog | None = None) -> Iterator[SpeedLog]:
    """A measuring command's session of probes (taken by checkpoint()), finished on every
    path: its speed file under `results` (None: none) and the history line."""
    log = log if log is not None else SpeedLog()
    _RECORDING.append(log)
    try:
        yield log
    finally:
        _RECORDING.remove(log)
        try:
            log.finish(results)
        except OSError as exc:  # the records are written: the command's status stands
            print(f"bench: host speed not saved: {exc}", file=sys.stderr, flush=True)


def checkpoint(say: Say, spaced: bool = False) -> dict | None:
    """Probe now when a command is recording (None otherwise): see SpeedLog.checkpoint."""
    return _RECORDING[-1].checkpoint(say, spaced) if _RECORDING else None


def record_field() -> dict | None:
    """metadata.speed of a record written now (None when nothing is recording)."""
    return _RECORDING[-1].speed() if _RECORDING else None
