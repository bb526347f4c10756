"""Clients that stop reading: a real ``arrowgate serve`` survives them and gives their memory back.

Issue 36: one ADBC connection running ``execute``, ``fetchmany(10)``, ``close``
in a loop killed the service with SIGSEGV inside DuckDB within 8-40 rounds
(the read-ahead thread was still reading DuckDB's stream while the statement's
close gave its cursor back and the next statement reused it), and each answer
abandoned so kept about 1 MB for good (cycles through an error's traceback held
DuckDB's stream, and the command's raised collector threshold freed them late).
"""

from __future__ import annotations

import time

import adbc_driver_flightsql.dbapi as dbapi
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from gateway.flight import protobuf as M
from tests.flight_support import action
from tests.serve_process import served

CONFIG = """
default_engine = "duck"
[engines.duck]
type = "duckdb"
"""
BIG = "SELECT range AS id, 'row' || range AS s FROM range(1000000)"


@pytest.fixture
def service(tmp_path):
    with served(tmp_path, CONFIG) as service:
        yield service


def ten_rows_and_close(conn) -> None:
    cur = conn.cursor()
    try:
        cur.execute(BIG)
        assert cur.fetchmany(10) == [(i, f"row{i}") for i in range(10)]
    finally:
        cur.close()


def test_reading_ten_rows_then_closing_in_a_loop_leaves_the_service_alive(service):
    with dbapi.connect(service.location, autocommit=True) as conn:
        for _ in range(150):  # it died within 8-40 rounds
            ten_rows_and_close(conn)
            assert service.alive, "".join(service.log[-20:])
        with conn.cursor() as cur:
            cur.execute("SELECT 42 AS answer")
            assert cur.fetchall() == [(42,)]
    with flight.connect(service.location) as client:
        assert action(client, "health")["running_queries"] == 0


def prepare(client: flight.FlightClient, sql: str) -> bytes:
    body = M.pack(M.ActionCreatePreparedStatementRequest(query=sql))
    answer = next(iter(client.do_action(flight.Action("CreatePreparedStatement", body))))
    return M.unpack(M.ActionCreatePreparedStatementResult,
                    answer.body.to_pybytes()).prepared_statement_handle


def close_prepared(client: flight.FlightClient, handle: bytes) -> None:
    body = M.pack(M.ActionClosePreparedStatementRequest(prepared_statement_handle=handle))
    list(client.do_action(flight.Action("ClosePreparedStatement", body)))


def test_a_raw_client_that_cancels_after_one_batch_and_closes_at_once(service):
    """The raw variant: DoGet cancelled after its first batch, the prepared statement
    closed at once, the next prepared (a general protection fault before)."""
    with flight.connect(service.location) as client:
        for _ in range(150):
            handle = prepare(client, BIG)
            command = M.pack(M.CommandPreparedStatementQuery(prepared_statement_handle=handle))
            info = client.get_flight_info(flight.FlightDescriptor.for_command(command))
            reader = client.do_get(info.endpoints[0].ticket)
            first = reader.read_chunk().data
            assert first.column(0)[0].as_py() == 0
            reader.cancel()
            close_prepared(client, handle)
            assert service.alive, "".join(service.log[-20:])
        info = client.get_flight_info(flight.FlightDescriptor.for_command(
            M.pack(M.CommandStatementQuery(query="SELECT sum(range) AS s FROM range(1000)"))))
        table = client.do_get(info.endpoints[0].ticket).read_all()
        assert table == pa.table({"s": pa.array([499500], pa.decimal128(38, 0))})


@pytest.mark.slow
def test_abandoned_answers_give_their_memory_back(service):
    """Each answer a client stops reading kept about 1 MB for good before: 400 of them
    grew the service by some 300 MB. The bound is the issue's: within 50 MB."""
    with dbapi.connect(service.location, autocommit=True) as conn:
        for _ in range(50):  # warm-up: DuckDB's and the allocator's first growth
            ten_rows_and_close(conn)
        start = service.rss_mb()
        for _ in range(400):
            ten_rows_and_close(conn)
        grown = service.rss_mb() - start
    assert grown < 50, f"the service grew by {grown:.0f} MB over 400 abandoned answers"


#: tickets never redeemed go after a second here, so what stays open was claimed
GONE_CONFIG = CONFIG + """
[serve]
ticket_idle = 1
"""
#: DoGet deadlines short enough that many calls end before their first batch is sent
SHORT = [0.0001, 0.0002, 0.0004, 0.0008, 0.0016]


def test_clients_gone_before_the_first_batch_leave_no_answer_behind(tmp_path):
    """Issue 36's slow growth at rest: a DoGet whose client left before the schema was
    sent never started pyarrow's generator, so its ``finally`` never ended the query;
    it stayed claimed (Queries.expire spares claimed tickets), with its answer and the
    engine's cursor: 47 of them after 13,848 client-model actions. A SELECT kept its
    admission slot as well: after 64 of them every statement was refused. The ADBC
    driver drops such streams (a DELETE executed, then the cursor reused at once); a
    raw client gets there with deadlines shorter than the call."""
    with served(tmp_path, GONE_CONFIG) as service, flight.connect(service.location) as client:
        command = M.pack(M.CommandStatementQuery(query="SELECT 42 AS answer"))
        failed = rounds = 0
        while failed < 60 and rounds < 20_000:  # each failure is a stream given up early
            info = client.get_flight_info(flight.FlightDescriptor.for_command(command))
            options = flight.FlightCallOptions(timeout=SHORT[rounds % len(SHORT)])
            rounds += 1
            try:
                client.do_get(info.endpoints[0].ticket, options).read_all()
            except flight.FlightError:
                failed += 1
        assert failed >= 20, f"only {failed} of {rounds} calls ended early: no test"
        assert service.alive, "".join(service.log[-20:])
        for _ in range(120):  # a hang guard: the unredeemed ones go within ticket_idle
            health = action(client, "health")
            if health["open_tickets"] == 0:
                break
            time.sleep(0.25)
        assert health["open_tickets"] == 0, f"{health} after {failed} of {rounds} gone early"
        assert health["running_queries"] == 0
        table = client.do_get(client.get_flight_info(
            flight.FlightDescriptor.for_command(command)).endpoints[0].ticket).read_all()
        assert table.to_pylist() == [{"answer": 42}]
