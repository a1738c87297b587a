"""Studies measured in network namespaces at the command line (bench.studies.runner): refused
without root (one line, exit 2), skipped from NAME=all without root, bad study files named."""

from pathlib import Path

import pytest

from bench import cli
from bench.core import studyfile
from bench.host import netns
from bench.studies import schema
from bench.studies.schema import StudyError

NAMESPACED = ["accept-queue-abort", "lb-keepalive-race", "port-exhaustion"]


def test_refused_without_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not root: `make study NAME=port-exhaustion` exits 2 with one line, writes nothing and
    creates no namespace."""
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    before = netns.list_namespaces()
    status = cli.main(["study", "--name=port-exhaustion", f"--results={tmp_path}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1 and "needs root" in err[0]
    assert not (tmp_path / "records").exists()
    assert netns.list_namespaces() == before


def test_all_without_root_skips_namespace_studies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NAME=all without root: the namespace studies are left out, with one line saying so
    (the others run as before; here the run itself is replaced to stop before any load)."""
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    seen: list[list[str]] = []

    def fake_execute(
        names, base, duration, execute, sections, arms=None, rounds=None, tune_budget=None
    ):
        seen.append(list(names))
        return 0

    monkeypatch.setattr("bench.studies.runner.execute_studies", fake_execute)
    assert cli.main(["study", "--name=all", f"--results={tmp_path}"]) == 0
    assert set(NAMESPACED) <= set(schema.study_names())
    assert seen and seen[0] and not set(seen[0]) & set(NAMESPACED)


def test_bad_proxy_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A study file whose proxy is not none/nginx/alb is refused, naming the choices."""
    (tmp_path / "bad.toml").write_text(
        'title = "t"\nsource = "s"\nclaim = "c"\ndiffers = "d"\nexpect = "e"\n'
        '[run]\nnamespace = true\nproxy = "haproxy"\n[[arm]]\nid = "a"\nlabel = "l"\n'
        'server = "granian"\nload = "race"\n'
    )
    monkeypatch.setattr(studyfile, "STUDIES_DIR", tmp_path)
    with pytest.raises(StudyError, match="proxy must be one of none, nginx, alb"):
        schema.load_study("bad")


def _namespace_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    how: tuple[object, dict[str, str]],
) -> tuple[list[tuple[str, int]], int]:
    """A namespace study's batch through runner.execute_in_namespaces at make study's TRIALS
    (`how`: the rounds, and arms measured as another arm's record) with the measurement
    replaced: each run appends its arm's real record (port-exhaustion, captured on the
    reference machine) as that round's, TIME_WAIT moved a little per round as runs do.
    Returns the (arm, round) runs in order and the exit status."""
    from dataclasses import replace

    from bench.core.progress import Progress
    from bench.core.record import load_records
    from bench.harness.recorder import Recorder
    from bench.host.placement import cpu_placement
    from bench.host.procs import ProcessTable
    from bench.load import tools
    from bench.studies import runner
    from bench.studies.arms import arm_options, base_options

    rounds, like = how
    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "port-exhaustion"
    real = {str(r.metadata["study_arm"]): r for r in load_records(fixtures)[0]}
    study = schema.load_study(name)
    batch = [(a, arm_options(study, a, base_options(tmp_path, 1), "run1")) for a in study.arms]
    recorder = Recorder({"hostname": "t"}, cpu_placement(False), tools()["oha"], Progress(1, 0))
    calls: list[tuple[str, int]] = []

    def measure(table, spaces, rec, what, study_dir, trial=1):  # type: ignore[no-untyped-def]
        arm = what[1].id
        calls.append((arm, trial))
        found = real.get(like.get(arm, arm))
        if found is not None:
            sockets = dict(found.sockets or {})
            sockets["time_wait_max"] = int(sockets["time_wait_max"]) + 3 * trial
            meta = {**found.metadata, "study_arm": arm}
            rec.records.append(replace(found, trial=trial, sockets=sockets, metadata=meta))

    def guarded(results, sections, body, note):  # type: ignore[no-untyped-def]
        return body(ProcessTable(), tmp_path)

    monkeypatch.setattr(runner, "_measure_one", measure)
    monkeypatch.setattr(runner, "_recorder", lambda run_dir, batch, runs: recorder)
    monkeypatch.setattr(runner.harness_run, "guarded", guarded)
    status = runner.execute_in_namespaces(study, batch, lambda records: [], rounds)  # type: ignore[arg-type]
    return calls, status


def test_namespace_arms_run_in_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A judged namespace study (port-exhaustion's checks) runs make study's TRIALS: every
    arm's round 1 before any round 2, each arm each round once; a described one (the
    keep-alive race, judged over one long run's events) runs each arm once."""
    calls, status = _namespace_run(tmp_path, monkeypatch, "port-exhaustion", (3, {}))
    arms = {a.id for a in schema.load_study("port-exhaustion").arms}
    assert status == 0
    assert sorted(calls) == sorted((a, t) for a in arms for t in (1, 2, 3))
    assert [t for _, t in calls] == sorted(t for _, t in calls)
    race, _ = _namespace_run(tmp_path / "race", monkeypatch, "lb-keepalive-race", (3, {}))
    assert race and {t for _, t in race} == {1}
    assert len(race) == len(schema.load_study("lb-keepalive-race").arms)


def test_namespace_study_raced_until_its_checks_are_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRIALS=auto: the first rounds, then the judge of the study's checks (the verdict's
    function): port-exhaustion's real records decide all three checks (3,911 502s in 5,000
    against 0; TIME_WAIT 1,091 against 12) in the first three rounds, so no fourth runs. With
    tcp_tw_reuse=1 measured as tcp_tw_reuse=0 (no difference), its check stays undecided:
    only its two arms race on, to the looks' end."""
    from bench.core import plan

    auto = plan.Precision(budget_s=600)
    calls, status = _namespace_run(tmp_path, monkeypatch, "port-exhaustion", (auto, {}))
    assert status == 0 and max(t for _, t in calls) == 3 and len(calls) == 4 * 3
    same = {"ka-off-reuse-1": "ka-off-reuse-0"}
    calls, _ = _namespace_run(tmp_path / "same", monkeypatch, "port-exhaustion", (auto, same))
    later = {arm for arm, t in calls if t > 3}
    assert max(t for _, t in calls) > 3
    assert later == {"ka-off-reuse-0", "ka-off-reuse-1"}
