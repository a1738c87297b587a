"""PYTHON=3.14t and 3.13t on the interpreters bench/python-build.sh built (issue 33):
free-threaded, and a server's venv on each keeps the GIL off while importing the whole WSGI
app. A build takes minutes and is never made by the test suite: without it its tests skip with
the reason (tests/bench/test_pythons.py covers the refusals, the venv naming and the records
without it).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from bench.core.registry import ROOT, load_all
from bench.host import venv


def built(name: str) -> pytest.ParameterSet:
    """PYTHON=name as a parameter, skipped with the reason when its interpreter is not built."""
    path = venv.PYTHONS / name / "bin" / "python3"
    why = f"{path} is not built (bash bench/python-build.sh {name})"
    return pytest.param(name, marks=pytest.mark.skipif(not path.exists(), reason=why), id=name)


BUILDS = [built("3.14t"), built("3.13t")]


@pytest.mark.parametrize("name", BUILDS)
def test_the_build_is_free_threaded(name: str) -> None:
    """The interpreter says it was built with --disable-gil and runs with the GIL off."""
    code = (
        "import json, sys, sysconfig; print(json.dumps([sysconfig.get_config_var("
        "'Py_GIL_DISABLED'), sys._is_gil_enabled(), sys.version_info[:2]]))"
    )
    python = venv.PYTHONS / name / "bin" / "python3"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    disabled, enabled, version = json.loads(done.stdout)
    assert disabled == 1 and enabled is False
    assert ".".join(map(str, version)) == name.removesuffix("t")


@pytest.mark.parametrize("name", BUILDS)
def test_the_wsgi_app_keeps_the_gil_off_in_a_server_venv(name: str) -> None:
    """waitress@<name> (made from the build if absent): the app and its server import, and
    /interpreter's payload says free-threaded with the GIL off (an extension without
    free-threading support would have turned it on)."""
    python = venv.ensure_venv(load_all()["waitress"], python=name)
    code = (
        "import json, waitress, app_common.wsgi; from app_common import common;"
        "print(json.dumps(common.interpreter()))"
    )
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["build"] == "free-threaded" and payload["gil_enabled"] is False
