"""Make variables are declared once (bench/core/variables.py): the Makefile passes what the
declaration lists, the parser takes it, `make help` states it, with scenarios, studies and
servers from their own declarations."""

import subprocess

import pytest

from bench import cli
from bench.cli.options import options_from
from bench.core import defaults, scenario, variables
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
    "tune": "tune",
    "reference": "reference",
}


def _harness_call(line: str) -> bool:
    """The recipe line that runs the harness (not the pre-check, not the variables query)."""
    return "-m bench" in line and "variables" not in line and "bench.precheck" not in line


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_makefile_passes_variables_through_the_environment_only(target: str) -> None:
    """Each variable of the command, set on make's command line, is read by the harness from
    the environment (--from-env): no recipe line holds its value, so no shell parses it."""
    declared = variables.for_command(TARGETS[target])
    assigned = [f"{v.name}=value-{i}-of-{v.name}" for i, v in enumerate(declared)]
    recipe = subprocess.run(
        ["make", "-n", target, *assigned], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    line = next(x for x in recipe.splitlines() if _harness_call(x))
    assert line.endswith(f"-m bench {TARGETS[target]} --from-env"), line
    for value in assigned:
        assert value.split("=", 1)[1] not in recipe, (value, recipe)


def test_from_env_takes_each_declared_variable_of_the_command(monkeypatch) -> None:
    """`python -m bench run --from-env` reads every run variable make exports."""
    args = cli.build_parser().parse_args(["run", "--from-env"])
    monkeypatch.setenv("DURATION", "7")
    monkeypatch.setenv("SERVER", "uvicorn")
    cli.from_env(args, {"DURATION": "7", "SERVER": "uvicorn"})
    assert (args.duration, args.server) == ("7", "uvicorn")


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
        "bench: RECYCLE and TARGET= cannot go together: it sets flags of a server started "
        "here; valid: one of them"
    ]


def test_every_declared_default_parses() -> None:
    """Each variable's value when unset is one its own parser takes (a default that its
    declaration would refuse cannot drift in)."""
    for variable in variables.VARIABLES:
        if variable.unset is not None:
            variable.parse(variable.unset)
    for command in variables.COMMANDS:
        for name, raw in variables.command_defaults(command).items():
            variables.BY_NAME[name].parse(raw)


@pytest.mark.parametrize(
    ("given", "blamed"),
    [
        ({"CPUS": "1"}, "CPUS needs RUNTIME=docker"),
        ({"UPSTREAM_KEEPALIVE": "on"}, "UPSTREAM_KEEPALIVE needs PROXY="),
        ({"LIFECYCLE": "reload", "LOAD": "oha"}, "LIFECYCLE needs RATE="),
        ({"RATE": "100"}, "RATE needs LOAD=oha"),
        ({"BUDGET": "5"}, "BUDGET needs TRIALS=auto"),
    ],
)
def test_a_rule_blames_the_variable_the_user_set(given: dict[str, str], blamed: str) -> None:
    """The refusal starts with what the user set, never with a default they did not touch
    (BUDGET=5 alone blames BUDGET, not a TRIALS value nobody gave)."""
    with pytest.raises(cli.UsageError) as caught:
        variables.check("run", given)
    assert str(caught.value).startswith(blamed), caught.value


def test_a_rule_is_silent_when_its_other_variable_fits() -> None:
    """The same variables with what they need: accepted, with their parsed values."""
    values = variables.check(
        "run", {"RUNTIME": "docker", "CPUS": "1", "TRIALS": "auto", "BUDGET": "5", "MARGIN": "10"}
    )
    assert (values["CPUS"], values["TRIALS"], values["BUDGET"], values["MARGIN"]) == (
        1.0,
        None,
        5,
        0.1,
    )


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("SERVERS", "SERVERS is not a variable; did you mean SERVER?"),
        ("server", "server is not a variable; did you mean SERVER?"),
        ("DURATON", "DURATON is not a variable; did you mean DURATION?"),
        ("XYZZY", "XYZZY is not a variable; valid: SERVER, SCENARIO"),
    ],
)
def test_an_unknown_variable_is_named_with_the_closest_declared_one(name: str, said: str) -> None:
    """difflib's closest declared name, or the list when none is close."""
    assert (variables.unknown_variable(name) or "").startswith(said)
    assert variables.unknown_variable("SERVER") is None


def test_margin_and_wait_reach_the_options() -> None:
    """MARGIN (percent) is Options.margin as a fraction, WAIT=0 is Options.wait False; unset,
    the declared defaults."""
    from bench.core import defaults

    unset = cli.options_from(cli.build_parser().parse_args(["run"]))
    assert (unset.margin, unset.wait) == (defaults.AUTO_MARGIN_PCT / 100, True)
    args = cli.build_parser().parse_args(["run", "--trials=auto", "--margin=10", "--wait=0"])
    opts = cli.options_from(args)
    assert (opts.margin, opts.wait) == (0.1, False)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(45, "45 s"), (720, "12 min"), (3.5 * 3600, "3.5 h"), (1_814_446_200, "21,000.5 days")],
)
def test_a_length_of_time_reads_in_its_unit(seconds: float, text: str) -> None:
    """Plans and progress in s, min, h or days, never "30240770m00s"."""
    assert variables.duration_text(seconds) == text


def test_a_plan_longer_than_a_day_needs_confirm() -> None:
    """SERVER=all DURATION=86400 TRIALS=100 is refused in days; CONFIRM=1 lets it through."""
    big = {"SERVER": "all", "DURATION": "86400", "TRIALS": "100"}
    with pytest.raises(cli.UsageError, match=r"days of load .* CONFIRM=1"):
        variables.check("run", big)
    variables.check("run", {**big, "CONFIRM": "1"})


def test_the_declared_choices_are_the_harness_choices() -> None:
    """ARCH, LIFECYCLE, FORMAT, PROXY and NETWORK's declared choices are what the code that
    acts on them takes."""
    from bench.core import plan
    from bench.host import arch
    from bench.observe import lifecycle
    from bench.report import export

    assert arch.ALIASES == variables.ARCHES
    assert lifecycle.EVENTS == variables.LIFECYCLES
    assert tuple(export.FORMATS) == variables.FORMATS
    assert plan.PROXIES == variables.PROXIES and plan.NETWORKS == variables.NETWORKS
    assert set(variables.USER_RUNTIMES) < set(plan.RUNTIMES)


@pytest.mark.parametrize(
    ("env", "duration"),
    [
        ({"TRIALS": "auto"}, defaults.RACE_DURATION_S),  # a race: shorter trials, more rounds
        ({"TRIALS": "auto", "DURATION": str(defaults.DURATION_S)}, defaults.DURATION_S),
        ({"TRIALS": "auto", "DURATION": "7"}, 7),
        ({"TRIALS": "3"}, defaults.DURATION_S),
        ({}, defaults.DURATION_S),
    ],
)
def test_trials_auto_races_short_trials_unless_duration_is_set(
    env: dict[str, str], duration: int
) -> None:
    """TRIALS=auto without DURATION runs trials of RACE_DURATION_S; a DURATION the user set,
    even to the default's value, is kept; fixed trials keep the default."""
    args = cli.build_parser().parse_args(["run", "--from-env"])
    cli.from_env(args, {"SERVER": "granian,uvicorn", **env})
    assert options_from(args).duration_s == duration


def test_every_declared_knob_has_a_bound_and_every_tune_list_keeps_it() -> None:
    """Issue 58 item 2: each knob a server.toml declares is bounded (by the variable that sets
    it, or KNOB_SECONDS), and each declared search space passes KNOBS='s own bounds."""
    from bench.core.registry import load_all

    bounds = variables.knob_limits()
    assert bounds["workers"] == variables.BY_NAME["WORKERS"].limits
    for spec in load_all().values():
        for name, knob in spec.knobs.items():
            assert name in bounds, f"{spec.id}: knob {name} has no bound"
            if knob.tune:
                variables.parse_knobs(f"{name}={','.join(map(str, knob.tune))}")
    from bench.core.studyfile import check_study, study_path

    for study in variables.study_names():  # a study's tuned arms hold to the same bounds
        for arm in check_study(study_path(study))["arm"]:
            if isinstance(arm.get("tune"), dict):
                items = arm["tune"].items()
                variables.parse_knobs(" ".join(f"{k}={','.join(map(str, v))}" for k, v in items))


def test_make_targets_are_the_makefiles_targets_with_their_check() -> None:
    """variables.MAKE_TARGETS (what a command-line variable is checked against) names every
    target of the Makefile but precheck, each with the command its CHECK line names."""
    text = (ROOT / "Makefile").read_text()
    line = next(x for x in text.splitlines() if x.startswith("override TARGETS := "))
    assert set(line.split(":=", 1)[1].split()) - {"precheck"} == set(variables.MAKE_TARGETS)
    for target, command in variables.MAKE_TARGETS.items():
        check = f"{target}: override CHECK := "
        said = [x.split(":=")[1].strip() for x in text.splitlines() if x.startswith(check)]
        if target != "compose-up":  # its CHECK is that of its prerequisite, images
            assert said == ([command] if command else []), target


def test_serve_takes_a_protocol_with_no_load_tool_rule() -> None:
    """Issue 58 item 7: make serve starts no load, so PROTOCOL=h2c needs no LOAD=oha there
    (that advice looped: serve does not take LOAD); make bench still asks for it."""
    variables.check("serve", {"SERVER": "granian", "PROTOCOL": "h2c"})
    with pytest.raises(variables.UsageError, match="PROTOCOL=h2c needs LOAD=oha"):
        variables.check("run", {"SERVER": "granian", "PROTOCOL": "h2c"})


def test_app_flavor_is_parsed_once_and_reaches_the_options() -> None:
    """APP_FLAVOR: framework (unset) or raw, exact as every choice (RAW: 'did you mean raw?'),
    into Options.app_flavor; the commands that start app_common take it, make study and make
    report do not."""
    taking = {
        c for c in variables.COMMANDS if variables.BY_NAME["APP_FLAVOR"] in variables.for_command(c)
    }
    assert {"run", "capacity", "soak", "serve", "overhead", "noise", "tune"} <= taking
    assert not {"study", "report", "export", "compare"} & taking
    assert variables.check("run", {"APP_FLAVOR": "raw"})["APP_FLAVOR"] == "raw"
    with pytest.raises(variables.UsageError, match="did you mean raw"):
        variables.check("run", {"APP_FLAVOR": "RAW"})
    assert cli.options_from(cli.build_parser().parse_args(["run"])).app_flavor == "framework"
    args = cli.build_parser().parse_args(["run", "--app-flavor=raw", "--server=granian"])
    assert cli.options_from(args).app_flavor == "raw"
    with pytest.raises(cli.UsageError, match="unknown APP_FLAVOR 'flask'; valid: framework, raw"):
        variables.check("run", {"APP_FLAVOR": "flask"})


@pytest.mark.parametrize(
    ("command", "given", "said"),
    [
        ("run", {"SCENARIO": "queries"}, "SCENARIO=queries: not served by the raw app"),
        ("run", {"SERVER": "all"}, "SERVER=nginx-static is not a Python server"),
        ("run", {"APP": "x.py:app"}, "APP_FLAVOR and APP= cannot go together"),
        ("run", {"RUNTIME": "docker"}, "APP_FLAVOR=raw and RUNTIME= cannot go together"),
        ("tune", {}, "APP_FLAVOR=raw: not with make tune yet"),
    ],
)
def test_app_flavor_raw_is_refused_where_the_raw_app_cannot_serve(
    command: str, given: dict[str, str], said: str
) -> None:
    """Refused by the declaration (before set-up), in one line naming what would do."""
    with pytest.raises(cli.UsageError, match=said):
        variables.check(command, {"APP_FLAVOR": "raw", **given})


def test_app_flavor_raw_takes_the_default_scenarios_and_each_commands_own() -> None:
    """make bench's default scenarios are the raw app's; soak, noise and overhead's too."""
    for command in ("run", "capacity", "soak", "noise", "overhead", "serve"):
        assert variables.check(command, {"APP_FLAVOR": "raw", "SERVER": "granian"}) is not None


def test_the_server_gets_the_raw_apps_target() -> None:
    """{app} is app_common's raw module of the server's kind under APP_FLAVOR=raw."""
    from bench.core.registry import APPS, RAW_APPS, app_target

    assert app_target("wsgi", "raw") == "app_common.raw_wsgi:app" == RAW_APPS["wsgi"]
    assert app_target("asgi", "raw") == "app_common.raw_asgi:app"
    assert app_target("wsgi") == APPS["wsgi"] and app_target("asgi", "framework") == APPS["asgi"]
