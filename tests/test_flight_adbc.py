"""The ADBC Flight SQL driver, unmodified, against ``arrowgate serve`` over loopback."""

from __future__ import annotations

import json
import time

import adbc_driver_flightsql.dbapi as dbapi
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from tests.flight_support import action, server_fixture, serving
from tests.hang_guard import HANG_GUARD

COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}

server = server_fixture()


@pytest.fixture
def conn(server):
    with dbapi.connect(server.location, autocommit=True) as conn:
        yield conn


def test_execute_and_fetch_arrow_table(server, conn):
    sql = "SELECT cab_type, count(*) AS n, sum(fare_amount) AS fares FROM trips GROUP BY 1 ORDER BY 1"
    with conn.cursor() as cur:
        cur.execute(sql)
        table = cur.fetch_arrow_table()
    assert table.equals(server.backend.gw.execute(sql, "duck").to_arrow())
    assert table.num_rows > 1


def test_large_answer_arrives_in_many_batches(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT range AS i FROM range(300000)")
        reader = cur.fetch_record_batch()
        batches = list(reader)
    assert sum(b.num_rows for b in batches) == 300000
    assert len(batches) > 1


def test_prepared_statement_with_parameters(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT ? + 1 AS next, ? AS word", parameters=(41, "hi"))
        assert cur.fetchall() == [(42, "hi")]
        cur.execute("SELECT count(*) FROM trips WHERE passenger_count = ?", parameters=(1,))
        (one,) = cur.fetchone()
        cur.execute("SELECT count(*) FROM trips WHERE passenger_count = ?", parameters=(2,))
        (two,) = cur.fetchone()
    assert one > 0 and two > 0 and one != two


def test_ddl_and_dml_report_update_counts(conn):
    with conn.cursor() as cur:
        cur.execute("CREATE OR REPLACE TABLE counted (a INTEGER, b VARCHAR)")
        cur.executemany("INSERT INTO counted VALUES (?, ?)", [(1, "a"), (2, "b"), (3, "c")])
        assert cur.rowcount == 3
        stmt = cur.adbc_statement
        stmt.set_sql_query("UPDATE counted SET b = 'z' WHERE a >= 2")
        assert stmt.execute_update() == 2
        stmt.set_sql_query("DELETE FROM counted WHERE a = 1")
        assert stmt.execute_update() == 1
        cur.execute("SELECT a, b FROM counted ORDER BY a")
        assert cur.fetchall() == [(2, "z"), (3, "z")]


def test_get_objects_lists_every_engine_down_to_columns(conn):
    objects = conn.adbc_get_objects(depth="all").read_all().to_pylist()
    by_catalog = {c["catalog_name"]: c for c in objects}
    assert set(by_catalog) == {"duck", "other", "scan"}
    scan_tables = {t["table_name"]: t for s in by_catalog["scan"]["catalog_db_schemas"]
                   for t in s["db_schema_tables"]}
    columns = [c["column_name"] for c in scan_tables["trips"]["table_columns"]]
    assert columns[:3] == ["trip_id", "cab_type", "vendor_id"]


def test_get_objects_filters_by_catalog_and_pattern(conn):
    objects = conn.adbc_get_objects(depth="tables", catalog_filter="scan",
                                    table_name_filter="tr%").read_all().to_pylist()
    assert [c["catalog_name"] for c in objects] == ["scan"]
    names = [t["table_name"] for s in objects[0]["catalog_db_schemas"]
             for t in s["db_schema_tables"]]
    assert names == ["trips"]


def test_get_table_schema(conn):
    schema = conn.adbc_get_table_schema("trips", catalog_filter="scan")
    assert schema.names[:2] == ["trip_id", "cab_type"]
    assert schema.field("trip_id").type == pa.int64()


def test_get_info_names_the_server(conn):
    info = conn.adbc_get_info()
    assert info["vendor_name"] == "arrowgate"
    assert info["vendor_arrow_version"] == pa.__version__


def test_cancel_stops_the_stream_and_frees_the_query(server, conn):
    with conn.cursor() as cur:
        cur.execute("SELECT range AS i FROM range(100000000)")
        reader = cur.fetch_record_batch()
        reader.read_next_batch()
        cur.adbc_cancel()
        with pytest.raises(Exception, match=r"(?i)cancel"):
            for _ in reader:
                pass
    client = flight.connect(server.location)
    deadline = time.monotonic() + HANG_GUARD
    while action(client, "running-queries") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert action(client, "running-queries") == []
    with conn.cursor() as cur:
        cur.execute("SELECT 1 AS still_serving")
        assert cur.fetchall() == [(1,)]


def test_session_option_chooses_the_engine(server):
    option = "adbc.flight.sql.session.option.engine"
    with dbapi.connect(server.location, db_kwargs=COOKIES, autocommit=True) as conn:
        conn.adbc_connection.set_options(**{option: "other"})
        options = json.loads(conn.adbc_connection.get_option("adbc.flight.sql.session.options"))
        assert options["engine"] == "other"
        with conn.cursor() as cur:
            cur.execute("CREATE OR REPLACE TABLE only_in_other AS SELECT 7 AS x")
            cur.fetchall()
            cur.execute("SELECT x FROM only_in_other")
            assert cur.fetchall() == [(7,)]
    with dbapi.connect(server.location, db_kwargs=COOKIES, autocommit=True) as conn, \
            conn.cursor() as cur, pytest.raises(dbapi.Error, match="only_in_other"):
        cur.execute("SELECT x FROM only_in_other")  # the default engine, duck, has no such table


def test_a_cookie_session_keeps_its_connection_state(server):
    with dbapi.connect(server.location, db_kwargs=COOKIES, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute("CREATE TEMP TABLE mine AS SELECT 5 AS v")
        cur.fetchall()
        cur.execute("SET VARIABLE who = 'me'")
        cur.fetchall()
        cur.execute("SELECT v, getvariable('who') AS who FROM mine")
        assert cur.fetchall() == [(5, "me")]
    with dbapi.connect(server.location, db_kwargs=COOKIES, autocommit=True) as conn, \
            conn.cursor() as cur, pytest.raises(dbapi.Error, match="mine"):
        cur.execute("SELECT v FROM mine")  # another connection: another session


def test_session_option_refuses_an_unknown_engine(server):
    with dbapi.connect(server.location, db_kwargs=COOKIES, autocommit=True) as conn, \
            pytest.raises(dbapi.Error):
        conn.adbc_connection.set_options(**{"adbc.flight.sql.session.option.engine": "nope"})


def test_transactions_commit_and_roll_back():
    with serving(transactions=True) as server:
        _commit_and_roll_back(server)


def _commit_and_roll_back(server):
    with dbapi.connect(server.location, autocommit=True) as setup, setup.cursor() as cur:
        cur.execute("CREATE OR REPLACE TABLE ledger (a INTEGER)")
        cur.fetchall()
    with dbapi.connect(server.location) as conn, conn.cursor() as cur:  # autocommit off
        assert conn.adbc_connection.get_option("adbc.connection.autocommit") == "false"
        cur.execute("INSERT INTO ledger VALUES (1)")
        cur.fetchall()
        conn.rollback()
        cur.execute("INSERT INTO ledger VALUES (2)")
        cur.fetchall()
        with dbapi.connect(server.location, autocommit=True) as other, other.cursor() as look:
            look.execute("SELECT count(*) FROM ledger")
            assert look.fetchone() == (0,)  # not committed yet
        conn.commit()
    with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT a FROM ledger")
        assert cur.fetchall() == [(2,)]


def test_a_client_that_never_commits_keeps_its_work_by_default(server):
    """harlequin-adbc (like DB-API's default) connects with autocommit off and never
    commits: with transactions advertised, its user's tables were lost at quit."""
    with pytest.warns(Warning, match="Cannot disable autocommit"):
        conn = dbapi.connect(server.location)  # asks for autocommit off, as harlequin-adbc does
    with conn, conn.cursor() as cur:
        assert conn.adbc_connection.get_option("adbc.connection.autocommit") == "true"
        cur.execute("CREATE OR REPLACE TABLE harlequin_kept AS SELECT 42 AS answer")
        cur.fetchall()
        with pytest.raises(dbapi.Error):
            cur.execute("SELEC typo")  # a typo wedges no transaction
        cur.execute("SELECT answer FROM harlequin_kept")
        assert cur.fetchall() == [(42,)]
    with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT answer FROM harlequin_kept")
        assert cur.fetchall() == [(42,)]


@pytest.mark.parametrize(("sql", "kind"), [("SELEC 1", "syntax"),
                                           ("SELECT nope FROM trips", "unknown_object"),
                                           ("SELECT CAST('x' AS INTEGER)", "type")])
def test_a_failed_query_sends_its_kind_in_a_trailer(conn, sql, kind):
    with conn.cursor() as cur, pytest.raises(dbapi.Error) as info:
        cur.execute(sql)
    details = {k.decode(): v.decode() for k, v in info.value.details}
    assert details.get("x-arrowgate-error-kind") == kind
