"""pyarrow.flight against the service directly: the gateway actions, and bad input.

Every bad request gets the Flight error its status calls for, and the server
goes on serving the next one.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

from gateway.flight import protobuf as M
from tests.flight_support import CONFIG, action, server_fixture, serving
from tests.hang_guard import HANG_GUARD

server = server_fixture(max_request_bytes=4096)


@pytest.fixture
def client(server):
    with flight.connect(server.location) as client:
        yield client


def query(sql: str) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(M.pack(M.CommandStatementQuery(query=sql)))


def run(client: flight.FlightClient, sql: str) -> pa.Table:
    info = client.get_flight_info(query(sql))
    return client.do_get(info.endpoints[0].ticket).read_all()


def still_serving(client: flight.FlightClient) -> None:
    assert run(client, "SELECT 1 AS ok").to_pylist() == [{"ok": 1}]


def test_list_actions_names_flight_sql_and_gateway_actions(client):
    names = {a.type for a in client.list_actions()}
    assert {"CreatePreparedStatement", "CancelFlightInfo", "SetSessionOptions",
            "engines", "health", "running-queries", "shadow-summary"} <= names


def test_engines_action(client):
    engines = {e["name"]: e for e in action(client, "engines")}
    assert set(engines) == {"duck", "other", "scan"}
    assert engines["duck"]["type"] == "duckdb" and engines["duck"]["default"]
    assert "write" in engines["duck"]["capabilities"]


def test_health_action(client):
    assert action(client, "health")["status"] == "ok"


def test_running_queries_lists_an_unread_query_until_it_is_read(client):
    info = client.get_flight_info(query("SELECT range FROM range(10)"))
    running = action(client, "running-queries")
    assert [q["sql"] for q in running] == ["SELECT range FROM range(10)"]
    assert client.do_get(info.endpoints[0].ticket).read_all().num_rows == 10
    assert action(client, "running-queries") == []


def test_flight_info_carries_the_query_id(client):
    import json

    info = client.get_flight_info(query("SELECT 1"))
    assert json.loads(info.app_metadata)["query_id"] > 0
    client.do_get(info.endpoints[0].ticket).read_all()


def test_shadow_summary_without_shadow_configured(client):
    assert action(client, "shadow-summary") == {"configured": False}


def test_cancel_flight_info(client):
    info = client.get_flight_info(query("SELECT range FROM range(1000000)"))
    request = M.CancelFlightInfoRequest(info=info.serialize())
    (result,) = client.do_action(flight.Action("CancelFlightInfo", request.SerializeToString()))
    status = M.CancelFlightInfoResult.FromString(result.body.to_pybytes()).status
    assert status == M.CANCEL_STATUS["CANCEL_STATUS_CANCELLED"]
    with pytest.raises(pa.ArrowKeyError, match="no such query"):
        client.do_get(info.endpoints[0].ticket).read_all()
    still_serving(client)


def test_malformed_protobuf_is_invalid_argument(client):
    with pytest.raises(pa.ArrowInvalid, match=r"not a google\.protobuf\.Any"):
        client.get_flight_info(flight.FlightDescriptor.for_command(b"\xff\xfe not protobuf"))
    still_serving(client)


def test_unknown_command_type_is_invalid_argument(client):
    wrapper = any_pb2.Any(type_url="type.googleapis.com/arrow.flight.protocol.sql.CommandNope",
                          value=b"")
    with pytest.raises(pa.ArrowInvalid, match="unknown Flight SQL command"):
        client.get_flight_info(flight.FlightDescriptor.for_command(wrapper.SerializeToString()))
    still_serving(client)


def test_a_command_of_the_specification_not_implemented_is_unimplemented(client):
    wrapper = any_pb2.Any(
        type_url="type.googleapis.com/arrow.flight.protocol.sql.CommandStatementIngest", value=b"")
    with pytest.raises(pa.ArrowNotImplementedError, match="no bulk ingest"):
        client.get_flight_info(flight.FlightDescriptor.for_command(wrapper.SerializeToString()))
    still_serving(client)


def test_ticket_that_never_existed_is_not_found(client):
    ticket = M.pack(M.TicketStatementQuery(statement_handle=b"\x00" * 16))
    with pytest.raises(pa.ArrowKeyError, match="no such query"):
        client.do_get(flight.Ticket(ticket)).read_all()
    still_serving(client)


def test_ticket_read_twice_is_not_found(client):
    info = client.get_flight_info(query("SELECT 1"))
    client.do_get(info.endpoints[0].ticket).read_all()
    with pytest.raises(pa.ArrowKeyError):
        client.do_get(info.endpoints[0].ticket).read_all()


class GoneCall:
    """The call context of a DoGet whose client left before its schema was sent."""

    def get_middleware(self, name: str) -> None:
        return None

    def is_cancelled(self) -> bool:
        return True


def test_an_answer_whose_stream_never_started_is_ended(server, client):
    """pyarrow never starts the generator of a DoGet whose client is gone before the
    schema is sent: the query, claimed, stayed open for good with its answer (issue 36's
    growth at rest). It ends once pyarrow drops the stream."""
    info = client.get_flight_info(query("SELECT 42 AS answer"))
    assert action(client, "health")["open_tickets"] == 1
    stream = server.do_get(GoneCall(), info.endpoints[0].ticket)
    assert action(client, "health")["open_tickets"] == 1
    del stream  # what pyarrow does when writing the schema fails
    health = action(client, "health")
    assert (health["open_tickets"], health["running_queries"]) == (0, 0)
    with pytest.raises(pa.ArrowKeyError, match="no such query"):
        client.do_get(info.endpoints[0].ticket).read_all()
    still_serving(client)


class LiveCall(GoneCall):
    """The call context of a DoGet whose client is reading."""

    def is_cancelled(self) -> bool:
        return False


def test_a_stream_waiting_at_a_batch_leaves_its_call_unwatched(server, client, monkeypatch):
    """The client watch asks each watched call's context whether its client left; a
    context lives only as long as its call, and pyarrow can let go of a stream's generator
    after the call ended. Watched for the generator's whole life, a generator kept past
    its call (a reference cycle, a thread holding every object) had the watch ask a freed
    context: SIGSEGV (issue 36, four of eight probed client-model runs). The call is
    watched only while the generator runs, never while it waits at a batch."""
    monkeypatch.setattr(flight, "GeneratorStream", lambda schema, generator: generator)
    info = client.get_flight_info(query("SELECT range AS i FROM range(500000)"))
    stream = server.do_get(LiveCall(), info.endpoints[0].ticket)
    for _ in range(2):
        assert next(stream).num_rows > 0
        assert server.watch._calls == {}
    stream.close()  # what the collector does with a generator pyarrow let go of
    monkeypatch.undo()
    assert server.watch._calls == {}
    health = action(client, "health")
    assert (health["open_tickets"], health["running_queries"]) == (0, 0)
    still_serving(client)


def test_expired_ticket_is_not_found():
    with serving(ticket_idle=0.2) as server, flight.connect(server.location) as client:
        info = client.get_flight_info(query("SELECT 1"))
        time.sleep(1.0)
        with pytest.raises(pa.ArrowKeyError, match="expired"):
            client.do_get(info.endpoints[0].ticket).read_all()
        still_serving(client)


def test_oversized_request_is_refused(client):
    with pytest.raises(pa.ArrowInvalid, match="limit of 4096"):
        client.get_flight_info(query("SELECT 1 " + " " * 5000))
    still_serving(client)


def test_unknown_action_is_unimplemented(client):
    with pytest.raises(pa.ArrowNotImplementedError, match="unknown action"):
        list(client.do_action(flight.Action("DropEverything", b"")))
    still_serving(client)


def test_sql_error_is_invalid_argument_with_the_engine_message(client):
    with pytest.raises(pa.ArrowInvalid, match="no_such_table"):
        client.get_flight_info(query("SELECT * FROM no_such_table"))
    still_serving(client)


def test_an_error_shows_no_frames_of_the_servers_code(client):
    """pyarrow appends the handler's Python traceback to a non-Flight error's message;
    the service cuts it to its error wrapper, so no engine or core frames leave it."""
    with pytest.raises(pa.ArrowInvalid) as caught:
        client.get_flight_info(query("SELECT * FROM no_such_table"))
    message = str(caught.value)
    assert "gateway/flight/server.py" not in message and "plugins/" not in message, message
    assert "gateway/core.py" not in message, message


def test_client_disconnecting_mid_stream_frees_the_query(server):
    # a client process that reads one batch of a long answer and dies
    script = (
        "import os, sys, pyarrow.flight as flight\n"
        "from gateway.flight import protobuf as M\n"
        "client = flight.connect(sys.argv[1])\n"
        "command = M.pack(M.CommandStatementQuery(query='SELECT range FROM range(50000000)'))\n"
        "info = client.get_flight_info(flight.FlightDescriptor.for_command(command))\n"
        "client.do_get(info.endpoints[0].ticket).read_chunk()\n"
        "print('read', flush=True)\n"
        "os._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", script, server.location],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout == "read\n", done.stderr
    with flight.connect(server.location) as other:
        deadline = time.monotonic() + HANG_GUARD
        while action(other, "running-queries") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert action(other, "running-queries") == []
        still_serving(other)


def test_metadata_answers_have_the_specified_schemas(client):
    for command, columns in [
        (M.CommandGetCatalogs(), ["catalog_name"]),
        (M.CommandGetDbSchemas(), ["catalog_name", "db_schema_name"]),
        (M.CommandGetTables(include_schema=True),
         ["catalog_name", "db_schema_name", "table_name", "table_type", "table_schema"]),
        (M.CommandGetTableTypes(), ["table_type"]),
        (M.CommandGetPrimaryKeys(table="trips"),
         ["catalog_name", "db_schema_name", "table_name", "column_name", "key_name",
          "key_sequence"]),
        (M.CommandGetImportedKeys(table="trips"), None),
        (M.CommandGetXdbcTypeInfo(), None),
    ]:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(M.pack(command)))
        table = client.do_get(info.endpoints[0].ticket).read_all()
        assert table.schema.equals(info.schema)
        if columns is not None:
            assert table.column_names == columns


def test_prepared_statement_bound_to_many_rows_answers_each(client):
    request = M.ActionCreatePreparedStatementRequest(query="SELECT ? * 10 AS x")
    (created,) = client.do_action(flight.Action("CreatePreparedStatement", M.pack(request)))
    result = any_pb2.Any.FromString(created.body.to_pybytes())
    prepared = M.ActionCreatePreparedStatementResult()
    result.Unpack(prepared)
    assert pa.ipc.read_schema(pa.py_buffer(prepared.dataset_schema)).names == ["x"]
    assert pa.ipc.read_schema(pa.py_buffer(prepared.parameter_schema)).names == ["$1"]
    command = M.pack(M.CommandPreparedStatementQuery(
        prepared_statement_handle=prepared.prepared_statement_handle))
    descriptor = flight.FlightDescriptor.for_command(command)
    params = pa.record_batch({"p": [1, 2, 3]})
    writer, _ = client.do_put(descriptor, params.schema)
    writer.write_batch(params)
    writer.close()
    info = client.get_flight_info(descriptor)
    answer = client.do_get(info.endpoints[0].ticket).read_all()
    assert answer.column("x").to_pylist() == [10, 20, 30]
    close = M.ActionClosePreparedStatementRequest(
        prepared_statement_handle=prepared.prepared_statement_handle)
    list(client.do_action(flight.Action("ClosePreparedStatement", M.pack(close))))
    with pytest.raises(pa.ArrowKeyError, match="no such prepared statement"):
        client.get_flight_info(descriptor)


def test_begin_transaction_on_an_engine_without_transactions_is_unimplemented():
    config = {**CONFIG, "default_engine": "scan"}
    with serving(config, transactions=True) as server, flight.connect(server.location) as client, \
            pytest.raises(pa.ArrowNotImplementedError, match="has no transactions"):
        list(client.do_action(flight.Action("BeginTransaction",
                                            M.pack(M.ActionBeginTransactionRequest()))))


def test_begin_transaction_is_unimplemented_while_transactions_are_off(client):
    with pytest.raises(pa.ArrowNotImplementedError, match="transactions are off"):
        list(client.do_action(flight.Action("BeginTransaction",
                                            M.pack(M.ActionBeginTransactionRequest()))))


def test_a_transaction_id_of_someone_else_or_ended_is_not_found(client):
    command = M.CommandStatementQuery(query="SELECT 1", transaction_id=b"\x01" * 16)
    with pytest.raises(pa.ArrowKeyError, match="no such transaction"):
        client.get_flight_info(flight.FlightDescriptor.for_command(M.pack(command)))
