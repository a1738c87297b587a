"""make noise: one server measured in a nested design through the ordinary harness.

Input: validated Options (one server, scenario and concurrency, closed loop) and a Design
(rounds × server starts per round × runs per start). Output: one record per run, like every
run (metadata.noise: the invocation's id, its round, start, design and whether it is the
warm-up start), summary.md rebuilt (its "This machine's noise" from bench.report.variance),
the exit status of make bench. A warm-up start comes first (round 0, one run): a server's
first start reads slow (issue 30: ×0.92 on req/s), so it is recorded and left out of the
analysis. Each start of a round is a block of the same run repeated; rounds in order, the
starts of a round in a seeded random order (bench.harness.run.interleave: the arms of one
trial shuffled), so that A is not always the round's first start.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.core import plan, record
from bench.core.progress import Progress
from bench.core.registry import load_all
from bench.harness import run
from bench.host.procs import Interrupted, ProcessTable


@dataclass(frozen=True)
class Design:
    """The nested design: R rounds, S server starts per round, K runs per start."""

    rounds: int
    starts: int
    runs: int

    def to_dict(self) -> dict[str, int]:
        """The records' metadata.noise.design."""
        return dataclasses.asdict(self)

    def run_count(self) -> int:
        """Runs measured, the warm-up start's one included."""
        return self.rounds * self.starts * self.runs + 1


def arms(
    options: plan.Options, design: Design, noise_id: str
) -> list[tuple[plan.Options, list[plan.Block]]]:
    """One arm per server start, in the order they run: the warm-up start, then each round's
    starts; every record of a start carries its place in the design."""
    server, scenario, concurrency = options.servers[0], options.scenarios[0], options.concurrency[0]
    path = plan.path_of(options, scenario)

    def start(rnd: int, number: int, runs: int) -> tuple[plan.Options, list[plan.Block]]:
        noise = {
            "id": noise_id,
            "round": rnd,
            "start": number,
            "warmup": rnd == 0,
            "design": design.to_dict(),
        }
        study = dataclasses.replace(options.study, meta={**options.study.meta, "noise": noise})
        opts = dataclasses.replace(options, trials=design.rounds, study=study)
        spec = plan.RunSpec(server, scenario, concurrency, rnd, path)
        return opts, [plan.Block(rnd, server, (spec,) * runs)]

    starts = [start(0, 1, 1)]
    for rnd in range(1, design.rounds + 1):
        starts += [start(rnd, number, design.runs) for number in range(1, design.starts + 1)]
    return starts


def estimate_seconds(options: plan.Options, design: Design) -> int:
    """Load seconds of the design (start-up and verification not counted)."""
    per_run = options.warmup_s + options.duration_s
    starts = design.rounds * design.starts + 1
    return starts * plan.run_seconds(options, False) + (design.run_count() - starts) * per_run


def execute(
    options: plan.Options,
    design: Design,
    sections: Callable[[list[record.Record]], list[str]] | None = None,
    harness: run.HarnessFactory = run.make_harness,
) -> tuple[int, str]:
    """Run the design; return the exit status and the invocation's id (its records'
    metadata.noise.id)."""
    noise_id = uuid.uuid4().hex[:12]
    plans = arms(options, design, noise_id)
    progress = Progress(design.run_count(), estimate_seconds(options, design))

    def body(table: ProcessTable, run_dir: Path) -> int:
        h = harness(plans[0][0], [o for o, _ in plans], table, run_dir, progress)
        try:
            return run.run_arms(h, plans, load_all())
        except (KeyboardInterrupt, Interrupted) as exc:
            if not getattr(exc, "__notes__", None):  # as run.execute: the stage it cut short
                exc.add_note(progress.last or "preparing the servers")
            raise

    note = f"noise {noise_id}, seed {options.seed}"
    # Ctrl-C and SIGTERM handled throughout, as every measuring entry point (run.interruptible)
    status = run.interruptible(lambda: run.guarded(options.results, sections, body, note))
    return status, noise_id
