"""The Flight SQL service: a thin ``FlightServerBase`` that hands every request to the core.

Each Flight method decodes the Flight SQL command it carries
(:mod:`gateway.flight.protobuf`) and dispatches on its type; the answers come
from :class:`gateway.flight.backend.Backend`. A query runs when its FlightInfo
is asked for, and its DoGet streams the engine's batches as they come
(``GeneratorStream``); from its third batch on, an answer is read a batch or two
ahead in a thread of its own (:mod:`gateway.flight.ahead`) so the engine's work
overlaps the sending; no answer is ever held whole in the server.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.flight as flight

from gateway.capture.captured import CapturedStatement, CaptureWriter
from gateway.errors import GatewayError
from gateway.flight import catalog, querylog, sqlinfo
from gateway.flight import protobuf as M
from gateway.flight.ahead import read_ahead
from gateway.flight.allocator import AtRest
from gateway.flight.auth import Authenticator, AuthMiddlewareFactory, NoopAuthHandler
from gateway.flight.backend import Backend
from gateway.flight.schemas import changes_nothing
from gateway.flight.serve_config import ANONYMOUS, ServeSettings, User
from gateway.flight.sessions import (
    COOKIE,
    OPTIONS,
    SessionMiddlewareFactory,
    SessionStore,
    session_for,
)
from gateway.flight.statements import FinishedQuery, PreparedStatements, Queries, ServedQuery
from gateway.flight.statuses import kind, send_kind, sends_kind, to_flight
from gateway.flight.transactions import Transactions
from gateway.flight.watch import ClientWatch
from gateway.sql.kinds import capture_kind, state_needed
from gateway.statement import Limits, arriving

if TYPE_CHECKING:
    from gateway.core import Gateway
    from gateway.flight.sessions import ClientSession
    from gateway.result import Result
    from gateway.session import Session


#: The actions ListActions reports: Flight SQL's, Flight's, then the gateway's own.
ACTIONS = [
    ("CreatePreparedStatement", "prepare a statement: its handle, answer and parameter schemas"),
    ("ClosePreparedStatement", "release a prepared statement"),
    ("CancelFlightInfo", "cancel the query a FlightInfo describes"),
    ("CancelQuery", "cancel the query a FlightInfo describes (before Flight SQL 13)"),
    ("SetSessionOptions", "choose the engine ('engine' or 'catalog') and the shadow "
                          "reference ('reference') for this session"),
    ("GetSessionOptions", "the options of this session"),
    ("CloseSession", "forget this session"),
    ("BeginTransaction", "begin a transaction on the session's engine, where it has them"),
    ("EndTransaction", "commit or roll back a transaction"),
    ("engines", "the engines you may use, with their types and capabilities (JSON)"),
    ("health", "whether the service is up, and how busy (JSON)"),
    ("running-queries", "your running queries (everyone's without users configured) (JSON)"),
    ("shadow-summary", "the shadow store's summary, as `arrowgate shadow report` shows it; "
                       "with users declared, its counts only (JSON)"),
    ("shadow-verdict", "the shadow verdict of one of your queries; body: its query id (JSON)"),
]


class FlightSqlServer(flight.FlightServerBase):
    """Serves one gateway over Flight SQL; use it as a context manager.

    Args:
        gw: the gateway; the server does not close it.
        settings: the checked ``[serve]`` section.
    """

    def __init__(self, gw: Gateway, settings: ServeSettings):
        # pyarrow sends a client the traceback of every error a handler raises that is not
        # a FlightError (INVALID_ARGUMENT's ArrowInvalid among them), with the server's
        # file paths; the traceback module's limit keeps it to the error's own line
        sys.tracebacklimit = 0
        if not settings.any_file:
            _sources_only(gw)
        if settings.query_memory is not None:
            _cap_statement_memory(gw, settings.query_memory)
        self.backend = Backend(gw)
        gw.pipeline.limits = Limits(
            max_queries=settings.max_queries,
            max_queries_per_user=settings.max_queries_per_user if settings.auth else None)
        self.watch = ClientWatch()
        self.capture = CaptureWriter(settings.capture) if settings.capture is not None else None
        self.settings = settings
        self.auth = Authenticator(settings)
        self.sessions = SessionStore(settings.session_idle)
        # what the engines and the allocator keep, given back once nothing runs
        self.at_rest = AtRest(tidy=gw.at_rest)
        self._statements = 0
        self.queries = Queries(settings)
        self.prepared = PreparedStatements(settings.session_idle)
        self.transactions = Transactions(settings.transaction_idle)
        self.draining = False
        tls = []
        if settings.tls_cert is not None and settings.tls_key is not None:
            tls = [flight.CertKeyPair(settings.tls_cert.read_bytes(),
                                      settings.tls_key.read_bytes())]
        super().__init__(
            f"{settings.scheme}://{settings.host}:{settings.port}",
            auth_handler=NoopAuthHandler(), tls_certificates=tls or None,
            middleware={"auth": AuthMiddlewareFactory(self.auth),
                        "session": SessionMiddlewareFactory()})
        self._stop = threading.Event()
        self._sweeper = threading.Thread(target=self._sweep, name="arrowgate-flight-sweeper",
                                         daemon=True)
        self._sweeper.start()

    @property
    def location(self) -> str:
        host = "localhost" if self.settings.host in ("127.0.0.1", "::1") else self.settings.host
        return f"{self.settings.scheme}://{host}:{self.port}"

    # -- who is calling ------------------------------------------------------
    def _user(self, context: Any) -> User:
        middleware = context.get_middleware("auth")
        return middleware.user if middleware is not None else ANONYMOUS

    def _session(self, context: Any, create: bool) -> ClientSession | None:
        return session_for(self.sessions, context.get_middleware("session"),
                           self._user(context).name, create)

    def _engine(self, context: Any, user: User) -> str:
        """The engine the caller's statements run on; refused if the user may not use it."""
        session = self._session(context, create=False)
        engine = session.engine if session is not None and session.engine else None
        if engine is None:
            engine = self.backend.default_engine
            if not user.may_use(engine):
                engine = next(iter(self._engines_of(user)), engine)
        if not user.may_use(engine):
            raise flight.FlightUnauthorizedError(
                f"user {user.name!r} may not use engine {engine!r}; allowed: "
                + (", ".join(self._engines_of(user)) or "none"))
        return engine

    def _engines_of(self, user: User) -> list[str]:
        return [e for e in self.backend.engines if user.may_use(e)]

    def _check_statement(self, sql: str) -> None:
        """The statement's size; what it may do is the statement pipeline's to check."""
        limit = min(self.settings.max_statement_bytes, self.settings.max_request_bytes)
        if len(sql.encode()) > limit:
            raise pa.ArrowInvalid(
                f"the statement is longer than the service's limit of {limit} bytes "
                "(max_statement_bytes): pass long lists of values as parameters or a table")

    def _check_size(self, data: bytes, what: str) -> None:
        if len(data) > self.settings.max_request_bytes:
            raise pa.ArrowInvalid(f"the {what} is {len(data)} bytes, over the service's limit "
                                  f"of {self.settings.max_request_bytes} (max_request_bytes)")

    def _command(self, data: bytes, what: str) -> Any:
        self._check_size(data, what)
        try:
            return M.unpack_command(data)
        except M.MalformedMessage as exc:
            raise pa.ArrowInvalid(f"{exc}: send a Flight SQL command") from None
        except M.NotImplementedCommand as exc:
            raise pa.ArrowNotImplementedError(str(exc)) from None

    # -- GetFlightInfo / GetSchema / DoGet -----------------------------------
    @sends_kind
    def get_flight_info(self, context: Any, descriptor: flight.FlightDescriptor) -> Any:
        command = self._command(descriptor.command or b"", "command")
        user = self._user(context)
        if isinstance(command, (M.CommandStatementQuery, M.CommandPreparedStatementQuery)):
            query = self._run(context, user, command) \
                if isinstance(command, M.CommandStatementQuery) else \
                self._run_prepared(context, user, command.prepared_statement_handle)
            return self._info(descriptor, query.schema,
                              M.pack(M.TicketStatementQuery(statement_handle=query.handle)),
                              _json({"query_id": query.query_id}))
        schema = self._metadata_schema(command)
        if schema is None:
            raise pa.ArrowInvalid(f"{command.DESCRIPTOR.name} is not a GetFlightInfo command: "
                                  "send it with DoPut")
        return self._info(descriptor, schema, descriptor.command)

    @sends_kind
    def get_schema(self, context: Any, descriptor: flight.FlightDescriptor) -> Any:
        command = self._command(descriptor.command or b"", "command")
        user = self._user(context)
        if isinstance(command, M.CommandStatementQuery):
            engine = self._engine(context, user)
            self._check_statement(command.query)
            prepared = self._call(self.backend.prepare, command.query, engine,
                                  self._core_session(context, engine), user.principal)
            try:
                return flight.SchemaResult(self._call(getattr, prepared, "schema"))
            finally:
                prepared.close()
        if isinstance(command, M.CommandPreparedStatementQuery):
            entry = self.prepared.get(command.prepared_statement_handle, user.name)
            return flight.SchemaResult(self._call(getattr, entry.prepared, "schema"))
        schema = self._metadata_schema(command)
        if schema is None:
            raise pa.ArrowInvalid(f"{command.DESCRIPTOR.name} has no schema")
        return flight.SchemaResult(schema)

    @sends_kind
    def do_get(self, context: Any, ticket: flight.Ticket) -> Any:
        command = self._command(ticket.ticket, "ticket")
        user = self._user(context)
        if isinstance(command, M.TicketStatementQuery):
            return self._stream(context, self.queries.claim(command.statement_handle, user.name))
        table = self._metadata(context, user, command)
        if table is None:
            raise pa.ArrowInvalid(f"{command.DESCRIPTOR.name} is not a ticket this service issues")
        return flight.RecordBatchStream(table)

    @staticmethod
    def _info(descriptor: flight.FlightDescriptor, schema: pa.Schema, ticket: bytes,
              metadata: bytes = b"") -> Any:
        """A FlightInfo whose one endpoint is this service; ``metadata`` names the query."""
        return flight.FlightInfo(schema, descriptor, [flight.FlightEndpoint(ticket, [])], -1, -1,
                                 app_metadata=metadata)

    # -- metadata ------------------------------------------------------------
    @staticmethod
    def _metadata_schema(command: Any) -> pa.Schema | None:
        if isinstance(command, M.CommandGetTables):
            return catalog.TABLES_WITH_SCHEMA if command.include_schema else catalog.TABLES
        return {
            M.CommandGetSqlInfo: sqlinfo.SCHEMA,
            M.CommandGetCatalogs: catalog.CATALOGS,
            M.CommandGetDbSchemas: catalog.DB_SCHEMAS,
            M.CommandGetTableTypes: catalog.TABLE_TYPES,
            M.CommandGetPrimaryKeys: catalog.PRIMARY_KEYS,
            M.CommandGetExportedKeys: catalog.FOREIGN_KEYS,
            M.CommandGetImportedKeys: catalog.FOREIGN_KEYS,
            M.CommandGetCrossReference: catalog.FOREIGN_KEYS,
            M.CommandGetXdbcTypeInfo: catalog.XDBC_TYPE_INFO,
        }.get(type(command))

    def _metadata(self, context: Any, user: User, command: Any) -> pa.Table | None:
        engines = self._engines_of(user)
        backend = self.backend
        if isinstance(command, M.CommandGetSqlInfo):
            engine = self._engine(context, user)
            answers = sqlinfo.infos(
                read_only=user.read_only or not any(self.backend.writes(e) for e in engines),
                writable=any(self.backend.writes(e) for e in engines),
                statement_length=min(self.settings.max_statement_bytes,
                                     self.settings.max_request_bytes),
                handle_timeout_ms=int(self.settings.session_idle * 1000),
                transactions=self.settings.transactions
                and self._call(self.backend.has_transactions, engine),
                dialect=self.backend.dialect(engine))
            return sqlinfo.table(answers, command.info)
        if isinstance(command, M.CommandGetCatalogs):
            return catalog.catalogs(engines)
        if isinstance(command, M.CommandGetDbSchemas):
            return catalog.db_schemas(
                engines, self._tree(backend.schema_names), _optional(command, "catalog"),
                _optional(command, "db_schema_filter_pattern"))
        if isinstance(command, M.CommandGetTables):
            return catalog.tables(
                engines, self._tree(backend.tables), self._tree(backend.columns),
                _optional(command, "catalog"),
                _optional(command, "db_schema_filter_pattern"),
                _optional(command, "table_name_filter_pattern"),
                command.table_types, command.include_schema)
        if isinstance(command, M.CommandGetTableTypes):
            return catalog.table_types()
        schema = self._metadata_schema(command)
        return None if schema is None else catalog.empty(schema)

    def _tree(self, method: Callable[..., Any]) -> Callable[..., Any]:
        """A catalog-tree call of the backend, its errors translated."""
        return lambda *args: self._call(method, *args)

    # -- running statements --------------------------------------------------
    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call the core, translating its errors into Flight errors."""
        try:
            return fn(*args)
        except GatewayError as exc:
            raise to_flight(exc) from None

    def _admit(self) -> None:
        """New statements are refused while the service drains (the limits on running
        statements are the pipeline's, counted from admission)."""
        if self.draining:
            raise flight.FlightUnavailableError("the service is shutting down")

    def _core_session(self, context: Any, engine: str) -> Session | None:
        """The core session of a caller that returns its cookie, on ``engine``; else None.

        Without a cookie every statement runs once, in a session of its own.
        """
        middleware = context.get_middleware("session")
        if middleware is None or middleware.cookie is None:
            return None
        session = self._session(context, create=True)
        if session is None or not session.by_cookie:
            return None
        user = self._user(context)
        return self._call(session.core_session, engine,
                          lambda name: self.backend.session(name, user.principal))

    def _target(self, context: Any, user: User, request: Any) -> tuple[str, Session | None]:
        """The engine and core session a statement runs in: its transaction's, else the caller's."""
        if request.HasField("transaction_id"):
            transaction = self.transactions.get(request.transaction_id, user.name)
            return transaction.engine, transaction.session
        engine = self._engine(context, user)
        core = self._core_session(context, engine)
        needed = state_needed(request.query) if core is None else None
        if needed is not None:
            # run alone it would answer OK and be forgotten (a BEGIN ... ROLLBACK committed)
            raise pa.ArrowInvalid(
                f"{needed[1]} needs a session, and this call has none: return the "
                f"{COOKIE} cookie the service sets (ADBC: "
                "adbc.flight.sql.rpc.with_cookie_middleware=true; JDBC does by itself), "
                "or use Flight SQL's BeginTransaction for a transaction")
        return engine, core

    def _run(self, context: Any, user: User, command: Any) -> ServedQuery:
        sql = command.query
        engine, core = self._target(context, user, command)
        self._check_statement(sql)
        self._admit()
        session = self._session(context, create=False)
        reference = session.reference if session is not None else None
        settings = list(core.settings_sql) if core is not None else []
        return self._start(context, user, engine, sql, lambda: self.backend.execute(
            sql, engine, core, self.settings.query_timeout, user.principal, reference),
            settings=settings)

    def _run_prepared(self, context: Any, user: User, handle: bytes) -> ServedQuery:
        entry = self.prepared.get(handle, user.name)
        prepared = entry.prepared
        self._check_statement(prepared.sql)
        self._admit()
        session = self._session(context, create=False)
        reference = session.reference if session is not None else None
        return self._start(context, user, prepared.engine, prepared.sql, lambda: prepared.execute(
            entry.parameters, self.settings.query_timeout, shadow=reference),
            parameters=entry.parameters, settings=prepared.settings_sql,
            earlier=entry.charge())

    def _start(self, context: Any, user: User, engine: str, sql: str,
               run: Callable[[], Result], parameters: pa.Table | None = None,
               settings: list[str] | None = None, earlier: float = 0.0) -> ServedQuery:
        """Run a statement for the call of ``context``; its clock (the timeout's and the
        query log's) starts at the call's arrival, ``earlier`` seconds before that for
        a prepared statement's first execution (the time its prepare took)."""
        started = _arrival(context) - earlier
        self._statements += 1  # (not exact across threads: it only has to change)
        wall = time.time() - (time.monotonic() - started)
        statement = capture_kind(sql)
        write = statement != "read"
        try:
            # a query is planned (and a blocking aggregate computed) here, and DDL and DML
            # run to their end now (clients often never fetch their answer); either is
            # cancelled if the client goes away meanwhile
            with self.watch.statements_of(context), self._may_change_schemas(sql), \
                    arriving(started):
                result = _ran(run()) if write else run()
        except GatewayError as exc:
            querylog.record(query_id=None, user=user.name, engine=engine, sql=sql, rows=0,
                            nbytes=0, started=started, outcome=exc.kind)
            self._keep(sql, engine, user.name, statement, wall, started, 0, "error",
                       parameters, settings or [], error=exc)
            raise to_flight(exc) from None
        query = ServedQuery(user.name, engine, sql, result, shadow=result.shadow,
                      parameters=parameters, settings=settings or [], write=write,
                      created=started)
        if write:  # it ran to its end: recorded now, whether or not its answer is fetched
            self._keep(sql, engine, user.name, statement, wall, started, None, "ok",
                       parameters, settings or [])
        self.queries.add(query)
        return query

    @contextlib.contextmanager
    def _may_change_schemas(self, sql: str) -> Iterator[None]:
        """A block running ``sql``: unless it surely changes nothing, the prepared
        statements' schemas kept are forgotten as it starts and again once it ran."""
        if changes_nothing(sql):
            yield
            return
        self.backend.schemas.invalidate()
        try:
            yield
        finally:
            self.backend.schemas.invalidate()

    def _stream(self, context: Any, query: ServedQuery) -> Any:
        """The answer's stream; the query ends when the stream does, read or not.

        pyarrow starts the generator only to send the first batch: when the client is
        gone before the schema is sent (the ADBC driver drops the stream of a DELETE
        whose cursor runs its next statement at once; a raw client's deadline passes),
        it is never started and its ``finally`` never runs. The query is then ended
        when pyarrow lets go of the generator; left, it stayed claimed, which
        :meth:`Queries.expire` spares, with its answer and the engine's cursor, for
        good (issue 36: 47 of them after 13,848 client-model actions), and a SELECT's
        admission slot with them: 64 such and the service refused every statement.
        """
        settings = self.settings
        started = False

        def batches() -> Iterator[pa.RecordBatch]:
            nonlocal started
            started = True
            handle = query.first.handle
            handles = [handle] if handle is not None else []
            # the call is watched only while this generator runs, never while it waits at a
            # yield: pyarrow may let go of it after the call, and its context, are gone
            # (gateway/flight/watch.py)
            watched: int | None = None
            batch = None
            try:
                watched = self.watch.add(context, handles)
                # read ahead: the engine makes the next batches while this one is sent
                for batch in read_ahead(query.first.reader(), stop=query.first.cancel):
                    if query.cancelled or context.is_cancelled():
                        query.first.cancel()
                        query.outcome = "cancelled"
                        raise flight.FlightCancelledError("the query was cancelled")
                    query.rows += batch.num_rows
                    query.bytes += batch.nbytes
                    _check_limits(query, settings)
                    self.watch.remove(watched)
                    watched = None
                    yield batch
                    watched = self.watch.add(context, handles)
                query.outcome = "ok"
            except GatewayError as exc:
                query.outcome = exc.kind
                error = to_flight(exc)
                send_kind(context, error)
                raise error from None
            except GeneratorExit:
                query.outcome = "disconnected"
                raise
            except BaseException as exc:
                if query.outcome in ("waiting", "ok"):
                    query.outcome = kind(exc)
                raise
            finally:
                batch = None  # an error's traceback keeps this frame, not the batch
                self.watch.remove(watched)
                ended()

        def ended() -> None:
            if not changes_nothing(query.sql):  # a query that writes wrote while it streamed
                self.backend.schemas.invalidate()
            self.queries.finish(query)
            querylog.log_query(query)
            self._keep(query.sql, query.engine, query.user, query.write, query.started_at,
                       query.created, query.rows, query.outcome, query.parameters,
                       query.settings)

        def never_started() -> None:
            if not started:  # (a started generator's own finally runs after this)
                query.outcome = "disconnected"
                ended()

        stream = batches()
        weakref.finalize(stream, never_started).atexit = False
        query.outcome = "streaming"
        return flight.GeneratorStream(query.schema, stream)

    # -- DoPut -----------------------------------------------------------------
    @sends_kind
    def do_put(self, context: Any, descriptor: flight.FlightDescriptor, reader: Any,
               writer: Any) -> None:
        command = self._command(descriptor.command or b"", "command")
        user = self._user(context)
        if isinstance(command, M.CommandStatementUpdate):
            engine, core = self._target(context, user, command)
            self._check_statement(command.query)
            self._admit()
            settings = list(core.settings_sql) if core is not None else []
            count = self._update(context, user, engine, command.query, lambda: self.backend.execute(
                command.query, engine, core, self.settings.query_timeout, user.principal),
                settings=settings)
        elif isinstance(command, M.CommandPreparedStatementQuery):
            entry = self.prepared.get(command.prepared_statement_handle, user.name)
            entry.parameters = self._parameters(reader)
            return
        elif isinstance(command, M.CommandPreparedStatementUpdate):
            entry = self.prepared.get(command.prepared_statement_handle, user.name)
            prepared = entry.prepared
            self._check_statement(prepared.sql)
            self._admit()
            parameters = self._parameters(reader) or entry.parameters
            count = self._update(context, user, prepared.engine, prepared.sql, lambda: prepared.execute(
                parameters, self.settings.query_timeout), parameters=parameters,
                settings=prepared.settings_sql)
        else:
            raise pa.ArrowInvalid(f"{command.DESCRIPTOR.name} is not a DoPut command")
        writer.write(pa.py_buffer(M.DoPutUpdateResult(record_count=count).SerializeToString()))

    def _update(self, context: Any, user: User, engine: str, sql: str,
                run: Callable[[], Result], parameters: pa.Table | None = None,
                settings: list[str] | None = None) -> int:
        """Run a write; the rows it changed, or -1 when the engine does not say."""
        total, started, outcome, query_id = -1, _arrival(context), "ok", None
        wall = time.time()
        error: BaseException | None = None
        try:
            with self.watch.statements_of(context), self._may_change_schemas(sql), \
                    arriving(started):
                result = _ran(run())
            query_id = result.query_id
            total = self.backend.update_count(result)
        except GatewayError as exc:
            outcome, error = exc.kind, exc
            raise to_flight(exc) from None
        except BaseException as exc:
            outcome, error = kind(exc), exc
            raise
        finally:
            querylog.record(query_id=query_id, user=user.name, engine=engine, sql=sql,
                            rows=max(total, 0), nbytes=0, started=started, outcome=outcome)
            self._keep(sql, engine, user.name, capture_kind(sql), wall, started,
                       None if total < 0 else total, "ok" if error is None else "error",
                       parameters, settings or [], error=error)
        return total

    def _keep(self, sql: str, engine: str, user: str, write: bool | str, wall: float,
              started: float, rows: int | None, outcome: str, parameters: pa.Table | None,
              settings: list[str], error: BaseException | None = None) -> None:
        """Hand a statement to the capture, if it is on and wants it (never fails).

        ``write`` is the statement's capture kind (:func:`capture_kind`); a bool is a
        query's at the end of its stream or its ticket, where only reads are recorded:
        a statement that writes was recorded when it ran (:meth:`_start`).
        """
        capture = self.capture
        if capture is None:
            return
        if isinstance(write, bool):
            if write:
                return
            write = "read"
        if not capture.wanted(engine, user, write):
            return
        error_kind = message = None
        if error is None and outcome not in _OUTCOMES:  # a stream's error, by its kind
            error_kind = outcome
        if error is not None:
            error_kind = getattr(error, "kind", None) or kind(error)
            message = str(error)
            outcome = "refused" if error_kind == "permission" else "error"
        at = datetime.datetime.fromtimestamp(wall, datetime.UTC)
        capture.offer(CapturedStatement(
            sql=sql, engine=engine, user=user, time=at.isoformat(timespec="milliseconds"),
            parameters=parameters, settings=list(settings),
            ms=round((time.monotonic() - started) * 1000, 3), rows=rows,
            outcome=_OUTCOMES.get(outcome, "error"), kind=write,
            error_kind=error_kind, error=message))

    def _parameters(self, reader: Any) -> pa.Table | None:
        """The parameter rows a DoPut uploads (None: no rows), refused past ``max_request_bytes``."""
        batches, size = [], 0
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            if chunk.data is None:
                continue
            size += chunk.data.nbytes
            if size > self.settings.max_request_bytes:
                raise pa.ArrowInvalid(f"the parameters uploaded pass the service's limit of "
                                      f"{self.settings.max_request_bytes} bytes")
            batches.append(chunk.data)
        if not sum(b.num_rows for b in batches):
            return None
        return pa.Table.from_batches(batches)

    # -- DoAction ----------------------------------------------------------------
    def list_actions(self, context: Any) -> list[tuple[str, str]]:
        return ACTIONS

    @sends_kind
    def do_action(self, context: Any, action: flight.Action) -> list[bytes]:
        body = action.body.to_pybytes() if action.body is not None else b""
        self._check_size(body, "action body")
        handler = getattr(self, "_action_" + action.type.replace("-", "_"), None)
        if handler is None or action.type not in dict(ACTIONS):
            raise pa.ArrowNotImplementedError(
                f"unknown action {action.type!r}: ListActions names the ones this service has")
        try:
            return [bytes(r) for r in handler(context, self._user(context), body)]
        except M.MalformedMessage as exc:
            raise pa.ArrowInvalid(f"{action.type}: {exc}") from None

    def _action_CreatePreparedStatement(self, context: Any, user: User, body: bytes) -> list[bytes]:
        request = M.unpack(M.ActionCreatePreparedStatementRequest, body)
        engine, core = self._target(context, user, request)
        self._check_statement(request.query)
        try:
            prepared = self.backend.prepare(request.query, engine, core, user.principal)
            try:
                schema = prepared.schema
            except BaseException:
                prepared.close()
                raise
        except GatewayError as exc:  # a statement that fails here never reaches _start
            self._keep(request.query, engine, user.name, capture_kind(request.query),
                       time.time(), time.monotonic(), 0, "error",
                       None, list(core.settings_sql) if core is not None else [], error=exc)
            raise to_flight(exc) from None
        handle = self.prepared.add(user.name, prepared,
                                   took=time.monotonic() - _arrival(context))
        return [M.pack(M.ActionCreatePreparedStatementResult(
            prepared_statement_handle=handle,
            dataset_schema=_schema_bytes(schema),
            parameter_schema=_schema_bytes(prepared.parameter_schema)))]

    def _action_ClosePreparedStatement(self, context: Any, user: User, body: bytes) -> list[bytes]:
        request = M.unpack(M.ActionClosePreparedStatementRequest, body)
        self.prepared.close(request.prepared_statement_handle, user.name)
        return []

    def _cancel(self, user: User, info_bytes: bytes) -> bool | None:
        """Cancel the query a serialized FlightInfo names: True, False (finished), None (unknown)."""
        try:
            info = flight.FlightInfo.deserialize(info_bytes)
            ticket = info.endpoints[0].ticket.ticket
            handle = M.unpack_command(ticket).statement_handle
        except (pa.ArrowException, IndexError, AttributeError, M.MalformedMessage):
            raise pa.ArrowInvalid("the request does not carry a FlightInfo of this service") \
                from None
        query = self.queries.find(handle, user.name)
        if query is None:
            return None
        self._cancel_query(query)
        return True

    def _cancel_query(self, query: ServedQuery) -> None:
        """Stop a query: its stream ends with CANCELLED, or its unread ticket is dropped."""
        query.cancelled = True
        query.first.cancel()
        if not query.streaming:
            query.outcome = "cancelled"
            self.queries.finish(query)
            querylog.log_query(query)
            self._keep(query.sql, query.engine, query.user, query.write, query.started_at,
                       query.created, query.rows, query.outcome, query.parameters,
                       query.settings)

    def _action_CancelFlightInfo(self, context: Any, user: User, body: bytes) -> list[bytes]:
        request = M.parse(M.CancelFlightInfoRequest, body)
        done = self._cancel(user, request.info)
        status = "CANCEL_STATUS_CANCELLED" if done else "CANCEL_STATUS_NOT_CANCELLABLE"
        return [M.CancelFlightInfoResult(status=M.CANCEL_STATUS[status]).SerializeToString()]

    def _action_CancelQuery(self, context: Any, user: User, body: bytes) -> list[bytes]:
        request = M.unpack(M.ActionCancelQueryRequest, body)
        done = self._cancel(user, request.info)
        result = M.ActionCancelQueryResult.CANCEL_RESULT_CANCELLED if done else \
            M.ActionCancelQueryResult.CANCEL_RESULT_NOT_CANCELLABLE
        return [M.pack(M.ActionCancelQueryResult(result=result))]

    def _action_SetSessionOptions(self, context: Any, user: User, body: bytes) -> list[bytes]:
        request = M.parse(M.SetSessionOptionsRequest, body)
        session = self._session(context, create=True)
        assert session is not None
        result = M.SetSessionOptionsResult()
        errors = M.SetSessionOptionsResult.ErrorValue
        for name, value in request.session_options.items():
            key = "engine" if name == "catalog" else name
            which = value.WhichOneof("option_value")
            text = value.string_value if which == "string_value" else None
            if key not in OPTIONS:
                result.errors[name].value = errors.Value("INVALID_NAME")
            elif which is not None and text is None:
                result.errors[name].value = errors.Value("INVALID_VALUE")
            elif not text:
                setattr(session, key, None)
            elif text not in self.backend.engines or not user.may_use(text):
                result.errors[name].value = errors.Value("INVALID_VALUE")
            else:
                setattr(session, key, text)
        return [result.SerializeToString()]

    def _action_GetSessionOptions(self, context: Any, user: User, body: bytes) -> list[bytes]:
        M.parse(M.GetSessionOptionsRequest, body)
        session = self._session(context, create=True)
        assert session is not None
        result = M.GetSessionOptionsResult()
        options = {"engine": self._engine(context, user), **session.options()}
        for name, value in options.items():
            result.session_options[name].string_value = value
        return [result.SerializeToString()]

    def _action_CloseSession(self, context: Any, user: User, body: bytes) -> list[bytes]:
        M.parse(M.CloseSessionRequest, body)
        session = self._session(context, create=False)
        if session is not None:
            self.sessions.close(session)
        return [M.CloseSessionResult(status=M.CloseSessionResult.CLOSED).SerializeToString()]

    def _action_BeginTransaction(self, context: Any, user: User, body: bytes) -> list[bytes]:
        M.unpack(M.ActionBeginTransactionRequest, body)
        if not self.settings.transactions:
            raise pa.ArrowNotImplementedError(
                "transactions are off on this service: statements commit one by one "
                "([serve] transactions = true turns them on)")
        engine = self._engine(context, user)
        if not self._call(self.backend.has_transactions, engine):
            raise pa.ArrowNotImplementedError(
                f"engine {engine!r} has no transactions: run statements one by one "
                "(autocommit)")
        session = self._call(self.backend.session, engine, user.principal)
        transaction_id = self._call(self.transactions.begin, user.name, engine, session)
        return [M.pack(M.ActionBeginTransactionResult(transaction_id=transaction_id))]

    def _action_EndTransaction(self, context: Any, user: User, body: bytes) -> list[bytes]:
        request = M.unpack(M.ActionEndTransactionRequest, body)
        ends = M.ActionEndTransactionRequest
        if request.action not in (ends.END_TRANSACTION_COMMIT, ends.END_TRANSACTION_ROLLBACK):
            raise pa.ArrowInvalid("EndTransaction: the action must be COMMIT or ROLLBACK")
        self._call(self.transactions.end, request.transaction_id, user.name,
                   request.action == ends.END_TRANSACTION_COMMIT)
        return []

    def _action_engines(self, context: Any, user: User, body: bytes) -> list[bytes]:
        return [_json([self.backend.describe(e) for e in self._engines_of(user)])]

    def _action_health(self, context: Any, user: User, body: bytes) -> list[bytes]:
        answer: dict[str, Any] = {"status": "draining" if self.draining else "ok",
                                  "running_queries": len(self.backend.running()),
                                  "open_tickets": len(self.queries.running()),
                                  "sessions": len(self.sessions)}
        if self.capture is not None:
            answer["capture"] = {"written": self.capture.written,
                                 "dropped": self.capture.dropped}
        return [_json(answer)]

    def _action_running_queries(self, context: Any, user: User, body: bytes) -> list[bytes]:
        """Every statement admitted and not finished (planning, computing, waiting for its
        DoGet, or streaming): the user's own, or everyone's without users configured."""
        streaming = {q.query_id for q in self.queries.running() if q.streaming}
        mine = None if not self.settings.auth else user.name
        return [_json([{"query_id": q.query_id, "user": q.user, "engine": q.engine,
                        "sql": q.sql, "started": q.started, "rows": q.rows,
                        "streaming": q.query_id in streaming}
                       for q in self.backend.running(mine)])]

    def _action_shadow_summary(self, context: Any, user: User, body: bytes) -> list[bytes]:
        """The store's summary. With users declared, the counts only: its per-statement
        rows quote every user's statements and the values of their differences."""
        summary = self.backend.shadow_summary()
        if self.settings.auth and summary.get("configured"):
            summary = {k: summary[k] for k in ("configured", "records", "skipped",
                                                "by_category")}
            summary["detail"] = ("per-statement rows quote every user's statements: "
                                 "`arrowgate shadow report` on the server shows them")
        return [_json(summary)]

    def _action_shadow_verdict(self, context: Any, user: User, body: bytes) -> list[bytes]:
        try:
            query_id = int(body.decode())
        except ValueError:
            raise pa.ArrowInvalid("the body must be a query id (a decimal number)") from None
        query: FinishedQuery | ServedQuery | None = self.queries.finished(query_id, user.name)
        if query is None:
            found = [q for q in self.queries.running()
                     if q.query_id == query_id and q.user == user.name]
            query = found[0] if found else None
        if query is None:
            raise KeyError(f"no query {query_id} of yours is known to this service")
        return [_json({"query_id": query_id, "shadow": querylog.verdict(query.shadow)})]

    # -- lifecycle -------------------------------------------------------------
    def _sweep(self) -> None:
        shortest = min(self.settings.session_idle, self.settings.transaction_idle,
                       self.settings.ticket_idle)
        interval = max(0.05, min(5.0, shortest / 4))
        while not self._stop.wait(interval):
            for query in self.queries.expire():
                querylog.log_query(query)
                self._keep(query.sql, query.engine, query.user, query.write, query.started_at,
                           query.created, query.rows, query.outcome, query.parameters,
                           query.settings)
            self.prepared.expire()
            self.transactions.expire()
            self.sessions.expire(self.settings.transaction_idle)
            self.auth.expire()
            self.at_rest.seen(self._statements, len(self.queries.running()), time.monotonic())

    def drain(self, grace: float) -> None:
        """Refuse new queries, give running streams ``grace`` seconds, then cancel the rest."""
        self.draining = True
        deadline = time.monotonic() + grace
        while self.queries.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        for query in self.queries.running():
            self._cancel_query(query)

    def shutdown(self) -> None:
        """Stop serving, then release every prepared statement and session."""
        self._stop.set()
        self.watch.stop()
        super().shutdown()
        if self.capture is not None:
            self.capture.close()
        self.prepared.close_all()
        self.transactions.close_all()
        self.sessions.close_all()

    def __exit__(self, *exc: object) -> None:
        # pyarrow's __exit__ stops the server without calling this class's shutdown, which
        # left the capture's last buffered lines unwritten and the sessions open
        self.shutdown()
        self.wait()


#: a statement's outcome as the capture records it: anything else is an error
_OUTCOMES = {o: o for o in ("ok", "error", "refused", "cancelled", "expired", "disconnected")}


def _check_limits(query: ServedQuery, settings: ServeSettings) -> None:
    if settings.max_rows and query.rows > settings.max_rows:
        query.outcome = "limit"
        raise pa.ArrowInvalid(f"the answer has more than the service's limit of "
                              f"{settings.max_rows} rows (max_rows): add a LIMIT")
    if settings.max_bytes and query.bytes > settings.max_bytes:
        query.outcome = "limit"
        raise pa.ArrowInvalid(f"the answer is larger than the service's limit of "
                              f"{settings.max_bytes} bytes (max_bytes): select less")


def _arrival(context: Any) -> float:
    """When the call arrived (``time.monotonic()``), as its session middleware noted it."""
    middleware = context.get_middleware("session")
    return middleware.arrived if middleware is not None else time.monotonic()


def _optional(message: Any, name: str) -> str | None:
    return getattr(message, name) if message.HasField(name) else None


def _schema_bytes(schema: pa.Schema) -> bytes:
    return schema.serialize().to_pybytes() if len(schema) else b""


def _json(value: Any) -> bytes:
    return json.dumps(value, default=str).encode()


def _sources_only(gw: Gateway) -> None:
    """Leave remote SQL users only the configured sources on every engine that has the
    ``files`` option (``duckdb``, ``ducklake``, ``csv``; a SQLite database through ``adbc`` or
    ``odbc`` keeps to its own file); ``[serve] any_file = true`` leaves them as configured.

    Engines start on their first query, so setting the option here, before
    serving, is in time.
    """
    for cfg in gw.config.engines.values():
        if "files" in gw.engine_types[cfg.type].options and cfg.options.get("files") == "any":
            cfg.options["files"] = "sources"


def _cap_statement_memory(gw: Gateway, limit: str) -> None:
    """``[serve] query_memory``: DuckDB's ``operator_memory_limit`` (a setting of each
    connection, from DuckDB 2.0) on every duckdb and ducklake engine, as if configured in
    its ``settings``, so users cannot change it in their sessions (the pipeline refuses a
    SET of a configured setting). Engines start on their first query: in time.

    Raises:
        ConfigError: an engine runs a DuckDB older than 2.0, which has no such setting.
    """
    from gateway.errors import ConfigError

    for cfg in gw.config.engines.values():
        if cfg.type not in ("duckdb", "ducklake"):
            continue
        version = gw.engine_types[cfg.type].describe_version(cfg.options) or ""
        major = version.split(".")[0]
        if major.isdigit() and int(major) < 2:
            raise ConfigError(
                f"query_memory needs DuckDB 2.0 or later; engine {cfg.name!r} runs {version}",
                key="serve.query_memory",
                hint="DuckDB before 2.0 has no per-connection memory limit: leave query_memory "
                     f"out, or set memory_limit in engines.{cfg.name}.settings (the whole "
                     "engine's)")
        cfg.options["settings"] = {**cfg.options.get("settings", {}),
                                   "operator_memory_limit": limit}


def _ran(result: Result) -> Result:
    """``result`` read to its end (it keeps the answer)."""
    result.to_arrow()
    return result
