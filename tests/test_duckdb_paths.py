"""Every way of running DuckDB answers the same, with the same setup, or fails clearly."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from gateway.errors import ConfigError, QueryError, Unsupported
from gateway_duckdb.engine import DuckDBEngine
from gateway_duckdb.install import ensure_installed
from tests.duckdb_support import V20, V144, V155, cli_binary, open_engine, rows, use_shared_home

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"
SOURCES = {"trips": {"path": str(DATA / "trips.csv")}}


@pytest.fixture(scope="module", autouse=True)
def home(tmp_path_factory) -> Path:
    return use_shared_home(tmp_path_factory)


PATHS: dict[str, dict[str, Any]] = {
    "installed": {},
    "adbc-1.4.4": {"version": V144},
    "adbc-1.5.5": {"version": V155},
    "adbc-2.0": {"version": V20},
    "worker-1.5.5": {"version": V155, "isolation": "process"},
    "worker-installed": {"isolation": "process"},
    "cli": {"cli": "duckdb-cli"},
}


def section(name: str, **extra: Any) -> dict[str, Any]:
    sec = {**PATHS[name], **extra}
    if sec.get("cli") == "duckdb-cli":
        sec["cli"] = cli_binary()
    return sec


@pytest.mark.parametrize("path", PATHS)
def test_every_path_applies_settings_mounts_sources_and_reports_its_version(path):
    engine = open_engine(section(path, settings={"threads": 3, "default_order": "desc"}),
                         SOURCES)
    try:
        got = rows(engine, "SELECT current_setting('threads') AS t, "
                   "current_setting('default_order') AS o, version() AS v, "
                   "(SELECT count(*) FROM trips) AS n")
        assert got[0]["t"] == 3 and got[0]["o"].lower() == "desc" and got[0]["n"] == 400
        if path.startswith(("adbc", "worker-1")):
            assert got[0]["v"] == "v" + engine.config["version"]
        assert engine.execute("SELECT 1").notes["duckdb_version"] == got[0]["v"][1:]
    finally:
        engine.close()


def installed_release_library() -> str:
    from importlib.metadata import version

    return str(ensure_installed(version("duckdb")).library)


@pytest.mark.parametrize("path", ["installed", "adbc-1.5.5", "adbc-installed-release",
                                  "worker-installed"])
def test_every_path_runs_without_progress_tracking_like_the_module(path):
    # DuckDB 2.0.1's ADBC driver switches the progress bar on; tracking progress on every
    # 2048-row fetch cost a quarter of a large answer's time
    sec = {"path": installed_release_library()} if path == "adbc-installed-release" \
        else section(path)
    setting = "SELECT current_setting('enable_progress_bar') AS p"
    engine = open_engine(sec)
    try:
        held = engine.execute("SELECT * FROM range(300000) t(i)").reader  # the next one clones
        assert rows(engine, setting) == [{"p": False}]
        held.read_all()
    finally:
        engine.close()
    engine = open_engine({**sec, "settings": {"enable_progress_bar": True}})
    try:
        assert rows(engine, setting) == [{"p": True}]
    finally:
        engine.close()


class AttachingEngine(DuckDBEngine):
    """What the ducklake engine does: extra extensions and statements after connecting."""

    type_name = "attaching"
    required_extensions: ClassVar[tuple[str, ...]] = ("sqlite_scanner",)

    def setup_sql(self) -> list[str]:
        return ["ATTACH ':memory:' AS side", "CREATE TABLE side.main.marker AS SELECT 7 AS x"]


@pytest.mark.parametrize("path", ["adbc-1.5.5", "adbc-1.4.4", "worker-1.5.5"])
def test_a_subclass_loads_its_extensions_then_runs_its_setup_sql_on_every_path(path):
    engine = open_engine(section(path), engine_class=AttachingEngine)
    try:
        assert rows(engine, "SELECT x FROM side.main.marker") == [{"x": 7}]
        loaded = rows(engine, "SELECT loaded FROM duckdb_extensions() "
                      "WHERE extension_name = 'sqlite_scanner'")
        assert loaded == [{"loaded": True}]
    finally:
        engine.close()


def test_a_subclass_setup_runs_in_every_cli_invocation(tmp_path):
    class CliAttaching(DuckDBEngine):
        type_name = "cliattach"

        def setup_sql(self) -> list[str]:
            return ["CREATE TEMP TABLE marker AS SELECT 7 AS x"]

    engine = open_engine(section("cli"), engine_class=CliAttaching)
    try:
        assert rows(engine, "SELECT x FROM marker") == [{"x": 7}]
        assert rows(engine, "SELECT x + 1 AS y FROM marker") == [{"y": 8}]
    finally:
        engine.close()


def test_extensions_option_loads_the_file_built_for_that_release():
    engine = open_engine({"version": V144, "extensions": ["ducklake"]})
    try:
        assert rows(engine, "SELECT loaded FROM duckdb_extensions() "
                    "WHERE extension_name = 'ducklake'") == [{"loaded": True}]
    finally:
        engine.close()


def test_an_extension_missing_for_the_release_is_a_configuration_error():
    with pytest.raises(ConfigError) as info:
        open_engine({"version": V20, "extensions": ["ducklake"]})
    assert info.value.key == "engines.e.extensions"
    assert "versions that have it" in str(info.value) and V155 in str(info.value)


def test_parameters_and_errors_on_the_adbc_path():
    engine = open_engine(section("adbc-1.5.5"), SOURCES)
    try:
        assert rows(engine, "SELECT count(*) AS n FROM trips WHERE cab_type = ?",
                    ["green"]) == [{"n": 113}]
        with pytest.raises(QueryError, match="no_such_column"):
            rows(engine, "SELECT no_such_column FROM trips")
        # two answers open at once are read on separate connections
        first = engine.execute("SELECT * FROM range(300000) t(i)").reader
        second = engine.execute("SELECT 2 AS two").reader
        assert second.read_all().to_pylist() == [{"two": 2}]
        assert first.read_all().num_rows == 300000
    finally:
        engine.close()


def test_a_write_on_a_second_adbc_connection_is_committed():
    engine = open_engine(section("adbc-1.5.5"))
    try:
        rows(engine, "CREATE TABLE written (a INTEGER)")
        held = engine.execute("SELECT * FROM range(300000) t(i)").reader  # the first connection
        rows(engine, "INSERT INTO written VALUES (1)")  # a second one, then idle
        assert held.read_all().num_rows == 300000
        assert rows(engine, "SELECT count(*) AS n FROM written") == [{"n": 1}]  # the first
    finally:
        engine.close()


def test_a_bad_setting_is_a_configuration_error_naming_its_key():
    with pytest.raises(ConfigError) as info:
        open_engine({"version": V155, "settings": {"threads": 0}})
    assert info.value.key == "engines.e.settings.threads"


# -- custom builds -------------------------------------------------------------
def test_path_accepts_a_folder_a_shared_library_and_a_wheel(tmp_path):
    inst = ensure_installed(V155)
    wheel = tmp_path / f"duckdb-{V155}-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(inst.library, inst.library.name)
        zf.write(inst.root / "duckdb" / "__init__.py", "duckdb/__init__.py")
    for given in (inst.root, inst.library, wheel):
        engine = open_engine({"path": str(given)})
        try:
            assert rows(engine, "SELECT version() AS v") == [{"v": f"v{V155}"}]
        finally:
            engine.close()


def test_path_with_extensions_uses_the_release_the_build_reports():
    inst = ensure_installed(V155)
    engine = open_engine({"path": str(inst.library), "extensions": ["sqlite"]})
    try:
        assert rows(engine, "SELECT loaded FROM duckdb_extensions() "
                    "WHERE extension_name = 'sqlite_scanner'") == [{"loaded": True}]
    finally:
        engine.close()


@pytest.mark.parametrize("what", ["missing", "text file", "other library", "empty folder"])
def test_a_path_that_is_not_a_duckdb_build_is_a_configuration_error(tmp_path, what):
    if what == "missing":
        given = tmp_path / "nothing.so"
    elif what == "text file":
        given = tmp_path / "notes.so"
        given.write_text("not a library")
    elif what == "other library":
        import pyarrow

        given = next(Path(pyarrow.__file__).parent.glob("lib.cpython*.so"))
    else:
        given = tmp_path
    with pytest.raises(ConfigError) as info:
        open_engine({"path": str(given)})
    assert info.value.key == "engines.e.path"
    assert "duckdb_adbc_init" in str(info.value)


# -- the CLI -------------------------------------------------------------------
def test_a_missing_cli_binary_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        open_engine({"cli": str(tmp_path / "duckdb")})
    assert info.value.key == "engines.e.cli"
    assert "does not exist" in str(info.value)


def test_a_binary_that_is_not_duckdb_is_a_configuration_error():
    with pytest.raises(ConfigError, match="is not a DuckDB binary"):
        open_engine({"cli": "/bin/true"})


def test_cli_rebuilds_types_parquet_cannot_hold():
    engine = open_engine(section("cli"))
    try:
        table = engine.execute(
            "SELECT sum(x) AS s, ('1' || repeat('0', 37))::HUGEINT AS h, "
            "'it''s' AS q, 1.5::DECIMAL(10, 2) AS d, DATE '2020-01-02' AS dt, "
            "[1, 2] AS l FROM range(3) t(x)").reader.read_all()
        assert table.schema.types[:2] == [pa.decimal128(38, 0), pa.decimal128(38, 0)]
        assert table.to_pylist()[0]["h"] == 10**37
        assert table.to_pylist()[0]["q"] == "it's"
        assert table.schema.field("d").type == pa.decimal128(10, 2)
        assert table.schema.field("l").type == pa.list_(pa.int32())
    finally:
        engine.close()


def test_cli_reads_queries_wrapped_in_comments():
    engine = open_engine(section("cli"))
    try:
        assert rows(engine, "-- name: leading\n/* block */ SELECT 1 AS a") == [{"a": 1}]
        assert rows(engine, "SELECT 2 AS a -- a trailing comment") == [{"a": 2}]
    finally:
        engine.close()


def test_cli_runs_statements_and_reports_errors_and_refuses_parameters(tmp_path):
    db = tmp_path / "c.duckdb"
    engine = open_engine({"cli": cli_binary(), "database": str(db)})
    try:
        assert engine.execute("CREATE TABLE t AS SELECT 1 AS a").reader.read_all().num_rows == 0
        assert rows(engine, "SELECT a FROM t") == [{"a": 1}]
        with pytest.raises(QueryError, match="no_such_column"):
            rows(engine, "SELECT no_such_column FROM t")
        with pytest.raises(Unsupported):
            engine.execute("SELECT ?", [1])
    finally:
        engine.close()


@pytest.mark.parametrize("sql", [
    "CREATE TABLE t (a INT);\n.shell touch {marker}",
    "CREATE TABLE t (a INT)\n;\n  .system touch {marker}",
    ".shell touch {marker}",
    "SELECT 1 AS a\n)));\n.shell touch {marker}\nSELECT (((1",
])
def test_cli_runs_no_dot_command_a_statement_holds(tmp_path, sql):
    """The statement is fed to the binary's standard input, where a line starting with a
    dot after a finished statement is the binary's own command: a Flight user ran a
    program on the server with "CREATE TABLE t (a INT);\n.shell ..."."""
    marker = tmp_path / "ran"
    engine = open_engine({"cli": cli_binary(), "database": str(tmp_path / "c.duckdb")})
    try:
        with pytest.raises(QueryError, match="dot commands"):
            engine.execute(sql.format(marker=marker)).reader.read_all()
        assert rows(engine, "SELECT 'a.b' AS x") == [{"x": "a.b"}]
    finally:
        engine.close()
    assert not marker.exists()


def test_version_path_and_cli_cannot_be_combined():
    with pytest.raises(ConfigError, match="cannot be combined"):
        open_engine({"version": V155, "cli": sys.executable})


def test_a_version_equal_to_the_installed_module_runs_on_the_module():
    from importlib.metadata import version

    from gateway_duckdb.python_session import PythonSession

    engine = open_engine({"version": version("duckdb")})
    try:
        assert isinstance(engine._session, PythonSession)
        assert rows(engine, "SELECT version() AS v") == [{"v": "v" + version("duckdb")}]
    finally:
        engine.close()


@pytest.mark.parametrize("isolation", ["in_process", "process"])
def test_a_version_engine_at_the_running_release_downloads_no_second_copy(
        tmp_path, monkeypatch, isolation):
    # issue 38: version = "2.0.1" downloaded 67 MB of DuckDB 2.0.1 though the venv had it
    from importlib.metadata import version

    from gateway_duckdb import install

    def no_pip(requirement, *args):
        raise AssertionError(f"pip ran for {requirement}")

    monkeypatch.setattr(install, "_pip_install_atomically", no_pip)
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path))
    engine = open_engine({"version": version("duckdb"), "isolation": isolation})
    try:
        assert rows(engine, "SELECT version() AS v") == [{"v": "v" + version("duckdb")}]
    finally:
        engine.close()
    assert not (tmp_path / "duckdb").exists()
    where = DuckDBEngine.describe_location({"version": version("duckdb"),
                                            "isolation": isolation})
    assert where["where"] == str(Path(__import__("duckdb").__file__).parent)


def test_extensions_for_a_duckdb_at_hand_install_without_a_second_copy_of_it(
        tmp_path, monkeypatch):
    from gateway_duckdb import install

    inst = ensure_installed(V155)  # the shared cache's, as a custom build's path
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "fresh"))
    engine = open_engine({"path": str(inst.library), "extensions": ["sqlite"]})
    try:
        assert rows(engine, "SELECT loaded FROM duckdb_extensions() "
                    "WHERE extension_name = 'sqlite_scanner'") == [{"loaded": True}]
    finally:
        engine.close()
    assert sorted(p.name for p in (tmp_path / "fresh" / "duckdb" / V155).iterdir()) == ["ext"]
    assert install.installed(V155) is None


def test_a_release_pip_does_not_offer_is_a_configuration_error_on_the_version_key():
    with pytest.raises(ConfigError) as info:
        open_engine({"version": "1.9.9"})
    assert info.value.key == "engines.e.version"
    assert "not a release pip can install" in str(info.value) and V155 in str(info.value)
