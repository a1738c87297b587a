"""The SaaS users of source document 000, for Locust (`make bench LOAD=locust SCENARIO=saas`).

Run by Locust in its own venv (never imported by the harness). Each simulated user goes
through the paper's session, in order: log in (a DB query), generate a study plan (an
external AI API that takes about 3 s), look at its history (DB), talk to the voice assistant
(an external speech API). The paper gives the four steps and the 3 s; it gives no weights
or think times, so each user runs the whole session in a loop with 1 s of think time
between sessions (our choice, recorded here).

Every response is checked (status and a cheap body check); responses are also counted by
HTTP status (0 = no response) and written as JSON to $LOCUST_STATUS_FILE when Locust quits,
summed over the workers in distributed mode.
"""

from __future__ import annotations

import json
import os
from collections import Counter

from locust import HttpUser, constant, events, task
from locust.runners import WorkerRunner

# route, Locust's name for it, and what the body must contain
STEPS = (
    ("/db", "login (DB)", b'"randomNumber"'),
    ("/upstream?ms=3000", "plan generation (AI API, 3 s)", b'"upstream_ms"'),
    # Redis + MySQL in the paper; here several rows from PostgreSQL through pgbouncer.
    ("/queries?n=5", "history (DB)", b'"randomNumber"'),
    # The paper names Google TTS/STT without a time; 1 s is our stand-in.
    ("/upstream?ms=1000", "voice (speech API, 1 s)", b'"upstream_ms"'),
)

STATUS: Counter[str] = Counter()


@events.request.add_listener
def _count_status(response: object = None, **_kwargs: object) -> None:
    STATUS[str(getattr(response, "status_code", 0) or 0)] += 1


@events.report_to_master.add_listener
def _send_counts(client_id: str, data: dict) -> None:
    # Workers send what they counted since the last report; the master adds it up.
    data["status_counts"] = dict(STATUS)
    STATUS.clear()


@events.worker_report.add_listener
def _add_counts(client_id: str, data: dict) -> None:
    STATUS.update(data.get("status_counts", {}))


@events.quitting.add_listener
def _write_counts(environment: object, **_kwargs: object) -> None:
    path = os.environ.get("LOCUST_STATUS_FILE")
    if path and not isinstance(getattr(environment, "runner", None), WorkerRunner):
        with open(path, "w") as fh:
            json.dump(dict(sorted(STATUS.items())), fh)


class SaasUser(HttpUser):
    """One user of the SaaS: the paper's four steps, then 1 s of think time."""

    wait_time = constant(1)

    @task
    def session(self) -> None:
        """login -> plan generation -> history -> voice."""
        for path, name, needle in STEPS:
            with self.client.get(path, name=name, catch_response=True) as resp:
                if resp.status_code != 200:
                    resp.failure(f"status {resp.status_code}")
                elif needle not in (resp.content or b""):
                    resp.failure(f"unexpected body {resp.content[:60]!r}")
                else:
                    resp.success()
