"""Credentials never reach SQL users, stores or printed output, on every engine type that takes
them: ducklake (a PostgreSQL catalog's password, written in the string or through ${VAR}) and
duckdb (``secrets``, in process, as an ADBC driver and in a worker process).

Every probe a SQL user or an operator has is run, and the secret bytes must appear nowhere:
duckdb_databases(), duckdb_secrets() (redacted and not), every setting (what current_setting()
reads), error messages, the shadow store, stderr and Python's logs, ``arrowgate engines`` and
``arrowgate lake check``.
"""

from __future__ import annotations

import logging
import secrets

import pyarrow.parquet as pq
import pytest

import gateway
from tests.lakes import DUCKDB

TOKEN = "tok-Bearer-5f1e2d3c4b"
PROBES = [
    "SELECT * FROM duckdb_databases()",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM duckdb_secrets(redact := false)",
    "SELECT name, value FROM duckdb_settings()",
    "SELECT current_setting('search_path') AS s",
    "SELECT * FROM no_such_table",
]


def write_config(postgres, tmp_path, *, shadow: bool = True) -> tuple[str, list[str]]:
    suffix = secrets.token_hex(3)
    postgres.create_database(f"cred_kw_{suffix}")
    postgres.create_database(f"cred_uri_{suffix}")
    pw = postgres.password
    data = tmp_path / "data"
    store = tmp_path / "store"
    text = f'''
[engines.lake_kw]
type = "ducklake"
duckdb = "{DUCKDB}"
catalog = "postgres:dbname=cred_kw_{suffix} host=127.0.0.1 port={postgres.port} user=postgres password={pw}"
data_path = "{data}/kw/"

[engines.lake_uri]
type = "ducklake"
duckdb = "{DUCKDB}"
catalog = "postgresql://postgres:${{ARROWGATE_TEST_LAKE_PW}}@127.0.0.1:{postgres.port}/cred_uri_{suffix}"
data_path = "{data}/uri/"

[engines.duck]
type = "duckdb"
secrets = {{ web = {{ type = "http", bearer_token = "{TOKEN}" }} }}

[engines.duck_adbc]
type = "duckdb"
version = "{DUCKDB}"
secrets = {{ web = {{ type = "http", bearer_token = "{TOKEN}" }} }}

[engines.duck_worker]
type = "duckdb"
isolation = "process"
secrets = {{ web = {{ type = "http", bearer_token = "${{ARROWGATE_TEST_TOKEN}}" }} }}

[engines.plain]
type = "duckdb"
'''
    if shadow:
        text += f'[shadow]\nreference = "plain"\nstore = "{store}"\n'
    path = tmp_path / "arrowgate.toml"
    path.write_text(text)
    return str(path), [pw, TOKEN]


@pytest.mark.slow
@pytest.mark.postgres
def test_no_probe_shows_a_credential(postgres, tmp_path, monkeypatch, cli, caplog):
    monkeypatch.setenv("ARROWGATE_TEST_LAKE_PW", postgres.password)
    monkeypatch.setenv("ARROWGATE_TEST_TOKEN", TOKEN)
    caplog.set_level(logging.DEBUG)
    config, hidden = write_config(postgres, tmp_path)
    seen: list[str] = []
    answered = 0
    for engine in ("lake_kw", "lake_uri", "duck", "duck_adbc", "duck_worker"):
        for sql in PROBES:
            run = cli("--config", config, "query", "-e", engine, "--format", "json", sql)
            seen += [run.out, run.err]
            answered += run.code == 0
        # the secret is there, and works: the lake answers
        if engine.startswith("lake"):
            run = cli("--config", config, "query", "-e", engine, "SELECT 42 AS answer")
            assert run.code == 0 and "42" in run.out, run.err
    assert answered >= 20, seen
    for args in (("engines",), ("lake", "check", "lake_kw"), ("lake", "check", "lake_uri")):
        run = cli("--config", config, *args)
        assert run.code == 0, run.err
        seen += [run.out, run.err]
    store = tmp_path / "store"
    files = sorted(store.glob("*.parquet"))
    assert files, "the shadowed probes left no record"
    for f in files:
        seen.append(str(pq.read_table(f).to_pylist()))
        seen.append(f.read_bytes().decode("latin-1"))
    seen.append(caplog.text)
    everything = "\n".join(seen)
    for secret in hidden:
        assert secret not in everything
    # the probes did see the lakes and the secrets, redacted
    assert "cred_kw" in everything and "bearer_token=redacted" in everything


@pytest.mark.postgres
def test_errors_from_the_api_carry_no_credential(postgres, tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_TEST_LAKE_PW", postgres.password)
    monkeypatch.setenv("ARROWGATE_TEST_TOKEN", TOKEN)
    config, hidden = write_config(postgres, tmp_path)
    with gateway.connect(config) as gw:
        for engine in ("lake_kw", "lake_uri", "duck"):
            with pytest.raises(gateway.GatewayError) as info:
                gw.execute("SELECT * FROM duckdb_secrets(redact := false)", engine=engine)
            for secret in hidden:
                assert secret not in str(info.value) and secret not in info.value.message


@pytest.mark.postgres
def test_the_query_log_never_sees_a_credential(postgres, tmp_path, monkeypatch):
    """A SQL user switches DuckDB's query log on, then makes the engine open another
    connection (a second open result): the secret is not created again, so not logged."""
    monkeypatch.setenv("ARROWGATE_TEST_LAKE_PW", postgres.password)
    monkeypatch.setenv("ARROWGATE_TEST_TOKEN", TOKEN)
    # no [shadow]: a shadowed engine reads each answer whole, and no second connection opens
    config, hidden = write_config(postgres, tmp_path, shadow=False)
    with gateway.connect(config) as gw:
        for engine in ("lake_kw", "lake_uri", "duck", "duck_adbc", "duck_worker"):
            gw.execute("CALL enable_logging('QueryLog')", engine=engine).to_arrow()
            first = gw.execute("SELECT * FROM range(10000000)", engine=engine)
            second = gw.execute("SELECT 1 AS x", engine=engine).to_arrow()
            assert second.num_rows == 1
            first.to_arrow()
            logged = gw.execute("SELECT message FROM duckdb_logs", engine=engine).to_arrow()
            text = str(logged.to_pylist())
            assert "SELECT 1 AS x" in text, engine  # the log works
            for secret in hidden:
                assert secret not in text, engine


def test_a_credential_in_settings_is_refused(tmp_path):
    with pytest.raises(gateway.ConfigError) as info, gateway.connect(
            {"engines": {"d": {"type": "duckdb",
                               "settings": {"s3_secret_access_key": "abc"}}}}) as gw:
        gw.execute("SELECT 1")
    assert info.value.key == "engines.d.settings.s3_secret_access_key"
    assert "current_setting" in info.value.message and "secrets" in (info.value.hint or "")


def test_a_secret_duckdb_cannot_create_names_its_key():
    config = {"engines": {"d": {"type": "duckdb", "secrets": {
        "s": {"type": "no_such_type", "password": "pw-never-shown"}}}}}
    with gateway.connect(config) as gw, pytest.raises(gateway.ConfigError) as info:
        gw.execute("SELECT 1").to_arrow()
    assert info.value.key == "engines.d.secrets.s"
    assert "pw-never-shown" not in str(info.value)
