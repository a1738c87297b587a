"""Command line: make variables -> validated Options -> a command, and the exit codes.

Input: argv (`python -m bench run --from-env`, `python -m bench report --results=...`).
Output: the exit status: 0 all runs ok, 1 some run failed, 2 bad input (one line on stderr
naming the valid choices; nothing started, nothing written). One module per job: `parser`
(argv and the environment -> a Namespace, checked by the declaration in
bench/core/variables.py), `options` (-> plan.Options), `commands` (one `do_<command>` each),
`cleanup` (what a killed harness left behind).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from bench.cli.cleanup import remove_leftovers
from bench.cli.commands import COMMANDS, DECLARATIVE, MEASURING
from bench.cli.options import (
    check_serve,
    docker_ready,
    noise_options,
    options_from,
    overhead_options,
    study_arms_from,
    study_names,
    study_names_from,
    validate_cpu_quota,
    with_app,
    with_objective,
    with_soak,
)
from bench.cli.parser import build_parser, declared_check, from_env
from bench.core import variables
from bench.core.registry import DeclarationError, server_ids
from bench.core.validate import UsageError, validate_choices, validate_int_list
from bench.host import speed
from bench.host.metadata import machine_label
from bench.studies.schema import StudyError

__all__ = [
    "COMMANDS",
    "UsageError",
    "build_parser",
    "check_serve",
    "declared_check",
    "docker_ready",
    "from_env",
    "main",
    "noise_options",
    "options_from",
    "overhead_options",
    "server_ids",
    "study_arms_from",
    "study_names",
    "study_names_from",
    "validate_choices",
    "validate_cpu_quota",
    "validate_int_list",
    "with_app",
    "with_objective",
    "with_soak",
]


def main(
    argv: list[str] | None = None, speeds: Callable[[], speed.SpeedLog] = speed.SpeedLog
) -> int:
    """Entry point of `python -m bench` (`speeds`: a measuring command's session of host-speed
    probes; the tests pass one with a fake probe and history)."""
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "from_env", False):
            from_env(args, dict(os.environ))
        if args.command in variables.COMMANDS:
            declared_check(args)
        if args.command not in DECLARATIVE:
            remove_leftovers()
            try:
                machine_label()  # MACHINE=, checked before anything starts
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        if args.command in MEASURING:
            # one session of host-speed probes; its speed file and history line at the end
            # (RESULTS is the command's to check: no probe is taken before it is)
            results = getattr(args, "results", None)  # make overhead records nothing
            with speed.recording(Path(results).absolute() if results else None, speeds()):
                return COMMANDS[args.command](args)
        return COMMANDS[args.command](args)
    except (UsageError, DeclarationError, StudyError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
