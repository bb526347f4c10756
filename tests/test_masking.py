"""One masking function for everything printed: every way a password is written, and every
value that came from ``${VAR}`` or a secret option."""

from __future__ import annotations

import pytest

import gateway
from gateway.masking import mask, mask_text, remember

FORMS = {
    # the text, the secret bytes that must be gone, what must still be there
    "uri_userinfo": ("postgresql://lake:S3cret%40x@host/db", "S3cret", "postgresql://lake:***@host/db"),
    "uri_without_scheme": ("'//lake:S3cret%40x@host/db'", "S3cret", "//lake:***@host/db"),
    "uri_raw_at_sign": ("postgres://u:p@ss@h:5432/d", "p@ss", "postgres://u:***@h:5432/d"),
    "libpq_bare": ("dbname=l password=hunter2 host=h", "hunter2", "dbname=l password=*** host=h"),
    "libpq_quoted_escape": (r"host=h password='Quo\'ted secret' user=u", "ted secret",
                            "host=h password=*** user=u"),
    "libpq_quoted_backslash": (r"password='a\\b c' port=5", r"a\\b c", "password=*** port=5"),
    "libpq_spaces_around_equals": ("password = 'x y z' dbname=d", "x y z", "dbname=d"),
    "sslpassword": ("sslmode=require sslpassword=keypass1 sslkey=/k", "keypass1",
                    "sslpassword=***"),
    "odbc_braces": ("Server=h;Password={a;b}}c};Database=l", "b}}c", "Server=h;Password=***;Database=l"),
    "odbc_pwd_upper": ("Server=x;PWD=s3cret;Database=y", "s3cret", "Server=x;PWD=***;Database=y"),
    "ado_value_with_spaces": ("Server=h;Password=my long secret;Database=l", "long secret",
                              "Server=h;Password=***;Database=l"),
    "ado_value_at_end": ("Server=h;User Id=u;Pwd=tail secret", "tail secret", "Pwd=***"),
    "token_key": ("token=abcd1234 mode=x", "abcd1234", "token=*** mode=x"),
    "secret_key": ("s3_secret_access_key=AKIAXYZ region=eu", "AKIAXYZ", "region=eu"),
    "api_key": ("https://h/x?api_key=zzz999&page=2", "zzz999", "&page=2"),
    "bare_key": ("key=k3y-value other=1", "k3y-value", "other=1"),
    "json_pair": ('{"password": "js\\"on pw", "user": "u"}', "on pw", '"user": "u"'),
    "python_repr": ("{'secret': 'py-secret', 'x': 1}", "py-secret", "'x': 1"),
}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_way_of_writing_a_password_is_masked(name):
    text, secret, kept = FORMS[name]
    shown = mask_text(text)
    assert secret not in shown, shown
    assert kept in shown, shown


def test_text_without_secrets_is_unchanged():
    for text in ("password authentication failed for user \"lake\"",
                 "engines.lake.secret_key: must be a string",
                 "dbname=lake host=db port=5432 user=u", "SELECT 1 AS key"):
        assert mask_text(text) == text


def test_remembered_values_are_masked_in_any_form():
    remember("R3member'd@pw")
    for text in ("login R3member'd@pw failed", "PASSWORD 'R3member''d@pw'",
                 "//u:R3member%27d%40pw@h"):
        assert "R3member" not in mask_text(text), text
    assert mask({"a": ["R3member'd@pw"], "b": 1}) == {"a": ["***"], "b": 1}


def test_short_remembered_values_are_masked_only_whole():
    remember("on")
    assert mask_text("on") == "***"
    assert mask_text("connection refused") == "connection refused"


def test_values_from_environment_variables_are_masked_everywhere(monkeypatch, tmp_path, cli):
    monkeypatch.setenv("ARROWGATE_TEST_DB_FILE", str(tmp_path / "envsecret-dbfile.duckdb"))
    config = tmp_path / "arrowgate.toml"
    config.write_text('[engines.d]\ntype = "duckdb"\ndatabase = "${ARROWGATE_TEST_DB_FILE}"\n'
                      'read_only = true\n')
    listing = cli("--config", str(config), "engines")
    assert listing.code == 0, listing.err
    assert "envsecret" not in listing.out + listing.err and "database=***" in listing.out
    # the engine fails to open the (missing) file read-only: the error names no path
    query = cli("--config", str(config), "query", "SELECT 1")
    assert query.code != 0
    assert "envsecret" not in query.out + query.err, query.err


def test_configuration_errors_mask_secret_values(tmp_path, cli):
    config = tmp_path / "arrowgate.toml"
    config.write_text('[engines.lake]\ntype = "ducklake"\n'
                      'catalog = "postgresql://lake:S3cret%40x@host/db"\nduckdb = "0.0.1"\n')
    for args in (("engines",), ("query", "SELECT 1"), ("lake", "check", "lake")):
        run = cli("--config", str(config), *args)
        assert "S3cret" not in run.out + run.err, (args, run.out, run.err)


def test_gateway_errors_are_masked_when_printed():
    err = gateway.QueryError("cannot connect: password=hunter22 host=h", engine="e",
                             hint="check postgresql://u:hunter22@h/d")
    assert "hunter22" not in str(err)
