"""make tune on the real stack: each server's knob space searched at one point, the answer
saved beside the records.

Input: validated Options (one scenario and concurrency, TRIALS=auto's budget and margin, the
servers), KNOBS (or each server.toml's tune lists), the objective (rps or p99). Output: one
record per run (metadata.tune: the objective; each configuration's knobs in `knobs`), a
progress line per round, and per server the answer (bench.harness.knobsearch) written to
RESULTS/tuned/<machine>/<server>_<scenario>_c<N>.json (bench.report.tuned) and printed on
stdout; exit status 0 when every server has an answer, 1 otherwise, 130 when interrupted.

One harness invocation: the shared stack starts once; each server warms up once with its
declared configuration (recorded, never analysed), then each round starts every racing
configuration once, in a fresh random order, through the same block runner as make bench
(bench.harness.run.run_blocks), so a configuration's run is recorded, verified and observed
as any other, and a failed one (a crash, an OOM kill under RUNTIME=docker MEMORY=) is out.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.core import defaults, plan
from bench.core.outcome import Outcome
from bench.core.progress import Progress
from bench.core.record import Record
from bench.core.registry import ServerSpec, load_all, tune_value
from bench.harness import knobsearch, run
from bench.harness.knobsearch import Config, Measured, Space, label
from bench.harness.session import Harness
from bench.host.metadata import host_metadata, now_iso
from bench.host.prepare import Environment, Unavailable
from bench.report import tuned

UNITS = {"rps": "req/s", "p99": "ms p99"}


def space_for(
    spec: ServerSpec, given: dict[str, tuple[str, ...]] | None, declared: dict[str, int], cpus: int
) -> Space:
    """The search space: KNOBS= where given, else each knob's declared tune list; values on
    this machine's CPUs, ascending; ordered where the declaration says so."""
    lists = given or {k: tuple(map(str, n.tune)) for k, n in spec.knobs.items() if n.tune}
    values = {
        knob: tuple(sorted({tune_value(int(v) if v.isdigit() else v, cpus) for v in raw}))
        for knob, raw in lists.items()
    }
    ordered = tuple(k for k in spec.knobs if k in values and spec.knobs[k].ordered)
    # a knob the site does not resolve starts at its first value
    return Space(values, ordered, {k: declared.get(k, values[k][0]) for k in values})


def measured_of(records: list[Record], objective: str, memory: int | None) -> Measured:
    """A configuration's run from the records it wrote (the repeat when one ran under
    foreign load): its figure and RSS, or why it is out."""
    kept = [r for r in records if not r.foreign_load] or records
    if not kept:
        return Measured(None, None, "no record written")
    rec = kept[-1]
    if rec.status != "ok":
        return Measured(None, None, rec.reason or rec.status)
    box = rec.container or {}
    if box.get("oom_kills"):
        limit = f" (memory limit {memory // 2**20} MiB)" if memory else ""
        return Measured(None, None, f"OOM kills: {box['oom_kills']}{limit}")
    figure = rec.rps if objective == "rps" else (rec.latency_ms or {}).get("p99")
    rss = (rec.resources or {}).get("server_rss_mb") or box.get("memory_peak_mb")
    outcome = Outcome.of_record(rec)
    if outcome.unserved_pct and outcome.unserved_pct > 100 * defaults.TUNE_MAX_FAILED_SHARE:
        share = f"{outcome.unserved_pct:.2f} %"
        return Measured(None, None, f"{outcome.unserved} failed request(s), {share} of them")
    return Measured(float(figure) if figure else None, rss)


def measurer(
    h: Harness, opts: plan.Options, specs: dict[str, ServerSpec], prepared: dict, objective: str
) -> knobsearch.Measure:
    """One round of configurations on the harness: a block each, as make bench runs them."""
    server, scenario, conc = opts.servers[0], opts.scenarios[0], opts.concurrency[0]

    def measure(configs: list[Config], round_no: int) -> dict[Config, Measured]:
        out = {}
        for config in configs:
            # the configuration over the knobs fixed for the point (a study arm's own)
            arm = replace(opts, overrides={**opts.overrides, **dict(config)})
            runs = (plan.RunSpec(server, scenario, conc, round_no, plan.path_of(opts, scenario)),)
            before = len(h.recorder.records)
            died = run.run_blocks(h, [(arm, plan.Block(round_no, server, runs))], specs, prepared)
            if died is not None:
                raise knobsearch.Stopped("stack")
            out[config] = measured_of(h.recorder.records[before:], objective, opts.memory_bytes)
        return out

    return measure


def looks(opts: plan.Options) -> int:
    """The most rounds of two configurations the budget holds (load time alone): the looks
    the decision engine spends its error over."""
    assert opts.precision is not None
    per_config = plan.run_seconds(opts, True) + defaults.PRIMER_S
    rounds = math.floor(opts.precision.budget_s / (2 * per_config))
    return max(defaults.AUTO_MIN_TRIALS, min(opts.precision.max_trials, rounds))


def tune_server(
    h: Harness, opts: plan.Options, spec: ServerSpec, env: Environment, knobs_given: dict | None
) -> dict | None:
    """Warm-up, the search, the answer as a JSON-ready dict (None: nothing was measured)."""
    specs, prepared = {spec.id: spec}, {spec.id: env}
    objective = str(opts.study.meta["tune"]["objective"])  # type: ignore[index]
    space = space_for(spec, knobs_given, h.site.knobs(spec, opts.overrides), h.site.cpus())
    h.progress.say(
        f"tune {spec.id}: {', '.join(f'{k}={list(v)}' for k, v in space.values.items())}; "
        f"ordered: {', '.join(space.ordered) or 'none'}"
    )
    if run.run_blocks(h, [(opts, b) for b in plan.warmup_round(opts)], specs, prepared):
        return None
    settings = knobsearch.Settings(
        opts.margin,
        objective == "rps",
        opts.precision.budget_s,
        looks(opts),
        opts.seed,  # type: ignore[union-attr]
    )
    started, clock = now_iso(), run.clock()
    answer = knobsearch.search(
        space,
        measurer(h, opts, specs, prepared, objective),
        settings,
        h.progress.say,
        lambda: run.clock() - clock,
    )
    if answer.entry(answer.best).figure is None:
        return None
    resolved = h.site.knobs(spec, {**opts.overrides, **dict(answer.recommended)})
    return answer_data(opts, space, answer, started, (run.clock() - clock) / 60, resolved)


def _entry(entry: knobsearch.Entry) -> dict[str, object]:
    return {
        "label": label(entry.config),
        "knobs": dict(entry.config),
        "rounds": entry.rounds,
        "figure": entry.figure,
        "rss_mb": entry.rss_mb,
        "state": entry.state,
        "ratio": entry.ratio,
        "low": entry.low,
        "high": entry.high,
        "reason": entry.reason,
    }


def _declared(space: Space, answer: knobsearch.Answer) -> dict[str, object] | None:
    """The declared configuration's entry against the best (None: the budget ended before
    the final race measured it)."""
    config = space.declared_config()
    found = next((e for e in answer.entries if e.config == config), None)
    return _entry(found) if found is not None else None


def answer_data(
    opts: plan.Options,
    space: Space,
    answer: knobsearch.Answer,
    started: str,
    minutes: float,
    resolved: dict[str, int],
) -> dict[str, object]:
    """The answer file's content (`resolved`: every knob of the recommended configuration,
    the searched ones and the declared rest, as the server is started)."""
    server, scenario, conc = opts.servers[0], opts.scenarios[0], opts.concurrency[0]
    recommended = _entry(answer.entry(answer.recommended))
    recommended["resolved"] = resolved
    recommended["paste"] = tuned.paste(server, scenario, conc, dict(answer.recommended), resolved)
    host = host_metadata()
    objective = str(opts.study.meta["tune"]["objective"])  # type: ignore[index]
    return {
        "format": tuned.FORMAT,
        "server": server,
        "scenario": scenario,
        "concurrency": conc,
        "objective": objective,
        "unit": UNITS[objective],
        "margin": opts.margin,
        "machine": tuned.machine_identity(host),
        "runtime": tuned.runtime_of(opts),
        "session_id": host["session_id"],
        "started_at": started,
        "ended_at": now_iso(),
        "minutes": minutes,
        "rounds": answer.rounds,
        "why": answer.why,
        "decided": answer.decided,
        "line": answer.line,
        "space": {k: list(v) for k, v in space.values.items()},
        "ordered": list(space.ordered),
        "space_size": space.size(),
        "best": _entry(answer.entry(answer.best)),
        "recommended": recommended,
        "runner_up": _entry(answer.runner_up) if answer.runner_up else None,
        "declared": _declared(space, answer),
        "configurations": [_entry(e) for e in answer.entries],
    }


# Where a server's answer is saved, from the answer's data (None: make tune's own file,
# RESULTS/tuned/<machine>/<server>_<scenario>_c<N>.json, the one make bench reads).
Where = Callable[[dict], Path] | None


def tune_all(
    h: Harness, opts: plan.Options, knobs_given: dict | None, said: list[str], where: Where = None
) -> int:
    """Every server in turn: its answer saved and its lines kept for stdout."""
    specs = load_all()
    prepared = run.open_arms(h, [(opts, [])], specs)
    if prepared is None:
        return 1
    status = 0
    for server in opts.servers:
        one = replace(opts, servers=(server,))
        env = run.env_of(prepared, opts, server)
        if isinstance(env, Unavailable):
            said.append(f"tune {server}: not measured: {env.reason}")
            status = 1
            continue
        data = tune_server(h, one, specs[server], env, knobs_given)
        if data is None:
            said.append(f"tune {server}: no configuration was measured; the records say why")
            status = 1
            continue
        path = (
            where(data)
            if where is not None
            else tuned.answer_path(
                opts.results,
                data["machine"],  # type: ignore[arg-type]
                server,
                *_point(opts),
                opts.python,
            )
        )
        tuned.write(path, data)
        said.extend(tuned.answer_lines(data, path))
    return status


def _point(opts: plan.Options) -> tuple[str, int]:
    return opts.scenarios[0], opts.concurrency[0]


def execute(
    opts: plan.Options,
    knobs_given: dict | None,
    objective: str,
    sections=None,
    harness: run.HarnessFactory = run.make_harness,
    where: Where = None,
) -> int:
    """make tune: the searches under the machine's lock, summary.md rebuilt, the answers on
    stdout (`harness`: the site and load tool; the tests pass fakes; `where`: where each
    answer is saved, a study's tuned arms' own place)."""
    meta = {**opts.study.meta, "tune": {"objective": objective}}
    opts = replace(opts, study=replace(opts.study, meta=meta))
    assert opts.precision is not None
    progress = Progress(None, opts.precision.budget_s * len(opts.servers))
    said: list[str] = []

    def body(table, run_dir: Path) -> int:
        h = harness(opts, [opts], table, run_dir, progress)
        return tune_all(h, opts, knobs_given, said, where)

    status = run.interruptible(
        lambda: run.guarded(opts.results, sections, body, f"seed {opts.seed}", opts.wait)
    )
    if said:
        print("\n".join(said), file=sys.stdout, flush=True)
    return status
