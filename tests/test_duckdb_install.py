"""Managed DuckDB installs: one folder per release, atomic, safe under concurrency."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway_duckdb import install
from gateway_duckdb.install import MARKER, ensure_installed, extension_versions
from tests.duckdb_support import V155, use_shared_home


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return use_shared_home(tmp_path_factory)


def test_install_holds_the_library_and_the_extension_built_for_that_version(home):
    inst = ensure_installed(V155, ["ducklake", "postgres"])
    assert inst.version == V155
    assert inst.root == home / "duckdb" / V155 / "core"
    assert (inst.root / "duckdb" / "__init__.py").is_file()
    assert inst.library.name.startswith("_duckdb") and inst.library.is_file()
    assert {"ducklake", "postgres_scanner"} <= set(inst.extensions)
    assert f"v{V155}" in str(inst.extensions["ducklake"])
    assert inst.extensions["ducklake"].name == "ducklake.duckdb_extension"
    # a second call finds it without running pip (it would fail offline otherwise too)
    assert ensure_installed(V155, ["ducklake"]) == install.installed(V155)


def test_the_installed_library_answers_as_an_adbc_driver(home):
    import adbc_driver_manager.dbapi as dbapi

    inst = ensure_installed(V155, ["ducklake"])
    with dbapi.connect(driver=str(inst.library), entrypoint="duckdb_adbc_init") as con, \
            con.cursor() as cur:
        cur.execute(f"LOAD '{inst.extensions['ducklake']}'")
        cur.execute("SELECT version(), (SELECT loaded FROM duckdb_extensions() "
                    "WHERE extension_name = 'ducklake')")
        assert cur.fetchall() == [(f"v{V155}", True)]


def test_an_unknown_version_is_a_configuration_error_listing_real_ones(home):
    with pytest.raises(ConfigError) as info:
        ensure_installed("1.9.9")
    message = str(info.value)
    assert "DuckDB 1.9.9 is not a release pip can install" in message
    assert V155 in message
    assert not (home / "duckdb" / "1.9.9").exists()


def test_a_version_that_is_not_a_version_is_refused_before_pip(home):
    with pytest.raises(ConfigError, match="is not a DuckDB version"):
        ensure_installed("latest")


def test_an_extension_missing_for_a_version_names_the_versions_that_have_it(home):
    with pytest.raises(ConfigError) as info:
        ensure_installed("2.0.1", ["ducklake"])
    message = str(info.value)
    assert "'ducklake' does not exist for DuckDB 2.0.1" in message
    assert "1.4.4" in message and "1.5.5" in message
    assert "1.4.4" in extension_versions("ducklake") and "2.0.1" not in extension_versions("ducklake")


def test_an_unknown_extension_lists_the_installable_ones():
    with pytest.raises(ConfigError, match="installable extensions: ducklake, postgres_scanner"):
        install.canonical_extension("spatial_magic")


def test_a_partial_folder_left_by_an_interrupted_install_is_never_taken_for_an_install(
        tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path))
    # what a killed pip leaves behind: the files but no marker, under a partial name
    partial = tmp_path / "duckdb" / V155 / "core.partial-1-deadbeef"
    (partial / "duckdb").mkdir(parents=True)
    (partial / "_duckdb.cpython-311-x86_64-linux-gnu.so").write_bytes(b"half")
    assert install.installed(V155) is None
    assert install.installed_versions() == []
    # a final-named folder without its marker is not an install either
    core = tmp_path / "duckdb" / V155 / "core"
    core.mkdir()
    (core / "_duckdb.cpython-311-x86_64-linux-gnu.so").write_bytes(b"half")
    assert install.installed(V155) is None


def test_installing_removes_stale_partial_folders(tmp_path, monkeypatch, home):
    # copy the shared install into a fresh home, leave a partial beside one extension
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path))
    shutil.copytree(home / "duckdb" / V155 / "core", tmp_path / "duckdb" / V155 / "core",
                    symlinks=True)
    stale = tmp_path / "duckdb" / V155 / "ext" / "sqlite_scanner.partial-99-00000000"
    stale.mkdir(parents=True)
    inst = ensure_installed(V155, ["sqlite"])
    assert "sqlite_scanner" in inst.extensions
    assert not stale.exists()


def test_two_processes_installing_the_same_version_end_with_one_valid_install(tmp_path,
                                                                            monkeypatch):
    script = textwrap.dedent("""
        import sys
        from gateway_duckdb.install import ensure_installed
        inst = ensure_installed(sys.argv[1], ["sqlite_scanner"])
        print(inst.library)
    """)
    env = {**os.environ, "ARROWGATE_HOME": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", script, V155], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    libraries = {out.strip() for out, _ in outs}
    assert len(libraries) == 1
    version_dir = tmp_path / "duckdb" / V155
    assert sorted(p.name for p in version_dir.iterdir()) == ["core", "ext"]
    assert sorted(p.name for p in (version_dir / "ext").iterdir()) == ["sqlite_scanner"]
    assert (version_dir / "core" / MARKER).is_file()
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path))
    assert install.installed_versions() == [V155]


def test_cache_dir_defaults_to_the_xdg_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("ARROWGATE_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert install.cache_dir() == tmp_path / "arrowgate"
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "h"))
    assert install.cache_dir() == tmp_path / "h"
