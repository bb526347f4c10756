"""A test-only engine plugin: the real DuckDB engine with one classic bug planted on demand.

Register it with ``gateway.connect(config, plugins=[planted_bugs])`` and
configure ``[engines.NAME] type = "planted", bug = "..."``. Each bug is the
kind shadow mode exists to catch; the engine otherwise answers exactly like
DuckDB (it *is* DuckDB), so any divergence the comparator reports comes from
the bug alone.

``delay`` (seconds) makes every query slow, to test the shadow timeout; ``gate = "NAME"``
makes every query wait until the test opens ``GATES["NAME"]`` (a threading.Event), so a
test shows an answer came without waiting for this engine by its order, not by a clock.
``limit_from_end = true`` answers a LIMIT without ORDER BY with the last rows
instead of the first ones: no bug (any rows are allowed), but not the rows
DuckDB keeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from gateway import hookimpl
from gateway.engine import EngineResult, Option
from gateway.errors import QueryError
from gateway_duckdb.engine import DuckDBEngine
from tests.hang_guard import HANG_GUARD

#: bug name -> the category the comparator must give it
BUGS = {
    "order_by_ignored": "order",
    "null_group_lost": "missing_rows",
    "round_half_even": "values",
    "integer_overflow_wraps": "values",
    "limit_off_by_one": "extra_rows",
    "column_renamed": "schema",
    "float_perturbed": "values",
    "error_swallowed": "error",
    "order_by_ignored_under_limit": "values",
    "round_group_key": "row_count",
    "null_groups_dropped": "missing_rows",
    "sum_overflow_wraps": "values",
}

#: a table the fuzzer finds every bug in (tests/test_fuzz.py, bench/fuzz_bench.py): unique
#: ids, small groups with NULLs, halves (for ROUND), strings, and 64-bit integers near the top
#: of their range
FUZZ_TABLE_SQL = """
SELECT i AS id,
       CASE WHEN i % 5 = 0 THEN NULL ELSE i % 4 END AS g,
       CASE WHEN i % 7 = 0 THEN NULL ELSE ((i % 9) * 0.5 - 1)::DOUBLE END AS x,
       CASE WHEN i % 6 = 0 THEN NULL ELSE chr((97 + i % 5)::INTEGER) END AS s,
       CASE WHEN i % 3 = 0 THEN 9223372036854775000 - i WHEN i % 3 = 1 THEN NULL
            ELSE i * 1000000000 END::BIGINT AS big
FROM range(40) t(i)
"""

#: the bugs rewriting the SQL (the others change the answer)
_SQL_BUGS = ("order_by_ignored", "round_half_even", "limit_off_by_one",
             "order_by_ignored_under_limit", "round_group_key", "null_groups_dropped")


#: name -> the event a ``gate = "name"`` engine waits for before each query
GATES: dict[str, threading.Event] = {}


class PlantedBugEngine(DuckDBEngine):
    """DuckDB with one planted bug (``bug``), or none."""

    type_name = "planted"
    description = "DuckDB with a planted bug (tests only)"
    native_sessions = False  # every answer goes through execute(), where the bug is
    options: ClassVar[dict[str, Option]] = {
        **DuckDBEngine.options,
        "bug": Option((str,), default="none", choices=("none", *BUGS)),
        "delay": Option((float,), default=0.0, help="seconds every query sleeps first"),
        "gate": Option((str,), default="", help="every query waits for GATES[gate] first"),
        "limit_from_end": Option((bool,), default=False,
                                 help="a LIMIT without ORDER BY keeps the last rows"),
        "every_other": Option((bool,), default=False,
                              help="the bug shows in every other answer only (as one that "
                                   "hangs on scheduling)"),
    }
    _answers = 0

    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> EngineResult:
        if self.config["delay"]:
            time.sleep(self.config["delay"])
        if self.config["gate"]:
            GATES[self.config["gate"]].wait(HANG_GUARD)
        bug = self.config["bug"]
        self._answers += 1
        if self.config["every_other"] and self._answers % 2 == 0:
            bug = "none"
        sql = _rewrite(sql, bug)
        keep_last = _limit_without_order(sql) if self.config["limit_from_end"] else None
        if keep_last is not None:
            sql, count = keep_last
        try:
            table = super().execute(sql, parameters).reader.read_all()
        except QueryError:
            if bug == "error_swallowed":
                return _result(pa.table({}))
            raise
        if keep_last is not None:
            table = table.slice(max(table.num_rows - count, 0))
        return _result(_mangle(table, bug))


def _limit_without_order(sql: str) -> tuple[str, int] | None:
    """``sql`` without its LIMIT and the count, when it has a LIMIT and no ORDER BY."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    limit = tree.args.get("limit")
    if limit is None or tree.args.get("order") is not None or tree.args.get("offset"):
        return None
    tree.set("limit", None)
    return tree.sql("duckdb"), int(limit.expression.this)


def _rewrite(sql: str, bug: str) -> str:
    """The SQL-level bugs: what a faulty planner would run instead."""
    if bug not in _SQL_BUGS:
        return sql
    tree = sqlglot.parse_one(sql, read="duckdb")
    if bug == "order_by_ignored" or (bug == "order_by_ignored_under_limit"
                                     and tree.args.get("limit") is not None):
        tree.set("order", None)
    group = tree.args.get("group")
    if bug == "round_group_key" and group is not None:
        # groups by the value under ROUND instead of the rounded key
        group.set("expressions", [g.this if isinstance(g, exp.Round) else g
                                  for g in group.expressions])
    if bug == "null_groups_dropped" and group is not None:
        for key in group.expressions:
            if not (isinstance(key, exp.Literal) and key.is_int):
                tree = tree.where(exp.Not(this=exp.Is(this=key.copy(), expression=exp.Null())))
    if bug == "round_half_even":
        for node in list(tree.find_all(exp.Round)):
            digits = node.args.get("decimals") or exp.Literal.number(0)
            node.replace(exp.Anonymous(this="round_even", expressions=[node.this, digits]))
    if bug == "limit_off_by_one":
        limit = tree.args.get("limit")
        if limit is not None:
            limit.set("expression", exp.Literal.number(int(limit.expression.this) + 1))
    return tree.sql("duckdb")


def _mangle(table: pa.Table, bug: str) -> pa.Table:
    """The answer-level bugs: what a faulty executor would return."""
    if bug == "order_by_ignored":
        # without ORDER BY, small answers come back in scan order; reversing them makes
        # "any order" visible whatever the data
        return table.take(pa.array(range(table.num_rows - 1, -1, -1), pa.int64()))
    if bug == "null_group_lost" and table.num_columns:
        return table.filter(pc.is_valid(table.column(0)))
    if bug == "integer_overflow_wraps":
        cols = [pc.cast(c, pa.int32(), safe=False).cast(c.type) if pa.types.is_integer(c.type)
                else c for c in table.columns]
        return pa.table(cols, names=table.column_names)
    if bug == "sum_overflow_wraps":
        # integers wider than 64 bits (DuckDB's HUGEINT sums) wrapped to 64 bits
        cols = [pa.array([None if v is None else (int(v) + 2**63) % 2**64 - 2**63
                          for v in c.to_pylist()], pa.int64())
                if pa.types.is_decimal(c.type) and c.type.scale == 0 else c
                for c in table.columns]
        return pa.table(cols, names=table.column_names)
    if bug == "column_renamed" and table.num_columns:
        return table.rename_columns([*table.column_names[:-1], table.column_names[-1] + "_1"])
    if bug == "float_perturbed":
        cols = [pc.multiply(c, 1.000001) if pa.types.is_floating(c.type) else c
                for c in table.columns]
        return pa.table(cols, names=table.column_names)
    return table


def _result(table: pa.Table) -> EngineResult:
    return EngineResult(pa.RecordBatchReader.from_batches(table.schema, table.to_batches()))


@hookimpl
def arrowgate_engine_types() -> list[type]:
    return [PlantedBugEngine]
