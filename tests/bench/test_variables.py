"""Make variables are declared once (bench/core/variables.py): the Makefile passes what the
declaration lists, the parser takes it, `make help` states it, with scenarios, studies and
servers from their own declarations."""

import subprocess

import pytest

from bench import cli
from bench.core import scenario, variables
from bench.core.registry import ROOT, server_ids

# make target -> the `python -m bench` command its recipe runs
TARGETS = {
    "bench": "run",
    "capacity": "capacity",
    "soak": "soak",
    "serve": "serve",
    "study": "study",
    "report": "report",
    "compare": "compare",
    "overhead": "overhead",
    "noise": "noise",
}


def _harness_call(line: str) -> bool:
    """The recipe line that runs the harness (not the pre-check, not the variables query)."""
    return "-m bench" in line and "variables" not in line and "bench.precheck" not in line


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_makefile_passes_every_declared_variable(target: str) -> None:
    """Each variable of the command, set on make's command line, reaches it as its option;
    an unset one is not passed."""
    declared = variables.for_command(TARGETS[target])
    assigned = [f"{v.name}=x{i}" for i, v in enumerate(declared)]
    recipe = subprocess.run(
        ["make", "-n", target, *assigned], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    line = next(x for x in recipe.splitlines() if _harness_call(x))
    for i, variable in enumerate(declared):
        assert f"{variable.option}='x{i}'" in line, (variable.name, line)
    bare = subprocess.run(
        ["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "='" not in next(x for x in bare.splitlines() if _harness_call(x))


def test_every_run_variable_is_an_option_of_the_run_parser() -> None:
    """python -m bench run takes each run variable's option, unset to its declared value."""
    args = cli.build_parser().parse_args(["run"])
    for variable in variables.for_command("run"):
        assert getattr(args, variable.dest) == variable.unset, variable.name


def test_every_command_has_a_handler() -> None:
    """The dispatch table covers each subcommand of the parser, and nothing else."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(cli.COMMANDS)


def test_make_help_lists_variables_scenarios_studies_and_servers() -> None:
    """`make help` names every declared variable, scenario (sleep and saas too), study and
    server."""
    text = subprocess.run(
        ["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    names = {line.split()[0] for line in text.splitlines() if line.startswith("  ")}
    assert {v.name for v in variables.VARIABLES} <= names
    assert set(scenario.SCENARIOS) <= names
    assert {"sleep", "saas"} <= names
    studies = next(x for x in text.splitlines() if x.startswith("Studies"))
    assert all(f" {name} " in studies for name in cli.study_names())
    servers = next(x for x in text.splitlines() if x.startswith("Servers"))
    assert servers.split(":", 1)[1].split() == server_ids()


def test_a_local_variable_is_refused_with_target(capsys) -> None:
    """RECYCLE sets flags of a server started here: with TARGET= it is bad input, one line."""
    status = cli.main(["run", "--recycle=100", "--target=http://10.0.0.5:8000"])
    assert status == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "bench: RECYCLE sets flags of a server started here: not with TARGET="
    ]
