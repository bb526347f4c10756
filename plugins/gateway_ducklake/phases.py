"""The phases of ``arrowgate lakebench``: what is done to an empty lake, in order.

The shape follows the SQL Server catalog extension's ``bench-scale``: many
tables spread over schemas, wide (40 columns of mixed types, because a row
per column per file is what grows a catalog), a first insert small enough to
be inlined into the catalog, a second that writes Parquet, then the
maintenance calls, a partitioned table, a few tables with a long history,
one table changing shape a hundred times, reads at the latest and at an old
snapshot, and a re-attach.

Every statement is its own DuckLake commit. Each phase returns a check value
(row counts, file counts) computed after its clock stopped, so the benchmark
can refuse to time an engine whose lake holds something else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: One DuckDB statement run on the lake's engine; returns the answer's rows as dicts.
Execute = Callable[[str], list[dict[str, Any]]]

_KINDS = ("BIGINT", "VARCHAR", "DECIMAL(18, 4)", "DATE", "DOUBLE")


@dataclass(frozen=True)
class Shape:
    """The size of one lakebench run.

    Attributes:
        tables: tables created, spread round-robin over ``schemas`` schemas.
        columns: columns per table besides ``id``.
        rows: rows of the second (Parquet) insert into each table.
        commits: commits into the three "deep" tables (default: ``tables``).
        schema_changes: ALTER TABLE statements on the evolving table.
        partitions: distinct partition values of the partitioned table.
        partitioned_commits: commits into the partitioned table (default: tables // 2, at least 5).
    """

    tables: int = 100
    schemas: int = 10
    columns: int = 40
    rows: int = 200
    commits: int | None = None
    schema_changes: int = 100
    partitions: int = 8
    partitioned_commits: int | None = None

    def __post_init__(self) -> None:
        for name in ("tables", "schemas", "columns", "rows", "partitions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")

    @property
    def deep_commits(self) -> int:
        return self.commits if self.commits is not None else self.tables

    @property
    def partition_commits(self) -> int:
        if self.partitioned_commits is not None:
            return self.partitioned_commits
        return max(5, self.tables // 2)

    def table(self, i: int) -> str:
        return f"s{i % self.schemas}.t{i}"

    @property
    def probe(self) -> str:
        """A table in the middle, so a read is not answered by whatever was touched last."""
        return self.table(self.tables // 2)

    def column_defs(self) -> str:
        return ", ".join(f"c{c} {_KINDS[c % 5]}" for c in range(self.columns))

    def column_values(self, seed: str) -> str:
        exprs = ("{s}", "'v' || ({s})::VARCHAR", "({s} * 1.5)::DECIMAL(18, 4)",
                 "DATE '2020-01-01' + ({s})::INTEGER", "({s} * 0.25)::DOUBLE")
        return ", ".join(exprs[c % 5].format(s=seed) for c in range(self.columns))


@dataclass
class PhaseContext:
    """What a phase needs: the lake, its shape, and values one phase leaves for a later one."""

    execute: Execute
    reattach: Callable[[], None]
    lake: str
    shape: Shape
    state: dict[str, Any] = field(default_factory=dict)

    def scalar(self, sql: str) -> Any:
        rows = self.execute(sql)
        return next(iter(rows[0].values())) if rows else None

    def snapshot(self) -> int:
        return int(self.scalar(f"SELECT max(snapshot_id) FROM ducklake_snapshots('{self.lake}')"))

    def file_count(self, table: str | None = None) -> int:
        where = f" WHERE table_name = '{table}'" if table else ""
        value = self.scalar(f"SELECT sum(file_count) FROM ducklake_table_info('{self.lake}'){where}")
        return int(value or 0)


@dataclass(frozen=True)
class Phase:
    """One timed step: ``statements`` run in order, then ``check`` (untimed)."""

    name: str
    title: str
    statements: Callable[[PhaseContext], Iterator[str]]
    check: Callable[[PhaseContext], Any]
    #: run before the clock starts (records a snapshot id, ...)
    prepare: Callable[[PhaseContext], None] | None = None
    #: the phase re-attaches the lake before its statements
    reattach: bool = False


def _create_tables(ctx: PhaseContext) -> Iterator[str]:
    s = ctx.shape
    for k in range(min(s.schemas, s.tables)):
        yield f"CREATE SCHEMA s{k}"
    for i in range(s.tables):
        yield f"CREATE TABLE {s.table(i)} (id BIGINT, {s.column_defs()})"


def _first_insert(ctx: PhaseContext) -> Iterator[str]:
    s = ctx.shape
    for i in range(s.tables):
        yield f"INSERT INTO {s.table(i)} SELECT {i}, {s.column_values(str(i))}"


def _second_insert(ctx: PhaseContext) -> Iterator[str]:
    s = ctx.shape
    for i in range(s.tables):
        yield (f"INSERT INTO {s.table(i)} SELECT r, {s.column_values('r')} "
               f"FROM range({s.rows}) t(r)")


def _partitioned_commits(ctx: PhaseContext) -> Iterator[str]:
    s = ctx.shape
    yield "CREATE TABLE s0.parted (k INTEGER, id BIGINT, v DOUBLE, note VARCHAR)"
    yield "ALTER TABLE s0.parted SET PARTITIONED BY (k)"
    for n in range(s.partition_commits):
        yield (f"INSERT INTO s0.parted SELECT r % {s.partitions}, {n} * 1000 + r, r * 0.5, "
               f"'n' || r::VARCHAR FROM range({max(s.rows, 10 * s.partitions)}) t(r)")


def _deep_tables(s: Shape) -> list[str]:
    return [s.table(i) for i in range(min(3, s.tables))]


def _many_commits(ctx: PhaseContext) -> Iterator[str]:
    s = ctx.shape
    deep = _deep_tables(s)
    for n in range(s.deep_commits):
        seed = f"({n} * 100 + r + 1000000)"
        yield (f"INSERT INTO {deep[n % len(deep)]} SELECT {seed}, {s.column_values(seed)} "
               "FROM range(20) t(r)")


def _evolution_plan(changes: int) -> list[str]:
    """``changes`` ALTER TABLE statements on ``s0.ev``, each followed by an insert.

    Columns are added; every third change drops the oldest added column and
    every fifth renames the newest, so the table keeps a moving window.
    """
    out: list[str] = []
    live: list[str] = []
    done = 0
    i = 0
    while done < changes:
        if i % 3 == 2 and len(live) > 1:
            out.append(f"ALTER TABLE s0.ev DROP COLUMN {live.pop(0)}")
        elif i % 5 == 4 and live:
            out.append(f"ALTER TABLE s0.ev RENAME COLUMN {live[-1]} TO r{i}")
            live[-1] = f"r{i}"
        else:
            out.append(f"ALTER TABLE s0.ev ADD COLUMN e{i} BIGINT")
            live.append(f"e{i}")
        out.append(f"INSERT INTO s0.ev (id, c0) VALUES ({i}, {i * 2})")
        done += 1
        i += 1
    return out


def _schema_changes(ctx: PhaseContext) -> Iterator[str]:
    yield "CREATE TABLE s0.ev (id BIGINT, c0 BIGINT)"
    yield from _evolution_plan(ctx.shape.schema_changes)


def _mark(key: str) -> Callable[[PhaseContext], None]:
    def prepare(ctx: PhaseContext) -> None:
        ctx.state[key] = ctx.snapshot()
    return prepare


def _old_snapshot_read(ctx: PhaseContext) -> Iterator[str]:
    ev_old = ctx.state["before_schema_changes"] + 2 * max(1, ctx.shape.schema_changes // 5)
    yield f"SELECT count(*), sum(id) FROM s0.ev AT (VERSION => {ev_old})"
    yield (f"SELECT count(*), sum(c0) FROM {ctx.shape.probe} "
           f"AT (VERSION => {ctx.state['after_first_insert']})")


def _probe_count(ctx: PhaseContext) -> Any:
    return ctx.scalar(f"SELECT count(*) FROM {ctx.shape.probe}")


PHASES: list[Phase] = [
    Phase("create_tables", "create schemas and tables", _create_tables,
          lambda ctx: ctx.scalar("SELECT count(*) FROM duckdb_tables() "
                                 f"WHERE database_name = '{ctx.lake}'")),
    Phase("first_insert", "first insert into each table (inlined)", _first_insert,
          _probe_count),
    Phase("second_insert", "second insert into each table (Parquet)", _second_insert,
          _probe_count),
    Phase("flush_inlined", "flush inlined data",
          lambda ctx: iter([f"CALL ducklake_flush_inlined_data('{ctx.lake}')"]),
          lambda ctx: ctx.file_count()),
    Phase("compaction", "compaction (merge adjacent files)",
          lambda ctx: iter([f"CALL ducklake_merge_adjacent_files('{ctx.lake}')"]),
          lambda ctx: ctx.file_count()),
    Phase("partitioned_commits", "partitioned commits", _partitioned_commits,
          lambda ctx: [ctx.scalar("SELECT count(*) FROM s0.parted"), ctx.file_count("parted")]),
    Phase("partitioned_compaction", "partitioned compaction",
          lambda ctx: iter([f"CALL ducklake_merge_adjacent_files('{ctx.lake}', 'parted', "
                            "schema => 's0')"]),
          lambda ctx: ctx.file_count("parted")),
    Phase("many_commits", "many commits into 3 tables", _many_commits,
          lambda ctx: sum(int(ctx.scalar(f"SELECT count(*) FROM {t}"))
                          for t in _deep_tables(ctx.shape))),
    Phase("schema_changes", "schema changes", _schema_changes,
          lambda ctx: [ctx.scalar("SELECT count(*) FROM s0.ev"),
                       ctx.scalar("SELECT count(*) FROM duckdb_columns() WHERE database_name = "
                                  f"'{ctx.lake}' AND table_name = 'ev'")],
          prepare=_mark("before_schema_changes")),
    Phase("read_after_schema_changes", "read after the schema changes",
          lambda ctx: iter(["SELECT * FROM s0.ev"]),
          lambda ctx: ctx.scalar("SELECT sum(id) FROM s0.ev")),
    Phase("old_snapshot_read", "read at an old snapshot", _old_snapshot_read,
          lambda ctx: [list(ctx.execute(sql)[0].values()) for sql in _old_snapshot_read(ctx)]),
    Phase("reattach", "re-attach and first read",
          lambda ctx: iter([f"SELECT count(*) FROM {ctx.shape.probe}"]),
          _probe_count, reattach=True),
]
PHASE_NAMES = [p.name for p in PHASES]


def run_phases(ctx: PhaseContext, only: list[str] | None = None
               ) -> tuple[dict[str, float], dict[str, Any]]:
    """Run the phases in order on an empty lake.

    Returns:
        (seconds per phase, check value per phase).
    """
    times: dict[str, float] = {}
    checks: dict[str, Any] = {}
    for phase in PHASES:
        if only is not None and phase.name not in only:
            continue
        if phase.name == "second_insert":
            # the snapshot that "read at an old snapshot" travels back to
            ctx.state["after_first_insert"] = ctx.snapshot()
        if phase.prepare is not None:
            phase.prepare(ctx)
        statements = list(phase.statements(ctx))
        start = time.perf_counter()
        if phase.reattach:
            ctx.reattach()
        for sql in statements:
            ctx.execute(sql)
        times[phase.name] = time.perf_counter() - start
        checks[phase.name] = _jsonable(phase.check(ctx))
    return times, checks


def _jsonable(value: Any) -> Any:
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, int | float | str) or value is None:
        return value
    return str(value)
