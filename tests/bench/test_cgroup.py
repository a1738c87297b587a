"""bench.host.cgroup: cpu.stat parsing over captured files, quota arithmetic, leftovers by
name; and, where this process may (root, a cpu controller), a real cgroup that throttles and
is removed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cli
from bench.host import cgroup

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "cgroup"


def test_v1_cpu_stat_throttled_time_is_ns() -> None:
    """A busy loop under a 0.2-CPU quota for 1 s (captured here): 10 of 11 periods throttled,
    792 ms throttled (throttled_time is in nanoseconds)."""
    stat = cgroup.parse_cpu_stat((FIXTURES / "v1-cpu.stat").read_text())
    assert stat == cgroup.Throttling(nr_periods=11, nr_throttled=10, throttled_ms=792.185984)


def test_a_cpu_stat_without_throttling_fields_is_refused() -> None:
    """The v2 root's cpu.stat (captured) has no bandwidth counters: not a quota's cgroup."""
    with pytest.raises(cgroup.CgroupError, match="throttled"):
        cgroup.parse_cpu_stat((FIXTURES / "v2-root-cpu.stat").read_text())


def test_v2_throttled_usec_is_microseconds() -> None:
    """cgroup-v2.rst's cpu.stat keys: throttled_usec in µs."""
    text = "usage_usec 10\nnr_periods 4\nnr_throttled 3\nthrottled_usec 2500\n"
    assert cgroup.parse_cpu_stat(text) == cgroup.Throttling(4, 3, 2.5)


def test_the_delta_over_a_window() -> None:
    """Counters grow; the record keeps their growth over the measured window."""
    before = cgroup.Throttling(10, 4, 100.0)
    after = cgroup.Throttling(60, 30, 1350.5)
    assert after.minus(before) == cgroup.Throttling(50, 26, 1250.5)


@pytest.mark.parametrize(("quota", "us"), [(0.5, 50_000), (1.0, 100_000), (1.25, 125_000)])
def test_quota_in_microseconds_per_period(quota: float, us: int) -> None:
    """Docker's --cpus=N is N × the 100 ms period."""
    assert cgroup.quota_us(quota) == us


@pytest.mark.parametrize("quota", [0.0, 0.005, -1.0, float("nan"), float("inf"), 2000.0])
def test_quota_out_of_range_is_refused(quota: float) -> None:
    """Below the kernel's 1 ms per period, or not a finite number: ValueError."""
    with pytest.raises(ValueError):
        cgroup.quota_us(quota)


def test_leftovers_are_ours_and_of_dead_harnesses(tmp_path: Path) -> None:
    """Only pwb-cpu-<pid>-<n> directories whose pid is gone; anyone else's are left alone."""
    for name in ("pwb-cpu-111-1", "pwb-cpu-222-3", "pwb-cpu-x-1", "docker", "pwb-cpu-111"):
        (tmp_path / name).mkdir()
    found = cgroup.leftovers(tmp_path, alive=lambda pid: pid == 222)
    assert [p.name for p in found] == ["pwb-cpu-111-1"]


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "0.001", "nan", "5000"])
def test_cli_refuses_a_bad_quota(raw: str) -> None:
    """CPU_QUOTA that is no number of CPUs in range: one line naming the range."""
    with pytest.raises(cli.UsageError, match=r"CPU_QUOTA=.*0\.01\.\.1024"):
        cli.validate_cpu_quota(raw)


def test_cli_refuses_a_quota_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not root: cgroups cannot be created; refused in one line before anything starts."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(cli.UsageError, match="needs root"):
        cli.validate_cpu_quota("0.5")


def test_cli_refuses_a_quota_for_a_remote_target() -> None:
    """TARGET= runs elsewhere: no cgroup of ours can hold it."""
    with pytest.raises(cli.UsageError, match="TARGET"):
        cli.validate_cpu_quota("1", "http://10.0.0.5:8000")


def test_bench_exits_2_on_a_bad_quota() -> None:
    """`python -m bench run --cpu-quota=lots`: exit status 2 and one line."""
    result = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--cpu-quota=lots"],
        capture_output=True,
        text=True,
        cwd=Path(cgroup.__file__).resolve().parents[2],
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "CPU_QUOTA='lots'" in result.stderr


BUSY = "import time\nend = time.time() + 0.6\nwhile time.time() < end: pass"
needs_cgroups = pytest.mark.skipif(
    cgroup.unavailable() is not None, reason=str(cgroup.unavailable())
)


@needs_cgroups
def test_a_real_cgroup_throttles_a_busy_child_and_is_removed() -> None:
    """A busy child placed in a 0.1-CPU cgroup is throttled; removing the cgroup kills what
    is left inside and removes the directory."""
    group = cgroup.CpuCgroup.create(0.1)
    try:
        assert group.name.startswith(f"pwb-cpu-{os.getpid()}-")
        assert group.limits() == (10_000, 100_000)
        before = group.stat()
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import time\nend = time.time() + 0.6\nwhile time.time() < end: pass",
            ],
            preexec_fn=lambda: group.procs_file.write_text(str(os.getpid())),
        )
        assert child.wait(timeout=30) == 0
        delta = group.stat().minus(before)
        assert delta.nr_throttled > 0 and delta.throttled_ms > 0
        sleeper = subprocess.Popen(
            ["sleep", "60"], preexec_fn=lambda: group.procs_file.write_text(str(os.getpid()))
        )
        assert group.pids() == [sleeper.pid]
    finally:
        group.remove()
    assert not group.path.exists()
    assert sleeper.wait(timeout=10) == -9
