"""Studies measured in network namespaces, offline (bench.studies.network): the study files
validate, nginx's error-log reasons parse from a captured log, the race's bound is the rule
of three, and the sections render from real records."""

from pathlib import Path

import pytest

from bench.core.parse import parse_proxy_errors
from bench.studies.network import upper_bound_per_10k
from bench.studies.schema import in_namespace, load_study, study_names

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nginx"


NAMESPACED = ["accept-queue-abort", "lb-keepalive-race", "port-exhaustion"]


@pytest.mark.parametrize("name", NAMESPACED)
def test_lb_study_files_validate(name: str) -> None:
    """Every namespace study file loads, runs every arm in a namespace, names known servers,
    and sets sysctls only by name."""
    assert name in study_names()
    study = load_study(name)
    assert study.arms and study.expect and not study.judged
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


def test_upper_bound_rule_of_three() -> None:
    """No event in 3,000 tries: below ~10 per 10,000 at 95 % (exactly 1 - 0.05^(1/3000)),
    and a bound p that makes 3,000 misses a 5 % event."""
    bound = upper_bound_per_10k(3000)
    assert bound == pytest.approx(9.98, abs=0.01)
    assert (1 - bound / 10_000) ** 3000 == pytest.approx(0.05)
    assert upper_bound_per_10k(0) is None


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
    assert lines[0].startswith("## Study: Ephemeral-port exhaustion")
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
    assert "| 2.00 |" in gevent and "| 480 | 1 | 20.8 (1 in 480) | 1953 (1) |" in gevent
    assert "Connection reset by peer" in gevent
    table = defaults_table(records)
    sync = next(line for line in table if line.startswith("| gunicorn-sync |"))
    assert "0 (no keep-alive)" in sync and "no: a new connection per request (1.00" in sync
    assert "no race possible" in sync
    untried = next(line for line in table if line.startswith("| granian |"))
    assert untried.count("not measured") == 4
