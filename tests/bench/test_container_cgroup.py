"""bench.host.container_cgroup over captured (v1, this machine) and written (v2) files: where a
container's cgroup is, and its window's CPU, throttling, memory and OOM kills."""

from pathlib import Path

import pytest

from bench.host.container_cgroup import (
    ContainerCgroup,
    ContainerCgroupError,
    anon_bytes,
    parse_mountinfo,
    parse_proc_cgroup,
    window,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "container_cgroup"


def test_v1_hybrid_host_is_read_as_v1() -> None:
    """This machine: the v1 controllers' mounts; the controller-less cgroup2 mount is not
    mistaken for the container's hierarchy."""
    mounts, unified = parse_mountinfo((FIXTURES / "mountinfo-v1-hybrid").read_text())
    assert mounts["cpu"] == Path("/sys/fs/cgroup/cpu")
    assert mounts["memory"] == Path("/sys/fs/cgroup/memory")
    assert unified == Path("/sys/fs/cgroup/unified")
    paths, v2 = parse_proc_cgroup((FIXTURES / "proc-cgroup-v1-docker").read_text())
    group = ContainerCgroup.locate(mounts, unified, paths, v2)
    assert group.version == "v1"
    assert group.dirs["cpu"].parent == Path("/sys/fs/cgroup/cpu/docker")
    assert group.dirs["memory"].name == group.dirs["cpu"].name  # the container's full id


def test_v2_host_needs_the_controllers_enabled(tmp_path: Path) -> None:
    """v2: the unified mount + the 0:: path, when cpu and memory are enabled there; without
    them one clear error."""
    text = (FIXTURES / "mountinfo-v2").read_text().replace("/sys/fs/cgroup", str(tmp_path))
    mounts, unified = parse_mountinfo(text)
    assert mounts == {} and unified == tmp_path
    paths, v2 = parse_proc_cgroup((FIXTURES / "proc-cgroup-v2").read_text())
    assert paths == {} and v2 is not None and v2.endswith(".scope")
    scope = tmp_path / v2.lstrip("/")
    scope.mkdir(parents=True)
    with pytest.raises(ContainerCgroupError, match="neither v1 mounts nor enabled"):
        ContainerCgroup.locate(mounts, unified, paths, v2)
    (scope / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    group = ContainerCgroup.locate(mounts, unified, paths, v2)
    assert group == ContainerCgroup("v2", {"unified": scope})


def _v2_files(root: Path, usage_us: int, throttled_us: int, periods: int, oom: int) -> None:
    (root / "cpu.max").write_text("50000 100000\n")
    (root / "cpu.stat").write_text(
        f"usage_usec {usage_us}\nuser_usec {usage_us // 2}\nsystem_usec {usage_us // 2}\n"
        f"nr_periods {periods}\nnr_throttled {periods // 2}\nthrottled_usec {throttled_us}\n"
    )
    (root / "memory.max").write_text("536870912\n")
    (root / "memory.current").write_text(str(300 * 2**20) + "\n")
    (root / "memory.peak").write_text(str(400 * 2**20) + "\n")
    (root / "memory.events").write_text(f"low 0\nhigh 0\nmax 12\noom {oom}\noom_kill {oom}\n")
    (root / "cgroup.procs").write_text("101\n102\n")


def test_v2_window(tmp_path: Path) -> None:
    """cpu.max, cpu.stat (µs), memory.max/current/peak and memory.events become the window's
    keys: CPU %, throttled ms, OOM kills as deltas; the peak counts from the cgroup's start."""
    group = ContainerCgroup("v2", {"unified": tmp_path})
    _v2_files(tmp_path, usage_us=1_000_000, throttled_us=5_000, periods=10, oom=0)
    before = group.snapshot()
    _v2_files(tmp_path, usage_us=1_500_000, throttled_us=255_000, periods=20, oom=2)
    after = group.snapshot()
    after = after.__class__(before.at + 1.0, *list(after.__dict__.values())[1:])
    assert group.reset_peak() is False
    got = window(group, before, after, peak_reset=False)
    assert got["cgroup_version"] == "v2"
    assert (got["quota_us"], got["period_us"], got["memory_limit_bytes"]) == (
        50_000,
        100_000,
        512 * 2**20,
    )
    assert got["cpu_pct"] == 50.0  # 0.5 s of CPU in 1 s
    assert (got["nr_periods"], got["nr_throttled"], got["throttled_ms"]) == (10, 5, 250.0)
    assert (got["memory_mb_end"], got["memory_peak_mb"]) == (300.0, 400.0)
    assert got["memory_peak_scope"] == "container"
    assert got["oom_kills"] == 2 and got["memory_failcnt"] is None
    assert group.pids() == {101, 102}


def test_v2_without_limits_reads_none(tmp_path: Path) -> None:
    """`max` in cpu.max and memory.max: no quota, no memory limit."""
    _v2_files(tmp_path, 0, 0, 0, 0)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    (tmp_path / "memory.max").write_text("max\n")
    limits = ContainerCgroup("v2", {"unified": tmp_path}).limits()
    assert limits == {"quota_us": None, "period_us": 100_000, "memory_limit_bytes": None}


def test_v1_window(tmp_path: Path) -> None:
    """v1: one directory per controller; throttled_time in ns, cpuacct.usage in ns, the peak
    reset at the window's start, oom_kill from memory.oom_control, failcnt."""
    dirs = {c: tmp_path / c for c in ("cpu", "cpuacct", "memory")}
    for d in dirs.values():
        d.mkdir()

    def files(usage_ns: int, throttled_ns: int, oom: int, failcnt: int) -> None:
        (dirs["cpu"] / "cpu.cfs_quota_us").write_text("100000\n")
        (dirs["cpu"] / "cpu.cfs_period_us").write_text("100000\n")
        (dirs["cpu"] / "cpu.stat").write_text(
            f"nr_periods 40\nnr_throttled 8\nthrottled_time {throttled_ns}\n"
        )
        (dirs["cpuacct"] / "cpuacct.usage").write_text(f"{usage_ns}\n")
        (dirs["memory"] / "memory.limit_in_bytes").write_text("9223372036854771712\n")
        (dirs["memory"] / "memory.usage_in_bytes").write_text(str(64 * 2**20))
        (dirs["memory"] / "memory.max_usage_in_bytes").write_text(str(80 * 2**20))
        (dirs["memory"] / "memory.oom_control").write_text(
            f"oom_kill_disable 0\nunder_oom 0\noom_kill {oom}\n"
        )
        (dirs["memory"] / "memory.failcnt").write_text(f"{failcnt}\n")

    group = ContainerCgroup("v1", dirs)
    files(2_000_000_000, 0, 1, 3)
    before = group.snapshot()
    assert group.reset_peak() is True
    assert (dirs["memory"] / "memory.max_usage_in_bytes").read_text() == "0"
    files(3_000_000_000, 1_500_000, 1, 7)
    after = group.snapshot()
    after = after.__class__(before.at + 2.0, *list(after.__dict__.values())[1:])
    got = window(group, before, after, peak_reset=True)
    assert got["memory_limit_bytes"] is None  # v1's "no limit"
    assert got["cpu_pct"] == 50.0 and got["throttled_ms"] == 1.5
    assert got["oom_kills"] == 0 and got["memory_failcnt"] == 4
    assert got["memory_peak_scope"] == "window"


CAPTURED_V1 = FIXTURES / "v1-gunicorn-sync-cpus0.5"


def _captured_v1(root: Path) -> ContainerCgroup:
    return ContainerCgroup("v1", {c: root / c for c in ("cpu", "cpuacct", "memory")})


def test_v1_captured_files_of_a_container_at_half_a_cpu(tmp_path: Path) -> None:
    """Real files of gunicorn-sync's container at --cpus=0.5 on this machine (copied from
    /sys/fs/cgroup/{cpu,cpuacct,memory}/docker/<id>/ under load): the quota as the kernel
    holds it, throttling, no memory limit, the anonymous memory from memory.stat's total_rss
    (not the usage, which holds the page cache too) and no OOM kill."""
    group = _captured_v1(CAPTURED_V1)
    assert group.limits() == {"quota_us": 50_000, "period_us": 100_000, "memory_limit_bytes": None}
    snap = group.snapshot()
    assert (snap.throttling.nr_periods, snap.throttling.nr_throttled) == (23, 17)
    assert snap.memory_anon_bytes == 51_318_784
    assert snap.memory_bytes > snap.memory_anon_bytes  # usage = anon + cache + kernel
    assert snap.oom_kills == 0 and snap.memory_failcnt == 0


def test_anonymous_memory_is_read_per_version() -> None:
    """v1: the hierarchy's total_rss before the cgroup's own rss; v2: anon; neither: None."""
    v1 = (CAPTURED_V1 / "memory" / "memory.stat").read_text()
    assert anon_bytes(v1, "v1") == 51_318_784
    assert anon_bytes("rss 4096\ntotal_rss 8192\n", "v1") == 8192
    assert anon_bytes("rss 4096\n", "v1") == 4096
    assert anon_bytes((FIXTURES / "v2-memory.stat").read_text(), "v2") == 94_371_840
    assert anon_bytes("file 10\n", "v2") is None


def test_window_keeps_the_anonymous_memory_and_every_kill_since_start(tmp_path: Path) -> None:
    """The window's memory_anon_mb_end, and oom_kills_total: the cgroup's counter since the
    container started (kills at start count), beside the window's own delta."""
    group = ContainerCgroup("v2", {"unified": tmp_path})
    _v2_files(tmp_path, usage_us=1_000_000, throttled_us=0, periods=10, oom=2)
    (tmp_path / "memory.stat").write_text((FIXTURES / "v2-memory.stat").read_text())
    before = group.snapshot()
    _v2_files(tmp_path, usage_us=1_100_000, throttled_us=0, periods=20, oom=5)
    got = window(group, before, group.snapshot(), peak_reset=False)
    assert got["oom_kills"] == 3 and got["oom_kills_total"] == 5
    assert got["memory_anon_mb_end"] == 90.0
    assert group.oom_kills() == 5


def test_v2_events_with_an_oom_group_kill_line(tmp_path: Path) -> None:
    """memory.events as newer kernels write it (oom_group_kill last): oom_kill still read."""
    _v2_files(tmp_path, 0, 0, 0, 0)
    (tmp_path / "memory.events").write_text((FIXTURES / "v2-memory.events").read_text())
    assert ContainerCgroup("v2", {"unified": tmp_path}).oom_kills() == 7


def test_a_containers_processes_are_the_harness_own_not_foreign_load(tmp_path: Path) -> None:
    """A server in its container has a leader here (the `docker run` client) and a cgroup:
    the foreign-load sampler counts the cgroup's processes as the harness's own and leaves
    the engine's daemons out. It used to take the local-server branch first, and every
    container-limits run was marked "foreign load: 50 % of a CPU (python 50 %)": its own
    server at --cpus=0.5."""
    import os
    import shutil
    from types import SimpleNamespace

    from bench.harness.observers import Observers
    from bench.observe.foreign import ENGINE_DAEMONS

    root = tmp_path / "group"
    shutil.copytree(CAPTURED_V1, root)
    (root / "cpu" / "cgroup.procs").write_text("4242\n4243\n")
    proc = SimpleNamespace(pid=os.getpid())
    server = SimpleNamespace(proc=proc, knobs={})
    served = SimpleNamespace(server=server, cgroup=None, container_cgroup=_captured_v1(root))
    found = Observers.of(served, 10.0)  # type: ignore[arg-type]
    assert found.foreign is not None and {4242, 4243, os.getpid()} <= found.foreign.own()
    assert found.foreign.excluded_names == ENGINE_DAEMONS
