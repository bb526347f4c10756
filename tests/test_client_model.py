"""The client model (bench/client_model.py), a short run: a real ``arrowgate serve``
driven by threads doing random sequences of what clients do, on the duckdb, csv and
ducklake (PostgreSQL catalog) engines. Every answer read is checked, the service
must stay alive, and at rest it must be back within bounds (issue 36). The long
run is ``bench/client_model.py --minutes 30``; its figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import io

import pytest

from bench.client_model import lake_toml, run_model

pytestmark = pytest.mark.postgres

#: the run's length, after a 20 s warm-up: the issue allows the suite at most 60 s of it
SECONDS = 30


@pytest.mark.slow
def test_random_clients_find_the_service_alive_and_every_answer_right(postgres, tmp_path):
    lake = lake_toml(postgres.create_database("client_model_lake"), tmp_path)
    out = io.StringIO()
    report = run_model(tmp_path, SECONDS, threads=3, seed=36, lake=lake, out=out)
    assert not report.failures, out.getvalue()
    assert report.alive
    assert report.actions >= 50, out.getvalue()  # it did drive the service
    before, after = report.before, report.after
    assert after["rss_mb"] - before["rss_mb"] < 50, out.getvalue()
    assert after["fds"] <= before["fds"] + 4, out.getvalue()
    assert after["threads"] <= before["threads"] + 4, out.getvalue()
