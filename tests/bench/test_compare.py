"""make compare: two result sets side by side, ratios with intervals and significance marks;
sets it cannot compare are refused with one line and exit 2."""

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from bench import cli
from bench.core.record import PROBE_VERSION, load_records
from bench.report.compare import UNDECIDED, compare, gate_verdict, render
from bench.report.groups import rps_values
from bench.report.stats import Difference, difference

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

    start = {"version": PROBE_VERSION, "ops_per_s": ops}
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


# -- the regression gate: make compare FAIL_BELOW= FAIL_ABOVE= (issue 57 item 4) --------------


def _result_set(source: Path, target: Path, scale: Callable[[dict], None] | None = None) -> Path:
    """A results directory as the harness writes it (target/records/*.json) holding copies of
    the real records of `source`, each changed by `scale` where given."""
    records = target / "records"
    shutil.copytree(source, records)
    for path in sorted(records.glob("*.json")) if scale else ():
        data = json.loads(path.read_text())
        scale(data)
        path.write_text(json.dumps(data, sort_keys=True))
    return target


def _rps_times(factor: float, server: str | None = None, scenario: str | None = None):
    """A change of a record's req/s by `factor` (of the given server and scenario only)."""

    def scale(data: dict) -> None:
        if server in (None, data["server"]) and scenario in (None, data["scenario"]):
            for key in ("rps", "achieved_rps"):  # a failed run has none
                if data.get(key) is not None:
                    data[key] *= factor

    return scale


def _gate_rows(out: str) -> list[str]:
    """The gate section's table rows."""
    return [line for line in out.split("Gate, per point:")[1].splitlines() if "| c" in line]


@pytest.mark.parametrize(
    ("diff", "higher_is_better", "state", "text"),
    [
        (
            Difference(0.8, 0.78, 0.82, 0.001),
            True,
            "regressed",
            "interval [0.78–0.82] wholly below 0.97",
        ),
        (Difference(0.98, 0.9, 1.05, 0.5), True, "undecided", "interval [0.90–1.05] spans 0.97"),
        (
            Difference(1.0, 0.98, 1.02, 0.9),
            True,
            "within",
            "interval [0.98–1.02] wholly at or above",
        ),
        # an end at the bound is not beyond it; 3 decimals where 2 would read as the bound
        (Difference(0.9, 0.85, 0.97, 0.01), True, "undecided", "[0.85–0.97] spans 0.97"),
        (Difference(0.9, 0.85, 0.9704, 0.01), True, "undecided", "[0.85–0.970] spans 0.97"),
        (Difference(1.5, 1.3, 1.7, 0.001), False, "regressed", "[1.30–1.70] wholly above 0.97"),
        (Difference(0.9, 0.8, 0.95, 0.01), False, "within", "wholly at or below 0.97"),
        (Difference(0.5, None, None, None), True, "undecided", "1 trial on a side, no interval"),
    ],
)
def test_the_gate_decides_on_the_interval_alone(
    diff: Difference, higher_is_better: bool, state: str, text: str
) -> None:
    """Regressed only when the whole interval is beyond the bound on the worse side; a ratio
    without an interval (one trial) is undecided whatever its size."""
    trials = 1 if diff.low is None else 5
    verdict = gate_verdict(diff, 0.97, higher_is_better, trials)
    assert verdict.state == state and verdict.text.startswith(state) and text in verdict.text


def test_no_interval_with_several_trials_is_undecided_and_says_why() -> None:
    """Identical trials (no spread) or no figure on a side (no p99): undecided, with why."""
    verdict = gate_verdict(Difference(0.5, None, None, None), 0.97, True, trials=3)
    assert verdict.state == UNDECIDED and "identical trials on both sides" in verdict.text
    verdict = gate_verdict(Difference(None, None, None, None), 1.1, False, trials=3)
    assert verdict.text == "undecided: no figure on a side, no interval"


def test_the_fixture_records_against_themselves_pass_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """machine-a (1 and 2 trials a point) and the A/A run (5 a point) against copies of
    themselves: exit 0, every point within or undecided, the answer on the first screen."""
    for source in (FIXTURES / "machine-a", AA / "base"):
        base = _result_set(source, tmp_path / source.name / "base")
        head = _result_set(source, tmp_path / source.name / "head")
        argv = ["compare", f"--base={base}", f"--head={head}", "--fail-below=0.97"]
        assert cli.main(argv) == 0
        out = capsys.readouterr().out
        assert "**Gate: passed, exit status 0: no point regressed (" in out.split("\n\n")[1]
        rows = _gate_rows(out)
        assert rows and all(("| undecided: " in r or "| within: " in r) for r in rows), rows


def test_req_s_lowered_by_20_percent_fails_the_gate_naming_the_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The A/A run's records against a copy with req/s 20 % lower (5 trials a point): exit 1,
    every point regressed and named; only granian's /db lowered: those two points alone."""
    base = _result_set(AA / "base", tmp_path / "base")
    slower = _result_set(AA / "base", tmp_path / "slower", _rps_times(0.8))
    assert cli.main(["compare", f"--base={base}", f"--head={slower}", "--fail-below=0.97"]) == 1
    out = capsys.readouterr().out
    assert "**Gate: regressed at 8 of 8 points, exit status 1: db granian w2 t4 b1024 c10;" in out
    rows = _gate_rows(out)
    assert len(rows) == 8 and all("| regressed: interval [0.7" in r for r in rows), rows
    assert "wholly below 0.97 |" in rows[0]
    one = _result_set(AA / "base", tmp_path / "one", _rps_times(0.8, "granian", "db"))
    assert cli.main(["compare", f"--base={base}", f"--head={one}", "--fail-below=0.97"]) == 1
    out = capsys.readouterr().out
    assert (
        "Gate: regressed at 2 of 8 points, exit status 1: db granian w2 t4 b1024 c10; "
        "db granian w2 t4 b1024 c50**" in out
    )
    regressed = [r for r in _gate_rows(out) if "| regressed: " in r]
    assert len(regressed) == 2 and all("| db | granian |" in r for r in regressed)


def test_a_point_with_one_or_two_trials_never_fails_a_20_percent_drop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """machine-a lowered by 20 %: its one-trial points have no interval and its two-trial
    points' intervals (Holm over three) reach 1.00×: exit 0, all undecided, none regressed."""
    base = _result_set(FIXTURES / "machine-a", tmp_path / "base")
    slower = _result_set(FIXTURES / "machine-a", tmp_path / "slower", _rps_times(0.8))
    assert cli.main(["compare", f"--base={base}", f"--head={slower}", "--fail-below=0.97"]) == 0
    out = capsys.readouterr().out
    assert "(req/s: from 95 % to 98.3 % over 3 tested points)" in out
    rows = _gate_rows(out)
    assert len(rows) == 8 and all("| undecided: " in r for r in rows)
    assert sum("| undecided: 1 trial on a side, no interval |" in r for r in rows) == 5
    assert sum("spans 0.97 |" in r for r in rows) == 3


def test_fail_above_gates_p99_from_make_s_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """FAIL_ABOVE=1.10 as make passes it (the environment, --from-env): p99 doubled on /db
    regresses those points, their req/s column is absent (FAIL_BELOW unset); the level of the
    intervals is stated."""

    def slower_p99(data: dict) -> None:
        if data["scenario"] == "db":
            data["latency_ms"]["p99"] *= 2

    base = _result_set(AA / "base", tmp_path / "base")
    head = _result_set(AA / "base", tmp_path / "head", slower_p99)
    for name in ("FAIL_BELOW", "FAIL_ABOVE", "BASE", "HEAD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BASE", str(base))
    monkeypatch.setenv("HEAD", str(head))
    monkeypatch.setenv("FAIL_ABOVE", "1.10")
    assert cli.main(["compare", "--from-env"]) == 1
    out = capsys.readouterr().out
    assert "| p99 HEAD/BASE, FAIL_ABOVE=1.1 |" in out and "FAIL_BELOW=" not in out
    regressed = [r for r in _gate_rows(out) if "| regressed: " in r]
    assert regressed and all("| db |" in r and "wholly above 1.1 |" in r for r in regressed)
    assert "p99: from 95 % to 99.4 % over 8 tested points" in out


def test_without_a_bound_there_is_no_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No FAIL_BELOW nor FAIL_ABOVE: no gate section, exit 0 whatever the ratios."""
    base = _result_set(AA / "base", tmp_path / "base")
    slower = _result_set(AA / "base", tmp_path / "slower", _rps_times(0.8))
    assert cli.main(["compare", f"--base={base}", f"--head={slower}"]) == 0
    assert "Gate" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--fail-below=abc", "FAIL_BELOW='abc' is not a number; give a ratio in 0.01..1"),
        ("--fail-below=0", "FAIL_BELOW=0 is out of range 0.01..1"),
        ("--fail-below=2", "FAIL_BELOW=2 is out of range 0.01..1"),
        ("--fail-above=0.5", "FAIL_ABOVE=0.5 is out of range 1..100"),
        ("--fail-above=inf", "FAIL_ABOVE=inf is out of range 1..100"),
    ],
)
def test_a_bad_bound_is_one_line_and_exit_2(
    option: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", f"--base={AA / 'base'}", f"--head={AA / 'head'}", option]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and not captured.out
