"""Credentials in at least 60 forms, through every place text leaves the service: the
errors its clients get, its logs, the shadow store and the capture. Masking works from a
statement's structure (gateway/masking.py), so each form hides a secret of its own.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as dbapi
import pyarrow.parquet as pq

from gateway.capture.captured import read_capture
from gateway.flight.serve_config import hash_password
from gateway.masking import mask_text
from gateway.shadow.store import flush_all
from tests.flight_support import CONFIG, serving

#: statements with a credential where ``{s}`` stands: CREATE SECRET options, settings,
#: passwords, named arguments, connection strings, URLs, headers, keys and tokens
FORMS = [
    "CREATE SECRET f (TYPE s3, KEY_ID 'AKIDplain', SECRET '{s}')",
    "CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 'x', SESSION_TOKEN '{s}')",
    "CREATE PERSISTENT SECRET p (TYPE gcs, TOKEN '{s}')",
    "CREATE OR REPLACE SECRET (TYPE http, BEARER_TOKEN '{s}')",
    "CREATE SECRET (TYPE azure, CONNECTION_STRING 'AccountName=a;AccountKey={s};x=1')",
    "CREATE SECRET (TYPE azure, PROVIDER service_principal, TENANT_ID 't', "
    "CLIENT_ID 'c', CLIENT_SECRET '{s}')",
    "CREATE SECRET (TYPE postgres, HOST 'h', USER 'u', PASSWORD '{s}')",
    "CREATE SECRET (TYPE mysql, HOST 'h', PASSWORD \"{s}\")",
    "CREATE SECRET (TYPE huggingface, TOKEN '{s}')",
    "CREATE SECRET (TYPE r2, ACCOUNT_ID 'acc', KEY_ID 'k', SECRET '{s}')",
    "CREATE SECRET (TYPE http, EXTRA_HTTP_HEADERS MAP {'Authorization': 'Bearer {s}'})",
    "CREATE TEMPORARY SECRET t (TYPE s3, KEY_ID '{s}', SECRET 'other')",
    "create secret lowered (type s3, secret '{s}')",
    "CREATE SECRET (\n  TYPE s3,\n  SECRET '{s}'\n)",
    "CREATE SECRET (TYPE s3, UNHEARD_OF_OPTION '{s}')",
    "SET s3_secret_access_key = '{s}'",
    "SET s3_session_token = '{s}'",
    "SET s3_access_key_id = '{s}'",
    "SET azure_storage_connection_string = 'AccountName=a;AccountKey={s}'",
    "SET hf_token = '{s}'",
    "SET password = '{s}'",
    "PRAGMA password='{s}'",
    "CREATE USER u PASSWORD '{s}'",
    "ALTER USER u WITH PASSWORD '{s}'",
    "CREATE ROLE r LOGIN PASSWORD '{s}'",
    "CREATE USER u IDENTIFIED BY '{s}'",
    "SELECT * FROM postgres_scan('host=h password={s}', 'public', 't')",
    "SELECT f(password := '{s}')",
    "SELECT f(token => '{s}')",
    "SELECT f(api_key := '{s}')",
    "CALL set_token(bearer_token := '{s}')",
    "ATTACH 'host=h user=u password={s} dbname=d' AS pg1 (TYPE postgres)",
    "ATTACH 'postgresql://u:{s}@h:5432/d' AS pg2 (TYPE postgres)",
    "ATTACH 'mysql://u:{s}@h/d' AS m1 (TYPE mysql)",
    "ATTACH 'Driver={SQL Server};Server=h;Uid=u;Pwd={s};' AS ms1",
    "ATTACH 'dbname=d password=''{s} x'' host=h' AS pg3 (TYPE postgres)",
    "SELECT * FROM read_csv('https://{s}@example.invalid/f.csv')",
    "SELECT * FROM read_parquet('https://user:{s}@example.invalid/f.parquet')",
    "SELECT * FROM read_parquet('https://a.blob.core.windows.net/c/f.parquet"
    "?sv=2022-11-02&ss=b&sig={s}&se=2030')",
    "SELECT * FROM read_csv('https://h.invalid/f.csv?token={s}')",
    "SELECT * FROM read_csv('https://h.invalid/f.csv?access_token={s}')",
    "SELECT * FROM read_csv('https://h.invalid/f.csv?api_key={s}&page=1')",
    "SELECT * FROM read_csv('https://h.invalid/f.csv?apikey={s}')",
    "SELECT * FROM read_json('https://b.s3.amazonaws.com/f.json?X-Amz-Credential=A%2F2026"
    "&X-Amz-Signature={s}')",
    "SELECT * FROM read_csv('https://storage.googleapis.com/b/f.csv?X-Goog-Signature={s}')",
    "SELECT * FROM read_csv('s3://key:{s}@bucket/f.csv')",
    "SELECT * FROM read_csv('ftp://anon:{s}@ftp.invalid/f.csv')",
    "SELECT http_get('https://h.invalid', headers => MAP {'Authorization': 'Bearer {s}'})",
    "SELECT 'Authorization: Bearer {s}' AS header_line",
    "SELECT 'Authorization: Basic {s}' AS header_line",
    "SELECT 'bearer {s}' AS header_value",
    "SELECT '{\"password\": \"{s}\"}'::JSON AS doc",
    "SELECT '{\"client_secret\": \"{s}\"}' AS doc",
    "SELECT 'Server=h;Database=d;User Id=u;Password={s};' AS dsn",
    "SELECT 'Server=h;PWD={s}' AS dsn",
    "SELECT 'DSN=x;UID=u;PWD={{s}}' AS dsn",
    "SELECT 'host=h sslpassword={s}' AS dsn",
    "SELECT 'aws_secret_access_key={s}' AS line",
    "SELECT 'AWS_SESSION_TOKEN={s}' AS line",
    "SELECT '-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----' AS pem",
    "SELECT '-----BEGIN RSA PRIVATE KEY-----{s}-----END RSA PRIVATE KEY-----' AS pem",
    "SELECT 'ghp_{s}AbCdEfGhIjKlMnOpQr' AS token",
    "SELECT 'xoxb-{s}' AS token",
    "SELECT 'eyJhbGciOiJIUzI1NiJ9.eyJ{s}.c2lnbmF0dXJl' AS jwt",
    "COPY (SELECT 1) TO 'https://u:{s}@h.invalid/out.csv'",
    "SELECT 'client_secret={s}&grant_type=client_credentials' AS body",
    "SELECT 'X-API-Key={s}' AS header_line",
    "SELECT * FROM iceberg_scan('s3://b/t', secret := '{s}')",
    "SELECT * FROM missing_table_{n} WHERE token = '{s}'",
    "SELEC 'password={s}'",
]


def secret(n: int) -> str:
    return f"Zq{n:02d}k9T7pW3mV8xR2c"


def statements() -> list[tuple[str, str]]:
    return [(form.replace("{s}", secret(n)).replace("{n}", str(n)), secret(n))
            for n, form in enumerate(FORMS)]


def test_there_are_at_least_60_forms_and_masking_hides_each():
    assert len(FORMS) >= 60
    shown = [(sql, mask_text(sql)) for sql, _ in statements()]
    assert [sql for (sql, masked), (_, s) in zip(shown, statements(), strict=True)
            if s in masked] == []


def _text_of(folder: Path) -> str:
    parts = []
    for file in sorted(folder.rglob("*")):
        if file.suffix == ".parquet":
            parts.append(str(pq.read_table(file).to_pylist()))
        elif file.is_file():
            parts.append(file.read_text(errors="replace"))
    return "\n".join(parts)


def test_no_form_reaches_a_client_a_log_the_shadow_store_or_the_capture(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    config: dict[str, Any] = {
        **CONFIG,
        "shadow": {"primary": "duck", "reference": "other", "sample": 1.0,
                   "store": str(tmp_path / "shadow")},
        "serve": {"users": {"dave": {"password_hash": hash_password("dave-pw")},
                            "reader": {"password_hash": hash_password("reader-pw"),
                                       "read_only": True}},
                  "capture": {"folder": str(tmp_path / "capture")}}}
    answers: list[str] = []
    with serving(config) as server:
        for user in ("dave", "reader"):
            with dbapi.connect(server.location, autocommit=True, db_kwargs={
                    "username": user, "password": f"{user}-pw",
                    "adbc.flight.sql.rpc.with_cookie_middleware": "true"}) as conn:
                for sql, _ in statements():
                    with conn.cursor() as cur:
                        try:
                            cur.execute(sql)
                            cur.fetchall()
                        except dbapi.Error as exc:
                            answers.append(str(exc))
        server.capture.flush()
        captured = list(read_capture(tmp_path / "capture"))
    flush_all()
    assert len(answers) > 60  # most forms fail: their errors are what is checked
    assert len(captured) >= len(FORMS)
    places = {"client errors": "\n".join(answers),
              "logs": "\n".join(r.getMessage() for r in caplog.records),
              "shadow store": _text_of(tmp_path / "shadow"),
              "capture": _text_of(tmp_path / "capture")}
    assert places["shadow store"] and places["capture"]
    leaks = {place: [sql for sql, s in statements() if s in text]
             for place, text in places.items()}
    assert leaks == {place: [] for place in places}
