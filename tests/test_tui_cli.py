"""``arrowgate tui`` as a command: the headless mode, flags, and a --help that stays light."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import DATA, ROOT

CONFIG = f"""
default_engine = "scan"
[engines.scan]
type = "csv"
fallback = "duck"
[engines.duck]
type = "duckdb"
settings = {{ threads = 1 }}
[engines.old]
type = "duckdb"
settings = {{ threads = 1, integer_division = true }}
[sources.trips]
path = "{DATA / 'trips.csv'}"
"""


def write_config(tmp_path):
    path = tmp_path / "arrowgate.toml"
    path.write_text(CONFIG)
    return str(path)


def test_headless_prints_the_answer_the_verdict_and_the_latencies(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    run = cli("--config", write_config(tmp_path), "tui", "--headless", "--engine", "duck",
              "--reference", "old", "-c", "SELECT 7 / 2 AS half")
    assert run.code == 1, run.err  # the answers differ
    out = run.out
    assert "half" in out and "3.5" in out
    assert "1 row" in out and "duck" in out
    assert "✗ values" in out
    assert "duck took" in out and "x old's time" in out


def test_headless_shadow_match_on_the_csv_scanner(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    run = cli("--config", write_config(tmp_path), "tui", "--headless", "--reference", "duck",
              "-c", "SELECT cab_type, count(*) AS n FROM trips GROUP BY 1 ORDER BY n DESC")
    assert run.code == 0, run.err
    assert "yellow" in run.out and "254" in run.out
    assert "✓ match" in run.out


def test_headless_shows_an_error_and_exits_1(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    run = cli("--config", write_config(tmp_path), "tui", "--headless", "--engine", "duck",
              "-c", "SELECT * FROM nowhere")
    assert run.code == 1
    assert "Catalog Error on duck: Table with name nowhere" in run.out


def test_usage_errors(cli, tmp_path):
    config = write_config(tmp_path)
    assert cli("--config", config, "tui", "--headless").code == 2
    assert cli("--config", config, "tui", "-c", "SELECT 1").code == 2
    bad = cli("--config", config, "tui", "--headless", "--engine", "nope", "-c", "SELECT 1")
    assert bad.code == 2 and "no engine named 'nope'" in bad.err


def test_help_does_not_import_textual():
    code = ("import sys\nfrom gateway.cli.main import build_parser\nbuild_parser()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', "
            "'textual_fastdatatable', 'textual_textarea')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]"
