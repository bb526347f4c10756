"""examples/upgrade end to end: a served DuckDB 1.5.5 takes an application's traffic with
capture on; the capture is replayed on DuckDB 2.0.1 beside 1.5.5, and the report names the
divergences between the two releases with how often the workload ran them."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

import gateway
from gateway.flight.serve_config import ServeSettings
from gateway.flight.server import FlightSqlServer
from tests.conftest import ROOT, run_arrowgate

EXAMPLE = ROOT / "examples" / "upgrade"


@pytest.mark.slow
def test_the_upgrade_example_finds_the_divergences_between_releases(tmp_path):
    folder = tmp_path / "capture"
    config = EXAMPLE / "arrowgate.toml"
    with gateway.connect(config) as gw:
        settings = ServeSettings.from_config(gw.config, port=0)
        assert settings.capture is not None and settings.capture.engines == {"duck155"}
        settings = dataclasses.replace(
            settings, capture=dataclasses.replace(settings.capture, folder=folder))
        with FlightSqlServer(gw, settings) as server:
            played = subprocess.run(
                [sys.executable, str(EXAMPLE / "app.py"), server.location,
                 "--statements", "150"], capture_output=True, text=True, timeout=120)
            assert played.returncode == 0, played.stderr
            assert "150 statements sent" in played.stdout
            server.capture.flush()
    md, js = tmp_path / "report.md", tmp_path / "report.json"
    done = run_arrowgate("--config", str(config), "shadow", "--primary", "duck201",
                         "--reference", "duck155", str(folder), "--no-store",
                         "--markdown", str(md), "--json", str(js))
    assert done.returncode == 1, done.stderr  # divergences fail the gate
    assert "Traceback" not in done.stderr
    report = json.loads(js.read_text())
    divergent = {row["sql"]: row for row in report["shapes"] if row["diverged"]}
    assert any("round(?::DOUBLE, 1)" in sql for sql in divergent), divergent
    assert any("//" in sql and "%" in sql for sql in divergent), divergent
    assert sum(row["seen"] for row in report["shapes"]) == 150
    text = md.read_text()
    assert "Divergences by shape" in text and "seen" in text
