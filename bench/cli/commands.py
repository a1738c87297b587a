"""The commands: validated options -> what each make target does, and its exit status.

Input: the parsed Namespace of a command. Output: 0 all runs ok, 1 some run failed; bad input
raises UsageError (exit 2 in bench.cli.main). One `do_<command>` per command, dispatched by
COMMANDS.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.options import (
    check_serve,
    docker_ready,
    noise_options,
    options_from,
    overhead_options,
    study_arms_from,
    study_names,
    study_names_from,
    study_rounds,
    study_tune_budget,
    tune_options,
    with_app,
    with_objective,
    with_soak,
    with_tuned,
)
from bench.core import plan, scenario
from bench.core.pythons import parse_python
from bench.core.registry import load_all, server_ids
from bench.core.validate import (
    UsageError,
    validate_choice,
    validate_choices,
    validate_int,
    validate_results,
)
from bench.core.variables import BY_NAME, help_lines
from bench.host.arch import ArchError, host_arch, normalize_arch
from bench.load import (
    default_name,
    scenarios_for,
)
from bench.load import names as load_names
from bench.report import inputs

if TYPE_CHECKING:  # compare needs numpy: imported where make compare runs
    from bench.report.compare import Bounds


def _sections(results: Path) -> Callable[[list], list[str]]:
    """The studies' summary sections, for report.write_summary."""
    from bench.studies.runner import sections_for

    return sections_for(results)


def _os_problem(exc: OSError) -> str:
    """An OSError in one line: what and where, without the errno."""
    where = exc.filename2 or exc.filename  # a rename fails on its target
    return f"{where}: {exc.strerror}" if where and exc.strerror else str(exc)


def _result_set(name: str, raw: str | None, other: str | None) -> list:
    """The records of an existing results directory (BASE= or HEAD=), without those of the
    other set when it is nested inside this one (results and results/after)."""
    if not raw:
        raise UsageError(
            f"{name}= is required: a results directory (e.g. results, results/reference)"
        )
    records, problems = inputs.result_set(name, raw, other)
    for problem in problems:
        print(f"compare: {name}: {problem}", file=sys.stderr)
    return records


def _compare(base_dir: str | None, head_dir: str | None, bounds: Bounds | None = None) -> int:
    """`make compare`: the report on stdout; 1 when the gate (FAIL_BELOW/FAIL_ABOVE) finds a
    point regressed; sets it cannot compare are bad input."""
    from bench.report import compare

    base = _result_set("BASE", base_dir, head_dir)
    head = _result_set("HEAD", head_dir, base_dir)
    gate_bounds = bounds or compare.Bounds()
    try:
        lines, gate = compare.gated(base, head, str(base_dir), str(head_dir), gate_bounds)
    except compare.CompareError as exc:
        raise UsageError(str(exc)) from None
    print("\n".join(lines))
    return 1 if gate.regressed else 0


def do_images(args: argparse.Namespace) -> int:
    """`make images`: the base (PYTHON=: then the interpreter's image), then each server's
    image; 1 when one failed."""
    from bench.host import images
    from bench.host.state import state_base

    servers = validate_choices("server", args.server, server_ids(), allow_all=True)
    try:
        arch = normalize_arch(args.arch) if args.arch else host_arch()
    except ArchError as exc:
        raise UsageError(str(exc)) from None
    problem = images.arch_problem(arch, host_arch())
    if problem is not None:
        raise UsageError(problem)
    raw = getattr(args, "python", None)
    python = parse_python(str(raw)) if raw is not None and str(raw).strip() else None
    specs = load_all()
    skipped = [s for s in servers if images.not_buildable(specs[s], python)]
    if skipped and args.server.strip() != "all":
        raise UsageError(images.not_buildable(specs[skipped[0]], python) or "")
    if python is not None and skipped:
        left = [s for s in skipped if specs[s].requirements is not None]
        if left:
            print(f"images: not on PYTHON={python}: {', '.join(left)}", file=sys.stderr)
    wanted = [specs[s] for s in servers if s not in skipped]
    log = state_base() / "images.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    on = f" on PYTHON={python}" if python is not None else ""
    print(f"images: building {', '.join(s.id for s in wanted)}{on} (log: {log})", file=sys.stderr)
    try:
        built = images.build_images(
            wanted,
            arch,
            lambda text: print(f"images: {text}", file=sys.stderr, flush=True),
            log,
            python,
        )
    except images.ImageError as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 1
    return 0 if all(built.values()) else 1


def do_help(args: argparse.Namespace) -> int:
    """`make help`'s variables, scenarios, studies and servers, from their declarations."""
    lines = ["Variables (make bench VAR=value ...):", *help_lines({"LOAD": default_name()}), ""]
    lines.append("Scenarios (SCENARIO=; the load tools that drive each):")
    width = max(map(len, scenario.SCENARIOS))
    for item in scenario.SCENARIOS.values():
        drivers = [n for n in load_names() if item.name in scenarios_for(n)]
        lines.append(f"  {item.name:<{width}}  {item.about} ({', '.join(drivers)})")
    lines += ["", f"Studies (NAME=): {' '.join(study_names())} all", ""]
    lines.append(f"Servers (SERVER=): {' '.join(server_ids())}")
    print("\n".join(lines))
    return 0


def do_report(args: argparse.Namespace) -> int:
    """`make report`: summary.md rebuilt from the records in RESULTS."""
    from bench.report import summary as report

    results = validate_results(args.results)
    inputs.check_report(results, args.results)  # nothing to report: one line, exit 2
    try:
        path = report.write_summary(results, _sections(results))
    except OSError as exc:
        raise UsageError(f"RESULTS={args.results!r}: {_os_problem(exc)}") from None
    print(f"wrote {path}")
    return 0


def _finish_reference(results: Path, picture: bool = True) -> int:
    """After the campaign: summary.md and index.html in RESULTS, and (`picture`: RESULTS is
    results/reference, not a machine's pending campaign) the README's picture of the report
    (docs/report.png) taken from that index.html; 1 when the picture could not be taken
    (said why)."""
    from bench.core.campaign import ROOT
    from bench.report import picture as shot
    from bench.report import summary as report

    print(f"reference: wrote {report.write_summary(results, _sections(results))}")
    if not picture:
        return 0
    problem = shot.take(results / "index.html", ROOT / "docs" / "report.png")
    if problem is not None:
        print(f"reference: docs/report.png not taken: {problem}", file=sys.stderr)
        return 1
    print("reference: wrote docs/report.png")
    return 0


def do_reference(args: argparse.Namespace) -> int:
    """`make reference`: the campaign of reference.toml (bench/cli/campaign.py)."""
    from bench.cli import campaign
    from bench.core.campaign import load_campaign
    from bench.core.variables import BY_NAME

    dry_run = bool(BY_NAME["DRY_RUN"].parse(args.dry_run or "0"))
    minutes = BY_NAME["MINUTES"].parse(args.minutes) if args.minutes else None
    return campaign.run_campaign(
        load_campaign(),
        dry_run,
        finish=_finish_reference,
        minutes=minutes,  # type: ignore[arg-type]
    )


def do_compare(args: argparse.Namespace) -> int:
    """`make compare`: BASE and HEAD side by side on stdout; 1 when FAIL_BELOW's or
    FAIL_ABOVE's gate finds a point regressed."""
    from bench.report.compare import Bounds

    below, above = (
        BY_NAME[name].parse(raw) if raw else None
        for name, raw in (("FAIL_BELOW", args.fail_below), ("FAIL_ABOVE", args.fail_above))
    )
    return _compare(args.base, args.head, Bounds(below, above))  # type: ignore[arg-type]


def do_study(args: argparse.Namespace) -> int:
    """`make study`: the named studies (bench/studies), namespace ones and common ones."""
    from bench.studies import runner

    names = study_names_from(args.name)
    tune_budget = study_tune_budget(args)  # BUDGET= with TRIALS=<n>: refused as such
    return runner.run(
        names,
        validate_results(args.results),
        validate_int("duration", args.duration) if args.duration else None,
        validate_int("seed", args.seed) if args.seed else random.randrange(2**31),
        skip_unrunnable=args.name.strip() == "all",
        arms=study_arms_from(args.arms, names),
        rounds=study_rounds(args),
        tune_budget=tune_budget,
    )


def do_run(args: argparse.Namespace) -> int:
    """`make bench`: verify and measure; 0 all runs ok, 1 some failed."""
    return _execute(with_tuned(with_app(options_from(args)), getattr(args, "tuned", None)))


def do_serve(args: argparse.Namespace) -> int:
    """`make serve`: one verified server up until Ctrl-C."""
    from bench.harness import serve

    options = options_from(args)
    check_serve(options)
    docker_ready(options)
    return serve.serve(with_app(options))


def do_capacity(args: argparse.Namespace) -> int:
    """`make capacity`: each server's highest rate within the objective."""
    # an open-loop LOAD, no LIFECYCLE or RECYCLE: make capacity's declared command rules
    options = options_from(args)
    return _execute(with_app(with_objective(options, args)))


def do_soak(args: argparse.Namespace) -> int:
    """`make soak`: memory of every server process over a long fixed-rate run."""
    return _execute(with_app(with_soak(options_from(args), args.interval)))


def do_overhead(args: argparse.Namespace) -> int:
    """`make overhead`: the harness's requests/s against bare wrk, on the run options."""
    from bench import overhead

    return overhead.measure(*overhead_options(args))


def do_noise(args: argparse.Namespace) -> int:
    """`make noise`: the nested design run, then its variance components and A/A verdict on
    stdout (one SERVER, SCENARIO and CONCURRENCY: make noise's declared command rules)."""
    from bench.core.record import load_records
    from bench.harness import nested
    from bench.report import variance

    options, design = noise_options(args)
    status, noise_id = nested.execute(options, design, _sections(options.results))
    records, _ = load_records(options.results)
    runs = [n for n in variance.noise_runs(records) if n.meta.get("id") == noise_id]
    if runs:
        print(
            "\n".join(
                [
                    "This machine's noise",
                    "",
                    *variance.short_lines(variance.findings(runs[0])),
                    f"Details: {options.results / 'details' / variance.DETAILS_FILE}",
                ]
            )
        )
    return status


def do_tune(args: argparse.Namespace) -> int:
    """`make tune`: each server's knobs raced at one point; the answers on stdout and in
    RESULTS/tuned/ (one SCENARIO and CONCURRENCY, no TRIALS or hand-set knobs: make tune's
    declared command rules)."""
    from bench.harness import tuner

    options, knobs, objective = tune_options(args)
    docker_ready(options)
    return tuner.execute(options, knobs, objective, _sections(options.results))


def _execute(options: plan.Options) -> int:
    from bench.harness import run

    docker_ready(options)
    return run.execute(options, _sections(options.results))


def export_points(raw_format: str | None, raw_results: str) -> int:
    """`make export`: every point of RESULTS as CSV or JSON on stdout (bench.report.export)."""
    from bench.report import export

    valid = ", ".join(export.FORMATS)
    if not raw_format:
        raise UsageError(f"FORMAT is required; valid: {valid}")
    fmt = validate_choice("format", raw_format, tuple(export.FORMATS))
    records, problems = inputs.result_set("RESULTS", raw_results, purpose="export")
    for problem in problems:
        print(f"export: {problem}", file=sys.stderr)
    sys.stdout.write(export.export(records, fmt))
    return 0


def do_remote(args: argparse.Namespace) -> int:
    """`make remote`: make bench on HOST over ssh, its records brought into RESULTS."""
    from bench.cli.parser import given_options
    from bench.core.registry import ROOT
    from bench.core.variables import REMOTE_OWN
    from bench.harness import remote
    from bench.host.procs import Interrupted, signals_raise
    from bench.report import summary

    results = validate_results(args.results)
    # make bench's variables as the user gave them, for the other machine; RESULTS is here
    given = {
        name: value
        for name, value in given_options(args).items()
        if name not in (*REMOTE_OWN, "RESULTS")
    }
    if os.environ.get("PYWEBBENCH_MACHINE"):  # MACHINE=: the other machine's label
        given["MACHINE"] = os.environ["PYWEBBENCH_MACHINE"]
    try:
        # Ctrl-C, SIGTERM and SIGHUP handled here also where SIGINT arrived ignored (a
        # background job, a CI runner): Python then installs no handler of its own
        with signals_raise():
            return remote.run(
                args.host,
                given,
                results,
                ROOT,
                lambda path: summary.write_summary(path, _sections(path)),
            )
    except (KeyboardInterrupt, Interrupted) as exc:
        print(
            f"remote: interrupted by {str(exc) or 'SIGINT'}; the run directory there and the "
            "temporary one here are removed",
            file=sys.stderr,
        )
        return 130


# subcommand -> handler; each returns the exit status or raises UsageError (exit 2).
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": do_run,
    "capacity": do_capacity,
    "serve": do_serve,
    "soak": do_soak,
    "report": do_report,
    "compare": do_compare,
    "study": do_study,
    "help": do_help,
    "images": do_images,
    "export": lambda args: export_points(args.format, args.results),
    "overhead": lambda args: do_overhead(args),
    "noise": do_noise,
    "tune": do_tune,
    "remote": do_remote,
    "reference": do_reference,
}


# Commands that measure: each is one session of host-speed probes (bench.host.speed), taken
# under the machine's lock at its start and end and between its rounds (bench.harness.run).
MEASURING = ("run", "capacity", "soak", "study", "overhead", "noise", "tune")

# Commands that only print what is declared: no leftover namespaces removed, no MACHINE check.
DECLARATIVE = ("help",)
