"""pgbouncer's pools through one long-lived psql session (bench.observe.pools.PoolSession)."""

import os
import signal

import pytest

from bench.host.procs import ProcessTable
from bench.observe.pools import PoolSession
from bench.stack.components import DB_NAME, DB_USER, Database

pytestmark = pytest.mark.integration


def test_one_session_answers_every_sample_and_is_replaced_when_it_dies(
    db: Database, table: ProcessTable, tmp_path
) -> None:
    """Three samples from one psql process, the same counters a psql per call gives; killed,
    the next sample starts a new session; closed, nothing is left."""
    session = PoolSession(
        table, db.pgbouncer_port, DB_USER, db.password, DB_NAME, tmp_path / "psql-pools.log"
    )
    try:
        first = session.pools()
        assert session.proc is not None
        pid = session.proc.pid
        for _ in range(2):
            assert set(session.pools()) == set(first)
        assert session.proc.pid == pid
        assert set(first) == set(db.pgbouncer_pools())
        os.kill(pid, signal.SIGKILL)
        session.proc.popen.wait()
        assert set(session.pools()) == set(first)
        assert session.proc.pid != pid
    finally:
        session.close()
    assert session.proc is None
