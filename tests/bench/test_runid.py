"""Run ids have one format (bench/core/runid.py), in UTC."""

import time

from bench.core import runid


def test_run_dir_name_and_study_run_id_share_one_utc_stamp(monkeypatch) -> None:
    """A run directory is `<UTC stamp>-<tag>`, a study run `<UTC stamp>Z`, whatever the zone."""
    moment = time.struct_time((2026, 1, 23, 10, 15, 0, 4, 23, 0))
    monkeypatch.setattr(time, "gmtime", lambda *a: moment)
    monkeypatch.setattr(time, "localtime", lambda *a: (_ for _ in ()).throw(AssertionError))
    assert runid.run_dir_name("4242-lb") == "20260123T101500-4242-lb"
    assert runid.study_run_id() == "20260123T101500Z"
