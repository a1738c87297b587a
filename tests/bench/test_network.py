"""Studies measured in network namespaces, offline (bench.studies.network): the study files
validate, nginx's error-log reasons parse from a captured log, each race rate carries its
exact binomial interval, the fix is judged only where the intervals part, and the sections
render from real records."""

from pathlib import Path

import pytest

from bench.core import studyfile
from bench.core.parse import parse_proxy_errors
from bench.studies.network import rate_per_10k
from bench.studies.schema import in_namespace, load_study, study_names

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nginx"


NAMESPACED = ["accept-queue-abort", "lb-keepalive-race", "port-exhaustion"]


@pytest.mark.parametrize("name", NAMESPACED)
def test_lb_study_files_validate(name: str) -> None:
    """Every namespace study file loads, runs every arm in a namespace, names known servers,
    and sets sysctls only by name; the keep-alive race is described (its fix judged over one
    long run's race events), the others decided by their checks over rounds."""
    assert name in study_names()
    study = load_study(name)
    assert study.arms
    if name == "lb-keepalive-race":
        assert study.expect and not study.judged
    else:
        # port-exhaustion's 3 checks; accept-queue-abort's 3 and its 502s behind the front
        checks = {"port-exhaustion": 3, "accept-queue-abort": 4}[name]
        assert study.judged and study.expect is None and len(study.checks) == checks
    for arm in study.arms:
        settings = study.settings(arm)
        assert in_namespace(settings)
        assert all(key.startswith("net.") for key in settings.get("sysctls", {}))


def test_nginx_error_reasons_from_captured_log() -> None:
    """A real error log of an exhausted port range: five connects failed with errno 99."""
    text = (FIXTURES / "error-port-exhaustion.log").read_text()
    reason = (
        "connect() to 127.0.0.1:8000 failed (99: Cannot assign requested address) "
        "while connecting to upstream"
    )
    assert parse_proxy_errors(text) == {reason: 5}


def test_notices_are_not_failures() -> None:
    """Lines below [error] (nginx's start-up notices) count for nothing."""
    assert parse_proxy_errors("2026/11/23 15:38:23 [notice] 1#1: start worker processes\n") == {}


def test_rate_interval_is_exact_binomial() -> None:
    """A rate per 10,000 with its Clopper–Pearson 95 % interval: 0 in 3,000 reaches ~12 (the
    two-sided bound 1 - 0.025^(1/3000)); 9 in 880 is 102 [47–193]; no tries, no rate."""
    rate, low, high = rate_per_10k(0, 3000)  # type: ignore[misc]
    assert rate == 0 and low == 0 and high == pytest.approx(10_000 * (1 - 0.025 ** (1 / 3000)))
    rate, low, high = rate_per_10k(9, 880)  # type: ignore[misc]
    assert rate == pytest.approx(102.27, abs=0.01)
    assert (low, high) == (pytest.approx(46.9, abs=0.1), pytest.approx(193.3, abs=0.1))
    assert rate_per_10k(0, 0) is None


def _race_arm(rec, arm: str, bad: int, sent: int):
    """A real race record as an arm with `bad` 502s in `sent` requests."""
    import dataclasses

    meta = {**rec.metadata, "study": "lb-keepalive-race", "study_arm": arm}
    network = {**rec.network, "race": {**rec.network["race"], "sent": sent}}
    errors = {**rec.errors, "proxy_by_status": {"502": bad}}
    return dataclasses.replace(rec, metadata=meta, network=network, errors=errors)


@pytest.mark.parametrize(
    ("default", "fixed", "result"),
    [
        ((9, 880), (0, 880), "reproduced"),  # exact p (two-sided) 0.004
        ((3, 660), (0, 660), "inconclusive"),  # 0.25
        # the 5 in 1,000 against 0 in 1,000: a one-sided Fisher p of 0.031 once
        # changed the pasted line while the section said inconclusive; two-sided 0.062 here,
        # for both
        ((5, 1000), (0, 1000), "inconclusive"),
        ((0, 880), (9, 880), "not reproduced"),  # the fix raced more
    ],
)
def test_the_fix_is_judged_by_one_exact_test_for_section_and_recommendations(
    default: tuple, fixed: tuple, result: str
) -> None:
    """The race's verdict per server: the fix arm's 502 count against the default arm's by
    bench.report.keepalive (Fisher's exact test, two-sided); the section says it first and
    the recommendations' race reads the same decision."""
    from bench.core.record import load_records
    from bench.report import keepalive
    from bench.report.recommend import races
    from bench.studies.network import study_section

    records, _ = load_records(FIXTURES.parent / "lb-race")
    rec = next(r for r in records if r.server == "gunicorn-gevent")
    arms = [_race_arm(rec, "gevent-default", *default), _race_arm(rec, "gevent-fix", *fixed)]
    (fix,) = keepalive.fixes(arms).values()
    assert fix.result == result
    lines = study_section(load_study("lb-keepalive-race"), arms)
    assert f"**Verdict: {result}** (1 {result}: the documented fix" in "\n".join(lines)
    race = races(arms, fix.machine)["gunicorn-gevent"]
    assert race.result == result and race.decided is (result == "reproduced")


def test_section_from_a_real_port_exhaustion_record() -> None:
    """A real record (port-exhaustion, keep-alive off, tcp_tw_reuse=0, 1,024 ports): the
    section shows its 502s, the errno-99 reason, the TIME_WAIT peak past the range, and no
    defaults table (the race did not run)."""
    from bench.core.record import load_records
    from bench.studies.sections import summary_sections

    records, problems = load_records(FIXTURES.parent / "lb")
    assert not problems and len(records) == 1
    rec = records[0]
    assert rec.network["sysctls"]["net.ipv4.tcp_tw_reuse"] == "0"
    lines = summary_sections(records)
    text = "\n".join(lines)
    assert lines[0].startswith("## Study: port-exhaustion — Ephemeral-port exhaustion")
    row = next(line for line in lines if line.startswith("| nginx upstream keep-alive off"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5] == str(rec.errors["proxy_by_status"]["502"])  # 502s
    assert "(99: Cannot assign requested address)" in cells[10]
    assert int(cells[8].replace(",", "")) > 1024  # TIME_WAIT peak above the range
    assert "Defaults behind a load balancer" not in text


def test_race_rows_and_defaults_from_real_records() -> None:
    """Two real race records: Gunicorn gevent (idle close measured at 2.00 s, one 502 in 480,
    a reset by peer at the 1953 ms gap) and the sync worker (closes at once: a new upstream
    connection per request, no race possible). The defaults table says so per server."""
    from bench.core.record import load_records
    from bench.studies.network import defaults_table
    from bench.studies.sections import summary_sections

    records, problems = load_records(FIXTURES.parent / "lb-race")
    assert not problems and len(records) == 2
    lines = summary_sections(records)
    gevent = next(line for line in lines if line.startswith("| Gunicorn gevent"))
    assert "| 2.00 |" in gevent and "| 480 | 1 | 20.8 [0.5–116] (1 in 480) | 1953 (1) |" in gevent
    assert "Connection reset by peer" in gevent
    table = defaults_table(records)
    sync = next(line for line in table if line.startswith("| gunicorn-sync |"))
    assert "0 (no keep-alive)" in sync and "no: a new connection per request (1.00" in sync
    assert "no race possible" in sync
    untried = next(line for line in table if line.startswith("| granian |"))
    assert untried.count("not measured") == 4


def test_zero_needed_is_where_the_exact_test_first_decides() -> None:
    """The requests a fix arm without a 502 must send for the exact test to separate it from
    the default's count (alone, and first of a family of 3 under Holm): one fewer does not."""
    from scipy.stats import fisher_exact

    from bench.report.keepalive import zero_needed

    def p(bad: int, sent: int, n: int) -> float:
        return 2 * fisher_exact([[bad, sent - bad], [0, n]], alternative="greater").pvalue

    for bad, sent in ((3, 660), (5, 880), (9, 880)):
        for family in (1, 3):
            needed = zero_needed((bad, sent), family)
            assert needed is not None
            assert p(bad, sent, needed) * family < 0.05 <= p(bad, sent, needed - 1) * family
    assert zero_needed((0, 880), 1) is None


def _race_pair(default: tuple, fixed: tuple, server: str = "gunicorn-gevent") -> list:
    import dataclasses

    from bench.core.record import load_records

    records, _ = load_records(FIXTURES.parent / "lb-race")
    rec = dataclasses.replace(
        next(r for r in records if r.server == "gunicorn-gevent"), server=server
    )
    name = server.removeprefix("gunicorn-")
    return [_race_arm(rec, f"{name}-default", *default), _race_arm(rec, f"{name}-fix", *fixed)]


def test_too_few_default_events_are_said_with_the_size_that_would_decide() -> None:
    """3 502s in 660 against 0 in 660: inconclusive, and the row says the default's events
    are too few for a fix arm of this size; a fix arm with 502s of its own does not part;
    no 502 at the default is no race to fix; 0 in 4,000 decides."""
    from bench.report import keepalive
    from bench.studies.network import fix_outcome

    def judged(default: tuple, fixed: tuple):
        (fix,) = keepalive.fixes(_race_pair(default, fixed)).values()
        return fix_outcome(fix)

    few = judged((3, 660), (0, 660))
    assert few.result == "inconclusive"
    assert "too few race events to decide: against the default's 3 in 660" in few.line
    needed = keepalive.zero_needed((3, 660), 1)
    assert f"would need {needed:,} requests sent (this one sent 660" in few.line
    assert "the counts do not part" in judged((3, 660), (2, 660)).line
    none = judged((0, 660), (0, 660))
    assert "the default showed no 502 (0 in 660): no race to fix" in none.line
    assert judged((3, 660), (0, 4_000)).result == "reproduced"


def test_a_server_without_a_setting_is_shown_as_such() -> None:
    """granian-asgi raced with its defaults and has no setting above the balancer's 60 s:
    the section says so (the study's no_fix) in place of a fix arm, and the defaults table's
    fix column too; a server that raced with neither a fix arm nor a reason says no fix ran."""
    from bench.studies.network import defaults_table, study_section

    study = load_study("lb-keepalive-race")
    assert study.no_fix["granian-asgi"].startswith("no keep-alive timeout setting in granian 2.8.7")
    pair = _race_pair((9, 880), (0, 880))
    granian = _race_pair((1, 140), (0, 140), "granian-asgi")[0]
    hyper = _race_pair((1, 660), (0, 660), "hypercorn")[0]
    lines = study_section(study, [*pair, granian, hyper])
    text = "\n".join(lines)
    assert "for the 1 server with both arms" in text
    row = next(line for line in lines if line.startswith("- granian-asgi,"))
    assert row.startswith("- granian-asgi, 502 per 10,000: default 71.4 [1.8–392] (1 in 140) —")
    assert "— no fix: no keep-alive timeout setting in granian 2.8.7: " in row
    assert "IntRange(1, 60_000)" in row
    assert "- hypercorn, 502 per 10,000: default 15.2 [0.4–84] (1 in 660) — no fix arm ran" in text
    table = defaults_table([*pair, granian])
    cell = next(line for line in table if line.startswith("| granian-asgi |"))
    assert "no setting above the balancer's (see the race study)" in cell


def test_no_fix_must_name_a_server_of_the_arms(tmp_path, monkeypatch) -> None:
    """no_fix.<server> names a server the study's arms run, with the reason as a string."""
    from bench.studies import schema

    text = (schema.STUDIES_DIR / "lb-keepalive-race.toml").read_text()
    monkeypatch.setattr(studyfile, "STUDIES_DIR", tmp_path)
    (tmp_path / "lb-keepalive-race.toml").write_text(text.replace("granian-asgi = ", "nginx = "))
    with pytest.raises(schema.StudyError, match=r"no_fix\.nginx must be a server of the arms"):
        schema.load_study("lb-keepalive-race")


def test_the_section_says_what_its_figures_rest_on_from_the_records() -> None:
    """The section's evidence line is read from the records (issue 32: "Measured on a shared
    machine while other load ran" was typed in, true or not): one real port-exhaustion run is
    "one round per arm"; two rounds, one of them under foreign load, say so, and each row
    names its round."""
    from dataclasses import replace

    from bench.core.record import load_records
    from bench.studies.network import study_section

    records, _ = load_records(FIXTURES.parent / "lb")
    study = load_study("port-exhaustion")
    one = "\n".join(study_section(study, records))
    assert "One round per arm: single runs; no run overlapped foreign load." in one
    assert "while other load ran" not in one
    second = replace(records[0], trial=2, foreign_load=True, run_id="second")
    two = study_section(study, [*records, second])
    text = "\n".join(two)
    assert "Up to 2 rounds per arm; 1 run(s) overlapped foreign load" in text
    rows = [line for line in two if line.startswith("| nginx upstream keep-alive off")]
    label = rows[0].split("|")[1].strip()
    # one row per arm over its rounds first (issue 32: 44 rows for 11 arms read as noise),
    # then each round's row, folded, naming its round
    assert [r.split("|")[1].strip() for r in rows] == [
        label,
        f"{label} (round 1)",
        f"{label} (round 2)",
        *[f"{r.split('|')[1].strip()}" for r in rows[3:]],
    ]
    assert rows[0].split("|")[4].strip() == "2"  # rounds
    assert text.index('<details markdown="1"><summary>Each round') < text.index(
        f"| {label} (round 1)"
    )


def test_a_judged_namespace_study_shows_its_verdict_above_its_counts() -> None:
    """port-exhaustion has checks: its section (bench.studies.sections, the function every
    study's verdict comes from) says "one trial: cannot decide" over the reference machine's
    single round, and decides its three checks once three rounds are there (the rounds here
    are that round again, TIME_WAIT moved a little as runs do); the arm table stays below."""
    from dataclasses import replace

    from bench.core.record import load_records
    from bench.studies.sections import _sections_of

    records, _ = load_records(FIXTURES.parent / "port-exhaustion")
    one = "\n".join(_sections_of("port-exhaustion", records, None))
    assert "**Verdict: open loop (oha) at 500 req/s: one trial: cannot decide**" in one
    assert "**Expected.**" not in one and one.index("**Verdict") < one.index("| arm |")
    rounds = [
        replace(
            r,
            trial=t,
            sockets={**(r.sockets or {}), "time_wait_max": r.sockets["time_wait_max"] + t},  # type: ignore[index]
        )
        for r in records
        for t in (1, 2, 3)
    ]
    three = "\n".join(_sections_of("port-exhaustion", rounds, None))
    assert "**Verdict: open loop (oha) at 500 req/s: reproduced**" in three
    assert three.count("— holds") == 3 and "(round 3)" in three
    # the arm's row over its three rounds: 502s summed (3,911 each), TIME_WAIT the highest
    header = next(line for line in three.splitlines() if "| rounds |" in line)
    cells = [c.strip() for c in header.split("|")]
    row = next(
        line.split("|")
        for line in three.splitlines()
        if line.startswith("| nginx upstream keep-alive off, tcp_tw_reuse=0 |")
    )
    assert row[cells.index("rounds")].strip() == "3"
    assert row[cells.index("502s (sum)")].strip() == "11,733"
    # the counts below: each arm once, summed over its rounds
    assert "- 502s: nginx upstream keep-alive off, tcp_tw_reuse=0 (11,733 over 3 rounds)\n" in three
