"""The one comparator: do two answers to the same SQL agree, and if not, how?

Shadow mode, the bench command and the conformance tests all call
:func:`compare_tables` (two Arrow answers) or :func:`compare_outcomes` (an
answer or an exception on each side). A :class:`Verdict` carries one category,
a one-line message and JSON-serializable evidence.

Categories, in the order they are decided:

``schema``
    column count, names, or types that no equivalence reconciles.
``row_count``
    the answers have different row counts and neither is a part of the other.
``missing_rows`` / ``extra_rows``
    the primary lacks rows of the reference (or has rows the reference
    lacks) and is otherwise a part of it.
``values``
    same number of rows, but cells differ; evidence pairs rows by their key.
``order``
    same rows, but the outermost ORDER BY makes order part of the answer and
    the primary's order differs. Rows tied on the ORDER BY keys may come in
    any order.
``error``
    one side failed, or both failed with different error classes.
``nondeterministic``
    the reference disagreed with itself (see :func:`compare_with_noise`).

How: both answers are normalized column by column in Arrow (numbers of mixed
types to float64, timestamps to one unit in UTC, strings to large_string,
dictionaries decoded), then DuckDB pairs rows on their key columns (the GROUP
BY keys when the SQL shows them, else the non-float columns) with a hash
join, so nothing loops over rows in Python and two 10-million-row answers
compare in seconds.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

CATEGORIES = ("match", "schema", "row_count", "missing_rows", "extra_rows", "values",
              "order", "error", "nondeterministic")

#: answers up to this many rows are paired directly, without hashing first
_SMALL = 20_000
#: hash buckets the cancelling step spreads rows over
_BUCKETS = 4096
_OVERRIDE = re.compile(r"--\s*arrowgate:\s*(.*)$", re.MULTILINE)


@dataclass
class CompareOptions:
    """What counts as the same answer.

    Attributes:
        rel_tol: relative float tolerance: ``|a-b| <= abs_tol + rel_tol * max(|a|, |b|)``.
        abs_tol: absolute float tolerance (for values near zero).
        numeric_types_equivalent: int, float and decimal holding the same
            number are equal (1 vs 1.0); when False a type change is ``schema``.
        timestamps_equivalent: timestamps of the same instant are equal
            whatever their unit or time zone.
        naive_timestamps_as_utc: a timestamp without a time zone compared to
            one with a zone is read as UTC (else the pair is ``schema``).
        strings_equivalent: string, large_string and string_view are one type
            (likewise the binary types, and dictionary-encoded columns).
        ignore_order_without_order_by: row order matters only when the
            outermost query has ORDER BY (set False to always compare order).
        nan_equals_nan: NaN on both sides is equal.
        signed_zero_equal: -0.0 equals 0.0.
        ignore_engine_chosen_names: names of unaliased expression columns
            (``count(*)``, which engines name differently) are not compared;
            needs the SQL.
        case_insensitive_names: column names are compared ignoring case.
        sample_size: how many rows of evidence to keep per kind.
        dialect: the sqlglot dialect used to read the SQL.

    A SQL comment ``-- arrowgate: rel_tol=1e-6 abs_tol=0.01`` in the query
    overrides options for that query (see :meth:`for_sql`).
    """

    rel_tol: float = 1e-9
    abs_tol: float = 1e-12
    numeric_types_equivalent: bool = True
    timestamps_equivalent: bool = True
    naive_timestamps_as_utc: bool = True
    strings_equivalent: bool = True
    ignore_order_without_order_by: bool = True
    nan_equals_nan: bool = True
    signed_zero_equal: bool = True
    ignore_engine_chosen_names: bool = True
    case_insensitive_names: bool = False
    sample_size: int = 5
    dialect: str = "duckdb"

    def for_sql(self, sql: str | None) -> CompareOptions:
        """These options with the query's ``-- arrowgate: key=value ...`` overrides applied.

        Keys that are not compare options (``shadow=off`` and the like, read
        by the shadow runner) are ignored here.
        """
        if not sql:
            return self
        changes: dict[str, Any] = {}
        fields = {f.name: f for f in dataclasses.fields(self)}
        for line in _OVERRIDE.findall(sql):
            for item in line.split():
                key, _, raw = item.partition("=")
                if key not in fields or not raw:
                    continue
                current = getattr(self, key)
                try:
                    if isinstance(current, bool):
                        changes[key] = raw.lower() in ("1", "true", "yes", "on")
                    elif isinstance(current, (int, float)):
                        changes[key] = type(current)(float(raw))
                    else:
                        changes[key] = raw
                except ValueError:
                    continue
        return dataclasses.replace(self, **changes) if changes else self


@dataclass
class Verdict:
    """The outcome of one comparison.

    Attributes:
        category: one of :data:`CATEGORIES`.
        message: one readable line.
        evidence: JSON-serializable details: row counts, key columns, samples
            of missing/extra rows, differing cells with their row key and
            both values.
    """

    category: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the answers agree (``match``)."""
        return self.category == "match"

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "message": self.message, "evidence": self.evidence}


# -- public entry points ----------------------------------------------------
def compare_tables(
    primary: pa.Table,
    reference: pa.Table,
    *,
    sql: str | None = None,
    options: CompareOptions | None = None,
) -> Verdict:
    """Compare the primary engine's answer with the reference's.

    Args:
        primary: the answer under test.
        reference: the answer taken as right.
        sql: the query both answered; it tells whether order matters, which
            columns are keys and which names are engine-chosen.
        options: equivalences and tolerances; defaults when None.

    Returns:
        A :class:`Verdict`; ``category == "match"`` when the answers agree.
    """
    opts = (options or CompareOptions()).for_sql(sql)
    shape = _QueryShape.of(sql, opts.dialect)
    schema_verdict, p, r = _align(primary, reference, shape, opts)
    if schema_verdict is not None:
        return schema_verdict
    return _Rows(p, r, shape, opts, primary.column_names).judge()


def compare_outcomes(
    primary: pa.Table | BaseException,
    reference: pa.Table | BaseException,
    *,
    sql: str | None = None,
    options: CompareOptions | None = None,
) -> Verdict:
    """Like :func:`compare_tables`, where either side may be the exception it raised.

    Both failing with the same error class is a match (the engines agree the
    query is wrong); one failing, or both with different classes, is ``error``.
    """
    p_err = isinstance(primary, BaseException)
    r_err = isinstance(reference, BaseException)
    if p_err or r_err:
        evidence = {
            "primary_error": _describe_error(primary) if p_err else None,
            "reference_error": _describe_error(reference) if r_err else None,
        }
        if p_err and r_err:
            if error_class(primary) == error_class(reference):
                return Verdict("match", f"both failed with {error_class(primary)}", evidence)
            return Verdict("error", f"both failed, differently: primary {error_class(primary)}"
                           f", reference {error_class(reference)}", evidence)
        if p_err:
            assert isinstance(primary, BaseException)
            return Verdict("error", f"primary failed but reference answered: "
                           f"{_one_line(primary)}", evidence)
        assert isinstance(reference, BaseException)
        return Verdict("error", f"primary answered but reference failed: {_one_line(reference)}",
                       evidence)
    assert not isinstance(primary, BaseException) and not isinstance(reference, BaseException)
    return compare_tables(primary, reference, sql=sql, options=options)


def compare_with_noise(
    primary: pa.Table | BaseException,
    reference: pa.Table | BaseException,
    reference_again: pa.Table | BaseException | None,
    *,
    sql: str | None = None,
    options: CompareOptions | None = None,
) -> Verdict:
    """Compare, treating what differs between two reference runs as noise.

    When ``reference_again`` (a second run of the reference) disagrees with
    ``reference``, the query's answer is not determined by the data (now(),
    random(), LIMIT without a total order): the verdict is
    ``nondeterministic`` rather than a divergence, with both verdicts in
    the evidence.
    """
    verdict = compare_outcomes(primary, reference, sql=sql, options=options)
    if reference_again is None or verdict.ok:
        return verdict
    noise = compare_outcomes(reference_again, reference, sql=sql, options=options)
    if noise.ok:
        return verdict
    return Verdict("nondeterministic",
                   f"two runs of the reference disagree ({noise.category}), so the answer is "
                   "not determined by the data",
                   {"reference_vs_itself": noise.to_dict(), "primary_vs_reference": verdict.to_dict()})


# -- what the SQL says -------------------------------------------------------
@dataclass
class _OrderTerm:
    column: int | None  # output column index, or None when not in the output
    text: str


@dataclass
class _QueryShape:
    """What the outermost query tells the comparator."""

    parsed: bool = False
    order: list[_OrderTerm] = field(default_factory=list)
    has_limit: bool = False
    #: per output column: True when its name is engine-chosen (unaliased expression)
    engine_named: list[bool] = field(default_factory=list)
    #: per output column: True when it is a GROUP BY key; empty when not an aggregate query
    group_keys: list[bool] = field(default_factory=list)
    has_star: bool = False
    projections: list[Any] = field(default_factory=list)

    @classmethod
    def of(cls, sql: str | None, dialect: str) -> _QueryShape:
        if not sql:
            return cls()
        try:
            import sqlglot
            from sqlglot import exp

            statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
        except Exception:
            return cls()
        if len(statements) != 1:
            return cls()
        tree = statements[-1]
        shape = cls(parsed=True)
        select = tree
        while isinstance(select, exp.Subquery):
            select = select.this
        if isinstance(select, exp.SetOperation):
            first = select.left
            while not isinstance(first, exp.Select) and isinstance(first, (exp.SetOperation, exp.Subquery)):
                first = first.left if isinstance(first, exp.SetOperation) else first.this
            shape._read_projections(first, exp)
        elif isinstance(select, exp.Select):
            shape._read_projections(select, exp)
            shape._read_groups(select, exp)
        else:
            return cls()
        shape.has_limit = select.args.get("limit") is not None or select.args.get("fetch") is not None
        order = select.args.get("order")
        if order is not None:
            shape.order = [shape._map_order(o, exp) for o in order.expressions]
        return shape

    def _read_projections(self, select: Any, exp: Any) -> None:
        if not isinstance(select, exp.Select):
            return
        self.projections = list(select.expressions)
        for e in self.projections:
            if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
                self.has_star = True
            self.engine_named.append(not isinstance(e, (exp.Alias, exp.Column, exp.Star)))

    def _read_groups(self, select: Any, exp: Any) -> None:
        if self.has_star:
            return
        group = select.args.get("group")
        aggregated = [e.find(exp.AggFunc) is not None for e in self.projections]
        if group is None and not any(aggregated):
            return
        self.group_keys = [not a for a in aggregated]

    def _map_order(self, ordered: Any, exp: Any) -> _OrderTerm:
        term = ordered.this
        text = term.sql()
        if isinstance(term, exp.Literal) and term.is_int:
            index = int(term.this) - 1
            return _OrderTerm(index if 0 <= index < max(len(self.projections), 1) else None, text)
        for i, proj in enumerate(self.projections):
            bare = proj.this if isinstance(proj, exp.Alias) else proj
            if bare == term:
                return _OrderTerm(i, text)
            if isinstance(term, exp.Column) and not term.table and proj.alias_or_name == term.name:
                return _OrderTerm(i, text)
        if isinstance(term, exp.Column) and self.has_star:
            return _OrderTerm(-1, term.name)  # resolved by name against the answer
        return _OrderTerm(None, text)


# -- normalizing the two answers -----------------------------------------------
def _kind(t: pa.DataType) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t) \
            or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_time(t):
        return "time"
    if pa.types.is_duration(t):
        return "duration"
    return "other"


_UNIT_RANK = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def _common_type(a: pa.DataType, b: pa.DataType, opts: CompareOptions) -> pa.DataType | None:
    """The type both columns are cast to before comparing, or None when incompatible."""
    import pyarrow as pa

    ka, kb = _kind(a), _kind(b)
    if pa.types.is_dictionary(a):
        a = a.value_type
    if pa.types.is_dictionary(b):
        b = b.value_type
    if ka == "null" and kb == "null":
        return pa.null()
    if ka == "null":
        return _common_type(b, b, opts)
    if kb == "null":
        return _common_type(a, a, opts)
    numeric = ("int", "float", "decimal")
    if ka in numeric and kb in numeric:
        if a == b and ka != "decimal":
            return a if ka != "float" else pa.float64()
        if not opts.numeric_types_equivalent and a != b:
            return None
        if ka == kb == "int":
            return pa.decimal128(38, 0) if pa.uint64() in (a, b) else pa.int64()
        return pa.float64()
    if ka != kb:
        return None
    if ka in ("string", "binary"):
        if a != b and not opts.strings_equivalent:
            return None
        return pa.large_string() if ka == "string" else pa.large_binary()
    if ka == "timestamp":
        if a == b:
            return pa.timestamp(a.unit, tz="UTC" if a.tz else None)
        if not opts.timestamps_equivalent:
            return None
        if (a.tz is None) != (b.tz is None) and not opts.naive_timestamps_as_utc:
            return None
        unit = max(a.unit, b.unit, key=_UNIT_RANK.__getitem__)
        return pa.timestamp(unit, tz="UTC")
    if ka in ("date", "time", "duration"):
        if a == b:
            return a
        if ka == "date":
            return pa.date32()
        unit = max(a.unit, b.unit, key=_UNIT_RANK.__getitem__)
        return pa.time64(unit) if ka == "time" and unit in ("us", "ns") else (
            pa.time32(unit) if ka == "time" else pa.duration(unit))
    if ka == "bool":
        return a
    return a if a == b else None


def _cast(column: Any, target: pa.DataType) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if pa.types.is_timestamp(column.type) and pa.types.is_timestamp(target) \
            and (column.type.tz is None) != (target.tz is None):
        # a naive timestamp read as UTC: same stored value, zone attached
        column = column.cast(pa.timestamp(column.type.unit, tz=target.tz))
    if column.type == target:
        return column
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), target)
    if pa.types.is_floating(target) and pa.types.is_decimal(column.type):
        return pc.cast(column, target, safe=False)
    return column.cast(target)


def _align(
    primary: pa.Table, reference: pa.Table, shape: _QueryShape, opts: CompareOptions
) -> tuple[Verdict | None, pa.Table, pa.Table]:
    import pyarrow as pa

    evidence: dict[str, Any] = {
        "primary_columns": [f"{f.name}: {f.type}" for f in primary.schema],
        "reference_columns": [f"{f.name}: {f.type}" for f in reference.schema],
    }
    if primary.num_columns != reference.num_columns:
        return Verdict("schema", f"primary has {primary.num_columns} columns, reference has "
                       f"{reference.num_columns}", evidence), primary, reference
    names_p, names_r = primary.column_names, reference.column_names
    for i, (np_, nr) in enumerate(zip(names_p, names_r, strict=True)):
        if opts.ignore_engine_chosen_names and i < len(shape.engine_named) \
                and shape.engine_named[i] and not shape.has_star:
            continue
        same = np_.lower() == nr.lower() if opts.case_insensitive_names else np_ == nr
        if not same:
            return Verdict("schema", f"column {i + 1} is named {np_!r} on primary but {nr!r} on "
                           "reference", evidence), primary, reference
    p_cols, r_cols, types = [], [], []
    for i in range(primary.num_columns):
        tp, tr = primary.schema.field(i).type, reference.schema.field(i).type
        common = _common_type(tp, tr, opts)
        if common is None:
            return Verdict("schema", f"column {names_r[i]!r} is {tp} on primary but {tr} on "
                           "reference", evidence), primary, reference
        try:
            p_cols.append(_cast(primary.column(i), common))
            r_cols.append(_cast(reference.column(i), common))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            return Verdict("schema", f"column {names_r[i]!r}: cannot compare {tp} with {tr} "
                           f"({exc})", evidence), primary, reference
        types.append(common)
    names = [f"c{i}" for i in range(primary.num_columns)]
    return None, pa.table(p_cols, names=names), pa.table(r_cols, names=names)


# -- comparing rows -----------------------------------------------------------
class _Rows:
    """Pairs the rows of two aligned answers in DuckDB and classifies the differences."""

    def __init__(self, p: pa.Table, r: pa.Table, shape: _QueryShape, opts: CompareOptions,
                 names: list[str]):
        import pyarrow as pa

        self.p, self.r, self.shape, self.opts, self.names = p, r, shape, opts, names
        self.cols = p.column_names
        self.floats = [pa.types.is_floating(t) for t in p.schema.types]
        if shape.group_keys and len(shape.group_keys) == len(self.cols):
            self.keys = [c for c, k in zip(self.cols, shape.group_keys, strict=True) if k]
        else:
            self.keys = [c for c, f in zip(self.cols, self.floats, strict=True) if not f]
        self.values = [c for c in self.cols if c not in self.keys]
        self.evidence: dict[str, Any] = {
            "primary_rows": p.num_rows, "reference_rows": r.num_rows,
            "key_columns": [self._name(c) for c in self.keys],
        }

    def _name(self, col: str) -> str:
        return self.names[int(col[1:])]

    def _same(self, col: str, a: str, b: str) -> str:
        """SQL that is true when cell ``a.col`` agrees with ``b.col``."""
        x, y = f"{a}.{col}", f"{b}.{col}"
        if not self.floats[int(col[1:])]:
            return f"({x} IS NOT DISTINCT FROM {y})"
        o = self.opts
        nan = f"(isnan({x}) AND isnan({y}))" if o.nan_equals_nan else "false"
        zero = "" if o.signed_zero_equal else \
            f" AND (({x} <> 0) OR (signbit({x}) = signbit({y})))"
        close = (f"(NOT isnan({x}) AND NOT isnan({y}) AND ({x} = {y} OR abs({x} - {y}) <= "
                 f"{o.abs_tol!r} + {o.rel_tol!r} * greatest(abs({x}), abs({y}))){zero})")
        return f"(({x} IS NULL AND {y} IS NULL) OR ({x} IS NOT NULL AND {y} IS NOT NULL AND " \
               f"({nan} OR {close})))"

    def judge(self) -> Verdict:
        import duckdb

        con = duckdb.connect()
        try:
            con.register("p_in", self.p)
            con.register("r_in", self.r)
            return self._judge(con)
        finally:
            con.close()

    def _judge(self, con: Any) -> Verdict:
        n_p, n_r = self.p.num_rows, self.r.num_rows
        if n_p == 0 and n_r == 0:
            return self._order_or_match()
        exact = self.opts.nan_equals_nan and self.opts.signed_zero_equal
        if not exact or max(n_p, n_r) <= _SMALL:
            # Small answers are paired directly. And DuckDB hashes -0.0 like 0.0 and every
            # NaN alike, so when those must differ, every row is paired.
            con.execute("CREATE VIEW p_d AS SELECT * FROM p_in")
            con.execute("CREATE VIEW r_d AS SELECT * FROM r_in")
            return self._pair(con)
        # Rows are spread over buckets by their hash; a bucket whose sum of row hashes and
        # row count agree on both sides holds the same rows on both (two aggregates with few
        # groups: one parallel scan each). Only the rows of the other buckets are paired.
        row_hash = f"hash({', '.join(self.cols)})"
        buckets = min(_BUCKETS, max(n_p, n_r) // 64)
        side = (f"SELECT {row_hash} % {buckets} AS b, sum({row_hash}::HUGEINT) AS s, "
                "count(*) AS n FROM {t} GROUP BY b")
        con.execute(
            f"CREATE TEMP TABLE fb AS SELECT b FROM ({side.format(t='p_in')}) p "
            f"FULL OUTER JOIN ({side.format(t='r_in')}) r USING (b) "
            "WHERE p.s IS DISTINCT FROM r.s OR p.n IS DISTINCT FROM r.n")
        differing = con.execute("SELECT count(*) FROM fb").fetchall()[0][0]
        if differing == 0:
            return self._order_or_match()
        widespread = differing > buckets // 2
        for name in ("p", "r"):
            if widespread:
                con.execute(f"CREATE VIEW {name}_d AS SELECT * FROM {name}_in")
            else:
                con.execute(f"CREATE TEMP TABLE {name}_d AS SELECT * FROM {name}_in "
                            f"WHERE {row_hash} % {buckets} IN (SELECT b FROM fb)")
        if widespread and n_p == n_r and self._pair_by_position(con):
            return self._classify(con)
        return self._pair(con)

    def _pair_by_position(self, con: Any) -> bool:
        """Pair rows by position after sorting both sides; False when the keys do not line up.

        When most rows differ (floats a little off everywhere, a type narrowed), sorting and
        a positional join cost far less than pairing every row on its key with a window.
        """
        order = ", ".join(f"{c} NULLS FIRST" for c in self.keys + self.values)
        for name in ("p", "r"):
            con.execute(f"CREATE TEMP TABLE {name}_s AS SELECT * FROM {name}_d ORDER BY {order}")
        if self.keys:
            keys_differ = " OR ".join(f"NOT {self._same(k, 'p', 'r')}" for k in self.keys)
            shifted = con.execute(f"SELECT count(*) FROM p_s p POSITIONAL JOIN r_s r "
                                  f"WHERE {keys_differ}").fetchall()[0][0]
            if shifted:
                return False
        differs = " OR ".join(f"NOT {self._same(c, 'p', 'r')}" for c in self.values) or "false"
        select = ", ".join([f"p.{c} AS p_{c}" for c in self.cols]
                           + [f"r.{c} AS r_{c}" for c in self.cols]
                           + ["true AS in_p", "true AS in_r"]
                           + [f"NOT {self._same(c, 'p', 'r')} AS ne_{c}" for c in self.values])
        con.execute(f"CREATE TEMP TABLE d AS SELECT {select} FROM p_s p POSITIONAL JOIN r_s r "
                    f"WHERE {differs}")
        return True

    def _pair(self, con: Any) -> Verdict:
        keys, vals = self.keys, self.values
        part = f"PARTITION BY {', '.join(keys)} " if keys else ""
        order = ", ".join(f"{c} NULLS FIRST" for c in (vals or keys)) or "1"
        numbered = "SELECT *, row_number() OVER ({part}ORDER BY {order}) AS rn__ FROM {src}"
        on = " AND ".join([f"p.{k} IS NOT DISTINCT FROM r.{k}" for k in keys] + ["p.rn__ = r.rn__"])
        differs = " OR ".join(f"NOT {self._same(c, 'p', 'r')}" for c in vals) or "false"
        select = ", ".join([f"p.{c} AS p_{c}" for c in self.cols]
                           + [f"r.{c} AS r_{c}" for c in self.cols]
                           + ["p.rn__ IS NOT NULL AS in_p", "r.rn__ IS NOT NULL AS in_r"]
                           + [f"NOT {self._same(c, 'p', 'r')} AS ne_{c}" for c in vals])
        con.execute(
            f"CREATE TEMP TABLE d AS WITH p AS ({numbered.format(part=part, order=order, src='p_d')}),"
            f" r AS ({numbered.format(part=part, order=order, src='r_d')}) "
            f"SELECT {select} FROM p FULL OUTER JOIN r ON {on} "
            f"WHERE p.rn__ IS NULL OR r.rn__ IS NULL OR {differs}")
        return self._classify(con)

    def _classify(self, con: Any) -> Verdict:
        """The verdict from table ``d``: the rows that found no equal partner."""
        n_p, n_r = self.p.num_rows, self.r.num_rows
        extra, missing, changed = con.execute(
            "SELECT count(*) FILTER (WHERE NOT in_r), count(*) FILTER (WHERE NOT in_p), "
            "count(*) FILTER (WHERE in_p AND in_r) FROM d").fetchall()[0]
        if not (extra or missing or changed):
            return self._order_or_match()
        if n_p == n_r and self._only_ties_at_the_limit(con):
            self.evidence["tied_at_limit"] = missing + changed
            verdict = self._order_or_match()
            if verdict.ok:
                verdict.message += (f"; {missing + changed} rows tied on the ORDER BY keys at the "
                                    "LIMIT differ, which the ORDER BY allows")
            return verdict
        self.evidence.update(missing_count=missing, extra_count=extra, changed_count=changed)
        n = self.opts.sample_size
        if missing:
            self.evidence["missing"] = self._sample(con, "r_", "NOT in_p", n)
        if extra:
            self.evidence["extra"] = self._sample(con, "p_", "NOT in_r", n)
        if changed:
            self.evidence["differences"] = self._differences(con, n)
        if n_p != n_r:
            if missing and not extra and not changed:
                return Verdict("missing_rows", f"primary lacks {missing} of the reference's "
                               f"{n_r} rows", self.evidence)
            if extra and not missing and not changed:
                return Verdict("extra_rows", f"primary has {extra} rows the reference does not "
                               f"({n_p} vs {n_r})", self.evidence)
            return Verdict("row_count", f"primary returned {n_p} rows, reference {n_r}",
                           self.evidence)
        if missing and not changed:
            self.evidence["differences"] = self._unpaired_differences(con, n)
        total = changed + missing
        first = self.evidence["differences"][0] if self.evidence.get("differences") else None
        detail = ""
        if first:
            key = ", ".join(f"{k}={_short(v)}" for k, v in first["key"].items())
            detail = (f"; first: {first['column']} is {_short(first['primary'])} on primary, "
                      f"{_short(first['reference'])} on reference" + (f" at {key}" if key else ""))
        return Verdict("values", f"{total} of {n_r} rows differ{detail}", self.evidence)

    def _only_ties_at_the_limit(self, con: Any) -> bool:
        """ORDER BY ... LIMIT n: do the answers differ only in rows tied with the last one?

        Rows whose ORDER BY keys equal the last row's compete for the last places; which of
        them an engine keeps is its own choice.
        """
        if not self.shape.has_limit or not self.shape.order or self.r.num_rows == 0:
            return False
        cols = [self._resolve(t) for t in self.shape.order]
        if any(c is None for c in cols):
            return False
        last = self.r.slice(self.r.num_rows - 1, 1).to_pylist()[0]
        tied = [c for c in cols if c is not None]

        def at_boundary(side: str) -> str:
            return " AND ".join(f"{side}{c} IS NOT DISTINCT FROM ${i + 1}"
                                for i, c in enumerate(tied))

        outside = con.execute(
            f"SELECT count(*) FROM d WHERE NOT ((NOT in_p OR ({at_boundary('p_')})) "
            f"AND (NOT in_r OR ({at_boundary('r_')})))", [last[c] for c in tied]).fetchall()[0][0]
        return bool(outside == 0)

    def _sample(self, con: Any, side: str, where: str, n: int) -> list[dict[str, Any]]:
        cols = ", ".join(f"{side}{c}" for c in self.cols)
        order = ", ".join(f"{side}{c} NULLS FIRST" for c in self.cols)
        rows = con.execute(f"SELECT {cols} FROM d WHERE {where} ORDER BY {order} LIMIT {n}").fetchall()
        return [{self._name(c): _jsonable(v) for c, v in zip(self.cols, row, strict=True)} for row in rows]

    def _differences(self, con: Any, n: int) -> list[dict[str, Any]]:
        key_sel = [f"p_{k}" for k in self.keys]
        val_sel = [f"p_{c}, r_{c}, ne_{c}" for c in self.values]
        order = ", ".join(f"{k} NULLS FIRST" for k in key_sel) or "1"
        rows = con.execute(f"SELECT {', '.join(key_sel + val_sel)} FROM d WHERE in_p AND in_r "
                           f"ORDER BY {order} LIMIT {n}").fetchall()
        out = []
        for row in rows:
            key = {self._name(k): _jsonable(v) for k, v in zip(self.keys, row, strict=False)}
            rest = row[len(self.keys):]
            for i, c in enumerate(self.values):
                pv, rv, ne = rest[3 * i:3 * i + 3]
                if ne:
                    out.append({"key": key, "column": self._name(c), "primary": _jsonable(pv),
                                "reference": _jsonable(rv)})
        return out[:n]

    def _unpaired_differences(self, con: Any, n: int) -> list[dict[str, Any]]:
        """Same row count, rows differ in key columns: pair them in sorted order."""
        extra = self._sample(con, "p_", "NOT in_r", n)
        missing = self._sample(con, "r_", "NOT in_p", n)
        out = []
        for prow, rrow in zip(extra, missing, strict=False):
            differing = [k for k in prow if prow[k] != rrow[k]]
            same = {k: v for k, v in rrow.items() if k not in differing}
            for col in differing:
                out.append({"key": same, "column": col, "primary": prow[col],
                            "reference": rrow[col]})
        return out[:n]

    def _order_or_match(self) -> Verdict:
        n = self.p.num_rows
        shape = self.shape
        if not shape.order:
            if self.opts.ignore_order_without_order_by or n < 2:
                return Verdict("match", f"{n} rows agree", self.evidence)
            checked = list(self.cols)
        else:
            checked = []
            for term in shape.order:
                col = self._resolve(term)
                if col is None:
                    break
                checked.append(col)
            self.evidence["order_keys"] = [t.text for t in shape.order]
            if not checked:
                self.evidence["order_checked"] = False
                return Verdict("match", f"{n} rows agree (order not checked: the ORDER BY keys "
                               "are not in the answer)", self.evidence)
        if n < 2:
            return Verdict("match", f"{n} rows agree", self.evidence)
        pos = self._first_position_differing(checked)
        if pos is None:
            return Verdict("match", f"{n} rows agree, in the order the ORDER BY requires",
                           self.evidence)
        lo, hi = max(pos - 1, 0), min(pos + 2, n)
        self.evidence.update(
            first_out_of_order=pos + 1,
            primary_rows_around=[self._row(r) for r in self.p.slice(lo, hi - lo).to_pylist()],
            reference_rows_around=[self._row(r) for r in self.r.slice(lo, hi - lo).to_pylist()],
        )
        return Verdict("order", f"same rows, but row {pos + 1} is out of order for ORDER BY "
                       f"{', '.join(t.text for t in shape.order) or '(all columns)'}", self.evidence)

    def _first_position_differing(self, cols: list[str]) -> int | None:
        """The first row position where the two answers' ``cols`` disagree (Arrow compute)."""
        import pyarrow.compute as pc

        same = None
        for c in cols:
            a, b = self.p.column(c), self.r.column(c)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b))
            if self.floats[int(c[1:])]:
                o = self.opts
                tol = pc.add(pc.multiply(pc.max_element_wise(pc.abs(a), pc.abs(b)), o.rel_tol),
                             o.abs_tol)
                eq = pc.or_(pc.equal(a, b), pc.less_equal(pc.abs(pc.subtract(a, b)), tol))
                if o.nan_equals_nan:
                    eq = pc.or_(eq, pc.and_(pc.is_nan(a), pc.is_nan(b)))
                if not o.signed_zero_equal:
                    sign = pc.equal(pc.greater(pc.divide(1.0, a), 0), pc.greater(pc.divide(1.0, b), 0))
                    eq = pc.and_(eq, pc.or_(pc.not_equal(a, 0), sign))
            else:
                eq = pc.equal(a, b)
            col_same = pc.or_(pc.fill_null(eq, False), both_null)
            same = col_same if same is None else pc.and_(same, col_same)
        assert same is not None
        index = pc.index(same, False).as_py()
        return None if index is None or index < 0 else int(index)

    def _row(self, row: dict[str, Any]) -> dict[str, Any]:
        return {self._name(c): _jsonable(row[c]) for c in self.cols}

    def _resolve(self, term: _OrderTerm) -> str | None:
        if term.column is None:
            return None
        if term.column >= 0:
            return self.cols[term.column] if term.column < len(self.cols) else None
        matches = [i for i, name in enumerate(self.names) if name.lower() == term.text.lower()]
        return self.cols[matches[0]] if len(matches) == 1 else None


# -- evidence ---------------------------------------------------------------------
def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def error_class(exc: BaseException) -> str:
    """The class name compared when both sides fail.

    An error re-raised from another process (the benchmark's workers) carries
    the original class name in ``error_class``.
    """
    return str(getattr(exc, "error_class", None) or type(exc).__name__)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{error_class(exc)}: {text[0] if text else ''}"


def _describe_error(exc: BaseException) -> dict[str, Any]:
    return {"class": error_class(exc), "message": str(exc)}
