"""APP=, APP_ROUTES, APP_REQUIREMENTS, APP_KIND: parsed into an AppSpec or refused in one line
(exit 2) before anything starts; the app's identity changes with its files and requirements."""

import shutil
from pathlib import Path

import pytest

from bench import cli
from bench.core.app import AppError, parse_app, parse_routes
from bench.core.record import Record
from bench.core.registry import ROOT
from bench.report.cells import app_label
from bench.report.groups import machine_group_key, point_key
from tests.bench.test_record import _record

APPS = ROOT / "tests" / "fixtures" / "apps"
TINY = APPS / "tiny"
ROUTES = APPS / "routes"


def test_a_path_entry_finds_its_folder_module_and_default_files() -> None:
    """dir/module.py:callable -> the module on sys.path from the first folder that is not a
    package; routes.toml beside it is the default APP_ROUTES."""
    app = parse_app("tests/fixtures/apps/tiny/tinyapp.py:app", cwd=ROOT)
    entry = app.entries[0]
    assert (entry.module, entry.callable, entry.root) == ("tinyapp", "app", TINY)
    assert entry.kind is None  # detected later, in the app's environment
    assert app.name == "tiny"
    assert app.routes_file == TINY / "routes.toml"
    assert app.requirements is None
    assert [r.name for r in app.loaded_routes] == ["ok"]
    assert app.scenario(app.loaded_routes[0]) == "tiny:ok"
    assert app.ready_path == "/ok"


def test_the_django_example_has_a_wsgi_and_an_asgi_entry_in_one_package() -> None:
    app = parse_app(
        "examples/django/benchsite/wsgi.py:application,examples/django/benchsite/asgi.py:application",
        "examples/django/routes.toml",
        kind="wsgi,asgi",
        cwd=ROOT,
    )
    assert [e.target for e in app.entries] == [
        "benchsite.wsgi:application",
        "benchsite.asgi:application",
    ]
    assert app.entry_for("asgi").module == "benchsite.asgi"  # type: ignore[union-attr]
    assert app.requirements == ROOT / "examples" / "django" / "requirements.txt"
    assert [r.name for r in app.loaded_routes] == ["json", "db", "template", "write"]


def test_a_module_entry_is_found_under_the_current_directory() -> None:
    app = parse_app("tinyapp:app", cwd=TINY)
    assert app.entries[0].target == "tinyapp:app" and app.root == TINY


@pytest.mark.parametrize(
    ("app", "kind", "message"),
    [
        ("tinyapp", None, "is not <path or module>:<callable>"),
        ("tests/fixtures/apps/tiny/nothere.py:app", None, "neither a .py file nor a package"),
        ("no.such.module:app", None, "no module no.such.module"),
        ("tests/fixtures/apps/tiny/tinyapp.py:1bad", None, "is not <path or module>:<callable>"),
        ("tests/fixtures/apps/tiny/tinyapp.py:app", "wsgi,asgi", "give one of wsgi, asgi per"),
        ("tests/fixtures/apps/tiny/tinyapp.py:app", "cgi", "give one of wsgi, asgi per"),
        ("a:b,c:d,e:f", None, "give one entry"),
    ],
)
def test_a_bad_app_is_one_line_naming_the_problem(app: str, kind: str, message: str) -> None:
    with pytest.raises(AppError, match=message) as caught:
        parse_app(app, kind=kind, cwd=ROOT)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bad-toml.toml", "not valid TOML"),
        ("unknown-key.toml", r"route 1: unknown keys \['expect'\]"),
        ("post-loaded.toml", "send GET only; give it weight = 0"),
        ("no-load.toml", "no route with weight > 0"),
        ("bad-path.toml", "path must be a string starting with /"),
        ("dupes.toml", r"route names \['a'\] repeat"),
    ],
)
def test_a_malformed_route_file_is_refused_in_one_line(name: str, message: str) -> None:
    with pytest.raises(AppError, match=message) as caught:
        parse_routes(ROUTES / name)
    assert "\n" not in str(caught.value)
    assert str(ROUTES / name) in str(caught.value)


def test_the_identity_changes_with_a_file_or_the_requirements(tmp_path: Path) -> None:
    """Two versions of one app never share a sha256; the same files always give the same."""
    copy = tmp_path / "tiny"
    shutil.copytree(TINY, copy)
    first = parse_app(f"{copy}/tinyapp.py:app", cwd=tmp_path)
    assert parse_app(f"{copy}/tinyapp.py:app", cwd=tmp_path).sha256 == first.sha256
    assert (
        first.files_sha256
        == parse_app("tests/fixtures/apps/tiny/tinyapp.py:app", cwd=ROOT).files_sha256
    )
    # caches are not the app's source
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "tinyapp.cpython-311.pyc").write_bytes(b"x")
    assert parse_app(f"{copy}/tinyapp.py:app", cwd=tmp_path).sha256 == first.sha256
    (copy / "tinyapp.py").write_text((copy / "tinyapp.py").read_text().replace('"1"', '"2"'))
    second = parse_app(f"{copy}/tinyapp.py:app", cwd=tmp_path)
    assert second.sha256 != first.sha256 and second.name == first.name
    reqs = tmp_path / "req.txt"
    reqs.write_text("psycopg==3.3.9\n")
    third = parse_app(f"{copy}/tinyapp.py:app", requirements=str(reqs), cwd=tmp_path)
    assert third.files_sha256 == second.files_sha256 and third.sha256 != second.sha256


def _app_record(sha: str, trial: int) -> Record:
    import dataclasses

    return dataclasses.replace(
        _record(),
        scenario="tiny:ok",
        trial=trial,
        user_app={"name": "tiny", "sha256": sha, "kind": "wsgi"},
    )


def test_two_versions_never_merge_as_trials_but_meet_across_result_sets() -> None:
    """machine_group_key (trials of one point) holds the app's version; point_key (where two
    result sets meet, make compare) holds its name only, through the scenario."""
    v1, v2 = _app_record("a" * 64, 1), _app_record("b" * 64, 2)
    assert machine_group_key(v1) != machine_group_key(v2)
    assert point_key(v1) == point_key(v2)
    assert app_label(v1) == " · wsgi tiny@aaaaaaaa"
    assert app_label(_record()) == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([f"--app-routes={ROUTES / 'unknown-key.toml'}"], "unknown keys"),
        (["--app-kind=wsgi"], None),  # companions alone
        (["--load=locust"], "APP needs LOAD=wrk or oha"),
        (["--scenario=nope"], "unknown SCENARIO 'nope'; valid: ok, all"),
        (["--target=http://127.0.0.1:9"], "APP and TARGET= cannot go together"),
    ],
)
def test_make_bench_refuses_bad_app_input_with_exit_2(
    extra: list[str], message: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is started: the route file, the load tool and SCENARIO are checked first."""
    app = [] if message is None else ["--app=tests/fixtures/apps/tiny/tinyapp.py:app"]
    status = cli.main(["run", "--server=gunicorn-sync", *app, *extra])
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1
    assert (message or "APP_KIND needs APP=") in err
