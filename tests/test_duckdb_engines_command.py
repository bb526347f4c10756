"""``arrowgate engines`` shows where each DuckDB runs; ``engines install`` installs releases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.duckdb_support import V155, cli_binary, use_shared_home


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return use_shared_home(tmp_path_factory)


def test_install_action_installs_a_release_with_the_extensions_asked_for(cli, home):
    run = cli("engines", "install", f"duckdb=={V155}", "--extensions", "sqlite,ducklake")
    assert run.code == 0, run.err
    assert str(home / "duckdb" / V155 / "core") in run.out
    assert "ducklake" in run.out and "sqlite_scanner" in run.out


def test_install_action_refuses_what_it_cannot_install(cli, home):
    bad = cli("engines", "install", "postgres==15")
    assert bad.code == 2 and "write duckdb==VERSION" in bad.err
    missing = cli("engines", "install", "duckdb==2.0.1", "--extensions", "ducklake")
    assert missing.code == 2
    assert "does not exist for DuckDB 2.0.1" in missing.err and V155 in missing.err


def test_engines_lists_version_place_and_extensions_without_importing_duckdb(tmp_path, home):
    config = tmp_path / "arrowgate.toml"
    config.write_text(f"""
[engines.installed]
type = "duckdb"
[engines.release]
type = "duckdb"
version = "{V155}"
isolation = "process"
[engines.later]
type = "duckdb"
version = "1.5.1"
[engines.binary]
type = "duckdb"
cli = "{cli_binary()}"
""")
    from gateway_duckdb.install import ensure_installed

    ensure_installed(V155, ["ducklake"])
    code = (f"import sys; from gateway.cli.main import main; main(['--config', {str(config)!r}, "
            "'engines']); "
            "print('DRIVER-IMPORTED' if 'duckdb' in sys.modules else 'driver-not-imported')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={"ARROWGATE_HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert "driver-not-imported" in done.stdout
    assert "worker process" in lines["release"]
    assert str(home / "duckdb" / V155 / "core") in lines["release"]
    assert "ducklake" in lines["release"]
    assert "not installed yet" in lines["later"]
    assert "CLI per query" in lines["binary"] and cli_binary() in lines["binary"]
    # a CLI engine cannot bind parameters, so it does not list them
    assert "parameters" in lines["release"] and "parameters" not in lines["binary"]
    assert "in process" in lines["installed"]


def test_parameters_sent_to_a_cli_engine_are_refused_naming_engines_that_take_them(home):
    import gateway
    from gateway.errors import Unsupported

    gw = gateway.connect({"engines": {"binary": {"type": "duckdb", "cli": cli_binary()},
                                      "installed": {"type": "duckdb"}}})
    try:
        with pytest.raises(Unsupported) as info:
            gw.execute("SELECT ? AS a", engine="binary", parameters=[1])
        assert info.value.engines == ("installed",)
        assert gw.execute("SELECT ? AS a", engine="installed", parameters=[1]).to_arrow() \
            .to_pylist() == [{"a": 1}]
    finally:
        gw.close()
