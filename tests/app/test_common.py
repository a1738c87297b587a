"""The app's pure functions: TechEmpower's clamping, escaping, the CPU work.

Runs in the harness venv, which has no Flask: only app_common.common is imported, and it
needs jinja2, so the test is skipped cleanly where jinja2 is absent.
"""

import sys
import sysconfig

import pytest

common = pytest.importorskip("app_common.common", reason="jinja2 is in the server venvs only")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, 1),
        ("", 1),
        ("foo", 1),
        ("0", 1),
        ("-1", 1),
        ("1", 1),
        ("20", 20),
        ("500", 500),
        ("501", 500),
        ("10" * 30, 1),
        ("１２", 12),
        ("٣", 3),
        ("1e3", 1),
        (" 7 ", 7),
    ],
)
def test_clamp_queries(raw: str | None, expected: int) -> None:
    """Missing or non-numeric -> 1; numbers clamped to 1..500; huge digit strings -> 1."""
    assert common.clamp_queries(raw) == expected


def test_clamp_ms_and_compute_caps() -> None:
    """ms clamps to 0..10000 (bad -> 0); compute n to 1..1000000 (bad -> 10000)."""
    assert [common.clamp_ms(v) for v in (None, "x", "-5", "50", "99999")] == [0, 0, 0, 50, 10_000]
    assert [common.clamp_compute(v) for v in (None, "x", "0", "5", "10" * 9)] == [
        10_000,
        10_000,
        1,
        5,
        10_000,
    ]


def test_fortunes_are_escaped_sorted_and_include_the_extra_row() -> None:
    """Script tags are escaped, unicode kept, the request-time fortune added, sorted."""
    page = common.render_fortunes([(11, "<script>x</script>"), (12, "フレームワーク")])
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert page.index("&lt;script") < page.index("Additional fortune") < page.index("フレーム")


def test_compute_is_deterministic() -> None:
    """The same n gives the same result."""
    assert common.compute(1000) == common.compute(1000) == sum(i * i % 7 for i in range(1000))


def test_interpreter_payload_of_this_process() -> None:
    """app_common's /interpreter payload as the serving process reads it: this interpreter's
    version, its build, and the GIL state only where it can be off."""
    payload = common.interpreter()
    assert payload["version"] == ".".join(map(str, sys.version_info[:3]))
    free = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    assert payload["build"] == ("free-threaded" if free else "default")
    assert payload["gil_enabled"] == (sys._is_gil_enabled() if free else None)  # type: ignore[attr-defined]
