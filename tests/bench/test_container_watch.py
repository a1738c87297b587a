"""bench.stack.containers.ContainerServed's watchdog under a memory limit: a worker the kernel
OOM-kills is measured (kills counted, the leader followed), never a silent void; what a failed
run's record keeps."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.host.container_cgroup import ContainerCgroup
from bench.host.docker import Limits
from bench.stack import containers
from bench.stack.site import LocalServed

CAPTURED_V1 = (
    Path(__file__).parent.parent / "fixtures" / "container_cgroup" / "v1-gunicorn-sync-cpus0.5"
)


class _Group(ContainerCgroup):
    """The captured container's files, with an OOM kill count of our choosing."""

    def oom_kills(self) -> int | None:
        return self.dirs["kills"]  # type: ignore[return-value]


def _served(memory: int | None, kills: int) -> containers.ContainerServed:
    served = containers.ContainerServed.__new__(containers.ContainerServed)
    served.limits = Limits(cpus=0.5, memory_bytes=memory)
    served.container_cgroup = _Group("v1", {"kills": kills})  # type: ignore[dict-item]
    served.oom_kills_seen = None
    served.image = None
    served.container = "pwb-1-granian-1"
    return served


@pytest.mark.parametrize(("memory", "leaders_only"), [(None, False), (113 * 2**20, True)])
def test_under_a_memory_limit_only_the_leader_is_followed(
    memory: int | None, leaders_only: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a memory limit a dead worker voids the run as natively; with one, the
    watchdog follows the container's first process alone (its master respawns workers)."""
    asked: list[bool] = []
    monkeypatch.setattr(LocalServed, "watch", lambda self, lo=False, when="": asked.append(lo))
    _served(memory, 0).watch()
    assert asked == [leaders_only]


def test_a_broken_run_says_how_many_kills_and_keeps_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server exited after OOM kills: the reason counts them, and the facts a failed
    record takes carry them (the container and its cgroup are gone afterwards)."""
    reason = "server exited with code 1 during load"
    monkeypatch.setattr(LocalServed, "watch", lambda self, lo=False, when="": reason)
    served = _served(113 * 2**20, 4)
    assert served.watch() == f"{reason} (4 OOM kill(s) in the container's cgroup)"
    assert served.facts()["oom_kills_total"] == 4
    monkeypatch.setattr(LocalServed, "watch", lambda self, lo=False, when="": None)
    assert _served(113 * 2**20, 4).watch() is None  # kills alone do not void the run


def test_the_captured_group_reads_as_the_real_one() -> None:
    """The fake above reads the same files as the real reader apart from the kill count."""
    real = ContainerCgroup("v1", {c: CAPTURED_V1 / c for c in ("cpu", "cpuacct", "memory")})
    assert real.oom_kills() == 0


def test_a_container_that_never_answered_has_its_kills_read_before_removal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that never answered (workers killed or thrashing at the memory limit) fails
    before its cgroup was located: the site locates it then, reads the kills, and the
    ServeError carries them (reason and container facts) after the container is removed."""
    from bench.stack.site import ServeError

    site = containers.ContainerSite.__new__(containers.ContainerSite)
    served = _served(113 * 2**20, 0)
    served.container_cgroup = None
    monkeypatch.setattr(containers.docker, "container_pid", lambda name: 4242)
    monkeypatch.setattr(
        containers.ContainerCgroup,
        "of_pid",
        classmethod(lambda cls, pid: _Group("v1", {"kills": 3})),
    )
    assert site._kills_so_far(served) == 3
    stopped: list[str] = []

    def fail(*args: object) -> None:
        raise ServeError("server did not start: not answering GET /plaintext after 60 s", {})

    monkeypatch.setattr(site, "_command", lambda *a: ([], {}), raising=False)
    monkeypatch.setattr(site, "_start", lambda *a: served, raising=False)
    monkeypatch.setattr(site, "_check_container", fail, raising=False)
    monkeypatch.setattr(site, "stop", lambda s: stopped.append(s.container), raising=False)
    site.db = object()  # type: ignore[assignment]
    site.run_dir = Path("/nonexistent")
    served.container_cgroup = None
    monkeypatch.setattr(containers.ready, "free_port", lambda: 8000)
    site.images = {"x": object()}  # type: ignore[dict-item]  # the image the run found
    spec, opts = SimpleNamespace(id="x"), SimpleNamespace(python=None, proxy=None)
    with pytest.raises(ServeError) as caught:
        site.serve(spec, {}, None, opts, "x.log")  # type: ignore[arg-type]
    assert str(caught.value).endswith("(3 OOM kill(s) in the container's cgroup)")
    assert caught.value.container == {"oom_kills_total": 3}
    assert stopped == ["pwb-1-granian-1"]
