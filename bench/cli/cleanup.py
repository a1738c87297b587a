"""Clean-up at a command's start: what a killed harness left behind, removed by owner.

Input: nothing (the network namespaces and the containers and networks a harness labels with
its pid, and PostgreSQL's socket directories it names by its pid). Output: lines on stderr
naming what was removed; nothing else. Runs before every command that starts something (not
before `help`).
"""

from __future__ import annotations

import shutil
import sys


def remove_leftovers() -> None:
    """Namespaces, containers, networks and socket directories of a harness whose pid is
    gone."""
    from bench.host import docker, netns
    from bench.host.state import socket_leftovers

    for name in netns.remove_leftovers():
        print(
            f"bench: removed network namespace {name} left by a harness that died", file=sys.stderr
        )
    for name in docker.remove_leftovers():
        print(f"bench: removed {name} left by a harness that died", file=sys.stderr)
    for path in socket_leftovers():
        shutil.rmtree(path, ignore_errors=True)
        print(f"bench: removed {path} left by a harness that died", file=sys.stderr)
