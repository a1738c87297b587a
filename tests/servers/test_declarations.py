"""Every servers/<id>/server.toml follows the one declaration format."""

from pathlib import Path

import pytest

from bench.core import registry

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "servers"


@pytest.mark.parametrize("server_id", registry.server_ids())
def test_declaration_is_valid(server_id: str) -> None:
    """Each declaration loads, binds to {port} and has pinned requirements for its venv."""
    spec = registry.load_spec(registry.SERVERS_DIR / server_id / "server.toml")
    assert spec.id == server_id
    config = (spec.folder / spec.config).read_text() if spec.config else ""
    assert any("{port}" in arg for arg in spec.argv) or "{port}" in config
    if spec.app != "static":
        assert spec.requirements is not None
        lines = [
            line.split(";")[0].strip()
            for line in spec.requirements.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith(("#", "-"))
        ]
        assert lines and all("==" in line for line in lines), "every requirement is pinned"


@pytest.mark.parametrize("server_id", registry.server_ids())
def test_knobs_that_differ_from_the_server_default_say_why(server_id: str) -> None:
    """The fairness rule: a value that is not the server's own default carries a reason."""
    spec = registry.load_spec(registry.SERVERS_DIR / server_id / "server.toml")
    for knob in spec.knobs.values():
        if knob.default != knob.server_default:
            assert knob.why and len(knob.why) > 10


def test_missing_why_is_refused_with_the_field_named() -> None:
    """A knob that departs from the default without a reason is a DeclarationError."""
    with pytest.raises(registry.DeclarationError, match=r"knobs\.workers.*why"):
        registry.load_spec(FIXTURES / "bad-knob" / "server.toml")


def test_undeclared_placeholder_is_refused() -> None:
    """An argv placeholder that is neither a knob nor a built-in is named in the error."""
    with pytest.raises(registry.DeclarationError, match="threads"):
        registry.validate_spec(
            FIXTURES / "bad-placeholder" / "server.toml",
            __import__("tomllib").loads((FIXTURES / "bad-placeholder" / "server.toml").read_text()),
        )


def test_resolve_knobs_applies_the_cpu_rule_and_overrides() -> None:
    """'cpus' becomes the usable CPU count; WORKERS= overrides; unknown overrides are ignored."""
    spec = registry.load_spec(registry.SERVERS_DIR / "granian" / "server.toml")
    assert registry.resolve_knobs(spec, 6, {})["workers"] == 6
    knobs = registry.resolve_knobs(spec, 6, {"workers": 3, "connections": 99})
    assert knobs["workers"] == 3 and "connections" not in knobs


def test_render_argv_fills_every_placeholder() -> None:
    """No brace is left in a rendered argv."""
    spec = registry.load_spec(registry.SERVERS_DIR / "gunicorn-sync" / "server.toml")
    fill = {
        **registry.resolve_knobs(spec, 2, {}),
        "python": "py",
        "port": 1234,
        "app": "app_common.wsgi:app",
        "run_dir": "/r",
        "root": "/",
        "venv": "/v",
    }
    argv = registry.render_argv(spec, fill)
    assert "127.0.0.1:1234" in argv and not any("{" in a for a in argv)


@pytest.mark.parametrize(
    ("knob", "message"),
    [
        ({"default": 1, "tune": [1, 2]}, "tune needs tune_why"),
        ({"default": 1, "tune": [0, 2], "tune_why": "x"}, "tune must be a list of positive"),
        ({"default": 1, "tune": ["many"], "tune_why": "x"}, "tune must be a list of positive"),
        ({"default": 1, "tune": [1], "tune_why": "x", "ordered": "yes"}, "ordered must be"),
        ({"default": 1, "ordered": True}, "ordered/tune_why need tune"),
    ],
)
def test_a_bad_search_space_is_refused(knob: dict, message: str) -> None:
    """make tune's space per knob: values, ordered and its why, or a DeclarationError."""
    with pytest.raises(registry.DeclarationError, match=message):
        registry.validate_knob(Path("server.toml"), "workers", {"server_default": 1, **knob})


def test_a_search_space_resolves_on_this_machine() -> None:
    """gunicorn-gthread's declared space: workers in CPUs' worth, ordered, with its why."""
    spec = registry.load_spec(registry.SERVERS_DIR / "gunicorn-gthread" / "server.toml")
    workers = spec.knobs["workers"]
    assert workers.ordered and workers.tune_why
    assert [registry.tune_value(v, 3) for v in workers.tune] == [1, 3, 6, 12]
