"""A race round measured in slices: its servers started together, loaded in turn and back.

Input: the blocks of one race round (one per configuration still racing, in the round's
random order), a way to start a block's server (a Session and the runs it can serve, or None:
recorded unsupported or failed) and to stop it. Output: each point of each started server
measured RACE_SLICES times, in passes over the servers in the round's order and back
(A B C C B A), each slice its own record (metadata.slice: the pass); then every server
stopped, on every exit path.

Why: on the project's 2-CPU VM the run-to-run noise has a slow part (ln req/s of runs less
than 10 s apart correlate at r = +0.52, `make noise`, 2026-11-25), and a round of one start
per server put a pair's runs 10-30 s apart with a start-up between them. Started together,
a pair's slices are one slice apart and the back pass cancels a linear drift over the round;
bench.report.standings takes a round's figure of a configuration as the geometric mean of its
slices, so the decision engine (bench.report.decision) pairs rounds as before. What is
measured per slice is what a trial measured: a primer at a server's first run of a scenario,
WARMUP, then DURATION.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from bench.core import defaults, plan
from bench.harness.session import BlockVoid, Session

Started = tuple[Session, tuple[plan.RunSpec, ...]]


def order(servers: int, passes: int = defaults.RACE_SLICES) -> list[tuple[int, int]]:
    """(server index, pass) in load order: pass 1 in the round's order, pass 2 back, …"""
    out = []
    for number in range(1, passes + 1):
        indices = range(servers) if number % 2 else reversed(range(servers))
        out.extend((index, number) for index in indices)
    return out


def _point(run: plan.RunSpec) -> tuple:
    return (run.scenario, run.concurrency, run.rate, run.path_override)


def measure_round(
    blocks: list[plan.Block],
    start: Callable[[plan.Block], Started | None],
    stop: Callable[[Session], None],
    stack_problem: Callable[[], str | None],
) -> str | None:
    """Start every block's server, measure each point in slices, stop them all; returns why
    the shared stack died (None: it lived). A server whose load broke (BlockVoid) has its
    later slices recorded failed with the same reason; the others go on."""
    started: list[Started] = []
    try:
        for block in blocks:
            session = start(block)
            if session is not None:
                started.append(session)
        points = list(dict.fromkeys(_point(r) for _, runs in started for r in runs))
        void: dict[int, BlockVoid] = {}
        for point in points:
            for index, number in order(len(started)):
                session, runs = started[index]
                run = next((r for r in runs if _point(r) == point), None)
                if run is None:
                    continue
                run = dataclasses.replace(run, slice=number)
                if index in void:
                    exc = void[index]
                    recorder = session.h.recorder
                    recorder.failed(session.opts, (run,), session.facts, str(exc), exc.logs)
                    continue
                try:
                    session.measure(run)
                except BlockVoid as exc:
                    if stack_problem():
                        return f"not measured: {exc}"
                    void[index] = exc
        return None
    finally:
        for session, _ in started:
            stop(session)
