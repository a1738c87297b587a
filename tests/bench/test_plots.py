"""Plots: what is drawn, read back from the matplotlib Figure before it is saved (the series,
their count, labels and data, baselines apart, at most 8 per axes), the capacity interval read
defensively, the race and reload figures' data taken from real records."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.container import ErrorbarContainer

from bench.core.outcome import Outcome
from bench.core.record import Record, load_records
from bench.report.figures import race_data, reload_timeline
from bench.report.openloop import knee_series
from bench.report.plots import (
    BASELINE_STYLE,
    MAX_SERIES,
    STARVED,
    STARVED_BAR,
    STARVED_STYLE,
    Knee,
    Panel,
    knee_figure,
    leading,
    lines_figure,
    plot_knee,
    race_figure,
    scenario_figure,
    study_figure,
)
from bench.studies import schema, sections

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_leading_keeps_the_best_eight_and_never_a_baseline() -> None:
    lines = {f"s{i} w2": [(10, float(i), 1.0)] for i in range(12)}
    lines["nginx-static"] = [(10, 1e6, 0.1)]
    shown = leading(lines)
    assert len(shown) == MAX_SERIES and "nginx-static" not in shown
    assert shown[0] == "s11 w2" and "s0 w2" not in shown


def test_the_knee_marks_the_reported_crossing_with_its_interval() -> None:
    """The knee plot's capacity is the summary's (the crossing of repeated steps,
    bench.report.openloop.capacity_estimate) with its interval, for every search."""
    records, _ = load_records(FIXTURES / "openloop" / "records")
    for knees in knee_series(records).values():
        for knee in knees:
            assert knee.capacity is not None
            if knee.interval is not None:
                low, high = knee.interval
                assert low <= knee.capacity <= high


@pytest.fixture
def drawn() -> Iterator[list[Any]]:
    """Figures a test draws, closed after it (pyplot keeps every open figure)."""
    figures: list[Any] = []
    yield figures
    for fig in figures:
        plt.close(fig)


def _series(ax: Any) -> list[tuple[str, list, list, list]]:
    """An axes' errorbar series in drawing order: (label, x, y, the lows then the highs)."""
    out = []
    for container in ax.containers:
        if not isinstance(container, ErrorbarContainer):
            continue
        line, _, bars = container.lines
        segments = bars[0].get_segments() if bars else []
        spans = [seg[0][1] for seg in segments] + [seg[1][1] for seg in segments]
        out.append((container.get_label(), list(line.get_xdata()), list(line.get_ydata()), spans))
    return out


def _dashed(ax: Any) -> list[list[float]]:
    """The y data of an axes' baseline reference lines (grey, dashed)."""
    return [
        list(line.get_ydata())
        for line in ax.lines
        if line.get_linestyle() == "--" and line.get_color() == BASELINE_STYLE["color"]
    ]


def _scenario_lines(configs: int) -> dict[str, list[tuple]]:
    """`configs` servers at 3 concurrencies, server i at (i+1)·100·c^0.5 req/s, p99 10+i ms,
    intervals ±5 %, and nginx-static far above them all."""
    lines: dict[str, list[tuple]] = {}
    for i in range(configs):
        points = []
        for c in (10, 30, 100):
            rps, p99 = (i + 1) * 100 * c**0.5, 10.0 + i
            points.append((c, rps, p99, (0.95 * rps, 1.05 * rps), (0.95 * p99, 1.05 * p99)))
        lines[f"s{i} w2"] = points
    lines["nginx-static"] = [(c, 1e6, 0.2) for c in (10, 30, 100)]
    return lines


@pytest.mark.parametrize("configs", [3, 11])
def test_the_scenario_figure_draws_the_leading_series_with_their_data(
    configs: int, drawn: list[Any]
) -> None:
    """Both axes hold exactly the leading configurations (at most 8, best first, no
    baseline), each with its req/s or p99 per concurrency and its interval as drawn; the
    baseline is a grey dashed line on both; the req/s axis ends 15 % above the highest
    interval of a shown series, whatever nginx-static's height."""
    lines = _scenario_lines(configs)
    fig = scenario_figure("db", lines)
    drawn.append(fig)
    ax_rps, ax_p99 = fig.axes[:2]
    shown = leading(lines)
    assert len(shown) == min(configs, MAX_SERIES)
    assert [label for label, *_ in _series(ax_rps)] == shown  # the legend's names
    for ax, column in ((ax_rps, 1), (ax_p99, 2)):
        series = _series(ax)
        assert len(series) == len(shown)
        for label, (_, xs, ys, spans) in zip(shown, series, strict=True):
            points = lines[label]
            assert ys == pytest.approx([p[column] for p in points])
            intervals = [p[column + 2] for p in points]
            assert spans == pytest.approx([lo for lo, _ in intervals] + [hi for _, hi in intervals])
            # dodged apart by a few per cent on the log axis, never onto another concurrency
            for x, point in zip(xs, points, strict=True):
                assert 0.9 < x / point[0] < 1.1
        assert _dashed(ax) == [[p[column] for p in lines["nginx-static"]]]
    top = 1.05 * max(p[1] for label in shown for p in lines[label])
    assert ax_rps.get_ylim()[1] == pytest.approx(1.15 * top)


def test_a_scenario_at_one_concurrency_draws_bars_of_every_shown_value(drawn: list[Any]) -> None:
    """One concurrency: a bar per configuration (baseline last, grey) whose length is its
    req/s, and one per configuration in the p99 panel."""
    lines = {"a w1": [(10, 300.0, 9.0)], "b w1": [(10, 500.0, 4.0)], "flask-dev": [(10, 50.0, 90)]}
    fig = scenario_figure("db", lines)
    drawn.append(fig)
    rps, p99 = fig.axes[:2]
    assert [bar.get_width() for bar in rps.patches] == [500.0, 300.0, 50.0]
    assert [bar.get_width() for bar in p99.patches] == [4.0, 9.0, 90.0]
    assert [t.get_text() for t in rps.get_yticklabels()] == ["b w1", "a w1", "flask-dev"]


def _knee_lines(ax: Any, label: str) -> Any:
    return next(line for line in ax.lines if line.get_label().startswith(label + ":"))


def test_the_knee_figure_draws_every_step_the_capacity_and_its_interval(
    drawn: list[Any],
) -> None:
    """Steps out of search order: each step a marker at its (rate, p99) — filled when it met
    the objective, hollow when it missed —, the medians joined in rate order, the capacity a
    vertical line in the series' colour, its interval shaded, the objective a horizontal
    line, and nothing for a step without a p99."""
    steps = [(400, 5.0, True), (100, 3.0, True), (800, 90.0, False), (800, None, False)]
    knee = Knee("granian", steps, 400.0, (380.0, 420.0))
    fig = knee_figure("db", 50, [knee])
    drawn.append(fig)
    ax = fig.axes[0]
    median = _knee_lines(ax, "granian")
    assert median.get_label() == "granian: 400 req/s"
    assert list(median.get_xdata()) == [100.0, 400.0, 800.0]
    assert list(median.get_ydata()) == [3.0, 5.0, 90.0]
    markers = [line for line in ax.lines if line.get_linestyle() == "None"]
    assert [(m.get_xdata()[0], m.get_ydata()[0]) for m in markers] == [
        (400, 5.0),
        (100, 3.0),
        (800, 90.0),
    ]
    faces = [m.get_markerfacecolor() for m in markers]
    assert faces[0] == faces[1] == median.get_color() and faces[2] == "white"
    vertical = [line for line in ax.lines if list(line.get_xdata()) == [400.0, 400.0]]
    assert len(vertical) == 1 and vertical[0].get_color() == median.get_color()
    assert len(ax.patches) == 1
    span = ax.patches[0]
    assert (span.get_x(), span.get_x() + span.get_width()) == (380.0, 420.0)
    objective = [line for line in ax.lines if list(line.get_ydata()) == [50, 50]]
    assert len(objective) == 1 and "p99 ≤ 50 ms" in objective[0].get_label()


def test_the_knee_figure_keeps_the_eight_highest_capacities(drawn: list[Any]) -> None:
    """Eleven searches: the eight with the highest capacity are drawn, the title says how
    many more are in the table."""
    knees = [Knee(f"s{i}", [(100 * (i + 1), 10.0, True)], 100.0 * (i + 1)) for i in range(11)]
    fig = knee_figure("db", 50, knees)
    drawn.append(fig)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.lines if line.get_label().startswith("s")]
    assert labels == [f"s{i}: {100 * (i + 1):,} req/s" for i in range(10, 2, -1)]
    assert "(3 more in the table)" in ax.get_title()


def test_knee_plot_writes_the_figure(tmp_path: Path) -> None:
    """plot_knee saves what knee_figure draws."""
    knee = Knee("granian", [(400, 5.0, True), (800, 90.0, False)], 400.0, (380.0, 420.0))
    plot_knee("db", 50, [knee], tmp_path / "knee.png")
    assert (tmp_path / "knee.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_race_figure_draws_the_502s_of_every_gap(drawn: list[Any]) -> None:
    """A panel per arm, a bar per idle gap as high as its 502s, the arm's total in its title,
    from the lb-race fixture's records."""
    records, _ = load_records(FIXTURES / "lb-race" / "records")
    arms = race_data(records)
    fig = race_figure(arms)
    drawn.append(fig)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    labels = [label for label in arms if arms[label]]
    assert len(visible) == len(labels)
    for ax, label in zip(visible, labels, strict=True):
        gaps = sorted(arms[label])
        assert [bar.get_height() for bar in ax.patches] == [n502 for _, _, n502 in gaps]
        sent = sum(s for _, s, _ in gaps)
        assert ax.get_title() == f"{label}\n{sum(n for *_, n in gaps)} × 502 in {sent:,} sent"


def test_the_study_figure_draws_bars_and_small_multiples_of_eight(drawn: list[Any]) -> None:
    """A metric with one point per arm is bars of its values; a metric with curves is split
    into axes of at most 8 series, each line its arm's points in x order."""
    bars = Panel("req/s", "connections", {"a": [(10, 5.0)], "b": [(10, 7.0)]})
    curves = {f"arm{i:02}": [(20, 2.0 * i), (10, float(i))] for i in range(10)}
    fig = study_figure("study", [bars, Panel("p99 ms", "connections", curves)])
    drawn.append(fig)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 3
    assert [bar.get_width() for bar in visible[0].patches] == [5.0, 7.0]
    drawn_lines = [line for ax in visible[1:] for line in ax.lines]
    assert [len(ax.lines) for ax in visible[1:]] == [8, 2]
    for line in drawn_lines:
        i = int(line.get_label()[3:])
        assert list(line.get_xdata()) == [10, 20]
        assert list(line.get_ydata()) == [float(i), 2.0 * i]


def test_an_arm_without_a_value_gets_no_bar_and_says_so(drawn: list[Any]) -> None:
    """A server that cannot reload has no "failed on reload": no bar (a 0 bar would read as
    a perfect reload, issue 32's reload plot), its label says it has no value; a real 0 is
    still a 0."""
    from bench.report.plots import NO_VALUE

    series = {"granian": [(None, 0.0)], "uwsgi": [(None, 15.0)], "waitress": [(None, None)]}
    fig = study_figure("reload", [Panel("failed on reload", "", series)])  # type: ignore[dict-item]
    drawn.append(fig)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert [bar.get_width() for bar in ax.patches] == [0.0, 15.0]
    texts = [t.get_text().strip() for t in ax.texts]
    assert texts == ["0", "15", NO_VALUE]


def test_bars_a_hundredfold_apart_get_a_log_axis(drawn: list[Any]) -> None:
    """The recycle study's p99: 2.2 ms without recycling beside 3,640 ms (uvicorn recycling);
    on a linear axis every bar but the longest is a hairline. Such a panel is drawn on a log
    axis that says so, every bar and value inside it; a panel with a 0 (failed %) stays
    linear, a 0 having no place on a log axis."""
    series = {"a": [(None, 2.2)], "b": [(None, 40.0)], "c": [(None, 3640.0)], "d": [(None, None)]}
    p99 = Panel("p99 ms", "", series)  # type: ignore[arg-type]
    failed = Panel("failed %", "", {"a": [(None, 0.0)], "b": [(None, 0.43)]})  # type: ignore[arg-type]
    fig = study_figure("recycle", [p99, failed])
    drawn.append(fig)
    by_title = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    log, linear = by_title["p99 ms"], by_title["failed %"]
    assert log.get_xscale() == "log" and "log scale" in log.get_xlabel()
    low, high = log.get_xlim()
    assert 0 < low < 2.2 and high > 3640.0
    assert all(low <= text.xy[0] < high for text in log.texts)
    assert linear.get_xscale() == "linear" and linear.get_xlabel() == "failed %"


def test_the_lines_figure_draws_at_most_eight_series_with_their_data(drawn: list[Any]) -> None:
    """RSS over time and the like: the first eight labels, each with its own data."""
    series = {f"p{i:02}": ([0, 5, 10], [i, i + 1, i + 2]) for i in range(10)}
    fig = lines_figure("RSS", "s", "MB", series)
    drawn.append(fig)
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines] == [f"p{i:02}" for i in range(MAX_SERIES)]
    for line in ax.lines:
        assert list(line.get_ydata()) == series[line.get_label()][1]


def test_race_data_counts_every_502_of_the_records() -> None:
    records, _ = load_records(FIXTURES / "lb-race" / "records")
    arms = race_data(records)
    assert arms
    total = sum(n502 for gaps in arms.values() for _, _, n502 in gaps)
    proxied = sum(int((r.errors or {}).get("proxy_by_status", {}).get("502", 0)) for r in records)
    assert total == proxied


def test_reload_timeline_counts_arrivals_not_served_in_time(tmp_path: Path) -> None:
    """Bins start at −(signal second); a run with no failure and no stall has almost none
    late, a bin's count never exceeds the arrivals due in it (rate × bin)."""
    results = tmp_path / "results"
    record = FIXTURES / "lifecycle" / "gunicorn-sync-reload.record.json"
    rec = Record.from_dict(json.loads(record.read_text()))
    raw = results / rec.raw_files[1]
    raw.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "lifecycle" / "gunicorn-sync-reload.oha.requests.csv.gz", raw)
    xs, late = reload_timeline(rec, results)
    assert xs[0] == -round(rec.lifecycle["at_s"], 3)
    assert max(late) <= rec.offered_rps * 0.5 + 1
    assert sum(late) >= Outcome.of_record(rec).failed - (rec.errors or {}).get("unsent", 0)


def test_the_open_loop_chart_draws_p99_against_the_offered_rate_never_achieved() -> None:
    """index.html's open-loop chart over the captured open-loop runs: each trace's y is the
    point's p99 (a log axis), never its achieved req/s, which at a fixed offered rate is the
    offered rate itself (the line y = x); the closed-loop chart stays req/s."""
    from bench.report.export import points
    from bench.report.html import CHART_METRIC, _traces

    records, _ = load_records(FIXTURES / "openloop" / "records")
    rows = [r for r in points(records) if r["load_model"] == "open" and r["p99_ms"] is not None]
    assert rows
    metric, title, log = CHART_METRIC["open"]
    assert (metric, log) == ("p99_ms", True) and title.startswith("p99 ms")
    assert CHART_METRIC["closed"][0] == "rps"
    by_point = {(r["server"], r["offered_rps"]): r for r in rows}
    for trace in _traces(rows, metric):
        server = trace["meta"]["server"]
        for x, y in zip(trace["x"], trace["y"], strict=True):
            row = by_point[(server, x)]
            assert y == row["p99_ms"] and y != row["rps"]


def test_no_interval_is_claimed_from_one_trial(drawn: list[Any]) -> None:
    """saas at one concurrency, one trial per configuration (no interval): the panels say so,
    never "95 % CI"; with intervals they claim it. Lines alike over several concurrencies."""
    single = {"a w1": [(20, 300.0, 9.0, None, None)], "b w1": [(20, 500.0, 4.0, None, None)]}
    fig = scenario_figure("saas", single)
    drawn.append(fig)
    labels = [" ".join(ax.get_xlabel().split()) for ax in fig.axes[:2]]  # wrapped to fit
    assert all("95 % CI" not in label and "one trial: no interval" in label for label in labels)
    spread = {
        k: [(20, rps, p99, (0.8 * rps, 1.2 * rps), (0.8 * p99, 1.2 * p99))]
        for k, [(_, rps, p99, *_)] in single.items()
    }
    fig = scenario_figure("saas", spread)
    drawn.append(fig)
    assert all("95 % CI" in ax.get_xlabel() for ax in fig.axes[:2])
    curves = {k: [(10, 1.0, 1.0), (50, 2.0, 2.0)] for k in ("a w1", "b w1")}
    fig = scenario_figure("db", curves)
    drawn.append(fig)
    assert all("95 % CI" not in ax.get_title() for ax in fig.axes[:2])


def test_a_study_panel_of_only_zeros_is_not_drawn(drawn: list[Any]) -> None:
    """cpu-quota's throttled ms at 0 in every arm is no chart: only the panel with values is
    drawn, and the title names the metric left to the table."""
    zeros = Panel("throttled ms", "connections", {"a": [(10, 0.0)], "b": [(10, 0.0)]})
    bars = Panel("req/s", "connections", {"a": [(10, 5.0)], "b": [(10, 7.0)]})
    fig = study_figure("cpu-quota", [zeros, bars])
    drawn.append(fig)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["req/s"]
    assert "0 in every arm (in the table, not drawn): throttled ms" in fig._suptitle.get_text()


def test_a_study_row_of_few_bars_is_shorter_than_a_row_of_many(drawn: list[Any]) -> None:
    """cpu-quota: 29 arms on /db, 7 on /upstream, each a long label (one column). The /upstream
    panel is drawn about a quarter as tall as the /db one, not as tall (the figure was 5,194
    px high for 6 panels)."""
    arm = "Gunicorn sync, workers = 2*os.cpu_count()+1, 0.5-CPU quota #"
    many = Panel("p99 ms, db", "connections", {f"{arm}{i}": [(50, 10.0 + i)] for i in range(29)})
    few = Panel("p99 ms, upstream", "connections", {f"{arm}{i}": [(10, 9.0 + i)] for i in range(7)})
    fig = study_figure("cpu-quota", [many, few])
    drawn.append(fig)
    fig.canvas.draw()
    tall, short = (ax.get_position().height for ax in fig.axes if ax.get_visible())
    assert short < 0.5 * tall


def _inside(inner: Any, outer: Any) -> bool:
    return (
        inner.x0 >= outer.x0 - 1
        and inner.x1 <= outer.x1 + 1
        and inner.y0 >= outer.y0 - 1
        and inner.y1 <= outer.y1 + 1
    )


def test_every_label_of_a_study_figure_is_inside_the_canvas(drawn: list[Any]) -> None:
    """container-limits' bars: 24 arms whose labels name the server, its rule and the limits
    (up to 90 characters), on four metrics. Drawn, every tick label lies inside the figure
    and clear of every other panel, every value label inside its own panel."""
    arms = [
        f"{server}, workers = {rule}, --cpus={cpus}{memory}"
        for server in ("granian", "gunicorn-gthread", "gunicorn-sync", "uvicorn")
        for rule in ("2 × os.cpu_count() + 1 (Gunicorn's documented rule)", "the CPU limit")
        for cpus, memory in (("0.25", ""), ("0.5", ""), ("0.5", " --memory=121m"))
    ]
    panels = [
        Panel(metric, "connections", {arm: [(10, (i + 1) * scale)] for i, arm in enumerate(arms)})
        for metric, scale in (
            ("p99 ms", 3.0),
            ("throttled ms", 150.0),
            ("req/s", 70.0),
            ("OOM kills", 0.25),
        )
    ]
    fig = study_figure("Container limits", panels)
    drawn.append(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 4
    for ax in visible:
        for label in ax.get_yticklabels():
            box = label.get_window_extent(renderer)
            assert _inside(box, fig.bbox), label.get_text()
            for other in visible:
                if other is not ax:
                    assert not box.overlaps(other.get_window_extent(renderer)), label.get_text()
        for text in ax.texts:
            assert _inside(text.get_window_extent(renderer), ax.get_window_extent(renderer))


SAAS_HOST = "[vm [kernel 6.18.44-fc-v669, AMD EPYC] · legacy e89897]"


def test_every_label_of_a_bar_figure_is_inside_the_canvas(drawn: list[Any]) -> None:
    """saas at one concurrency: labels of configuration and machine (about 80 characters)
    ran off the canvas's left edge and over the next panel, the values past the axes. Drawn
    now, every tick label (wrapped) and every value label lies inside the figure, and the
    second panel repeats no label."""
    lines = {
        f"{name} {SAAS_HOST}": [(20, rps, p99, None, None)]
        for name, rps, p99 in (
            ("gunicorn-gevent w2 c1000 b2048", 16.0, 3000.0),
            ("uvicorn w2 b2048", 16.0, 3000.0),
            ("granian w2 t4 b1024", 8.5, 12000.0),
            ("gunicorn-sync w2 b2048", 2.4, 24000.0),
        )
    }
    fig = scenario_figure("saas", lines)
    drawn.append(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    rps, p99 = fig.axes[:2]
    ticks = [t for t in rps.get_yticklabels() if t.get_text()]
    assert len(ticks) == 4 and all("\n" in t.get_text() for t in ticks)
    assert not [t for t in p99.get_yticklabels() if t.get_text() and t.get_visible()]
    for ax in (rps, p99):
        for text in [*ticks, ax.xaxis.label]:
            assert _inside(text.get_window_extent(renderer), fig.bbox), text.get_text()
        for text in ax.texts:
            assert _inside(text.get_window_extent(renderer), ax.get_window_extent(renderer))


def test_a_starved_configuration_is_marked_in_the_scenario_lines(drawn: list[Any]) -> None:
    """uwsgi left connections unserved at c50 (bench.report.groups.starved, the Point's
    flag): its series is grey and dashed with hollow markers, "starved" in its legend
    label, never styled as a contender; the others keep their colours."""
    lines = _scenario_lines(3)
    lines["uwsgi w2"] = [(c, 9e3, 2.0, None, None, c == 100) for c in (10, 30, 100)]
    fig = scenario_figure("db", lines)
    drawn.append(fig)
    series = {label: s for label, *s in _series(fig.axes[0])}
    (label,) = [label for label in series if STARVED in label.replace("\n", " ")]
    assert label.replace("\n", " ").startswith("uwsgi w2")
    container = next(c for c in fig.axes[0].containers if c.get_label() == label)
    line = container.lines[0]
    assert line.get_color() == STARVED_STYLE["color"] and line.get_linestyle() == "--"
    assert line.get_markerfacecolor() == "white"
    others = [c.lines[0] for c in fig.axes[0].containers if c.get_label() != label]
    assert all(other.get_color() != STARVED_STYLE["color"] for other in others)


def test_a_starved_configuration_is_hatched_in_the_bars(drawn: list[Any]) -> None:
    """At one concurrency the starved configuration's bars are hatched grey, with "starved"
    in its label; the others are coloured."""
    lines = {
        "a w1": [(10, 300.0, 9.0, None, None, False)],
        "uwsgi w2": [(10, 900.0, 1.0, None, None, True)],
    }
    fig = scenario_figure("db", lines)
    drawn.append(fig)
    rps = fig.axes[0]
    names = [t.get_text().replace("\n", " ") for t in rps.get_yticklabels()]
    assert names == [f"uwsgi w2 ({STARVED})", "a w1"]
    hatched = [bar.get_hatch() for bar in rps.patches]
    assert hatched == [STARVED_BAR["hatch"], None]


def test_a_starved_study_arm_is_marked_in_its_panels(drawn: list[Any]) -> None:
    """sync-vs-async-p99 in the previous reference: uWSGI served under half its connections
    (its p99 3.5 ms was the best bar). starved_arms finds its arms from the records; each
    panel marks them (Panel.starved), drawn hatched with "starved" in the label."""
    records, _ = load_records(FIXTURES / "reference-2026-11")
    mine = [r for r in records if r.metadata.get("study") == "sync-vs-async-p99"]
    study = schema.load_study("sync-vs-async-p99")
    records_shown, _ = sections.collapse_groups(study, mine)
    hungry = sections.starved_arms(mine)
    assert hungry and all(arm.startswith("uwsgi") for arm in hungry)
    panels = sections.study_series(study, mine)
    closed = [p for p in panels if "open loop" not in p.metric]
    assert closed and all(p.starved and all("uWSGI" in s for s in p.starved) for p in closed)
    fig = study_figure(study.title, closed)
    drawn.append(fig)
    ax = next(ax for ax in fig.axes if ax.get_visible())
    names = [t.get_text() for t in ax.get_yticklabels()]
    marked = [i for i, name in enumerate(names) if STARVED in name]
    assert marked and all("uWSGI" in names[i] for i in marked)
    assert all(ax.patches[i].get_hatch() == STARVED_BAR["hatch"] for i in marked)
    assert all(ax.patches[i].get_hatch() is None for i in range(len(names)) if i not in marked)
    assert records_shown  # the section's own records hold the same arms


def test_a_bar_row_without_a_value_stays_inside_the_axes(drawn: list[Any]) -> None:
    """The first and last rows without a bar (flask-dev and waitress, which cannot reload)
    stay inside the axes, not on their edge where the spine strikes their text through."""
    series = {"a-flask-dev": [(None, None)], "granian": [(None, 1.0)], "z-waitress": [(None, None)]}
    fig = study_figure("reload", [Panel("failed on reload", "", series)])  # type: ignore[dict-item]
    drawn.append(fig)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    bottom, top = ax.get_ylim()
    assert bottom > top  # the first row at the top
    assert top < 0 < 2 < bottom and min(bottom - 2, 0 - top) >= 0.4
