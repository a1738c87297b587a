"""The SaaS users of source document 000, for Locust (`make bench LOAD=locust SCENARIO=saas`).

Run by Locust in its own venv (never imported by the harness). What the paper says (section
"실험 환경"): Locust 2.15, 5 to 100 virtual users, a scenario "reflecting the real usage
pattern" made of four numbered steps: 1) user login (MySQL query), 2) AI study-plan generation
(Gemini API, 3 s on average), 3) study-history lookup (Redis cache + MySQL), 4) voice
conversation (Google TTS/STT API). It gives no task weights, no think time and no time for
the speech API. Our choices, therefore: each user runs the four steps in the paper's order
(a SequentialTaskSet: every step once per session, i.e. equal weights), then thinks 1 s
before the next session; the voice call takes 1 s.

Each step is its own Locust task, so a stopping user (at -t, within --stop-timeout) finishes
only the request in flight, not the rest of its session.

Every response is checked (status 200 and a cheap body check) and marked failed otherwise.
Responses are also counted by HTTP status (0 = no response: connection refused/reset,
timeout) and written as JSON ({"200": n, ...}) to $LOCUST_STATUS_FILE when Locust quits,
summed over the workers in distributed mode. At that moment the master (or the single
process) also rewrites `<--csv>_stats.csv` with the final statistics: Locust's own CSV writer
refreshes that file only once a second and writes nothing at exit, so it lags the end of the
run by up to a second.
"""

from __future__ import annotations

import csv
import json
import os
from collections import Counter

from locust.runners import WorkerRunner
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

from locust import HttpUser, SequentialTaskSet, events, task

# Seconds of think time after each session (the paper gives none).
THINK_S = 1.0

STATUS: Counter[str] = Counter()


@events.request.add_listener
def _count_status(response: object = None, **_kwargs: object) -> None:
    STATUS[str(getattr(response, "status_code", 0) or 0)] += 1


@events.report_to_master.add_listener
def _send_counts(client_id: str, data: dict) -> None:
    # Workers send what they counted since their last report (every 3 s and a final one when
    # they stop); the master adds it up.
    data["status_counts"] = dict(STATUS)
    STATUS.clear()


@events.worker_report.add_listener
def _add_counts(client_id: str, data: dict) -> None:
    STATUS.update(data.get("status_counts", {}))


def _write_atomically(path: str, write: object) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", newline="") as fh:
        write(fh)  # type: ignore[operator]
    os.replace(tmp, path)


@events.quitting.add_listener
def _write_counts(environment: object, **_kwargs: object) -> None:
    # Fired after the users stopped (and, distributed, after the workers' last reports).
    if isinstance(getattr(environment, "runner", None), WorkerRunner):
        return
    path = os.environ.get("LOCUST_STATUS_FILE")
    if path:
        _write_atomically(path, lambda fh: json.dump(dict(sorted(STATUS.items())), fh))
    options = getattr(environment, "parsed_options", None)
    prefix = getattr(options, "csv_prefix", None)
    if prefix:
        table = StatsCSV(environment, PERCENTILES_TO_REPORT)
        _write_atomically(f"{prefix}_stats.csv", lambda fh: table.requests_csv(csv.writer(fh)))


class Session(SequentialTaskSet):
    """login -> plan generation -> history -> voice, then THINK_S of think time."""

    finished = False

    def wait_time(self) -> float:
        """No pause between the steps of a session; THINK_S after its last step."""
        return THINK_S if self.finished else 0.0

    def _get(self, path: str, name: str, needle: bytes, last: bool = False) -> None:
        self.finished = last
        with self.client.get(path, name=name, catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"status {resp.status_code}")
            elif needle not in (resp.content or b""):
                resp.failure(f"unexpected body {resp.content[:60]!r}")
            else:
                resp.success()

    @task
    def login(self) -> None:
        """1) login: one MySQL query in the paper, one row through pgbouncer here."""
        self._get("/db", "login (DB)", b'"randomNumber"')

    @task
    def plan(self) -> None:
        """2) AI plan generation: the paper's Gemini call, 3 s on average."""
        self._get("/upstream?ms=3000", "plan generation (AI API, 3 s)", b'"upstream_ms"')

    @task
    def history(self) -> None:
        """3) history: Redis + MySQL in the paper; several rows (not /fortunes: a history is
        a list of the user's records, not a rendered page of a fixed table) here."""
        self._get("/queries?n=5", "history (DB)", b'"randomNumber"')

    @task
    def voice(self) -> None:
        """4) voice: Google TTS/STT in the paper, without a time; 1 s is our stand-in."""
        self._get("/upstream?ms=1000", "voice (speech API, 1 s)", b'"upstream_ms"', last=True)


class SaasUser(HttpUser):
    """One user of the SaaS, going through the paper's session again and again."""

    tasks = [Session]
