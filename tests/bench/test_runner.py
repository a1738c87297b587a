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
