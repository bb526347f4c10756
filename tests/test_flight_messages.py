"""The Flight SQL message definitions and the SqlInfo answer built on them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
from google.protobuf import descriptor_pb2

from gateway.flight import protobuf as M
from gateway.flight import sqlinfo

FLIGHT = Path(M.__file__).parent


def test_descriptor_set_matches_the_proto_files(tmp_path):
    out = tmp_path / "messages.binpb"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{FLIGHT}",
                    f"--descriptor_set_out={out}", str(FLIGHT / "flight_sql.proto"),
                    str(FLIGHT / "flight_session.proto")], check=True)
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    committed = descriptor_pb2.FileDescriptorSet.FromString(
        (FLIGHT / "messages.binpb").read_bytes())
    assert fresh == committed, "regenerate messages.binpb (command in flight_sql.proto)"


def test_messages_live_beside_another_clients_definitions():
    import flightsql.flightsql_pb2 as theirs  # registers arrow.flight.protocol.sql.* by default

    packed = M.pack(theirs.CommandStatementQuery(query="SELECT 1"))
    assert M.unpack_command(packed).query == "SELECT 1"


def test_type_urls_are_the_specifications():
    from google.protobuf import any_pb2

    wrapper = any_pb2.Any.FromString(M.pack(M.CommandGetTables()))
    assert wrapper.type_url == "type.googleapis.com/arrow.flight.protocol.sql.CommandGetTables"


def answers(**overrides):
    kwargs = {"read_only": False, "writable": True, "statement_length": 1000,
              "handle_timeout_ms": 60_000, **overrides}
    return {row["info_name"]: row["value"]
            for row in sqlinfo.table(sqlinfo.infos(**kwargs)).to_pylist()}


def test_sql_info_answers_every_code_of_the_specification():
    got = answers()
    # all of FlightSql.proto's SqlInfo enum but 6 and 7, Substrait's versions: null without it
    server = {0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 100, 101}
    assert server | set(range(500, 577)) == set(got)
    assert got[0] == "arrowgate" and got[504] == '"' and got[563] is False
    assert got[10] is False and got[11] is False  # no bulk ingestion


def test_sql_info_advertises_transactions_only_when_the_engine_has_them():
    assert answers()[8] == 0 and answers()[563] is False
    assert answers(transactions=True)[8] == 1 and answers(transactions=True)[563] is True


def test_sql_info_is_per_user():
    assert answers(read_only=True)[3] is True
    assert answers(read_only=True)[502] is False
    assert answers()[3] is False and answers()[502] is True


def test_sql_info_asks_for_some_codes():
    table = sqlinfo.table(sqlinfo.infos(read_only=False, writable=True, statement_length=1,
                                        handle_timeout_ms=1), [0, 504])
    assert table.column("info_name").to_pylist() == [0, 504]


#: Functions DuckDB parses as special forms, so duckdb_functions() does not list them.
SPECIAL_FORMS = {"coalesce": "coalesce(NULL, 1)", "ifnull": "ifnull(NULL, 1)",
                 "extract": "extract(year FROM DATE '2020-01-02')"}


def test_every_function_listed_exists_in_duckdb():
    con = duckdb.connect()
    known = {name for (name,) in con.execute(
        "SELECT DISTINCT function_name FROM duckdb_functions()").fetchall()}
    for name in (sqlinfo.NUMERIC_FUNCTIONS + sqlinfo.STRING_FUNCTIONS
                 + sqlinfo.SYSTEM_FUNCTIONS + sqlinfo.DATETIME_FUNCTIONS):
        if name in SPECIAL_FORMS:
            assert con.execute(f"SELECT {SPECIAL_FORMS[name]}").fetchall()
        else:
            assert name in known, name
