"""flightsql-dbapi, a second Flight SQL client with its own protobuf messages.

Through its DB-API and its SQLAlchemy dialect (``datafusion+flightsql://``),
as an application would use them.
"""

from __future__ import annotations

import flightsql
import flightsql.sqlalchemy  # registers the datafusion+flightsql dialect
import pytest
import sqlalchemy

from tests.flight_support import server_fixture

server = server_fixture()


@pytest.fixture
def conn(server):
    client = flightsql.FlightSQLClient(host="localhost", port=server.port, insecure=True)
    with flightsql.connect(client) as conn:
        yield conn


def test_query(conn):
    cur = conn.cursor()
    cur.execute("SELECT trip_id, cab_type FROM trips ORDER BY trip_id LIMIT 3")
    rows = cur.fetchall()
    assert [r[0] for r in rows] == [1, 2, 3]
    assert [d[0] for d in cur.description] == ["trip_id", "cab_type"]


def test_prepared_statement_with_parameters(conn):
    cur = conn.cursor()
    cur.execute("SELECT ? * 2 AS twice, ? AS word", (21, "hi"))
    assert [tuple(row) for row in cur.fetchall()] == [(42, "hi")]


def test_prepared_statement_filters_rows(conn):
    cur = conn.cursor()
    cur.execute("SELECT count(*) FROM trips WHERE cab_type = ?", ("green",))
    (green,) = cur.fetchone()
    cur.execute("SELECT count(*) FROM trips WHERE cab_type = 'green'")
    assert cur.fetchone()[0] == green > 0


def test_sqlalchemy_inspector_lists_the_catalog(server):
    engine = sqlalchemy.create_engine(
        f"datafusion+flightsql://localhost:{server.port}?insecure=true")
    inspector = sqlalchemy.inspect(engine)
    assert "main" in inspector.get_schema_names()
    assert "trips" in inspector.get_table_names(schema="main")
    columns = inspector.get_columns("trips", schema="main")
    assert [c["name"] for c in columns][:3] == ["trip_id", "cab_type", "vendor_id"]
    with engine.connect() as connection:
        count = connection.execute(sqlalchemy.text("SELECT count(*) FROM trips")).scalar()
    assert count > 0
    engine.dispose()
