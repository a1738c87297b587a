"""APP=: every server that can serve the user's app started on it and verified on every route
of APP_ROUTES before any load is sent; the first that fails stops the run as bad input.

Input: the harness (site started), an arm's Options with its app, the server specs and their
prepared environments. Output: nothing when every compatible server answered every route as
declared; AppRejected (one line naming the server and the problem, with the server's log)
otherwise, or when no server in SERVER can serve the app's entries. Each server is stopped
again before the next starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.host.prepare import Prepared, Unavailable
from bench.stack.site import ServeError, read_log

if TYPE_CHECKING:
    from bench.core import plan
    from bench.core.registry import ServerSpec
    from bench.harness.session import Harness


class AppRejected(RuntimeError):
    """The user's app failed before any load: exit status 2, with the logs that say why."""

    def __init__(self, reason: str, logs: dict[str, str]) -> None:
        super().__init__(reason)
        self.logs = logs


def preflight_app(
    h: Harness, opts: plan.Options, specs: dict[str, ServerSpec], prepared: dict[str, Prepared]
) -> None:
    """Start, verify and stop each compatible server in SERVER's order."""
    assert opts.app is not None
    compatible = [s for s in opts.servers if specs[s].app in {e.kind for e in opts.app.entries}]
    if not compatible:
        kinds = ", ".join(f"{e.kind} ({e.given})" for e in opts.app.entries)
        raise AppRejected(f"no server in SERVER serves APP's {kinds}", {})
    for server in compatible:
        env = prepared[server]
        if isinstance(env, Unavailable):
            logs = {n: read_log(h.run_dir / n) for n in env.logs if (h.run_dir / n).exists()}
            raise AppRejected(f"{server}: {env.reason}", logs)
        spec = specs[server]
        h.progress.say(f"{server}: verifying APP {opts.app.name} on every route before any load")
        try:
            served = h.site.serve(
                spec, h.site.knobs(spec, opts.overrides), env, opts, f"{server}-verify.log"
            )
        except ServeError as exc:
            raise AppRejected(f"{server}: {exc}", exc.logs) from None
        h.site.stop(served)
