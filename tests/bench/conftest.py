"""Unit tests run the harness with fakes and measure nothing: their machine lock is a file of
their own, so they never wait for (nor hold up) a real measuring run on this machine."""

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.host.state import LOCK_ENV


@pytest.fixture(scope="session", autouse=True)
def _own_machine_lock() -> Iterator[None]:
    with tempfile.TemporaryDirectory(prefix="pywebbench-unit-lock-") as folder:
        before = os.environ.get(LOCK_ENV)
        os.environ[LOCK_ENV] = str(Path(folder) / "bench.lock")
        yield
        if before is None:
            os.environ.pop(LOCK_ENV, None)
        else:
            os.environ[LOCK_ENV] = before
