"""ssh to another machine without a prompt: the argv, a probe, a command's output.

Input: HOST ([user@]host, bench/core/variables.parse_host) and commands for the other machine
(argv lists, quoted here for its shell). Output: ssh's argv and its results. Every call runs
ssh with BatchMode=yes (a password, passphrase or unknown host key refuses instead of
prompting) and a connect timeout; PYWEBBENCH_SSH_CONFIG (tests) names an ssh_config file
(`ssh -F`: the key and known-hosts file a test made). Standard library only: the pre-check
(bench/precheck.py) probes HOST before set-up installs anything.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence

CONFIG_ENV = "PYWEBBENCH_SSH_CONFIG"
CONNECT_TIMEOUT_S = 10
PROBE_TIMEOUT_S = 30
# What make bench needs on the other machine before its own set-up can install the rest.
NEEDED = ("git", "make", "python3", "tar")


def ssh_argv(host: str, command: Sequence[str], tty: bool = False) -> list[str]:
    """`ssh -o BatchMode=yes … HOST 'quoted command'`; tty: a terminal there, so that a
    hang-up (this side gone) or Ctrl-C reaches the command as a signal."""
    argv = [shutil.which("ssh") or "ssh"]
    config = os.environ.get(CONFIG_ENV)
    if config:
        argv += ["-F", config]
    argv += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}"]
    argv += ["-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4"]
    argv += ["-tt"] if tty else ["-T"]
    return [*argv, destination(host), shlex.join(command)]


def destination(host: str) -> str:
    """HOST as ssh's destination: an IPv6 address without the brackets a user writes around
    it (ssh would look up "[::1]" as a name): user@[::1] -> user@::1."""
    user, at, name = host.rpartition("@")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return f"{user}{at}{name}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def probe(host: str) -> str | None:
    """None when ssh reaches HOST without a prompt and HOST has what make bench needs first
    (NEEDED); else the problem in one line."""
    if shutil.which("ssh") is None:
        return "ssh is not installed here (apt-get install openssh-client)"
    script = "for c in " + " ".join(NEEDED) + '; do command -v "$c" >/dev/null || echo "$c"; done'
    try:
        done = subprocess.run(
            ssh_argv(host, ["sh", "-c", script]),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"ssh {host} did not answer within {PROBE_TIMEOUT_S} s"
    if done.returncode != 0:
        return (
            f"ssh cannot reach {host} without a prompt (BatchMode): {_last_line(done.stderr)}; "
            "set up key authentication and accept its host key first (ssh-copy-id, ssh once)"
        )
    missing = done.stdout.split()
    if missing:
        return f"{host} lacks {', '.join(missing)}: install it there first (apt-get install …)"
    return None


def output(host: str, command: Sequence[str], timeout: float = 120) -> str:
    """A command's stdout on HOST (stripped); CalledProcessError when it fails."""
    done = subprocess.run(
        ssh_argv(host, command),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return done.stdout.strip()
