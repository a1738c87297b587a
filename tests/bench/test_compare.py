"""make compare: two result sets side by side, ratios with intervals and significance marks;
sets it cannot compare are refused with one line and exit 2."""

import shutil
from pathlib import Path

import pytest

from bench import cli
from bench.core.record import load_records
from bench.report.compare import compare, render
from bench.report.groups import rps_values
from bench.report.stats import difference

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "records"


def test_every_point_of_both_sets_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    """Real records of two machines: the point both measured side by side with HEAD/BASE,
    the points only one set has listed apart, the machines named."""
    assert (
        cli.main(
            ["compare", f"--base={FIXTURES / 'machine-a'}", f"--head={FIXTURES / 'machine-b'}"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "- BASE machines: vm [kernel 6.18.44-fc-v669, AMD EPYC] (amd64)" in out
    assert "- HEAD machines: graviton [kernel 6.18.44-fc-v669, AMD EPYC] (arm64)" in out
    # 2 trials against 1: the ratio, and "?" (no test possible with one trial)
    assert "| plaintext | granian | w2 t4 b1024 | direct | c10 | 13,964 | 20,000 | 1.43× ? |" in out
    assert "Only in BASE (" in out and "| gunicorn-sync |" in out.split("Only in BASE")[1]
    assert "Only in HEAD" not in out


def test_a_real_significant_difference_and_a_tie() -> None:
    """Same records twice: every point a tie (~ or ?); a 30 % slower copy of a 2-trial
    point: the ratio and its interval below 1."""
    from dataclasses import replace

    base, _ = load_records(FIXTURES / "machine-a")
    same = compare(base, base)
    assert same.rows and not any(row.rps.significant for row in same.rows)
    slower = [replace(r, rps=(r.rps or 0) * 0.7) for r in base]
    rows = compare(base, slower).rows
    two = next(r for r in rows if len(r.base) == 2 and r.base[0].server == "gunicorn-sync")
    assert two.rps.ratio == pytest.approx(0.7)
    # alone it is significant (p 0.02); Holm over the table's 3 testable points is not
    assert two.rps.p_raw is not None and two.rps.p_raw < 0.05 and two.rps.family == 3
    assert not two.rps.significant and two.rps.high is not None and two.rps.high > 1.0
    only = compare(
        [r for r in base if r.server == "gunicorn-sync"],
        [r for r in slower if r.server == "gunicorn-sync"],
    ).rows
    alone = next(r for r in only if len(r.base) == 2)
    assert alone.rps.significant and alone.rps.high is not None and alone.rps.high < 1.0


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "BASE='{base}' is not a directory of results"),
        ("empty", "BASE='{base}' holds no records"),
        ("disjoint", "have no point in common"),
    ],
)
def test_sets_it_cannot_compare_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, message: str
) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    shutil.copytree(FIXTURES / "machine-a", head)
    if setup == "empty":
        base.mkdir()
    elif setup == "disjoint":
        base.mkdir()
        shutil.copy(next((FIXTURES / "machine-a").glob("*nginx-static*")), base)
        for path in head.glob("*nginx-static*"):
            path.unlink()
    assert cli.main(["compare", f"--base={base}", f"--head={head}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message.format(base=base) in err[0]


def test_compare_requires_both_sets() -> None:
    with pytest.raises(ValueError, match="holds no records"):
        render([], [], "a", "b")
    assert cli.main(["compare", f"--head={FIXTURES}"]) == 2


AA = Path(__file__).resolve().parent.parent / "fixtures" / "aa"


def test_a_real_a_a_run_comes_out_as_ties() -> None:
    """The same command run twice on this machine (`make bench SERVER=granian,gunicorn-sync
    SCENARIO=plaintext,db CONCURRENCY=10,50 DURATION=3 TRIALS=5`, records in fixtures/aa):
    every point present in both, none significantly different; within one run, granian's lead
    over gunicorn-sync on /plaintext is."""
    base, _ = load_records(AA / "base")
    head, _ = load_records(AA / "head")
    result = compare(base, head)
    assert len(result.rows) == 8 and not result.only_base and not result.only_head
    assert all(row.rps.testable and not row.rps.significant for row in result.rows)
    assert all(row.p99.testable and not row.p99.significant for row in result.rows)

    def trials(server: str) -> list[float]:
        return rps_values(
            [r for r in base if (r.server, r.scenario, r.concurrency) == (server, "plaintext", 10)]
        )

    lead = difference(trials("gunicorn-sync"), trials("granian"))
    assert lead.significant and lead.ratio is not None and lead.ratio > 1


def test_a_set_nested_in_the_other_is_not_counted_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """BASE=results HEAD=results/after: BASE's trials are its own, not HEAD's too."""
    base = tmp_path / "results"
    shutil.copytree(FIXTURES / "machine-a", base)
    shutil.copytree(FIXTURES / "machine-a", base / "after")
    assert cli.main(["compare", f"--base={base}", f"--head={base / 'after'}"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "| gunicorn-sync | w2 t4 b1024 |" in line)
    assert row.endswith("| 2 / 2 |") and "1.00×" in row


def test_two_sessions_of_one_set_are_never_pooled() -> None:
    """A set that measured a point in two sessions is compared on the latest session's
    trials alone, and names both sessions."""
    from dataclasses import replace

    base, _ = load_records(FIXTURES / "machine-a")
    head, _ = load_records(FIXTURES / "machine-b")
    common = compare(base, head).rows[0].base[0]
    older = [
        replace(
            r,
            rps=(r.rps or 0) * 10,
            run_id=f"old{i}".ljust(32, "0"),
            metadata={**r.metadata, "session_id": "0ld5e55", "started_at": "2000-01-01T00:00:00Z"},
        )
        for i, r in enumerate(base)
        if r.scenario == common.scenario and r.server == common.server
    ]
    row = next(
        r
        for r in compare([*base, *older], head).rows
        if r.base[0].scenario == common.scenario and r.base[0].server == common.server
    )
    assert all(r.metadata.get("session_id") != "0ld5e55" for r in row.base)
    assert len(row.base) == len(compare(base, head).rows[0].base)
    text = "\n".join(render([*base, *older], head, "a", "b"))
    assert "session 0ld5e5 (from 2000-01-01T00:00:00Z)" in text


def _probed(records: list, ops: float, session: str) -> list:
    """Records as if their session had probed its host at `ops` work units per second."""
    from dataclasses import replace

    start = {"version": 1, "ops_per_s": ops}
    speed = {"start": start, "latest": start, "change": 1.0, "changed": False}
    return [
        replace(r, metadata={**r.metadata, "speed": speed, "session_id": session}) for r in records
    ]


def test_compare_names_the_ratio_of_the_two_hosts_speed_probes() -> None:
    """BASE on a host probed at 1,000 ops/s, HEAD at 310: the report says HEAD's host ran at
    0.31× and that the ratios mix host speed with the change; within ±10 % it says one class;
    before the probe it says the speed is unknown."""
    base, _ = load_records(FIXTURES / "machine-a")
    slow = "\n".join(render(_probed(base, 1000.0, "b"), _probed(base, 310.0, "h"), "a", "b"))
    assert "HEAD's host ran at 0.31× BASE's (probe 310 vs 1,000 ops/s): two speed classes" in slow
    same = "\n".join(render(_probed(base, 1000.0, "b"), _probed(base, 980.0, "h"), "a", "b"))
    assert "ran at 0.98× BASE's" in same and "one speed class" in same
    old = "\n".join(render(base, _probed(base, 980.0, "h"), "a", "b"))
    assert "not probed on BASE" in old
