"""PYTHON=3.13t on the interpreter bench/python-build.sh built (issue 33): free-threaded, and a
server's venv on it keeps the GIL off while importing the whole WSGI app. The build takes
minutes and is never made by the test suite: without it these tests skip with the reason
(tests/bench/test_pythons.py covers the refusals, the venv naming and the records without it).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from bench.core.registry import ROOT, load_all
from bench.host import venv

BUILT = venv.PYTHONS / "3.13t" / "bin" / "python3"
pytestmark = pytest.mark.skipif(
    not BUILT.exists(), reason=f"{BUILT} is not built (bash bench/python-build.sh 3.13t)"
)


def test_the_build_is_free_threaded() -> None:
    """The interpreter says it was built with --disable-gil and runs with the GIL off."""
    code = (
        "import json, sys, sysconfig; print(json.dumps([sysconfig.get_config_var("
        "'Py_GIL_DISABLED'), sys._is_gil_enabled(), sys.version_info[:2]]))"
    )
    done = subprocess.run([str(BUILT), "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    disabled, enabled, version = json.loads(done.stdout)
    assert disabled == 1 and enabled is False and version == [3, 13]


def test_the_wsgi_app_keeps_the_gil_off_in_a_server_venv() -> None:
    """waitress@3.13t (made from the build if absent): the app and its server import, and
    /interpreter's payload says free-threaded with the GIL off (an extension without
    free-threading support would have turned it on)."""
    python = venv.ensure_venv(load_all()["waitress"], python="3.13t")
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
