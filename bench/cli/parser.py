"""The `python -m bench` argument parser, built from the declared make variables.

Input: argv, and with --from-env the environment make exports its command line in. Output:
an argparse Namespace whose options hold raw text, checked by the one declaration
(bench/core/variables.py) before any command runs.
"""

from __future__ import annotations

import argparse
import functools

from bench.core import variables
from bench.core.validate import (
    UsageError,
)
from bench.core.variables import VARIABLES, command_defaults, for_command


class UsageParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a harness run: make bench's variables (bench/core/variables.py)."""
    for variable in VARIABLES:
        if "run" in variable.commands:
            parser.add_argument(variable.option, default=variable.unset)


def add_own_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The variables only `command` takes (make capacity's objective, make soak's interval)."""
    for variable in for_command(command):
        if "run" not in variable.commands:
            parser.add_argument(variable.option, default=variable.unset)


def dests(values: dict[str, str]) -> dict[str, str]:
    """Variable name -> value, as the parser's attribute names (`LOAD_THREADS` -> load_threads)."""
    return {variables.BY_NAME[name].dest: value for name, value in values.items()}


def build_parser() -> argparse.ArgumentParser:
    """The `python -m bench` argument parser (make passes the variables as options)."""
    parser = UsageParser(prog="python -m bench", description="Python web server benchmark")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="verify and measure servers")
    add_run_arguments(run)
    capacity = sub.add_parser("capacity", help="each server's capacity within a latency objective")
    add_run_arguments(capacity)
    capacity.set_defaults(**dests(command_defaults("capacity")))
    add_own_arguments(capacity, "capacity")
    serve = sub.add_parser("serve", help="a verified stack and server left up until Ctrl-C")
    add_run_arguments(serve)
    soak = sub.add_parser("soak", help="memory of every server process over a long fixed-rate run")
    add_run_arguments(soak)
    soak.set_defaults(**dests(command_defaults("soak")))
    add_own_arguments(soak, "soak")
    overhead = sub.add_parser("overhead", help="the harness's observation cost against bare wrk")
    for variable in for_command("overhead"):
        overhead.add_argument(variable.option, default=variable.unset)
    overhead.set_defaults(**dests(command_defaults("overhead")))
    noise = sub.add_parser("noise", help="this machine's noise: one server in rounds of starts")
    for variable in for_command("noise"):
        noise.add_argument(variable.option, default=variable.unset)
    noise.set_defaults(**dests(command_defaults("noise")))
    tune = sub.add_parser("tune", help="each server's knobs raced at one point: the best to paste")
    for variable in for_command("tune"):
        tune.add_argument(variable.option, default=variable.unset)
    tune.set_defaults(**dests(command_defaults("tune")))
    remote = sub.add_parser("remote", help="make bench on another machine over ssh (HOST)")
    add_run_arguments(remote)
    add_own_arguments(remote, "remote")
    for command, about in (
        ("report", "rebuild summary.md from the records"),
        ("compare", "two result sets side by side (BASE, HEAD)"),
        ("images", "build the base image and one image per server"),
        ("export", "one row per point as CSV or JSON on stdout"),
        ("study", "re-run a source document's experiment"),
        ("reference", "the reference campaign of reference.toml (DRY_RUN=1: its plan)"),
    ):
        own = sub.add_parser(command, help=about)
        for variable in for_command(command):
            default = variable.unset if command != "study" or variable.name == "RESULTS" else None
            own.add_argument(variable.option, default=default)
    sub.add_parser("help", help="make help: variables, scenarios, studies and servers")
    for command, own in sub.choices.items():
        if command in variables_of_commands():
            # The Makefile's way in: no value is ever spliced into a shell command.
            own.add_argument(
                "--from-env",
                action="store_true",
                help="take the make variables from the environment, where make exports them",
            )
    return parser


def variables_of_commands() -> tuple[str, ...]:
    """The commands that take make variables."""
    return variables.COMMANDS


def from_env(args: argparse.Namespace, env: dict[str, str]) -> None:
    """Each variable of the command that the environment holds (make exports its command
    line there), where the option was not given: checked by the declaration first."""
    parser_defaults = defaults_of(args.command)
    given = {v.name: env[v.name] for v in for_command(args.command) if v.name in env}
    variables.check(args.command, given)
    args.given_names = frozenset(given)  # what the user set, even to a default's value
    for name, raw in given.items():
        dest = variables.BY_NAME[name].dest
        if getattr(args, dest, None) == parser_defaults.get(dest):
            setattr(args, dest, raw)


@functools.cache
def defaults_of(command: str) -> dict[str, object]:
    """The parser's value of each option of `command` when it is not given."""
    args = build_parser().parse_args([command])
    return vars(args)


def given_options(args: argparse.Namespace) -> dict[str, str]:
    """The options the user gave (those that differ from the command's defaults), by variable
    name, as raw text. make compose-bench's own --runtime=compose is the command's, not a
    user's choice."""
    defaults_ = defaults_of(args.command)
    return {
        v.name: str(getattr(args, v.dest))
        for v in for_command(args.command)
        if getattr(args, v.dest, None) is not None
        and getattr(args, v.dest) != defaults_.get(v.dest)
        and not (v.name == "RUNTIME" and getattr(args, v.dest) == "compose")
    }


def declared_check(args: argparse.Namespace) -> dict[str, object]:
    """The options the user gave, parsed and held to the rules between them by their one
    declaration (bench/core/variables.py): the rules the pre-check applied before set-up,
    again."""
    return variables.check(args.command, given_options(args))
