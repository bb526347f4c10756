"""The ``CommandGetSqlInfo`` answer: what the service and its SQL can do.

JDBC and DBeaver read this to decide what to offer, so every code of the
specification's server and syntax ranges has an answer (but the Substrait
versions, which the specification makes null when Substrait is not served), and each answer is
what arrowgate does (the engines of today all speak DuckDB's SQL). Codes are
the ``SqlInfo`` enum of the Flight SQL specification.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

import gateway

# A value's type picks its branch of the answer's dense union.
STRING, BOOL, BIGINT, BITMASK, STRING_LIST, INT_MAP = range(6)

VALUE_TYPE = pa.dense_union([
    pa.field("string_value", pa.string()),
    pa.field("bool_value", pa.bool_()),
    pa.field("bigint_value", pa.int64()),
    pa.field("int32_bitmask", pa.int32()),
    pa.field("string_list", pa.list_(pa.string())),
    pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32()))),
], type_codes=[STRING, BOOL, BIGINT, BITMASK, STRING_LIST, INT_MAP])

SCHEMA = pa.schema([
    pa.field("info_name", pa.uint32(), nullable=False),
    pa.field("value", VALUE_TYPE, nullable=False),
])

# The SqlSupportsConvert codes, and which conversions CAST performs.
_BIGINT, _BINARY, _BIT, _CHAR, _DATE, _DECIMAL, _FLOAT, _INTEGER = range(8)
_LONGVARBINARY, _LONGVARCHAR, _NUMERIC, _REAL, _SMALLINT, _TIME = 10, 11, 12, 13, 14, 15
_TIMESTAMP, _TINYINT, _VARBINARY, _VARCHAR = 16, 17, 18, 19
_NUMBERS = [_BIGINT, _DECIMAL, _FLOAT, _INTEGER, _NUMERIC, _REAL, _SMALLINT, _TINYINT]
_TEXT = [_CHAR, _LONGVARCHAR, _VARCHAR]
_CONVERT = {
    **{n: [*_NUMBERS, *_TEXT, _BIT] for n in _NUMBERS},
    **{t: [*_NUMBERS, *_TEXT, _BIT, _DATE, _TIME, _TIMESTAMP, _VARBINARY] for t in _TEXT},
    _BIT: [_BIT, *_TEXT, _INTEGER, _BIGINT, _SMALLINT, _TINYINT],
    _DATE: [_DATE, _TIMESTAMP, *_TEXT],
    _TIME: [_TIME, *_TEXT],
    _TIMESTAMP: [_TIMESTAMP, _DATE, _TIME, *_TEXT],
    _BINARY: [_BINARY, _VARBINARY, _LONGVARBINARY],
    _VARBINARY: [_BINARY, _VARBINARY, _LONGVARBINARY],
}

# Functions of each class that DuckDB has (tests/test_flight_sqlinfo.py checks each one).
NUMERIC_FUNCTIONS = ["abs", "acos", "asin", "atan", "atan2", "cbrt", "ceil", "cos", "cot",
                     "degrees", "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi",
                     "pow", "power", "radians", "random", "round", "sign", "sin", "sqrt",
                     "tan", "trunc"]
STRING_FUNCTIONS = ["ascii", "chr", "concat", "concat_ws", "contains", "left", "length",
                    "lower", "lpad", "ltrim", "regexp_matches", "regexp_replace", "repeat",
                    "replace", "reverse", "right", "rpad", "rtrim", "split_part",
                    "starts_with", "strpos", "substr", "substring", "trim", "upper"]
SYSTEM_FUNCTIONS = ["coalesce", "current_database", "current_schema", "current_user",
                    "ifnull", "nullif", "typeof", "version"]
DATETIME_FUNCTIONS = ["age", "current_date", "date_diff", "date_part", "date_trunc",
                      "dayname", "epoch", "extract", "last_day", "make_date",
                      "make_timestamp", "monthname", "now", "strftime", "strptime",
                      "to_timestamp"]


@dataclass(frozen=True)
class Info:
    """One answer: its SqlInfo code, union branch and value."""

    code: int
    kind: int
    value: Any


def keywords(dialect: str) -> list[str]:
    """The reserved words of the dialect's tokenizer (sqlglot's list)."""
    from sqlglot.dialects.dialect import Dialect

    tokenizer = Dialect.get_or_raise(dialect).tokenizer_class
    return sorted({k for k in tokenizer.KEYWORDS if k.replace("_", "").isalpha()})


def infos(*, read_only: bool, writable: bool, statement_length: int,
          handle_timeout_ms: int, transactions: bool = False,
          dialect: str = "duckdb") -> list[Info]:
    """Every SqlInfo answer for one user.

    Args:
        read_only: the user may not write (or no engine they may use writes).
        writable: some engine the user may use accepts DDL.
        statement_length: the longest statement accepted, in bytes.
        handle_timeout_ms: how long an idle prepared statement lives.
        transactions: the user's engine has transactions (BeginTransaction works).
        dialect: the sqlglot dialect whose keywords are listed.
    """
    ddl = writable and not read_only
    return [
        # server
        Info(0, STRING, "arrowgate"),
        Info(1, STRING, gateway.__version__),
        Info(2, STRING, pa.__version__),
        Info(3, BOOL, read_only),
        Info(4, BOOL, True),             # SQL
        Info(5, BOOL, False),            # Substrait
        # 6, 7 (Substrait's versions) are null without Substrait: left out of the answer
        Info(8, BITMASK, 1 if transactions else 0),  # BeginTransaction, no savepoints
        Info(9, BOOL, True),             # CancelQuery / CancelFlightInfo
        Info(10, BOOL, False),           # no CommandStatementIngest (bulk ingestion)
        Info(11, BOOL, False),           # ... so no ingestion in transactions
        Info(100, BITMASK, min(handle_timeout_ms, 2**31 - 1)),
        Info(101, BITMASK, min(handle_timeout_ms, 2**31 - 1) if transactions else 0),
        # SQL syntax
        Info(500, BOOL, False),          # CREATE CATALOG: catalogs are engines
        Info(501, BOOL, ddl),            # CREATE SCHEMA
        Info(502, BOOL, ddl),            # CREATE TABLE
        Info(503, BITMASK, 1),           # identifiers are case-insensitive
        Info(504, STRING, '"'),
        Info(505, BITMASK, 1),           # quoted ones too (DuckDB)
        Info(506, BOOL, True),
        Info(507, BITMASK, 3),           # NULLs sort at the end
        Info(508, STRING_LIST, keywords(dialect)),
        Info(509, STRING_LIST, NUMERIC_FUNCTIONS),
        Info(510, STRING_LIST, STRING_FUNCTIONS),
        Info(511, STRING_LIST, SYSTEM_FUNCTIONS),
        Info(512, STRING_LIST, DATETIME_FUNCTIONS),
        Info(513, STRING, "\\"),         # escapes % and _ in catalog patterns
        Info(514, STRING, ""),
        Info(515, BOOL, True),           # column aliases
        Info(516, BOOL, True),           # NULL || 'x' is NULL
        Info(517, INT_MAP, _CONVERT),
        Info(518, BOOL, True),           # table correlation names
        Info(519, BOOL, False),          # ... need not differ from the table's name
        Info(520, BOOL, True),           # expressions in ORDER BY
        Info(521, BOOL, True),           # ORDER BY columns not selected
        Info(522, BITMASK, 0b11),        # GROUP BY unrelated and beyond SELECT
        Info(523, BOOL, True),           # LIKE ... ESCAPE
        Info(524, BOOL, True),           # NOT NULL columns
        Info(525, BITMASK, 0b011),       # minimum and core ODBC grammar
        Info(526, BITMASK, 0b011),       # ANSI-92 entry and intermediate
        Info(527, BOOL, True),           # CHECK, PRIMARY KEY, FOREIGN KEY constraints
        Info(528, BITMASK, 2),           # full outer joins
        Info(529, STRING, "schema"),
        Info(530, STRING, ""),           # no stored procedures
        Info(531, STRING, "engine"),     # a catalog is an engine, chosen by session option
        Info(532, BOOL, False),          # ... and never written in a table name
        Info(533, BITMASK, 0b010),       # schemas in index definitions
        Info(534, BITMASK, 0),
        Info(535, BITMASK, 0),           # no positioned UPDATE/DELETE
        Info(536, BOOL, False),          # SELECT FOR UPDATE
        Info(537, BOOL, False),          # stored procedures
        Info(538, BITMASK, 0b1111),      # subqueries in comparisons, EXISTS, IN, quantifieds
        Info(539, BOOL, True),           # correlated subqueries
        Info(540, BITMASK, 0b11),        # UNION and UNION ALL
        *(Info(code, BIGINT, 0) for code in range(541, 557) if code != 556),  # 0: no limit
        Info(556, BOOL, False),
        Info(557, BIGINT, statement_length),
        *(Info(code, BIGINT, 0) for code in range(558, 562)),
        # DuckDB's transactions are snapshot isolation: repeatable read at least
        Info(562, BITMASK, 3 if transactions else 0),
        Info(563, BOOL, transactions),
        Info(564, BITMASK, 0b1001 if transactions else 0b1),  # none, repeatable read
        Info(565, BOOL, False),
        Info(566, BOOL, False),
        Info(567, BITMASK, 0b10),        # forward-only result sets
        Info(568, BITMASK, 0),
        Info(569, BITMASK, 0b10),        # forward-only ones are read-only
        Info(570, BITMASK, 0),
        Info(571, BITMASK, 0),
        Info(572, BOOL, True),           # batch updates (executemany)
        Info(573, BOOL, False),          # savepoints
        Info(574, BOOL, False),          # named parameters
        Info(575, BOOL, False),
        Info(576, BOOL, False),
    ]


def table(answers: Iterable[Info], wanted: Iterable[int] = ()) -> pa.Table:
    """The answers as the specification's table, only the ``wanted`` codes when given."""
    wanted = set(wanted)
    rows = [a for a in answers if not wanted or a.code in wanted]
    children: list[list[Any]] = [[] for _ in range(6)]
    offsets = []
    for row in rows:
        offsets.append(len(children[row.kind]))
        value = row.value
        if row.kind == INT_MAP:
            value = list(value.items()) if isinstance(value, Mapping) else value
        children[row.kind].append(value)
    value_array = pa.UnionArray.from_dense(
        pa.array([r.kind for r in rows], pa.int8()),
        pa.array(offsets, pa.int32()),
        [pa.array(values, field.type) for values, field in
         zip(children, VALUE_TYPE, strict=True)],
        [field.name for field in VALUE_TYPE],
        list(VALUE_TYPE.type_codes),
    )
    return pa.Table.from_arrays([pa.array([r.code for r in rows], pa.uint32()), value_array],
                                schema=SCHEMA)
