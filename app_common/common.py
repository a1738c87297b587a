"""What both app variants share: input clamping, SQL, the fortunes template, the CPU work.

Pure functions and constants only, so the WSGI (Flask) and ASGI (Quart) variants stay one app.
"""

from __future__ import annotations

import os
import platform
import sys
import sysconfig

from jinja2 import Environment

WORLD_ROWS = 10_000
MAX_QUERIES = 500
MAX_MS = 10_000  # one request may hold a worker for 10 s at most
MAX_COMPUTE = 1_000_000
DEFAULT_COMPUTE = 10_000

SELECT_WORLD = "SELECT id, randomnumber FROM world WHERE id = %s"
UPDATE_WORLD = "UPDATE world SET randomnumber = %s WHERE id = %s"
SELECT_FORTUNES = "SELECT id, message FROM fortune"
# A query that waits in the database: shows whether the driver lets other requests run.
DB_WAIT = "SELECT pg_sleep(%s)"
FORTUNE_EXTRA = (0, "Additional fortune added at request time.")

PLAINTEXT = b"Hello, World!"
JSON_MESSAGE = "Hello, World!"

_TEMPLATE = Environment(autoescape=True).from_string(
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
    "<tr><th>id</th><th>message</th></tr>"
    "{% for id, message in rows %}<tr><td>{{ id }}</td><td>{{ message }}</td></tr>{% endfor %}"
    "</table></body></html>"
)


def _clamp(raw: str | None, low: int, high: int, default: int) -> int:
    # Anything that is not a plain (short) integer falls back to the default: int() on a
    # 10 kB digit string is itself a CPU cost an attacker could pick.
    if raw is None or len(raw) > 12:
        return default
    try:
        value = int(raw)
    except ValueError:
        return default
    return max(low, min(high, value))


def clamp_queries(raw: str | None) -> int:
    """TechEmpower's rule for ?n=: missing or not a number -> 1, then clamp to 1..500."""
    return _clamp(raw, 1, MAX_QUERIES, 1)


def clamp_ms(raw: str | None) -> int:
    """Milliseconds to wait: missing or not a number -> 0, then clamp to 0..10000."""
    return _clamp(raw, 0, MAX_MS, 0)


def clamp_compute(raw: str | None) -> int:
    """Loop count for /compute: missing or not a number -> 10000, then clamp to 1..1000000."""
    return _clamp(raw, 1, MAX_COMPUTE, DEFAULT_COMPUTE)


def compute(n: int) -> int:
    """Deterministic CPU-bound work: sum of i*i mod 7 over range(n)."""
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def render_fortunes(rows: list[tuple[int, str]]) -> str:
    """The fortunes page: the rows plus the request-time fortune, sorted by message, escaped."""
    rows = sorted([*rows, FORTUNE_EXTRA], key=lambda row: row[1])
    return _TEMPLATE.render(rows=rows)


def pool_size() -> int:
    """Connections per process for the DB pool and the upstream HTTP pool (APP_POOL_SIZE)."""
    return max(1, int(os.environ.get("APP_POOL_SIZE", "4")))


def http_pool_size() -> int:
    """Connections per process to the upstream API (APP_HTTP_POOL_SIZE, else APP_POOL_SIZE).

    Separate from the DB pool: a cooperative worker may wait on hundreds of upstream calls
    while pgbouncer only has 20 server connections to share.
    """
    return max(1, int(os.environ.get("APP_HTTP_POOL_SIZE", pool_size())))


def interpreter() -> dict[str, object]:
    """The interpreter serving this request, as read inside the serving process: its version,
    its build ("free-threaded": compiled with --disable-gil, else "default") and whether the
    GIL is on now (an extension module without free-threading support turns it back on when
    imported); gil_enabled is None on a default build, where the GIL cannot be off."""
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    is_enabled = getattr(sys, "_is_gil_enabled", None)  # CPython 3.13 and later
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "build": "free-threaded" if free_threaded else "default",
        "gil_enabled": bool(is_enabled()) if free_threaded and is_enabled is not None else None,
    }


def database_url() -> str:
    """libpq URL of pgbouncer, given by the harness."""
    return os.environ["APP_DATABASE_URL"]


def upstream_url() -> str:
    """Base URL of the simulated external API."""
    return os.environ.get("APP_UPSTREAM_URL", "http://127.0.0.1:7001").rstrip("/")
