"""make remote: make bench on another machine over ssh, its records brought back here.

Input: HOST (probed first: ssh without a prompt, git, make, python3 and tar there), make
bench's variables as the user gave them, RESULTS (here). Output: the other machine's records
and raw files in RESULTS (each written once, atomically, never over an existing file), the
summary rebuilt, and the exit status: 0 when make bench there succeeded, 1 when it failed or
a file could not be brought back, 130 when interrupted.

The steps: a run directory there (`mktemp -d`); this checkout's HEAD shipped as a git bundle
(committed files only: uncommitted changes stay here, said so) and cloned there; `make bench
RESULTS=<run dir>/results …` run there on a terminal of its own, so that Ctrl-C and a hang-up
reach it as signals and its harness stops its stack; its records/ and raw/ copied back as a
tar stream into a temporary directory here, then each file linked into RESULTS. On every exit
path, the run directory there (once make bench's session there has ended: a hang-up still
lets its harness write its interrupted record) and the temporary directory here are removed.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from bench.core.record import write_new
from bench.core.validate import UsageError
from bench.host import ssh

Say = Callable[[str], None]
# What comes back: the records and the raw tool output they list (RESULTS's layout).
BROUGHT = ("raw", "records")
INTERRUPTED = 130
# How long the run directory's removal waits for make bench's session there to end: after a
# hang-up its harness still stops its stack and writes its interrupted record into the run
# directory (an rm -rf before that leaves the directory re-made behind it).
SESSION_WAIT_S = 120


def _say(line: str) -> None:
    print(f"remote: {line}", file=sys.stderr, flush=True)


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def ship(host: str, run_dir: str, checkout: Path, local_tmp: Path, say: Say) -> str:
    """HEAD as a git bundle, cloned into <run_dir>/src there; returns the commit shipped."""
    commit = _git("rev-parse", "HEAD", cwd=checkout)
    if _git("status", "--porcelain", "--untracked-files=no", cwd=checkout):
        say(f"uncommitted changes stay here: {commit[:12]} (HEAD) is what runs on {host}")
    bundle = local_tmp / "checkout.bundle"
    _git("bundle", "create", "-q", str(bundle), "HEAD", cwd=checkout)
    with bundle.open("rb") as source:
        subprocess.run(
            ssh.ssh_argv(host, ["sh", "-c", f"cat > {shlex.quote(run_dir)}/checkout.bundle"]),
            stdin=source,
            check=True,
        )
    clone = ["git", "-c", "advice.detachedHead=false", "clone", "-q"]
    ssh.output(host, [*clone, f"{run_dir}/checkout.bundle", f"{run_dir}/src"])
    return commit


def in_session(run_dir: str, command: list[str]) -> list[str]:
    """COMMAND run with its session id written to <run_dir>/session first (what
    remove_after_session waits on)."""
    script = 'ps -o sid= -p $$ > "$0/.session" 2>/dev/null && mv "$0/.session" "$0/session"; '
    script += 'exec "$@"'
    return ["sh", "-c", script, run_dir, *command]


def remove_after_session(run_dir: str, wait_s: int = SESSION_WAIT_S) -> list[str]:
    """`rm -rf RUN_DIR` once no live process of the session in <run_dir>/session is left
    (at most wait_s seconds; at once when there is no such file or no ps). A zombie of the
    session writes nothing and is not waited for: one its parent has not reaped yet kept the
    removal waiting the whole wait_s."""
    script = (
        'sid=$(tr -d " " < "$0/session" 2>/dev/null); i=0; '
        'while [ -n "$sid" ] && [ "$i" -lt "$1" ] && command -v ps >/dev/null '
        "&& ps -e -o stat=,sid= | awk '$1 !~ /^Z/ {print $2}' | grep -qx \"$sid\"; "
        "do sleep 1; i=$((i + 1)); done; "
        'rm -rf -- "$0"'
    )
    return ["sh", "-c", script, run_dir, str(wait_s)]


def bench_there(host: str, run_dir: str, given: Mapping[str, str]) -> int:
    """`make bench` in the clone there, its output here as it comes; its exit status."""
    assignments = [f"{name}={value}" for name, value in sorted(given.items())]
    command = ["make", "-C", f"{run_dir}/src", "bench", f"RESULTS={run_dir}/results"]
    argv = ssh.ssh_argv(host, in_session(run_dir, [*command, *assignments]), tty=True)
    return subprocess.run(argv).returncode


def fetch(host: str, run_dir: str, local_tmp: Path) -> Path:
    """RESULTS's records/ and raw/ there, unpacked under local_tmp/back (regular files only)."""
    back = local_tmp / "back"
    back.mkdir()
    script = f"cd {shlex.quote(run_dir)}/results 2>/dev/null || exit 0; "
    script += "for d in " + " ".join(BROUGHT) + '; do [ -d "$d" ] && set -- "$@" "$d"; done; '
    script += '[ "$#" -eq 0 ] || tar -cf - "$@"'
    tar_path = local_tmp / "back.tar"
    with tar_path.open("wb") as sink:
        subprocess.run(ssh.ssh_argv(host, ["sh", "-c", script]), stdout=sink, check=True)
    if tar_path.stat().st_size:
        with tarfile.open(tar_path) as archive:
            members = [m for m in archive.getmembers() if m.isfile() or m.isdir()]
            archive.extractall(back, members=members, filter="data")
    return back


def bring_back(back: Path, results: Path, say: Say) -> tuple[int, list[str]]:
    """Each file of `back` into RESULTS under the same name, raw files before the records
    that list them; never over an existing file (the same bytes there: already here). The
    number brought, and a line per file that could not be."""
    brought, problems = 0, []
    for folder in BROUGHT:  # raw/ first: a record is only there once its raw files are
        for path in sorted((back / folder).rglob("*")) if (back / folder).is_dir() else []:
            if not path.is_file():
                continue
            target = results / path.relative_to(back)
            data = path.read_bytes()
            try:
                write_new(target, data)
                brought += 1
            except FileExistsError:
                if target.read_bytes() != data:
                    problems.append(f"{target} exists with other content: kept, not replaced")
    say(f"brought back {brought} file(s) into {results}")
    return brought, problems


def _cleanup(host: str, run_dir: str | None, local_tmp: Path, say: Say) -> None:
    if run_dir is not None:
        try:
            ssh.output(host, remove_after_session(run_dir), timeout=SESSION_WAIT_S + 60)
        except (subprocess.SubprocessError, OSError) as exc:
            say(f"could not remove {run_dir} on {host}: {exc}")
    shutil.rmtree(local_tmp, ignore_errors=True)


def _status(code: int, problems: list[str], host: str, say: Say) -> int:
    for problem in problems:
        say(problem)
    if code == INTERRUPTED:
        say(f"make bench on {host} was interrupted; its records so far are brought back")
        return INTERRUPTED
    if code != 0:
        say(f"make bench on {host} ended with status {code}; its records are brought back")
    return 0 if code == 0 and not problems else 1


def run(
    host: str,
    given: Mapping[str, str],
    results: Path,
    checkout: Path,
    rebuild: Callable[[Path], object],
    say: Say = _say,
) -> int:
    """The whole of make remote; UsageError (exit 2) before anything starts when ssh cannot
    reach HOST without a prompt."""
    problem = ssh.probe(host)
    if problem is not None:
        raise UsageError(f"HOST={host}: {problem}")
    local_tmp = Path(tempfile.mkdtemp(prefix="pywebbench-remote-"))
    run_dir = None
    try:
        run_dir = ssh.output(host, ["mktemp", "-d", "/tmp/pywebbench-remote.XXXXXXXX"])
        commit = ship(host, run_dir, checkout, local_tmp, say)
        say(f"{host}:{run_dir}: make bench at {commit[:12]}")
        code = bench_there(host, run_dir, given)
        _, problems = bring_back(fetch(host, run_dir, local_tmp), results, say)
        rebuild(results)
        return _status(code, problems, host, say)
    except subprocess.CalledProcessError as exc:
        say(f"{shlex.join(map(str, exc.cmd))[:200]} failed with status {exc.returncode}")
        return 1
    finally:
        _cleanup(host, run_dir, local_tmp, say)
