"""make study: every arm of the named studies run, a record each, summary.md rebuilt.

Input: study names (validated by bench.cli against studies/), RESULTS, DURATION, SEED.
Output: the exit status (0 ok, 1 a run failed, but not one whose failure a check counts:
failed_as_findings; 2 a study cannot run here: StudyError, one line; 130 interrupted). Per
study two phases: the arms that need nothing measured, then those whose rates and knobs come
from the first phase's records. Arms run in batches of one
way of measuring: through the harness's stack (bench.harness.run.execute), or each in a
network namespace of its own (bench.studies.namespace); both under the same lock, signal
handling and run directory (bench.harness.run.guarded).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from bench.core import plan, studyfile
from bench.core.progress import Progress
from bench.core.record import Record, load_records
from bench.core.registry import load_all
from bench.harness import racing
from bench.harness import run as harness_run
from bench.harness.recorder import Recorder
from bench.host import cgroup, docker, images, netns, speed
from bench.host.arch import host_arch
from bench.host.metadata import host_metadata, now_iso
from bench.host.placement import cpu_placement
from bench.host.procs import Interrupted, ProcessTable, StartError
from bench.host.venv import tool_version
from bench.load import LoadError, open_loop_name, tools
from bench.report import tuned
from bench.report.summary import ADVICE_TOPIC, SOURCES_TOPIC, StudyParts
from bench.studies import rounds as studyrounds
from bench.studies import tuning
from bench.studies.arms import arm_options, base_options, derived_options, new_run_id
from bench.studies.namespace import facts_of, measure_arm, record_arm, run_spec
from bench.studies.schema import Arm, Study, StudyError, in_namespace, load_runnable
from bench.studies.sections import summary_sections
from bench.studies.sources import advice_lines, limit_checks, question_lines, source_lines

# The studies' parts of the report: details/studies.md's sections and summary.md's source
# documents (bench.report.summary.write_summary takes either a list or topic -> lines).
Sections = Callable[[list[Record]], list[str] | dict[str, list[str]] | StudyParts]
Execute = Callable[[Sequence[plan.Options], Sections], int]
Batch = list[tuple[Arm, plan.Options]]


def run(
    names: list[str],
    results: Path,
    duration: int | None,
    seed: int,
    skip_unrunnable: bool = False,
    arms: Sequence[str] | None = None,
    rounds: studyrounds.Rounds = None,
    tune_budget: int | None = None,
) -> int:
    """make study NAME=... [ARMS=...]: the exit status. A study this machine cannot run
    (namespaces without root) is refused (StudyError), or with `skip_unrunnable` (NAME=all)
    left out with one line saying why. `arms`: only these arm ids run (None: all); `rounds`:
    make study's TRIALS (a number, TRIALS=auto's Precision, or None: the study file's);
    `tune_budget`: BUDGET= without TRIALS=auto, the minutes of each tuned arm's search."""
    studies = [only_arms(s, arms) for s in load_runnable(names)]  # checked before any runs
    studies = [s for s in studies if s.arms]
    if tune_budget is not None and not any(s.tuned_arms for s in studies):
        raise StudyError(
            f"BUDGET={tune_budget} without TRIALS=auto bounds the searches of tuned arms, and "
            f"{', '.join(names)} has none; valid: TRIALS=auto BUDGET=<minutes>"
        )
    names = [n for n in names if n in {s.name for s in studies}]
    namespaced = [s.name for s in studies if any(in_namespace(s.settings(a)) for a in s.arms)]
    problem = netns.root_problem() if namespaced else None
    try:
        check_images(studies)
    except StudyError as exc:
        if not skip_unrunnable:
            raise
        # NAME=all on a machine without the images: the container studies left out, as the
        # namespace ones without root.
        boxed = [s.name for s in studies if any(_in_container(s, a) for a in s.arms)]
        print(f"bench: skipping {', '.join(boxed)}: {exc}", file=sys.stderr)
        names = [n for n in names if n not in boxed]
    if problem is not None and not skip_unrunnable:
        raise StudyError(f"study {', '.join(namespaced)} {problem}")
    if problem is not None:
        print(f"bench: skipping {', '.join(namespaced)}: {problem}", file=sys.stderr)
        names = [n for n in names if n not in namespaced]
    if not names:
        return 0
    base = base_options(results, seed)
    execute = harness_run.execute
    return harness_run.interruptible(
        lambda: execute_studies(
            names, base, duration, execute, sections_for(results), arms, rounds, tune_budget
        )
    )


def only_arms(study: Study, arms: Sequence[str] | None) -> Study:
    """The study with only the arms named (ARMS=); every arm when None."""
    if arms is None:
        return study
    return replace(study, arms=tuple(a for a in study.arms if a.id in arms))


def missing_images(studies: list[Study]) -> dict[str | None, list[str]]:
    """The servers of arms with runtime = "docker" whose current image (on the arm's python,
    if any) is missing, by python (None: the server's own); {} when every one is built or no
    arm runs in a container. StudyError in one line when the engine is missing."""
    wanted = sorted(
        {(a.server, _python_of(s, a)) for s in studies for a in s.arms if _in_container(s, a)},
        key=lambda pair: (pair[1] or "", pair[0]),
    )
    if not wanted:
        return {}
    problem = docker.engine_problem()
    if problem is not None:
        raise StudyError(f"study {', '.join(s.name for s in studies)}: {problem}")
    specs, arch = load_all(), host_arch()
    missing: dict[str | None, list[str]] = {}
    for server, python in wanted:
        try:
            images.image_for(specs[server], arch, python)
        except images.ImageError:
            missing.setdefault(python, []).append(server)
    return missing


def check_images(studies: list[Study]) -> None:
    """StudyError in one line when the engine is missing or a server's current image is
    (missing_images), naming the `make images SERVER=... [PYTHON=...]` commands that build
    them all."""
    missing = missing_images(studies)
    if missing:
        what = "; ".join(
            f"{', '.join(servers)}" + (f" on PYTHON={python}" if python else "")
            for python, servers in missing.items()
        )
        commands = " and ".join(
            f"`{images.images_command(servers, python)}`" for python, servers in missing.items()
        )
        raise StudyError(
            f"study {', '.join(s.name for s in studies)}: no current image of {what}; "
            f"run {commands}"
        )


def _python_of(study: Study, arm: Arm) -> str | None:
    python = study.settings(arm).get("python")
    return str(python) if python is not None else None


def _in_container(study: Study, arm: Arm) -> bool:
    return study.settings(arm).get("runtime") == "docker"


def sections_for(results: Path) -> Sections:
    """The studies' summary sections, plots under `results`, and the container study's
    verdicts on its pairs (sources.limit_checks), for report.write_summary."""
    return lambda records: StudyParts(
        {
            "studies": summary_sections(records, results),
            SOURCES_TOPIC: source_lines(records) + question_lines(records),
            ADVICE_TOPIC: advice_lines(records),
        },
        limit_checks(records),
    )


def _batches(study: Study, options: list[tuple[Arm, plan.Options]]) -> list[Batch]:
    """Consecutive batches of one way of measuring each: one load tool and one runtime with
    its container limits through the stack (one harness run drives one tool and starts its
    containers with one set of limits), or network namespaces."""

    def kind(arm: Arm, opts: plan.Options) -> tuple:
        way = (opts.load_tool, opts.mode.runtime, opts.cpus, opts.memory_bytes)
        return (in_namespace(study.settings(arm)), *way)

    batches: list[Batch] = []
    for arm, opts in options:
        last = batches[-1][0] if batches else None
        if last and kind(*last) == kind(arm, opts):
            batches[-1].append((arm, opts))
        else:
            batches.append([(arm, opts)])
    return batches


def _second_phase(
    study: Study, base: plan.Options, run_id: str, duration: int | None
) -> tuple[list[tuple[Arm, plan.Options]], int]:
    """The arms derived from the first phase's records, and 1 when one cannot run."""
    mine = [
        r
        for r in load_records(base.results)[0]
        if r.metadata.get("study") == study.name and r.metadata.get("study_run") == run_id
    ]
    options, skipped = derived_options(study, mine, base, run_id, duration)
    for line in skipped:
        print(f"bench: study {study.name}: {line}", file=sys.stderr)
    by_id = {a.id: a for a in study.arms}
    return [(by_id[str(o.study.meta["study_arm"])], o) for o in options], 1 if skipped else 0


def execute_studies(
    names: list[str],
    base: plan.Options,
    duration: int | None,
    execute: Execute,
    sections: Sections,
    arms: Sequence[str] | None = None,
    rounds: studyrounds.Rounds = None,
    tune_budget: int | None = None,
) -> int:
    """Per study, make tune's search of each tuned arm, the first phase, then the arms
    derived from its records; the worst exit status (130: interrupted, nothing more is
    run). `arms`: only these (ARMS=); `rounds`: make study's TRIALS (None: each study
    file's); `tune_budget`: BUDGET= without TRIALS=auto (the searches' minutes)."""
    studies = [s for s in (only_arms(s, arms) for s in load_runnable(names)) if s.arms]
    for study in studies:
        quotas = [a.id for a in study.arms if "cpu_quota" in study.settings(a)]
        problem = cgroup.unavailable() if quotas else None
        if problem is not None:
            raise StudyError(f"study {study.name} (cpu_quota): {problem}")
    run_id = new_run_id()
    status = 0
    for study in studies:
        options = [
            (a, arm_options(study, a, base, run_id, duration)) for a in study.arms if not a.derived
        ]
        if study.tuned_arms:
            identity = tuned.machine_identity(host_metadata())
            how = (tuning.make_tune, sections)
            options, searched = tuning.tune_arms(study, options, tune_budget, identity, how)
            status = max(status, searched)
            if status == 130:
                return status
        started = time.monotonic()
        derived = any(a.derived for a in study.arms)
        for phase in (1, 2):
            if phase == 2:
                if not derived:
                    break
                options, skipped = _second_phase(study, base, run_id, duration)
                status = max(status, skipped)
            batches = _batches(study, options)
            later = 1 if phase == 1 and derived else 0  # phase 2 keeps a share
            for i, batch in enumerate(batches):
                spent = time.monotonic() - started
                share = batch_rounds(rounds, spent, len(batches) - i + later)
                status = max(status, _run_batch(study, batch, (execute, sections), share))
                if status == 130:
                    return status
    return status


def batch_rounds(
    rounds: studyrounds.Rounds, spent_s: float, batches_left: int
) -> studyrounds.Rounds:
    """TRIALS=auto's Precision for the next batch of a study: the study's BUDGET is shared by
    its batches, not spent by each (container-limits has 6 batches, one per set of limits:
    at BUDGET=15 each raced 15 minutes). The budget not spent yet over the batches left, so
    a batch decided early leaves its slack to the next; at least 1 s (a batch whose share is
    spent runs its first rounds and stops). Other TRIALS pass unchanged."""
    if not isinstance(rounds, plan.Precision):
        return rounds
    left = max(0.0, rounds.budget_s - spent_s)
    return replace(rounds, budget_s=max(1, int(left // max(1, batches_left))))


def _run_batch(
    study: Study, batch: Batch, how: tuple[Execute, Sections], rounds: studyrounds.Rounds
) -> int:
    """One batch, in namespaces or through the stack, with make study's TRIALS (TRIALS=auto:
    raced until the checks it measures are decided)."""
    execute, sections = how
    if in_namespace(study.settings(batch[0][0])):
        status = execute_in_namespaces(study, batch, sections, rounds)
    else:
        arms = [studyrounds.with_rounds(o, rounds) for _, o in batch]
        if not isinstance(rounds, plan.Precision):
            status = execute(arms, sections)
        else:
            judge = studyrounds.judge_for(study, {a.id for a, _ in batch})
            status = execute(studyrounds.with_looks(arms), sections, race=judge)  # type: ignore[call-arg]
    if status == 1 and failed_as_findings(study, batch[0][1]):
        return 0
    return status


def failed_as_findings(study: Study, opts: plan.Options) -> bool:
    """Whether this study run's failed runs (one at least) are all of arms whose failure the
    study measures (Study.fails_as_finding): then they are its data, not a failed run, and
    make study exits 0 (make reference's question is answered, not asked again). Says so."""
    run_id = opts.study.meta.get("study_run")
    failed = [
        r
        for r in load_records(opts.results)[0]
        if r.metadata.get("study") == study.name
        and r.metadata.get("study_run") == run_id
        and r.status == "failed"
    ]
    arms = sorted({str(r.metadata.get("study_arm")) for r in failed})
    if not studyfile.failures_are_findings(study.checks, arms):
        return False
    print(
        f"bench: study {study.name}: {len(failed)} failed run(s) of {', '.join(arms)}, whose "
        "failure it measures (a check counts it on failed runs): its data, not a failed run",
        file=sys.stderr,
    )
    return True


def namespace_rounds(study: Study, batch: Batch, rounds: studyrounds.Rounds) -> list[plan.Options]:
    """The arms of a namespace batch with their rounds: a judged study's as any study's
    (make study's TRIALS, or the file's trials; TRIALS=auto: its first rounds and looks, then
    raced); a described one's (no check to decide: the keep-alive race's arms, judged over
    the events of one long run) once."""
    if not study.judged:
        return [replace(o, trials=1, precision=None) for _, o in batch]
    arms = [studyrounds.with_rounds(o, rounds) for _, o in batch]
    return studyrounds.with_looks(arms) if isinstance(rounds, plan.Precision) else arms


def execute_in_namespaces(
    study: Study, batch: Batch, sections: Sections, rounds: studyrounds.Rounds = None
) -> int:
    """A batch of a study's arms, each run in a network namespace of its own (a fresh one per
    run), a record per run, in rounds: round 1 of every arm (in a seeded random order), then
    round 2...; TRIALS=auto then races the arms of the checks still undecided
    (bench.harness.racing.race_arms, the judge bench.studies.rounds.judge_for: the stack's
    study race). Under the harness's one lock, signal handling and run directory."""
    arms = namespace_rounds(study, batch, rounds)
    by_id = {a.id: a for a, _ in batch}

    def body(table: ProcessTable, run_dir: Path) -> int:
        # TRIALS=auto: the rounds are not known ahead, the budget bounds them (as the stack's)
        auto = arms[0].precision
        runs = None if auto is not None else sum(o.trials for o in arms)
        load_s = auto.budget_s if auto is not None else sum(o.trials * o.duration_s for o in arms)
        recorder = _recorder(run_dir, batch, (runs, load_s))
        spaces = netns.Namespaces(table)
        started = time.monotonic()

        def run_round(blocks: list[tuple[plan.Options, plan.Block]]) -> bool:
            speed.checkpoint(recorder.progress.say, spaced=True)  # a round begins
            for opts, block in blocks:
                arm = by_id[str(opts.study.meta["study_arm"])]
                what = (study, arm, opts)
                _measure_one(table, spaces, recorder, what, run_dir / study.name, block.trial)
            return True

        # the first rounds as the stack's study arms run them (no warm-up start: each run
        # starts a fresh server in a fresh namespace)
        run_round(harness_run.interleave([(o, plan.make_plan(o, warm=())) for o in arms]))
        if arms[0].precision is not None:
            outcome = racing.race_arms(
                arms,
                studyrounds.judge_for(study, set(by_id)),
                lambda: recorder.records,
                run_round,
                recorder.progress.say,
                lambda: time.monotonic() - started,
            )
            elapsed = time.monotonic() - started
            recorder.progress.say(racing.stop_line(outcome, elapsed, "study race"))
            for line in outcome.lines:
                print(f"bench: {line}", file=sys.stderr)
        return 1 if recorder.failures else 0

    results = batch[0][1].results
    return harness_run.guarded(results, sections, body, f"study {study.name} in namespaces")


def _recorder(run_dir: Path, batch: Batch, total: tuple[int | None, int]) -> Recorder:
    """The Recorder of namespace arms: oha's version, nginx's when a proxy is in front."""
    tool = tools()[open_loop_name()]
    # Without a working oha an oha arm fails with oha's own reason; the race needs none.
    with contextlib.suppress(LoadError):
        tool.prepare(run_dir / "venv.log")
    proxy_version = tool_version(("nginx", "-v")) if any(o.proxy for _, o in batch) else None
    progress = Progress(*total)  # runs (None: raced) and seconds of load at most
    return Recorder(host_metadata(), cpu_placement(False), tool, progress, proxy_version)


def _measure_one(
    table: ProcessTable,
    spaces: netns.Namespaces,
    recorder: Recorder,
    what: tuple[Study, Arm, plan.Options],
    study_dir: Path,
    trial: int = 1,
) -> None:
    """One arm measured in its namespace and recorded as round `trial`: ok, or failed with
    the reason (an interrupted arm is recorded failed, then the interruption goes on)."""
    study, arm, opts = what
    print(f"bench: {study.name} {arm.id} round {trial}: {arm.label}", file=sys.stderr)
    spec = load_all()[arm.server]
    started = now_iso()
    try:
        measured = measure_arm(table, spaces, study, arm, opts, study_dir / arm.id / str(trial))
    except (StartError, netns.NetnsError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else repr(exc)
        recorder.failed(opts, (run_spec(opts, trial),), facts_of(spec, opts, None), reason, {})
        return
    except (KeyboardInterrupt, Interrupted) as exc:
        reason = f"interrupted by {harness_run.signal_name(exc)}"
        recorder.failed(opts, (run_spec(opts, trial),), facts_of(spec, opts, None), reason, {})
        exc.add_note(f"{study.name} {arm.id}")
        raise
    finally:
        recorder.progress.remaining_s -= opts.duration_s
    path = record_arm(recorder, study, arm, opts, measured, (started, trial))
    if path is not None:
        print(f"bench: {study.name} {arm.id}: ok -> {path}", file=sys.stderr)
