"""Configuration: every kind of mistake names the file, the key, the reason, and exits 2."""

from __future__ import annotations

import pytest

import gateway
from gateway.config import EngineConfig
from tests.conftest import DATA


def write(tmp_path, text: str):
    path = tmp_path / "arrowgate.toml"
    path.write_text(text)
    return path


MISTAKES = {
    "unknown_top_level_key": (
        '[engines.d]\ntype = "duckdb"\n[engnes.x]\ntype = "duckdb"\n',
        "engnes", "unknown key", "allowed at the top level"),
    "unknown_engine_key": (
        '[engines.d]\ntype = "duckdb"\nthreads = 2\n',
        "engines.d.threads", "unknown key", "read_only, secrets, settings"),
    "unknown_engine_type": (
        '[engines.d]\ntype = "oracle"\n',
        "engines.d.type", "unknown engine type 'oracle'", "installed engine types: "),
    "missing_engine_type": (
        '[engines.d]\nread_only = true\n',
        "engines.d.type", "missing", "installed engine types"),
    "wrong_value_type": (
        '[engines.d]\ntype = "duckdb"\nread_only = "yes"\n',
        "engines.d.read_only", "must be boolean, not a string", "read-only"),
    "missing_source_file": (
        '[engines.d]\ntype = "duckdb"\n[sources.t]\npath = "no/such.csv"\n',
        "sources.t.path", "no such file or folder", "relative to the configuration file"),
    "source_without_path": (
        '[engines.d]\ntype = "duckdb"\n[sources.t]\nformat = "csv"\n',
        "sources.t.path", "missing", "a file, a glob"),
    "bad_source_format": (
        f'[engines.d]\ntype = "duckdb"\n[sources.t]\npath = "{DATA}/trips.csv"\nformat = "xlsx"\n',
        "sources.t.format", "'xlsx' is not allowed", "allowed: csv, parquet"),
    "default_engine_unknown": (
        'default_engine = "x"\n[engines.d]\ntype = "duckdb"\n',
        "default_engine", "names no declared engine", "declared engines: d"),
    "no_engines": ("", "engines", "no engine is declared", 'type = "duckdb"'),
    "missing_env_var": (
        '[engines.d]\ntype = "duckdb"\ndatabase = "${ARROWGATE_TEST_UNSET_VAR}"\n',
        "engines.d.database", "ARROWGATE_TEST_UNSET_VAR is not set", "export"),
    "fallback_to_a_missing_engine": (
        '[engines.scan]\ntype = "csv"\nfallback = "duk"\n[engines.duck]\ntype = "duckdb"\n',
        "engines.scan.fallback", "fallback names no engine: 'duk'", "configured engines: duck"),
    "fallback_to_itself": (
        '[engines.scan]\ntype = "csv"\nfallback = "scan"\n',
        "engines.scan.fallback", "fallback names the engine itself", "none besides this one"),
    "invalid_toml": ('[engines.d\ntype = "duckdb"\n', None, "not valid TOML", "line"),
    "engine_name_with_a_trailing_newline": (
        '[engines."d\\n"]\ntype = "duckdb"\n',
        "engines.'d\\n'", "an engine name must be letters, digits and underscores",
        "--engine"),
    "source_name_with_a_trailing_newline": (
        f'[engines.d]\ntype = "duckdb"\n[sources."t\\n"]\npath = "{DATA}/trips.csv"\n',
        "sources.'t\\n'", "a source name must be letters", "table name"),
    "negative_timeout": (
        '[engines.d]\ntype = "duckdb"\ntimeout = -5\n',
        "engines.d.timeout", "-5 is out of range", "allowed: a number greater than 0"),
    "zero_timeout": (
        '[engines.d]\ntype = "duckdb"\nisolation = "process"\ntimeout = 0\n',
        "engines.d.timeout", "0 is out of range", "allowed: a number greater than 0"),
    "negative_csv_threads": (
        '[engines.c]\ntype = "csv"\nthreads = -3\n',
        "engines.c.threads", "-3 is out of range", "allowed: 0 or more"),
    "zero_csv_chunk_bytes": (
        '[engines.c]\ntype = "csv"\nchunk_bytes = 0\n',
        "engines.c.chunk_bytes", "0 is out of range", "allowed: 1 or more"),
    "negative_lake_retries": (
        '[engines.l]\ntype = "ducklake"\ncatalog = "sqlite:x.db"\nmax_retry_count = -1\n',
        "engines.l.max_retry_count", "-1 is out of range", "allowed: 0 or more"),
}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_mistake_is_named_with_file_key_and_reason(name, tmp_path, cli):
    text, key, reason, allowed = MISTAKES[name]
    path = write(tmp_path, text)
    with pytest.raises(gateway.ConfigError) as info:
        gateway.connect(path)
    message = str(info.value)
    assert str(path) in message
    if key is not None:
        assert f": {key}: " in message
    assert reason in message
    assert allowed in message
    if name == "unknown_engine_type":
        assert "duckdb" in message.split("installed engine types: ")[1]
    run = cli("--config", str(path), "query", "SELECT 1")
    assert run.code == 2
    assert "configuration error" in run.err and reason in run.err


def test_missing_config_file_exits_2(cli, tmp_path):
    run = cli("--config", str(tmp_path / "absent.toml"), "engines")
    assert run.code == 2
    assert "configuration file not found" in run.err


def test_unknown_duckdb_setting_names_it(cli, tmp_path):
    path = write(tmp_path, '[engines.d]\ntype = "duckdb"\nsettings = { no_such_setting = 1 }\n')
    run = cli("--config", str(path), "query", "SELECT 1")
    assert run.code == 2
    assert "engines.d.settings.no_such_setting" in run.err
    assert "unrecognized configuration parameter" in run.err


def test_dict_config_and_env_expansion(monkeypatch, tmp_path):
    monkeypatch.setenv("TRIPS_FILE", str(DATA / "trips.csv"))
    config = {"engines": {"d": {"type": "duckdb"}}, "sources": {"trips": {"path": "${TRIPS_FILE}"}}}
    with gateway.connect(config) as gw:
        assert gw.execute("SELECT count(*) AS n FROM trips").to_arrow()["n"][0].as_py() == 400


def test_dollar_escape_is_literal(tmp_path):
    path = write(tmp_path, '[engines.d]\ntype = "duckdb"\ndatabase = "$${not_a_var}.db"\n')
    with gateway.connect(path) as gw:
        assert gw.engine_config("d").options["database"] == "${not_a_var}.db"


def test_relative_source_paths_resolve_against_the_config_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "t.csv").write_text("a,b\n1,2\n")
    path = write(tmp_path, '[engines.d]\ntype = "duckdb"\n[sources.t]\npath = "sub/t.csv"\n')
    with gateway.connect(path) as gw:
        assert gw.execute("SELECT a + b AS s FROM t").to_arrow()["s"][0].as_py() == 3


def test_source_folder_and_glob(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        (folder / f"p{i}.csv").write_text(f"x\n{i}\n")
    config = {"engines": {"d": {"type": "duckdb"}},
              "sources": {"folder": {"path": str(folder)},
                          "pattern": {"path": str(folder / "p[01].csv")}}}
    with gateway.connect(config) as gw:
        assert gw.execute("SELECT sum(x) AS s FROM folder").to_arrow()["s"][0].as_py() == 3
        assert gw.execute("SELECT sum(x) AS s FROM pattern").to_arrow()["s"][0].as_py() == 1


def test_secrets_are_masked_when_printed():
    cfg = EngineConfig(
        name="pg", type="x",
        options={"password": "hunter2", "dsn": "host=db user=me password=hunter2 port=5432",
                 "url": "postgresql://me:hunter2@db/x", "threads": 4},
        secret_keys=frozenset({"password"}),
    )
    shown = str(cfg.printable_options())
    assert "hunter2" not in shown
    assert "host=db" in shown and "port=5432" in shown and "postgresql://me:***@db/x" in shown


@pytest.mark.parametrize("kind", ["fifo", "device", "fifo_in_glob", "fifo_in_folder"])
def test_a_source_that_is_not_a_regular_file_is_a_config_error(kind, tmp_path):
    import os

    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "ok.csv").write_text("x\n1\n")
    fifo = folder / "pipe.csv"
    os.mkfifo(fifo)
    path, what = {"fifo": (str(fifo), "a named pipe (FIFO)"),
                  "device": ("/dev/zero", "a character device"),
                  "fifo_in_glob": (str(folder / "*.csv"), "a named pipe (FIFO)"),
                  "fifo_in_folder": (str(folder), "a named pipe (FIFO)")}[kind]
    config = {"engines": {"d": {"type": "duckdb"}},
              "sources": {"t": {"path": path, "format": "csv"}}}
    with pytest.raises(gateway.ConfigError) as info:
        gateway.connect(config)
    assert info.value.key == "sources.t.path"
    shown = "/dev/zero" if kind == "device" else str(fifo)
    assert f"{shown} is {what}" in info.value.message


def test_every_numeric_engine_option_declares_its_range():
    from gateway.plugins import build_plugin_manager, engine_types

    unbounded = [f"{type_name}.{key}"
                 for type_name, cls in engine_types(build_plugin_manager()).items()
                 for key, opt in cls.options.items()
                 if (int in opt.types or float in opt.types) and not opt.choices
                 and opt.minimum is None and opt.exclusive_minimum is None]
    assert not unbounded, "give these options a minimum: " + ", ".join(unbounded)


def test_a_source_takes_an_encoding_and_a_compression_every_engine_reads(tmp_path):
    import gzip

    latin = tmp_path / "latin.csv"
    latin.write_bytes("a;b\ncaf\u00e9;1\n".encode("latin-1"))
    packed = tmp_path / "packed.csv.gz"
    packed.write_bytes(gzip.compress(b"x,y\n1,2\n3,4\n"))
    config = {"engines": {"c": {"type": "csv"}, "d": {"type": "duckdb"}},
              "sources": {"l": {"path": str(latin), "encoding": "latin-1"},
                          "z": {"path": str(packed), "format": "csv", "compression": "gzip"}}}
    with gateway.connect(config) as gw:
        for engine in ("c", "d"):
            assert gw.execute("SELECT a FROM l", engine=engine).to_arrow() \
                .column(0).to_pylist() == ["caf\u00e9"]
            assert gw.execute("SELECT sum(y) AS s FROM z", engine=engine).to_arrow() \
                .column(0).to_pylist() == [6]


def test_an_unknown_encoding_is_a_config_error(tmp_path):
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    with pytest.raises(gateway.ConfigError, match=r"sources\.x\.encoding: no text encoding"):
        gateway.connect({"engines": {"d": {"type": "duckdb"}},
                         "sources": {"x": {"path": str(data), "encoding": "klingon"}}})
