"""A study's tuned arms: make tune's search per arm before the first phase, its answer's
knobs the arm's configuration.

Input: a validated study with arms that say `tune` and its [tune] table, each arm's
Options (bench.studies.arms), BUDGET= when make study has no TRIALS=auto (then it bounds
the searches), and the search to run (make tune's own, bench.harness.tuner.execute; the
tests pass a fake). Output: the arms' Options, a tuned arm's with the knobs its search
recommends (the least memory among the best and those within ±margin of it, as make tune
recommends) and metadata.study_tuned (the search in short: configurations tried, the best
with its interval, the equivalents, why it stopped); a line per tuned arm that has no
answer (it is not run: the checks on it say "not measured"); the exit status. Each answer is
saved at RESULTS/tuned/<machine>/study-<name>/<arm>.json, a place make bench never reads
(bench.report.tuned.find reads <server>_<scenario>_c<N>.json beside it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.core import plan
from bench.report import tuned
from bench.studies.schema import Arm, Study
from bench.studies.tunespec import TuneTable

# (the arm's search options, its space (None: the server.toml's), the objective, where the
# answer is saved, the summary's sections) -> the search's exit status
Search = Callable[[plan.Options, dict | None, str, Path, object], int]
# What metadata.study_tuned keeps of an answer (the rest is in its file).
KEPT = ("objective", "unit", "margin", "why", "decided", "rounds", "minutes", "line")
KEPT += ("space", "space_size", "best", "runner_up")


def make_tune(opts: plan.Options, space: dict | None, objective: str, path: Path, sections) -> int:
    """make tune's search on the real stack (bench.harness.tuner: the same code path), its
    answer saved at `path`."""
    from bench.harness import tuner

    return tuner.execute(opts, space, objective, sections, where=lambda _data: path)


def answer_path(results: Path, identity: dict, study: str, arm: str) -> Path:
    """Where a study's tuned arm's answer is saved (never where make bench looks)."""
    return results / tuned.DIR / tuned.machine_dir(identity) / f"study-{study}" / f"{arm}.json"


def search_options(
    study: Study, arm: Arm, opts: plan.Options, budget_min: int | None
) -> plan.Options:
    """The arm's point as make tune's search runs it: TRIALS=auto within [tune]'s budget
    (BUDGET= instead when given), [tune]'s margin; metadata naming the study's search, not
    its arm, so the verdict never judges a search's runs."""
    table = study.tune
    assert isinstance(table, TuneTable)
    precision = plan.Precision(budget_s=(budget_min or table.budget_min) * 60, margin=table.margin)
    meta = {
        "study_search": study.name,
        "study_search_arm": arm.id,
        "study_run": opts.study.meta.get("study_run"),
    }
    return replace(
        opts,
        trials=precision.min_trials,
        precision=precision,
        margin=table.margin,
        study=replace(opts.study, meta=meta),
    )


def read_answer(path: Path) -> dict | None:
    """A saved answer with a recommended configuration of whole-number knobs, or None."""
    try:
        data = json.loads(path.read_text())
        knobs = data["recommended"]["knobs"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(knobs, dict) or not all(isinstance(v, int) for v in knobs.values()):
        return None
    return data


def tuned_options(opts: plan.Options, data: dict, path: Path) -> plan.Options:
    """The arm's Options with the answer's recommended knobs over its fixed ones, and the
    search in short in metadata.study_tuned."""
    rec = data["recommended"]
    summary = {k: data.get(k) for k in KEPT}
    summary |= {
        "answer": str(path.relative_to(opts.results)),
        "recommended": {k: rec.get(k) for k in ("label", "knobs", "figure", "rss_mb")},
        "equivalent": [c["label"] for c in data["configurations"] if c["state"] == "equivalent"],
        "tried": [
            {k: c.get(k) for k in ("label", "figure", "rounds", "state", "reason")}
            for c in data["configurations"]
        ],
    }
    meta = {**opts.study.meta, "study_tuned": summary}
    return replace(
        opts,
        overrides={**opts.overrides, **rec["knobs"]},
        study=replace(opts.study, meta=meta),
    )


def tune_arms(
    study: Study,
    options: list[tuple[Arm, plan.Options]],
    budget_min: int | None,
    identity: dict,
    how: tuple[Search, object] = (make_tune, None),
) -> tuple[list[tuple[Arm, plan.Options]], int]:
    """Each tuned arm searched at its point, then configured by the answer; the arms to run
    (a tuned arm without an answer left out, with a line) and the worst exit status (130:
    interrupted, nothing more is searched). `identity`: this machine's
    (bench.report.tuned.machine_identity)."""
    search, sections = how
    out, status = [], 0
    minutes = budget_min or study.tune.budget_min  # type: ignore[union-attr]
    print(
        f"bench: study {study.name}: {len(study.tuned_arms)} tuned arm(s), make tune's search "
        f"of each before the first phase: at most {len(study.tuned_arms) * minutes} min",
        file=sys.stderr,
    )
    for arm, opts in options:
        if arm.tune is None:
            out.append((arm, opts))
            continue
        path = answer_path(opts.results, identity, study.name, arm.id)
        path.unlink(missing_ok=True)  # an earlier run's answer never stands for this one
        space = None if arm.tune is True else dict(arm.tune)  # type: ignore[arg-type]
        objective = study.tune.objective  # type: ignore[union-attr]
        print(
            f"bench: study {study.name}: arm {arm.id}: make tune's search (≤ {minutes} min)",
            file=sys.stderr,
        )
        got = search(search_options(study, arm, opts, budget_min), space, objective, path, sections)
        if got == 130:
            return out, 130
        data = read_answer(path)
        if data is None:
            print(
                f"bench: study {study.name}: arm {arm.id} not run: its search gave no answer "
                f"(exit status {got}); its records say why",
                file=sys.stderr,
            )
            status = 1
            continue
        print(
            f"bench: study {study.name}: arm {arm.id} tuned: {data['recommended']['label']} "
            f"({path})",
            file=sys.stderr,
        )
        out.append((arm, tuned_options(opts, data, path)))
    return out, status
