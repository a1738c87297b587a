"""When the measured run counts responses by status (a cost per response in wrk): behind a
proxy, after a warmup that saw failed statuses, or without a warmup; otherwise not."""

import dataclasses
from pathlib import Path

import pytest

from bench.core import plan
from bench.harness.measure import Settings, measure_point
from bench.host.procs import ProcessTable
from bench.load import Errors, LoadResult
from tests.fakes import FakeServed, FakeSite, FakeTool, result


@dataclasses.dataclass
class WarmupSays(FakeTool):
    """A fake tool whose warmup answers with `warmup_non_2xx` failed statuses."""

    warmup_non_2xx: int = 0

    def run(self, table, request, watch=None, sampler=None) -> LoadResult:
        """The warmup's scripted failures; everything else as FakeTool."""
        if sampler is None and request.out.name.endswith(".warmup"):
            self.calls.append(request)
            return dataclasses.replace(
                result(), errors=Errors(non_2xx=self.warmup_non_2xx, by_status={503: 1})
            )
        return super().run(table, request, watch, sampler)


@pytest.mark.parametrize(
    ("proxied", "warmup_s", "warmup_non_2xx", "counted"),
    [
        (False, 2, 0, False),  # the server alone, a clean warmup: wrk's own non-2xx suffices
        (False, 2, 3, True),  # failures seen in the warmup: count them by status
        (True, 2, 0, True),  # a proxy's log is read inside the tool's window
        (False, 0, 0, True),  # no warmup, no evidence: count
    ],
)
def test_statuses_are_counted_only_when_needed(
    proxied: bool, warmup_s: int, warmup_non_2xx: int, counted: bool, tmp_path: Path
) -> None:
    """The measured request asks for status counting exactly in the cases that need it; the
    primer and the warmup always count (they are not measured)."""
    tool = WarmupSays(warmup_non_2xx=warmup_non_2xx)
    served = FakeServed(FakeSite(), "granian", proxied=proxied)
    settings = Settings(ProcessTable(), tmp_path, 2, warmup_s, True, 10, None)
    run = plan.RunSpec("granian", "plaintext", 10, 1)
    measure_point(settings, tool, served, run, set())
    assert [r.statuses for r in tool.measured] == [counted]
    assert all(r.statuses for r in tool.calls if r not in tool.measured)


@pytest.mark.parametrize(("scenario", "warmed"), [("websocket", True), ("websocket-idle", False)])
def test_a_scenario_that_does_not_warm_gets_no_warmup(
    scenario: str, warmed: bool, tmp_path: Path
) -> None:
    """WARMUP=2: the echo scenario's measured run follows a warmup at its connections; the idle
    one's (its warmup's connections would leave memory the measured ones reuse) follows the
    primer only."""
    tool = FakeTool()
    served = FakeServed(FakeSite(), "uvicorn")
    settings = Settings(ProcessTable(), tmp_path, 2, 2, True, 10, None)
    measure_point(settings, tool, served, plan.RunSpec("uvicorn", scenario, 100, 1), set())
    phases = [r.out.name.rsplit(".", 1)[1] for r in tool.calls]
    assert phases == (["primer", "warmup", "measure"] if warmed else ["primer", "measure"])


def test_idle_runs_on_one_start_grow_from_its_first_rss() -> None:
    """websocket-idle: a repeat (or a later point) on the same server start keeps the start's
    first RSS before load as its own (the memory the first run freed is reused, so its own
    window would show no growth); an echo run keeps its window's."""
    from bench.harness.measure import Measurement
    from bench.harness.session import Session
    from bench.observe.sample import Resources

    def measured(start: float, peak: float) -> Measurement:
        resources = Resources(1.0, peak, 1.0, None, server_rss_start_mb=start)
        return Measurement(result(), "now", resources=resources)

    session = Session(None, None, None, None)  # type: ignore[arg-type]
    idle = plan.RunSpec("uvicorn", "websocket-idle", 1000, 1)
    first = session._grown_from_start(idle, measured(160.0, 200.0))
    repeat = session._grown_from_start(idle, measured(200.0, 201.0))
    assert first.resources and first.resources.server_rss_start_mb == 160.0
    assert repeat.resources and repeat.resources.server_rss_start_mb == 160.0
    echo = session._grown_from_start(plan.RunSpec("uvicorn", "websocket", 10, 1), measured(1, 2))
    assert echo.resources and echo.resources.server_rss_start_mb == 1
