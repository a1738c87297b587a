"""The app's routes against the scenarios' declaration (bench/core/scenario.py): every path a
scenario requests or verifies is served by both apps, and every route the apps serve is a
scenario's or exempt here with its reason. Routes are read from the source (the harness never
imports app_common; Flask and Quart need not be installed to check this)."""

import ast
import urllib.parse
from pathlib import Path

import pytest

from bench.core import scenario

APP = Path(__file__).resolve().parents[2] / "app_common"
# Routes no scenario requests, and why they exist.
EXEMPT = {
    "/health": "readiness probe: make compose-up waits for it",
    "/dbwait": "a database wait (pg_sleep) of the cooperative-scheduling integration tests",
    "/interpreter": "the interpreter and GIL state the harness reads into records (PYTHON=)",
}


def routes_of(module: Path) -> set[str]:
    """The paths of every `@app.get("/x")` / `@app.route("/x")` in an app module."""
    found = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                if (
                    isinstance(deco, ast.Call)
                    and isinstance(deco.func, ast.Attribute)
                    and deco.func.attr in ("get", "route", "post", "websocket")
                    and deco.args
                    and isinstance(deco.args[0], ast.Constant)
                ):
                    found.add(str(deco.args[0].value))
    return found


def declared_paths(websocket: bool = False) -> set[str]:
    """Every URL path a scenario's load tool requests or its checks verify: the HTTP ones,
    or (websocket) those of the scenarios that carry WebSockets."""
    paths = set()
    for item in scenario.SCENARIOS.values():
        if (item.needs == scenario.WS) != websocket:
            continue
        if item.needs in (scenario.URL, scenario.WS):
            paths.add(urllib.parse.urlsplit(item.path).path)
        paths |= {urllib.parse.urlsplit(check.path).path for check in item.checks}
    return paths


# WSGI has no WebSocket interface: the WebSocket scenarios' routes are the async twin's only.
SERVES_WEBSOCKETS = {"wsgi.py": False, "asgi.py": True}


@pytest.mark.parametrize("module", ["wsgi.py", "asgi.py"])
def test_every_declared_scenario_path_is_served(module: str) -> None:
    """Both apps serve each HTTP path the scenarios request; the ASGI app the WebSocket ones."""
    wanted = declared_paths() | (declared_paths(True) if SERVES_WEBSOCKETS[module] else set())
    missing = wanted - routes_of(APP / module)
    assert not missing, f"{module} lacks {sorted(missing)}"


@pytest.mark.parametrize("module", ["wsgi.py", "asgi.py"])
def test_every_route_is_declared_or_exempt(module: str) -> None:
    """No route outside the declaration, unless exempt with a reason."""
    declared = declared_paths() | declared_paths(True)
    extra = routes_of(APP / module) - declared - set(EXEMPT)
    assert not extra, f"{module} serves {sorted(extra)}: declare a scenario or exempt it"


def test_websocket_routes_are_found() -> None:
    """The reader finds the async twin's WebSocket routes, and the scenarios declare them."""
    assert {"/ws/echo", "/ws/push"} <= routes_of(APP / "asgi.py") & declared_paths(True)


def test_the_reader_finds_routes() -> None:
    """The AST reader is not vacuous: it finds the plaintext route and the sleep route."""
    assert {"/plaintext", "/sleep", "/health"} <= routes_of(APP / "wsgi.py")
    assert "/sleep" in declared_paths() and "/queries" in declared_paths()


@pytest.mark.parametrize(
    ("path", "body", "wait_ms"),
    [
        ("/sleep", {"slept_ms": scenario.SLEEP_MS}, scenario.SLEEP_MS),
        ("/upstream", {"upstream_ms": scenario.UPSTREAM_MS}, scenario.UPSTREAM_MS),
    ],
)
def test_a_timed_route_may_answer_within_an_event_loops_timer_slack(
    path: str, body: dict, wait_ms: int
) -> None:
    """A route that waits is verified by how long it took: an answer a loop's timer made
    0.3 ms early passes (uvloop counts whole milliseconds: gunicorn-uvicorn answered /sleep
    in 9.7 ms on 2026-11-27 and failed its verification), one that did not wait fails."""
    import json

    check = next(
        c for s in scenario.SCENARIOS.values() for c in s.checks if c.path.startswith(path)
    )
    facts = scenario.Facts(world=None, read_world=None)

    def answer(ms: float) -> list[str]:
        resp = scenario.Response(
            200, {"content-type": "application/json"}, json.dumps(body).encode(), ms / 1000
        )
        return check.body(resp, facts)

    assert answer(wait_ms - 0.3) == []
    assert answer(wait_ms + 2) == []
    late = answer(wait_ms - scenario.TIMER_SLACK_MS - 0.5)
    assert len(late) == 1 and f"< {wait_ms} ms" in late[0]
    assert answer(0.2) != []
