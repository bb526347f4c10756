"""The ``spark`` engine: Apache Spark through Spark Connect, answers in Arrow.

Each gateway session is a Spark session of its own on the server (its ``SET``,
temporary views and ``USE`` last until it closes); one-shot queries share one.
Statements are Spark SQL (sqlglot's ``spark`` dialect), or another dialect
rewritten by sqlglot when ``transpile_from`` is set; ``?`` parameters go to
``spark.sql(args=[...])``. Answers stream: the result schema comes from the
plan's analysis, then each Arrow batch as the server sends it. Every statement
carries a tag of its own, and cancelling it interrupts that tag's Spark jobs
(``interruptTag``), from any thread.

The configuration's sources are mounted as temporary views of each Spark
session, the first time a statement names one: Parquet as it is, CSV with a
header and Spark's own type inference (which differs from DuckDB's: declare
Parquet sources where answers are compared).
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from gateway.drivers.dialects import SqlRewriter
from gateway.engine import CatalogColumn, Engine, EngineResult, EngineSession, Option
from gateway.errors import (
    Cancelled,
    ConfigError,
    EngineConnectionError,
    GatewayError,
    QueryError,
    install_extra,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.config import Source
    from gateway.result import QueryHandle

#: Spark's own SQLSTATEs (beyond the standard ones gateway.drivers.error_kinds knows)
_SPARK_STATES = {"42K09": "type", "42K0E": "syntax", "42P20": "syntax", "22546": "type"}
_tags = itertools.count(1)


class SparkEngine(Engine):
    type_name = "spark"
    description = "Apache Spark through Spark Connect (sc://host:port), Arrow answers"
    supports_streaming = True
    supports_parameters = True
    supports_cancel = True
    supports_write = True
    supports_catalog = True
    session_state = frozenset({"settings", "use", "temp_tables"})
    dialect = "spark"

    options: ClassVar[Mapping[str, Option]] = {
        "remote": Option((str,), required=True, secret=True,
                         help="the Spark Connect server's URL, sc://host:port (a token as "
                              "sc://host:port/;token=${VAR})"),
        "transpile_from": Option((str,), help="the dialect queries are written in (e.g. "
                                              "duckdb); sqlglot rewrites them for Spark SQL"),
    }

    def __init__(self, name: str, options: Mapping[str, Any], sources: Mapping[str, Any]):
        super().__init__(name, options, sources)
        remote = self.config["remote"]
        if not remote.startswith("sc://"):
            raise ConfigError("remote must be a Spark Connect URL, sc://host:port",
                              key=f"engines.{name}.remote", engine=name)
        #: callers write this engine's SQL in transpile_from when set, else in Spark SQL
        self.dialect = self.config.get("transpile_from") or "spark"
        self.rewriter = SqlRewriter("spark", "qmark", self.config.get("transpile_from"), name)
        self._shared: Any = None
        self._lock = threading.Lock()
        self._open: set[SparkEngineSession] = set()

    @classmethod
    def describe_version(cls, options: Mapping[str, Any]) -> str | None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("pyspark")
        except PackageNotFoundError:
            return None

    # -- lifecycle -------------------------------------------------------
    def connect(self) -> None:
        try:
            import pyspark.sql.connect.session  # noqa: F401
        except ImportError as exc:
            raise ConfigError(f"the spark engine needs pyspark with Spark Connect ({exc})",
                              key=f"engines.{self.name}.type", engine=self.name,
                              hint=install_extra("spark")) from None
        from pyspark.logger import PySparkLogger

        # pyspark logs each SQL error (with the JVM's stack) to stderr as it raises it; the
        # gateway's error carries Spark's message already
        PySparkLogger.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
        self._check_reachable()
        self._shared = self.new_spark()

    def _check_reachable(self) -> None:
        """Fail fast on a server that is not there: the client would retry for minutes."""
        import socket
        from urllib.parse import urlsplit

        url = urlsplit(self.config["remote"].split(";", 1)[0].replace("sc://", "http://", 1))
        host, port = url.hostname or "localhost", url.port or 15002
        try:
            socket.create_connection((host, port), timeout=self.config["connect_timeout"]).close()
        except OSError as exc:
            raise EngineConnectionError(
                f"cannot reach the Spark Connect server at {host}:{port}: {exc}",
                engine=self.name, hint="start it (sbin/start-connect-server.sh) or check "
                                       "remote") from None

    def new_spark(self) -> Any:
        """A new Spark session on the server (its own settings, temporary views and USE)."""
        from pyspark.sql.connect.session import SparkSession

        try:
            return SparkSession.builder.remote(self.config["remote"]).create()
        except Exception as exc:
            raise EngineConnectionError(f"cannot open a Spark session: {_message(exc)}",
                                        engine=self.name) from None

    def close(self) -> None:
        with self._lock:
            sessions, self._open = list(self._open), set()
        for session in sessions:
            session.close()
        shared, self._shared = self._shared, None
        if shared is not None:
            _quietly(shared.stop)

    def cancel(self) -> None:
        if self._shared is not None:
            _quietly(self._shared.interruptAll)

    # -- queries ---------------------------------------------------------
    def _shared_spark(self) -> Any:
        if self._shared is None:
            raise EngineConnectionError("the engine is closed", engine=self.name)
        return self._shared

    def open_session(self, one_shot: bool = False, read_only: bool = False) -> EngineSession:
        """A Spark session of its own, or (one-shot) the engine's shared one. Spark has no
        per-session read-only mode: a read-only user has the pipeline's check only."""
        spark = self._shared_spark() if one_shot else self.new_spark()
        session = SparkEngineSession(self, spark, own=not one_shot)
        if not one_shot:
            with self._lock:
                self._open.add(session)
        return session

    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> EngineResult:
        from gateway.result import QueryHandle

        session = SparkEngineSession(self, self._shared_spark(), own=False)
        return session.execute(sql, parameters, QueryHandle(self.name, 0, sql))

    def translate(self, exc: BaseException, cancelled: bool = False) -> GatewayError:
        """A pyspark error as the gateway's, with Spark's message and SQLSTATE's kind."""
        if isinstance(exc, GatewayError):
            return exc
        message = _message(exc)
        if cancelled or "OPERATION_CANCELED" in message or "INTERRUPTED" in message:
            return Cancelled("the query was cancelled", engine=self.name)
        from gateway.drivers.error_kinds import error_kind

        state = _sql_state(exc)
        if "UNAVAILABLE" in message or "Connection refused" in message:
            return EngineConnectionError(message, engine=self.name,
                                         hint="the Spark Connect server went away")
        kind = _SPARK_STATES.get(state or "") or error_kind(state, message)
        return QueryError(message, engine=self.name, kind=kind)

    # -- catalog ---------------------------------------------------------
    def catalog(self) -> list[CatalogColumn]:
        """The tables of every database and the shared session's temporary views (the
        mounted sources among them), with the Arrow types their answers have."""
        spark = self._shared_spark()
        session = SparkEngineSession(self, spark, own=False)
        session.mount(list(self.sources))
        out: list[CatalogColumn] = []
        try:
            tables = [(t.catalog or "spark_catalog", (t.namespace or [""])[-1], t.name,
                       t.tableType or "")
                      for db in spark.catalog.listDatabases()
                      for t in spark.catalog.listTables(db.name)]
            seen = {(s, t) for _, s, t, _ in tables}
            tables += [("spark_catalog", "", t.name, "TEMPORARY")
                       for t in spark.catalog.listTables() if t.isTemporary
                       and ("", t.name) not in seen]
            for catalog, schema, table, kind in tables:
                name = f"{_quote(schema)}.{_quote(table)}" if schema else _quote(table)
                arrow = _arrow_schema(spark.table(name).schema)
                out += [CatalogColumn(schema, table, f.name, f.type, f.nullable,
                                      "VIEW" if "VIEW" in kind or kind == "TEMPORARY"
                                      else "TABLE", catalog) for f in arrow]
        except Exception as exc:
            raise self.translate(exc) from None
        return out


class SparkEngineSession(EngineSession):
    """One Spark session: statements tagged one by one, so that cancelling one interrupts
    its jobs only; a session of its own is stopped (released on the server) when it closes.
    """

    engine: SparkEngine

    def __init__(self, engine: SparkEngine, spark: Any, *, own: bool):
        super().__init__(engine)
        self.spark = spark
        self.own = own
        self._mounted: set[str] = set()

    def mount(self, names: Sequence[str]) -> None:
        """Mount the named sources as temporary views of this Spark session, once."""
        for name in names:
            source = self.engine.sources.get(name)
            if source is None or name in self._mounted:
                continue
            try:
                self.spark.sql(_view_sql(source))
            except Exception as exc:
                error = self.engine.translate(exc)
                raise QueryError(f"cannot mount the source {name!r}: {error.message}",
                                 engine=self.engine.name, kind=error.kind) from None
            self._mounted.add(name)

    def execute(self, sql: str, parameters: Sequence[Any] | None,
                handle: QueryHandle) -> EngineResult:
        import pyarrow as pa
        from pyspark.sql.types import StructType

        engine = self.engine
        text, values = engine.rewriter.rewrite(sql, parameters)
        self.mount([n for n in engine.sources if re.search(rf"\b{re.escape(n)}\b", text, re.I)])
        tag = f"arrowgate-{next(_tags)}"
        stop = lambda: self.spark.interruptTag(tag)  # noqa: E731 - this query's jobs only
        handle.on_cancel(stop)
        # the tag is the thread's: the request carries it when it is made, at the first
        # chunk, which is also when the statement starts and its errors show
        self.spark.addTag(tag)
        try:
            frame = self.spark.sql(text, args=values) if values else self.spark.sql(text)
            client = self.spark.client
            chunks = client.to_table_as_iterator(frame._plan.to_proto(client),
                                                 frame._plan.observations)
            first = next(chunks, None)
            # the server sends the schema first; asking for it would cost an analysis more
            schema = _arrow_schema(first if isinstance(first, StructType) else frame.schema)
        except Exception as exc:
            raise self._error(exc, handle, text) from None
        finally:
            self.spark.removeTag(tag)
        batches = _stream(itertools.chain([first], chunks), chunks, schema,
                          lambda exc: self._error(exc, handle, text), lambda: _quietly(stop))
        # a reader closed before its first batch never runs the generator's ``finally``
        weakref.finalize(batches, _quietly, chunks.close)
        notes = {"sql": text} if text != sql else {}
        return EngineResult(pa.RecordBatchReader.from_batches(schema, batches), notes)

    def _error(self, exc: BaseException, handle: QueryHandle, text: str) -> GatewayError:
        error = self.engine.translate(exc, cancelled=handle.cancelled)
        if self.engine.rewriter.transpile_from and isinstance(error, QueryError) and \
                error.hint is None:
            error.hint = f"the statement was transpiled from " \
                         f"{self.engine.rewriter.transpile_from}: {text}"
        return error

    def close(self) -> None:
        if not self.own:
            return
        spark, self.spark = self.spark, None
        with self.engine._lock:
            self.engine._open.discard(self)
        if spark is not None:
            _quietly(spark.stop)


def _stream(chunks: Iterator[Any], source: Any, schema: pa.Schema, translate: Any,
            stop: Any) -> Iterator[pa.RecordBatch]:
    """The answer's batches, cast to ``schema``; an answer closed before its end
    interrupts the rest of its Spark job and lets go of its stream."""
    import pyarrow as pa

    finished = False
    try:
        for chunk in chunks:
            if isinstance(chunk, pa.Table):
                yield from chunk.cast(schema).to_batches()
        finished = True
    except Exception as exc:
        finished = True
        raise translate(exc) from None
    finally:
        if not finished:
            stop()
        source.close()


def _arrow_schema(struct: Any) -> pa.Schema:
    """The Arrow schema Spark's answer has (what ``DataFrame.toArrow`` casts to)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(struct, error_on_duplicated_field_names_in_struct=True,
                           timezone="UTC")


def _view_sql(source: Source) -> str:
    options = {"path": source.path if not source.is_folder else source.scan_pattern()}
    if source.format == "csv":
        opts = source.options
        options["header"] = "true" if opts.get("header", True) else "false"
        options["inferSchema"] = "true"
        for ours, theirs in (("delimiter", "sep"), ("quote", "quote"), ("escape", "escape"),
                             ("encoding", "encoding")):
            if opts.get(ours) is not None:
                options[theirs] = str(opts[ours])
        null = opts.get("null")
        if isinstance(null, str):
            options["nullValue"] = null
    listed = ", ".join(f"{k} '{_literal(v)}'" for k, v in options.items())
    return (f"CREATE OR REPLACE TEMPORARY VIEW {_quote(source.name)} "
            f"USING {source.format} OPTIONS ({listed})")


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _literal(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _message(exc: BaseException) -> str:
    """Spark's message without the plan it appends after the first blank line."""
    getter = getattr(exc, "getMessage", None)
    text = str(getter() if callable(getter) else exc) or type(exc).__name__
    return text.split("\n\nJVM stacktrace:", 1)[0].strip()


def _sql_state(exc: BaseException) -> str | None:
    getter = getattr(exc, "getSqlState", None)
    try:
        return getter() if callable(getter) else None
    except Exception:
        return None


def _quietly(fn: Any) -> None:
    try:
        fn()
    except Exception:
        pass
