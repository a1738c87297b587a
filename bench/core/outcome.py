"""The outcome of one run's requests: the one definition of a failed request.

Input: a record's `requests` (answers received, whatever their status) and its `errors` dict
(or a load tool's Errors as a mapping). Output: an Outcome whose `failed`, `arrivals` and
`failed_pct` every table, verdict and study reads; nothing else in the harness adds error
classes up.

What counts, and why:
- socket errors (`connect`, `read`, `write`, `timeout`, `other`): the request got no answer;
- `non_2xx`: an answer, but not a success (a proxy's 502/504 included);
- `unsent` (open loop): an arrival the tool scheduled and never sent because every connection
  was busy. The user it stands for got nothing, so it is *unserved*; it is not *failed*, which
  counts requests that were sent (a step of a capacity search judges its served share apart,
  and one arrival due at oha's deadline can go unsent on a healthy server);
- `aborted` (open loop): in flight at the tool's own deadline; the run ended, not the server,
  so it counts on neither side.
Arrivals = answers + socket errors + unsent: every request a user made.
failed = socket errors + non-2xx; unserved = failed + unsent: the arrivals without a 2xx answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SOCKET_CLASSES = ("connect", "read", "write", "timeout", "other")
# Every class of unserved arrival, in the order tables list them.
UNSERVED_CLASSES = (*SOCKET_CLASSES, "non_2xx", "unsent")


def _count(errors: Mapping[str, object], key: str) -> int:
    value = errors.get(key)
    return int(value) if isinstance(value, int | float) else 0


@dataclass(frozen=True)
class Outcome:
    """The requests of one run by what became of them."""

    answers: int  # responses received, any status
    non_2xx: int
    socket: dict[str, int]  # SOCKET_CLASSES -> count
    unsent: int = 0
    aborted: int = 0

    @classmethod
    def of(cls, requests: int | None, errors: Mapping[str, object] | None) -> Outcome:
        """From a record's (or a load result's) request count and errors."""
        errors = errors or {}
        return cls(
            answers=int(requests or 0),
            non_2xx=_count(errors, "non_2xx"),
            socket={k: _count(errors, k) for k in SOCKET_CLASSES},
            unsent=_count(errors, "unsent"),
            aborted=_count(errors, "aborted"),
        )

    @classmethod
    def of_record(cls, rec: object) -> Outcome:
        """From a Record (anything with `requests` and `errors`)."""
        return cls.of(getattr(rec, "requests", None), getattr(rec, "errors", None))

    @property
    def socket_errors(self) -> int:
        """Requests that got no answer at all."""
        return sum(self.socket.values())

    @property
    def failed(self) -> int:
        """Requests sent that got no 2xx answer: socket errors and non-2xx answers."""
        return self.socket_errors + self.non_2xx

    @property
    def unserved(self) -> int:
        """Arrivals without a 2xx answer: failed requests and arrivals never sent."""
        return self.failed + self.unsent

    @property
    def ok(self) -> int:
        """2xx answers."""
        return max(0, self.answers - self.non_2xx)

    @property
    def arrivals(self) -> int:
        """Every request a user made: answered, unanswered, or never sent."""
        return self.answers + self.socket_errors + self.unsent

    @property
    def unserved_pct(self) -> float | None:
        """Unserved arrivals as a share of all arrivals, in %; None when nothing arrived."""
        return 100 * self.unserved / self.arrivals if self.arrivals else None

    def by_class(self) -> dict[str, int]:
        """The non-zero classes of unserved arrivals, in UNSERVED_CLASSES order."""
        counts = {**self.socket, "non_2xx": self.non_2xx, "unsent": self.unsent}
        return {k: counts[k] for k in UNSERVED_CLASSES if counts[k]}
