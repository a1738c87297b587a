"""summary.md is rendered from the records alone, deterministically (golden file)."""

import os
import shutil
import statistics
from pathlib import Path

from bench.core.record import load_records
from bench.report.summary import (
    render_report,
    render_summary,
    render_system,
    server_version,
    write_summary,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GOLDEN = FIXTURES / "summary" / "summary.md"
GOLDEN_DETAILS = FIXTURES / "summary" / "details.md"


def _whole(records: list, problems: list[str]) -> str:
    """summary.md and every detail file, one after another, each under its name."""
    return "\n".join(
        f"<!-- {name} -->\n{text}" for name, text in render_report(records, problems).items()
    )


SYSTEM_CELLS = 15  # cells of a row of the second (resources and sockets) table


def test_summary_matches_golden_file() -> None:
    """Rendering the fixture records gives the checked-in summary and detail files
    (UPDATE_GOLDEN=1 rewrites them)."""
    records, problems = load_records(FIXTURES / "records")
    text = render_summary(records, problems)
    details = _whole(records, problems)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
        GOLDEN_DETAILS.write_text(details)
    assert text == GOLDEN.read_text()
    assert details == GOLDEN_DETAILS.read_text()


def test_summary_content() -> None:
    """Rows per machine and concurrency, best req/s first, with 95 % intervals; failures and
    skipped files listed; the system figures in their own file."""
    records, problems = load_records(FIXTURES / "records")
    text = _whole(records, problems)
    plaintext = render_report(records, problems)["details/speed-plaintext.md"]
    assert plaintext.index("granian 2.8.7 | w2 t4 b1024 | direct | 10 | 13,964") < plaintext.index(
        "gunicorn-sync 27.0.1 | w2 t4 b1024 | direct | 10 | 6,050"
    )
    # two trials each: geometric mean and its t interval; the two cannot be told apart by
    # req/s (rank interval 1–2 each), gunicorn-sync's p99 is significantly lower
    assert (
        "| 1–2 | 2 | granian 2.8.7 | w2 t4 b1024 | direct | 10 | 13,964 [5,626–34,662]" in plaintext
    )
    assert (
        "| 1–2 | 1 | gunicorn-sync 27.0.1 | w2 t4 b1024 | direct | 10 | 6,050 [5,447–6,720]"
        in plaintext
    )
    assert "server exited with code -9 during load" in text
    assert "greenlet<0.5" in text and "unsupported" in text
    assert "corrupt.json" in text and "future.json" in text
    assert "graviton [kernel 6.18.44-fc-v669, AMD EPYC] (arm64)" in text
    # real version-2 records: the share of nginx-static, and system figures in system.md
    speed_row = next(
        line
        for line in plaintext.splitlines()
        if "gunicorn-sync 27.0.1 | w2 b2048" in line and "%" in line
    )
    assert "| 5% |" in speed_row  # 6,397 rps of nginx-static's 118,121 at c=50
    system = render_system(records)
    system_row = next(
        line for line in system.splitlines() if "gunicorn-sync 27.0.1 | w2 b2048" in line
    )
    assert "| 17,347 |" in system_row  # TIME_WAIT piled up by a server that closes connections
    # a deep accept queue (49), but it closes every connection, so every connection cycles
    # through and its waits are timed: 99 % served, not flagged as optimistic
    assert "| 49 | 99% |" in system_row and "†" not in speed_row
    assert "TIME_WAIT" not in plaintext  # the speed table keeps to speed
    # machines are never ranked together: each machine's rows form one block
    graviton = plaintext.index("**Machine graviton")
    assert graviton < plaintext.index("**Machine vm") < plaintext.rindex("| granian 2.8.7")


def test_at_a_glance_names_the_best_with_significance() -> None:
    """At a glance, from the records: per machine, scenario and load the best configuration,
    ties where the data cannot separate them, the margin with its interval."""
    records, problems = load_records(FIXTURES / "records")
    text = render_summary(records, problems)
    glance = text.split("## At a glance")[1].split("## Details")[0]
    # c10 on vm: granian leads req/s but is not significantly ahead of gunicorn-sync (2
    # trials each); gunicorn-sync's p99 is significantly lower (0.24× [0.06–0.88])
    vm = glance.split("**vm [kernel 6.18.44-fc-v669, AMD EPYC]**")[1]
    row = next(line for line in vm.splitlines() if "| plaintext | wrk c10 | granian" in line)
    assert "granian w2 t4 b1024 = gunicorn-sync w2 t4 b1024 (of 2)" in row
    # leader against runner-up by point estimate, whatever the test says
    assert "| 2.31× [0.92–5.76] vs gunicorn-sync w2 t4 b1024, not significant |" in row
    assert "0.24× [0.06–0.88] vs granian w2 t4 b1024, significant" in row
    assert "2 trial(s): ties cannot be told apart" in row
    assert "| nginx-static" not in glance and "= nginx-static" not in glance  # the ceiling
    assert (
        "**graviton [kernel 6.18.44-fc-v669, AMD EPYC]**" in glance
        and "**vm [kernel 6.18.44-fc-v669, AMD EPYC]**" in glance
    )
    study = ["## Study: demo — A demo", "", "**Verdict: reproduced** (run x on vm)"]
    assert "- Study demo — A demo: **reproduced**." in render_summary(
        records, problems, None, study
    )


def test_starved_connections_flag_the_latency_as_optimistic() -> None:
    """Little's law: 8 of 50 connections served (uWSGI's threads holding keep-alive
    connections) flags p99 with a dagger and the footnote; all connections served does not."""
    from dataclasses import replace

    from bench.report.summary import served_share

    rec = load_records(FIXTURES / "records")[0][0]
    starved = replace(
        rec, concurrency=50, rps=19_354.0, latency_ms={**rec.latency_ms, "mean": 0.41, "p99": 1.7}
    )
    assert round(served_share(starved), 2) == 0.16
    text = _whole([starved], [])
    assert "| 1.7 † |" in text and "Fewer than 50% of the connections" in text
    served = replace(starved, latency_ms={**starved.latency_ms, "mean": 2.6})
    assert round(served_share(served), 2) == 1.0
    assert "†" not in _whole([served], [])


def test_write_summary_replaces_only_the_summary(tmp_path: Path) -> None:
    """write_summary creates summary.md (with system.md and index.html beside it) and leaves
    no temp file."""
    path = write_summary(tmp_path)
    assert path.read_text().startswith("# Benchmark summary")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["details", "index.html", "summary.md"]
    assert (tmp_path / "details" / "system.md").read_text().startswith("# System figures")


def test_server_version_falls_back_to_the_package_list() -> None:
    """Without server_version the version of packages[server_package] is shown, else "?"."""
    packages = {"gunicorn": "27.0.1", "flask": "3.1.2"}
    assert server_version({"packages": packages, "server_package": "gunicorn"}) == "27.0.1"
    assert server_version({"server_version": "2.8.7", "packages": packages}) == "2.8.7"
    assert server_version({"packages": packages, "server_package": None}) == "?"
    assert server_version({}) == "?"


def test_keepalive_and_proxy_columns() -> None:
    """Real v3 records behind nginx: keep-alive off shows thousands of TIME_WAIT sockets on
    both sides, keep-alive on almost none; the 502/504 columns read nginx's counts."""
    records, problems = load_records(FIXTURES / "records")
    system = [line for line in render_system(records).splitlines() if "| gunicorn-gthread" in line]
    assert all(r.count("|") == SYSTEM_CELLS + 1 for r in system)
    off = next(r for r in system if "nginx, keepalive off" in r)
    on = next(r for r in system if "| nginx |" in r)
    assert "15,713 (7,827 / 7,886)" in off and "30 (29 / 1)" in on
    text = _whole(records, problems)
    # the two come from two sessions (two seeds): each ranked alone, never against the other
    assert any(
        r.startswith("| 1 | 1 | gunicorn-gthread") and "| nginx | 20 | 4,737 |" in r
        for r in text.splitlines()
    )
    errors = next(r for r in text.splitlines() if "| nginx | 20 |" in r and "0 / 0 | 0 / 0" in r)
    assert errors.endswith(
        "| 0 / 0 | 0 / 0 | – |"
    )  # 502 and 504 counted (none), no ceiling measured


def test_compare_arches_ratio_and_emulated_apart() -> None:
    """Native amd64 and arm64 of the same configuration are put side by side with the
    arm64/amd64 ratio; emulated records never enter the per-scenario tables."""
    from dataclasses import replace

    records, problems = load_records(FIXTURES / "records")
    section = _whole(records, problems).split("## Compare arches")[1]
    # 2 trials on amd64, 1 on arm64: the ratio, and no test possible (?)
    row = "| plaintext | granian | w2 t4 b1024 | direct | c10 | 13,964 | 20,000 | 1.43× ? |"
    assert row in section
    native = next(
        r
        for r in records
        if r.server == "granian"
        and r.arch == "amd64"
        and r.concurrency == 10
        and r.scenario == "plaintext"
    )
    # trials of the fixture's emulated run's session (another session's would stand apart)
    session = next(r for r in records if r.emulated and r.server == "granian").metadata
    emulated = [
        replace(
            native,
            emulated=True,
            arch="arm64",
            rps=rps,
            trial=i,
            run_id=f"e{i}" * 8,
            metadata={**native.metadata, "seed": session.get("seed")},
        )
        for i, rps in enumerate((1000.0, 1500.0), start=1)
    ]
    text = _whole([*records, *emulated], problems)
    assert "### Emulated runs (functional check)" in text
    before_arches = text.split("## Compare arches")[0]
    assert "1,225" not in before_arches
    # one row per point: the geometric mean of its trials, and its ratio to native here
    emulated_rows = [
        line for line in text.split("### Emulated runs")[1].splitlines() if "| granian |" in line
    ]
    assert len(emulated_rows) == 1
    trials = [r for r in records if r.emulated and r.server == "granian"] + emulated
    center = statistics.geometric_mean([r.rps for r in trials])
    base = statistics.geometric_mean(
        [
            r.rps
            for r in records
            if not r.emulated
            and r.arch == "amd64"
            and r.server == "granian"
            and r.concurrency == 10
            and r.scenario == "plaintext"
        ]
    )
    assert f"| {center:,.0f} |" in emulated_rows[0]
    assert f"| {len(trials)} | {center / base:.2f}× |" in emulated_rows[0]


def test_plots_get_one_series_per_scenario(tmp_path: Path) -> None:
    """Each scenario has its own plot data (records of other scenarios never join its lines),
    and write_summary links a PNG per scenario."""
    from bench.report.summary import plot_series

    records, _ = load_records(FIXTURES / "records")
    series = plot_series(records)
    assert set(series) == {"db", "plaintext"}
    assert all(
        point[0] == 10
        for point in series["db"][
            "granian w2 t4 b1024 [vm [kernel 6.18.44-fc-v669, AMD EPYC] · legacy 6d58fb]"
        ]
    )
    shutil.copytree(FIXTURES / "records" / "machine-a", tmp_path / "records", dirs_exist_ok=True)
    write_summary(tmp_path)
    text = (tmp_path / "details" / "speed-db.md").read_text()
    assert "![db: req/s and p99 by concurrency](../plots/db.png)" in text
    assert (tmp_path / "plots" / "db.png").stat().st_size > 1000
    # A plot no text shows any more (its records gone: a question asked again) is removed
    # when the summary is rebuilt; the ones it shows stay.
    (tmp_path / "plots" / "race-502-by-gap.png").write_bytes(b"stale")
    # so is a detail file it no longer writes (a scenario whose runs left the speed tables)
    (tmp_path / "details" / "speed-upstream.md").write_text("stale")
    write_summary(tmp_path)
    assert not (tmp_path / "plots" / "race-502-by-gap.png").exists()
    assert not (tmp_path / "details" / "speed-upstream.md").exists()
    assert (tmp_path / "plots" / "db.png").stat().st_size > 1000
    assert (tmp_path / "details" / "speed-db.md").exists()


def test_a_plot_draws_the_runs_its_table_shows_and_no_other() -> None:
    """A run under a CPU quota (make bench CPU_QUOTA=0.5) has its own section, not a row of
    the speed table: it is not drawn in the scenario's plot either (the AMD reference drew
    quota-upstream's runs in upstream.png, unlabelled, beside native ones)."""
    import dataclasses

    from bench.report.summary import _by_scenario, plot_series

    records, _ = load_records(FIXTURES / "records")
    native = plot_series(records)
    quota = {"cpu_quota": 0.5, "cgroup_version": "v2", "throttled_ms": 10.0}
    limited = [
        dataclasses.replace(r, cgroup=quota, run_id=f"q{i}", server="uvicorn")
        for i, r in enumerate(records)
        if r.status == "ok" and not r.emulated and r.scenario == "db"
    ]
    assert limited and not any(r in _by_scenario(limited).get("db", []) for r in limited)
    assert plot_series(records + limited) == native


def test_docker_runs_are_their_own_labelled_configuration(tmp_path: Path) -> None:
    """A RUNTIME=docker run (with its limits) and the same point run natively never merge as
    trials of one configuration in one result set; the container's limits are in the label,
    and it appears in the speed table (not only among the experiments)."""
    import json

    from bench.core.record import Record
    from bench.report.cells import via_label
    from bench.report.groups import groups, point_key

    raw = json.loads((FIXTURES / "container_records" / "granian-db-docker-cpus1.json").read_text())
    docker = Record.from_dict(raw)
    native = Record.from_dict({**raw, "container": None})
    assert point_key(docker) == point_key(native)  # make compare pairs native with docker
    assert len(groups([docker, native])) == 2
    assert "docker --cpus=1" in via_label(docker) and "docker" not in via_label(native)
    records = tmp_path / "records"
    records.mkdir()
    (records / "one.json").write_text(json.dumps(raw))
    loaded, problems = load_records(records)
    details = _whole(loaded, problems)
    assert "docker --cpus=1" in details and "Speed: db" in details


def test_a_starved_configuration_has_no_rank_in_the_speed_table() -> None:
    """uwsgi serves 16 % of its 50 connections (p99 1.7 ms of the requests it accepted),
    granian every connection (p99 40 ms), 3 trials each: uwsgi's row keeps its † and is
    ranked apart, no rank by req/s nor p99 (–), and granian alone holds rank 1 by both; uwsgi
    serving its connections ranks 1 by p99 again."""
    from dataclasses import replace

    rec = next(
        r for r in load_records(FIXTURES / "records")[0]
        if r.server == "granian" and r.scenario == "plaintext" and r.arch == "amd64"
        and r.status == "ok"
    )  # fmt: skip

    def point(uwsgi_mean: float) -> str:
        runs = []
        for trial in range(1, 4):
            jitter = 1 + trial / 100
            for server, rps, mean, p99 in (
                ("uwsgi", 19_354.0 * jitter, uwsgi_mean, 1.7 * jitter),
                ("granian", 1_200.0 * jitter, 40.0, 41.0 * jitter),
            ):
                latency = {**(rec.latency_ms or {}), "mean": mean, "p99": p99}
                runs.append(
                    replace(
                        rec, server=server, rps=rps, concurrency=50, latency_ms=latency,
                        trial=trial, run_id=f"{server}-{trial}",
                    )
                )  # fmt: skip
        return render_report(runs, [])[f"details/speed-{rec.scenario}.md"]

    def rows(text: str) -> dict[str, list[str]]:
        out = {}
        for line in text.splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) > 2 and cells[2].split(" ")[0] in ("uwsgi", "granian"):
                out.setdefault(cells[2].split(" ")[0], cells)
        return out

    starved = rows(point(0.41))
    assert starved["uwsgi"][0] == "–" and starved["uwsgi"][1] == "–"  # ranked apart
    assert starved["uwsgi"][7].endswith("†")
    assert starved["granian"][0] == "1" and starved["granian"][1] == "1"
    served = rows(point(2.6))
    assert served["uwsgi"][1] == "1" and "†" not in served["uwsgi"][7]


def test_the_speed_tables_of_a_locust_scenario_carry_its_caveat() -> None:
    """The SaaS mix under Locust: under its speed tables, what Locust's figures are not (its
    percentiles are buckets, its req/s the users' pacing); a wrk scenario's tables say
    nothing of it."""
    from dataclasses import replace

    rec = next(
        r for r in load_records(FIXTURES / "records")[0]
        if r.server == "granian" and r.scenario == "plaintext" and r.arch == "amd64"
        and r.status == "ok"
    )  # fmt: skip
    saas = [
        replace(rec, scenario="saas", load_tool="locust", trial=t, run_id=f"saas-{t}")
        for t in (1, 2)
    ]
    files = render_report([rec, *saas], [])
    assert "Locust: percentiles are its response-time buckets" in files["details/speed-saas.md"]
    assert "Locust" not in files["details/speed-plaintext.md"]
