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
    one side failed, or both failed with different error kinds.
``nondeterministic``
    the SQL leaves the answer undetermined (:mod:`gateway.nondeterminism`:
    volatile functions, a LIMIT no total order fixes, a sample) and nothing
    it determines differs; the evidence says what was verified. Also: the
    reference disagreed with itself (see :func:`compare_with_noise`).

How: both answers are normalized column by column in Arrow (numbers of mixed
types to float64, timestamps to one unit in UTC, strings to large_string,
dictionaries decoded); :mod:`gateway.query_shape` reads the SQL and
:mod:`gateway.row_pairing` pairs the rows in DuckDB, so nothing loops over rows
in Python.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.query_shape import QueryShape

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.nondeterminism import Nondeterminism
    from gateway.row_pairing import CutEdges, RowPairing

CATEGORIES = ("match", "schema", "row_count", "missing_rows", "extra_rows", "values",
              "order", "error", "nondeterministic")

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
        interval_month_is_30_days: an interval's months count as 30 days each,
            as DuckDB compares them (``INTERVAL '1 month'`` equals ``'30 days'``);
            when False, months, days and nanoseconds are compared separately
            (they move a date differently).
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
    interval_month_is_30_days: bool = False
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
    from gateway.nondeterminism import Nondeterminism

    opts = (options or CompareOptions()).for_sql(sql)
    ties = Nondeterminism.of(sql, opts.dialect).ties
    tied = 0
    if ties and primary.num_columns == reference.num_columns:
        from gateway.tied_rows import without_tied_cells

        primary, tied_p = without_tied_cells(primary, ties)
        reference, tied_r = without_tied_cells(reference, ties)
        tied = tied_p + tied_r
    verdict, pairing, found, volatile = pairing_for(primary, reference, sql, opts)
    if verdict is not None:
        return verdict
    assert pairing is not None
    return allow_for(found, volatile, pairing.judge(), tied)


def pairing_for(primary: pa.Table, reference: pa.Table, sql: str | None, opts: CompareOptions,
                *, order: bool = True, edges: CutEdges | None = None
                ) -> tuple[Verdict | None, RowPairing | None, Nondeterminism, list[str]]:
    """The two answers aligned, ready to pair: a ``schema`` verdict, or the pairing.

    Also returns what the SQL leaves undetermined and the names of the columns
    left out as volatile (see :func:`compare_tables`). ``order=False`` pairs
    the rows as a multiset (no order check, no LIMIT cut): the streaming
    comparison (:mod:`gateway.compare_stream`) pairs one part of two answers
    at a time and checks their order on its own; ``edges`` (the whole
    reference's first and last rows) then lets it judge a LIMIT's cut.
    """
    from gateway.nondeterminism import Nondeterminism
    from gateway.row_pairing import RowPairing

    shape = QueryShape.of(sql, opts.dialect)
    found = Nondeterminism.of(sql, opts.dialect)
    schema_verdict, p, r, rules = _align(primary, reference, shape, opts)
    if schema_verdict is not None:
        return schema_verdict, None, found, []
    names = primary.column_names
    volatile = found.columns_in(names)
    if volatile:
        keep = [i for i in range(p.num_columns) if i not in volatile]
        p, r, shape = _drop_columns(p, keep), _drop_columns(r, keep), _shape_without(shape, keep)
        rules, names = [rules[i] for i in keep], [names[i] for i in keep]
    cut_order = shape.order
    if not order:
        shape = dataclasses.replace(shape, order=[])
        opts = dataclasses.replace(opts, ignore_order_without_order_by=True)
    pairing = RowPairing(p, r, shape, opts, names, rules,
                         cut=found.cut if order or edges is not None else None, edges=edges,
                         cut_order=cut_order)
    return None, pairing, found, [primary.column_names[i] for i in volatile]


def _drop_columns(table: pa.Table, keep: list[int]) -> pa.Table:
    return table.select(keep).rename_columns([f"c{i}" for i in range(len(keep))])


def _shape_without(shape: QueryShape, keep: list[int]) -> QueryShape:
    """``shape`` for an answer reduced to the columns at ``keep``."""
    from gateway.query_shape import OrderTerm

    position = {old: new for new, old in enumerate(keep)}
    order = [OrderTerm(position.get(t.column) if t.column is not None and t.column >= 0
                       else t.column, t.text) for t in shape.order]
    groups = [shape.group_keys[i] for i in keep] if shape.group_keys else []
    return dataclasses.replace(shape, order=order, group_keys=groups)


def allow_for(found: Nondeterminism, volatile: list[str], verdict: Verdict,
              tied: int = 0) -> Verdict:
    """The verdict once what the SQL leaves undetermined is taken into account.

    ``tied``: the cells of window functions over tied rows left out (both sides).
    """
    evidence = verdict.evidence
    if volatile:
        evidence.update(volatile_columns=volatile, volatile_functions=found.functions)
    if tied:
        from gateway.tied_rows import describe

        evidence.update(describe(found.ties, tied))
        if verdict.ok and found.rows_undetermined is None and not volatile:
            functions = ", ".join(sorted({t.function for t in found.ties}))
            return Verdict("nondeterministic", f"{tied} cells of {functions} over rows tied on "
                           "the window's keys are not compared; the rest agrees", evidence)
    if found.rows_undetermined is not None:
        if verdict.ok and not volatile:
            return verdict
        return Verdict("nondeterministic", f"{found.rows_undetermined}, so only the schema is "
                       f"checked ({'the answers differ' if not verdict.ok else 'the rest agrees'})",
                       {"verified": ["schema"], "reason": found.rows_undetermined,
                        "volatile_columns": volatile, "comparison": verdict.to_dict()})
    if volatile and verdict.ok:
        return Verdict("nondeterministic", f"{', '.join(volatile)} come from "
                       f"{', '.join(sorted(set(found.functions)))} and are not compared; "
                       "the rest agrees", evidence)
    return verdict


def compare_outcomes(
    primary: pa.Table | BaseException,
    reference: pa.Table | BaseException,
    *,
    sql: str | None = None,
    options: CompareOptions | None = None,
) -> Verdict:
    """Like :func:`compare_tables`, where either side may be the exception it raised.

    Both failing with the same error kind (``gateway.errors.KINDS``: syntax,
    unknown_object, type...; the class's own kind where the engine did not
    classify it) is a match: the engines agree the query is wrong, and why.
    One failing, or both with different kinds, is ``error``. Both messages
    are kept in the evidence.
    """
    p_err = isinstance(primary, BaseException)
    r_err = isinstance(reference, BaseException)
    if p_err or r_err:
        evidence = {
            "primary_error": _describe_error(primary) if p_err else None,
            "reference_error": _describe_error(reference) if r_err else None,
        }
        if p_err and r_err:
            assert isinstance(primary, BaseException) and isinstance(reference, BaseException)
            kp, kr = error_kind(primary), error_kind(reference)
            if kp == kr:
                return Verdict("match", f"both failed with a {kp} error", evidence)
            return Verdict("error", f"both failed, differently: primary {kp} "
                           f"({error_class(primary)}), reference {kr} ({error_class(reference)})",
                           evidence)
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
    if reference_again is None or verdict.category in ("match", "nondeterministic"):
        return verdict
    noise = compare_outcomes(reference_again, reference, sql=sql, options=options)
    if noise.ok:
        return verdict
    return Verdict("nondeterministic",
                   f"two runs of the reference disagree ({noise.category}), so the answer is "
                   "not determined by the data",
                   {"reference_vs_itself": noise.to_dict(), "primary_vs_reference": verdict.to_dict()})


# -- normalizing the two answers -----------------------------------------------
#: integers up to this magnitude are exact in a float64; beyond it, only some are
EXACT_FLOAT_RANGE = 2**53


def _kind(t: pa.DataType) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if isinstance(t, pa.BaseExtensionType):
        return "uuid" if t.extension_name == "arrow.uuid" else "other"
    checks = (("null", pa.types.is_null), ("bool", pa.types.is_boolean),
              ("int", pa.types.is_integer), ("float", pa.types.is_floating),
              ("decimal", pa.types.is_decimal), ("timestamp", pa.types.is_timestamp),
              ("date", pa.types.is_date), ("time", pa.types.is_time),
              ("duration", pa.types.is_duration), ("struct", pa.types.is_struct),
              ("map", pa.types.is_map))
    for name, check in checks:
        if check(t):
            return name
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t) \
            or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return "list"
    return "other"


def contains_float(t: pa.DataType) -> bool:
    """True when ``t`` is a float type or a nested type with a float inside."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return contains_float(t.value_type)
    if pa.types.is_floating(t):
        return True
    return any(contains_float(t.field(i).type) for i in range(t.num_fields))


_UNIT_RANK = {"s": 0, "ms": 1, "us": 2, "ns": 3}
#: decimal digits of each integer type's largest value
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def _common_decimal(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """Integers and decimals: the decimal holding both exactly (a 256-bit one past 38 digits,
    which :func:`_cast` then writes as text: DuckDB reads no 256-bit decimal)."""
    import pyarrow as pa

    def digits(t: pa.DataType) -> tuple[int, int]:
        if pa.types.is_integer(t):
            return _INT_DIGITS[t.bit_width] + (t == pa.uint64()), 0
        return t.precision - t.scale, t.scale

    (ia, sa), (ib, sb) = digits(a), digits(b)
    scale = max(sa, sb)
    precision = max(ia, ib) + scale
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


def _common_type(a: pa.DataType, b: pa.DataType, opts: CompareOptions) -> pa.DataType | None:
    """The type both columns are cast to before comparing, or None when incompatible.

    Nested types (lists of every kind, structs with the same field names, maps)
    get the common type of their parts, so the equivalences hold at every depth.
    """
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
        if not opts.numeric_types_equivalent and a != b:
            return None
        if ka == kb == "int":
            return a if a == b else (pa.decimal128(38, 0) if pa.uint64() in (a, b) else pa.int64())
        if "float" in (ka, kb):
            return pa.float64()
        return a if a == b else _common_decimal(a, b)
    if "uuid" in (ka, kb) and {ka, kb} <= {"uuid", "string"}:
        # DuckDB hands a UUID out as either, by arrow_lossless_conversion
        return pa.large_string() if "string" in (ka, kb) or opts.strings_equivalent else a
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
    if ka == "list":
        if type(a) is not type(b) and not opts.strings_equivalent:
            return None
        inner = _common_type(a.value_type, b.value_type, opts)
        return None if inner is None else pa.large_list(inner)
    if ka == "struct":
        names = [a.field(i).name for i in range(a.num_fields)]
        if names != [b.field(i).name for i in range(b.num_fields)]:
            return None
        fields = [_common_type(a.field(i).type, b.field(i).type, opts) for i in range(a.num_fields)]
        if any(f is None for f in fields):
            return None
        return pa.struct([pa.field(n, t) for n, t in zip(names, fields, strict=True)])
    if ka == "map":
        key, item = _common_type(a.key_type, b.key_type, opts), \
            _common_type(a.item_type, b.item_type, opts)
        return None if key is None or item is None else pa.map_(key, item)
    return a if a == b else None


#: the fields a month_day_nano interval is compared as: each apart, or with 30-day months
INTERVAL_FIELDS = (("months", "int32"), ("days", "int32"), ("nanoseconds", "int64"))
INTERVAL_30_DAY_FIELDS = (("days", "int64"), ("nanoseconds", "int64"))
_DAY_NS = 86_400 * 10**9


def compared_type(a: pa.DataType, b: pa.DataType, opts: CompareOptions) -> pa.DataType | None:
    """The type a column of type ``a`` against one of ``b`` is compared in (None: none).

    :func:`_common_type`, except that an interval becomes a struct of its fields
    (:data:`INTERVAL_FIELDS`, or :data:`INTERVAL_30_DAY_FIELDS` with
    ``interval_month_is_30_days``), at any depth: DuckDB takes a month as 30 days when
    it compares.
    """
    common = _common_type(_plain_type(a), _plain_type(b), opts)
    return None if common is None else _intervals_as_fields(common, opts)


def _intervals_as_fields(t: pa.DataType, opts: CompareOptions) -> pa.DataType:
    """``t`` with every interval in it, at any depth, the struct it is compared as."""
    import pyarrow as pa

    if pa.types.is_interval(t):
        fields = INTERVAL_30_DAY_FIELDS if opts.interval_month_is_30_days else INTERVAL_FIELDS
        return pa.struct([(name, pa.type_for_alias(f)) for name, f in fields])
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_intervals_as_fields(t.field(i).type, opts))
                          for i in range(t.num_fields)])
    if pa.types.is_large_list(t):
        return pa.large_list(_intervals_as_fields(t.value_type, opts))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _intervals_as_fields(t.item_type, opts))
    return t


def _holds_interval(t: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_interval(t)) or any(_holds_interval(t.field(i).type)
                                                for i in range(t.num_fields))


def _with_interval_fields(column: Any, target: pa.DataType) -> Any:
    """``column`` (holding intervals, at any depth) with each interval the struct ``target``
    has in its place; the rest is cast by :func:`_cast_to`."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([_with_interval_fields(c, target) for c in column.chunks],
                                target)
    t = column.type
    mask = column.is_null() if column.null_count else None
    if pa.types.is_interval(t):
        return _interval_fields(column, target)
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays(
            [_cast_to(column.field(i), target.field(i).type) for i in range(t.num_fields)],
            fields=list(target), mask=mask)
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(column.offsets, column.keys,
                                       _cast_to(column.items, target.item_type), type=target,
                                       mask=mask)
    if not pa.types.is_large_list(t):
        column = column.cast(pa.large_list(t.value_type))
    return pa.LargeListArray.from_arrays(column.offsets, _cast_to(column.values,
                                                                  target.value_type), mask=mask)


def _is_view(t: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_list_view(t) or pa.types.is_large_list_view(t))


def _plain_type(t: pa.DataType) -> pa.DataType:
    """``t`` as :func:`_plain_array` writes it: run-end encoding decoded, list views as
    lists, a union as a struct of its type code and one field per member."""
    import pyarrow as pa

    if pa.types.is_run_end_encoded(t):
        return _plain_type(t.value_type)
    if _is_view(t):
        return pa.large_list(_plain_type(t.value_type))
    if pa.types.is_union(t):
        return pa.struct([("type_code", pa.int8())] + [
            (str(code), _plain_type(t.field(i).type)) for i, code in enumerate(t.type_codes)])
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_plain_type(t.field(i).type))
                          for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.large_list(_plain_type(t.value_type))
    return t


def _plain_array(column: Any) -> Any:
    """``column`` in :func:`_plain_type`'s type (pyarrow 26 casts a list view to a list
    wrongly: ``[[1, 2], [], [3]]`` became ``[[1, 2], [], []]``; it casts no union)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        if _plain_type(column.type) == column.type:
            return column
        return pa.chunked_array([_plain_array(c) for c in column.chunks],
                                _plain_type(column.type))
    t = column.type
    if _plain_type(t) == t:
        return column
    mask = column.is_null() if column.null_count else None
    if pa.types.is_run_end_encoded(t):
        return _plain_array(pc.run_end_decode(column))
    if _is_view(t):
        sizes = np.where(column.is_valid().to_numpy(zero_copy_only=False),
                         column.sizes.fill_null(0).to_numpy(), 0).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        starts = column.offsets.fill_null(0).to_numpy().astype(np.int64)
        at = np.repeat(starts - offsets[:-1], sizes) + np.arange(offsets[-1])
        values = _plain_array(column.values.take(pa.array(at)))
        return pa.LargeListArray.from_arrays(pa.array(offsets), values, mask=mask)
    if pa.types.is_union(t):
        # (UnionArray.type_codes and .offsets ignore a slice's offset)
        n, buffers = len(column), column.buffers()
        codes = pa.Array.from_buffers(pa.int8(), n, [None, buffers[1]], offset=column.offset)
        fields = [codes]
        for i, code in enumerate(t.type_codes):
            member = column.field(i)
            if t.mode == "dense":
                at = pa.Array.from_buffers(pa.int32(), n, [None, buffers[2]], offset=column.offset)
                member = member.take(pc.if_else(pc.equal(codes, code), at, 0))
            fields.append(_plain_array(pc.if_else(pc.equal(codes, code), member,
                                                  pa.scalar(None, member.type))))
        return pa.StructArray.from_arrays(fields, fields=list(_plain_type(t)))
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([_plain_array(column.field(i))
                                           for i in range(t.num_fields)],
                                          fields=list(_plain_type(t)), mask=mask)
    flat = column.cast(pa.large_list(t.value_type)) if pa.types.is_list(t) else column
    return pa.LargeListArray.from_arrays(flat.offsets, _plain_array(flat.values), mask=mask)


def _interval_fields(column: Any, target: pa.DataType) -> Any:
    """A month_day_nano interval column as the struct ``target`` (see :func:`compared_type`)."""
    import numpy as np
    import pyarrow as pa

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    raw = np.frombuffer(column.buffers()[1], np.uint8)
    parts = raw[16 * column.offset:16 * (column.offset + len(column))].view(
        np.dtype([("m", "<i4"), ("d", "<i4"), ("n", "<i8")]))
    mask = column.is_null()
    if target.num_fields == 3:
        arrays = [pa.array(parts["m"]), pa.array(parts["d"]), pa.array(parts["n"])]
    else:
        days = parts["m"].astype(np.int64) * 30 + parts["d"] + parts["n"] // _DAY_NS
        arrays = [pa.array(days), pa.array(parts["n"] % _DAY_NS)]
    return pa.StructArray.from_arrays(arrays, fields=list(target), mask=mask)


def _uuid_text(column: Any) -> Any:
    """An ``arrow.uuid`` column as the 36-character lower-case text DuckDB writes for a UUID."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    storage = column.storage
    n = len(storage)
    raw = np.frombuffer(storage.buffers()[1], np.uint8)[16 * storage.offset:16 * (storage.offset + n)]
    nibbles = np.stack([raw >> 4, raw & 15], axis=1).reshape(n, 32)
    text = np.full((n, 36), ord("-"), np.uint8)
    text[:, [i for i in range(36) if i not in (8, 13, 18, 23)]] = \
        np.frombuffer(b"0123456789abcdef", np.uint8)[nibbles]
    strings = pa.Array.from_buffers(pa.large_string(), n, [
        None, pa.py_buffer(np.arange(n + 1, dtype=np.int64) * 36), pa.py_buffer(text.tobytes())])
    if not storage.null_count:
        return strings
    return pc.if_else(storage.is_null(), pa.scalar(None, pa.large_string()), strings)


def _holds_int_or_decimal(t: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_integer(t) or pa.types.is_decimal(t):
        return True
    return any(_holds_int_or_decimal(t.field(i).type) for i in range(t.num_fields))


def _cast(column: Any, target: pa.DataType) -> Any:
    """``column`` in type ``target``; 256-bit decimals then as their text at their scale
    (exact, and one text per number)."""
    column = _cast_to(column, target)
    as_text = _decimal256_as_text(target)
    return column if as_text == target else column.cast(as_text)


def _decimal256_as_text(t: pa.DataType) -> pa.DataType:
    """``t`` with every 256-bit decimal in it made a large_string."""
    import pyarrow as pa

    if pa.types.is_decimal256(t):
        return pa.large_string()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_decimal256_as_text(t.field(i).type))
                          for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(_decimal256_as_text(t.key_type), _decimal256_as_text(t.item_type))
    if pa.types.is_large_list(t):
        return pa.large_list(_decimal256_as_text(t.value_type))
    return t


def _cast_to(column: Any, target: pa.DataType) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    column = _plain_array(column)
    if pa.types.is_timestamp(column.type) and pa.types.is_timestamp(target) \
            and (column.type.tz is None) != (target.tz is None):
        # a naive timestamp read as UTC: same stored value, zone attached
        column = column.cast(pa.timestamp(column.type.unit, tz=target.tz))
    if pa.types.is_map(column.type):
        column = _entries_in_key_order(column)
    if _holds_interval(column.type) and not _holds_interval(target):
        return _with_interval_fields(column, target)
    if _kind(column.type) == "uuid" and pa.types.is_large_string(target):
        return _uuid_text(column)
    if column.type == target:
        return column
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), target)
    if pa.types.is_floating(target) and pa.types.is_decimal(column.type):
        return pc.cast(column, target, safe=False)
    try:
        return column.cast(target)
    except pa.ArrowInvalid:
        # integers past 2**53 inside a nested value: rounded to the nearest float (the
        # one known limit of the equivalences; at the top level they are kept exact)
        if contains_float(target) and _holds_int_or_decimal(column.type):
            return pc.cast(column, target, safe=False)
        raise


def _entries_in_key_order(column: Any) -> Any:
    """A map column with each map's entries sorted by key: a map's entry order means nothing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    maps = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    first, last = maps.offsets[0].as_py(), maps.offsets[-1].as_py()
    offsets = pc.subtract(maps.offsets, first)
    keys, items = maps.keys.slice(first, last - first), maps.items.slice(first, last - first)
    as_list = pa.ListArray.from_arrays(offsets, pa.StructArray.from_arrays([keys, items],
                                                                           ["k", "v"]),
                                       mask=maps.is_null())
    entries = pc.list_flatten(as_list)
    order = pc.sort_indices(pa.table({"o": pc.list_parent_indices(as_list),
                                      "k": entries.field(0)}),
                            sort_keys=[("o", "ascending"), ("k", "ascending")])
    entries = entries.take(order)
    return pa.MapArray.from_arrays(offsets, entries.field(0), entries.field(1), type=maps.type,
                                   mask=maps.is_null())


def _exact_side_fits_float(column: Any) -> bool:
    """True when every integer or decimal in ``column`` is an exact float64 (|x| <= 2**53)."""
    import pyarrow.compute as pc

    if column.null_count == len(column):
        return True
    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return max(abs(low), abs(high)) <= EXACT_FLOAT_RANGE


@dataclass
class ColumnRule:
    """How one aligned column is compared (read by :mod:`gateway.row_pairing`).

    ``primary_type`` / ``reference_type``: the column's types as the engines
    returned them. Where a float in the aligned column was an integer or a
    decimal on one side, the float tolerance applies only while both values
    are within 2**53; beyond it a float matches only the number it is exactly.
    ``exact_side``: ``"p"`` or ``"r"`` when that side keeps its integers or
    decimals (some past 2**53, so not exact as floats) against floats on the other.
    """

    primary_type: pa.DataType
    reference_type: pa.DataType
    exact_side: str | None = None


def _align(
    primary: pa.Table, reference: pa.Table, shape: QueryShape, opts: CompareOptions
) -> tuple[Verdict | None, pa.Table, pa.Table, list[ColumnRule]]:
    import pyarrow as pa

    evidence: dict[str, Any] = {
        "primary_columns": [f"{f.name}: {f.type}" for f in primary.schema],
        "reference_columns": [f"{f.name}: {f.type}" for f in reference.schema],
    }
    rules: list[ColumnRule] = []
    if primary.num_columns != reference.num_columns:
        return Verdict("schema", f"primary has {primary.num_columns} columns, reference has "
                       f"{reference.num_columns}", evidence), primary, reference, rules
    names_p, names_r = primary.column_names, reference.column_names
    for i, (np_, nr) in enumerate(zip(names_p, names_r, strict=True)):
        if opts.ignore_engine_chosen_names and i < len(shape.engine_named) \
                and shape.engine_named[i] and not shape.has_star:
            continue
        same = np_.lower() == nr.lower() if opts.case_insensitive_names else np_ == nr
        if not same:
            return Verdict("schema", f"column {i + 1} is named {np_!r} on primary but {nr!r} on "
                           "reference", evidence), primary, reference, rules
    p_cols, r_cols = [], []
    for i in range(primary.num_columns):
        tp, tr = primary.schema.field(i).type, reference.schema.field(i).type
        common = compared_type(tp, tr, opts)
        if common is None:
            return Verdict("schema", f"column {names_r[i]!r} is {tp} on primary but {tr} on "
                           "reference", evidence), primary, reference, rules
        rule = ColumnRule(tp, tr)
        p_target = r_target = common
        if pa.types.is_floating(common) and _kind(tp) != _kind(tr) and "null" not in (
                _kind(tp), _kind(tr)):
            exact = "p" if not pa.types.is_floating(tp) else "r"
            column = primary.column(i) if exact == "p" else reference.column(i)
            if not _exact_side_fits_float(column):
                rule.exact_side = exact
                kept = tp if exact == "p" else tr
                if pa.types.is_integer(kept) and kept != pa.uint64():
                    kept = pa.int64()
                p_target, r_target = (kept, common) if exact == "p" else (common, kept)
        try:
            p_cols.append(_cast(primary.column(i), p_target))
            r_cols.append(_cast(reference.column(i), r_target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            return Verdict("schema", f"column {names_r[i]!r}: cannot compare {tp} with {tr} "
                           f"({exc})", evidence), primary, reference, rules
        rules.append(rule)
    names = [f"c{i}" for i in range(primary.num_columns)]
    return None, pa.table(p_cols, names=names), pa.table(r_cols, names=names), rules


def error_class(exc: BaseException) -> str:
    """The class name compared when both sides fail.

    An error re-raised from another process (the benchmark's workers) carries
    the original class name in ``error_class``.
    """
    return str(getattr(exc, "error_class", None) or type(exc).__name__)


def error_kind(exc: BaseException) -> str:
    """What kind of failure ``exc`` is: its ``kind`` (``gateway.errors``), else its class name."""
    kind = getattr(exc, "kind", None)
    return kind if isinstance(kind, str) else error_class(exc)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{error_class(exc)}: {text[0] if text else ''}"


def _describe_error(exc: BaseException) -> dict[str, Any]:
    return {"class": error_class(exc), "kind": error_kind(exc), "message": str(exc)}
