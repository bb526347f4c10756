"""The fused aggregation: group keys and aggregates the compiled scanner computes on the raw bytes.

:func:`plan` decides whether the scanner can compute a whole aggregation (keys:
a column, a number rounded, a date or timestamp truncated; aggregates: count,
sum, avg, min and max of a column) and lays out its scan; :func:`run` runs it
and hands back the keys and aggregates as Arrow arrays. Nothing here imports
sqlglot: the planner (:func:`gateway_csv.query.fused_aggregate`) and the
aggregations read without it (:mod:`gateway_csv.shape_aggregation`) describe their keys and
aggregates in these terms, so both take this path for the same statements and
answer alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import pyarrow as pa

from gateway.cli.startup import sort_functions
from gateway.drivers import arrow_values
from gateway.records import FrozenRecord, Record
from gateway_csv import _scanner
from gateway_csv.columns import arrow_type
from gateway_csv.layout import DATE, FLOAT, INT, TS, TSTZ, Layout
from gateway_csv.scan import MAX_COLUMNS, Plan, Scanner

# Shared with _scanner.c
F_IDENT, F_YEAR, F_MONTH, F_DAY, F_HOUR, F_ROUND = range(6)
F_TRUNC_YEAR, F_TRUNC_MONTH, F_TRUNC_DAY, F_TRUNC_HOUR, F_TRUNC_MINUTE, F_TRUNC_SECOND = \
    range(6, 12)
A_COUNT_STAR, A_COUNT, A_SUM, A_AVG, A_MIN, A_MAX = range(6)
#: DuckDB's algebraic aggregates, answered as DOUBLE: of one INTEGER, BIGINT or DOUBLE column,
#: and (A_COVAR_SAMP, A_COVAR_POP, A_CORR) of two, ``corr(y, x)`` in that order
A_VAR_SAMP, A_VAR_POP, A_STDDEV_SAMP, A_STDDEV_POP, A_COVAR_SAMP, A_COVAR_POP, A_CORR = \
    range(A_MAX + 1, A_MAX + 8)
STATISTICS = (A_VAR_SAMP, A_VAR_POP, A_STDDEV_SAMP, A_STDDEV_POP, A_COVAR_SAMP, A_COVAR_POP,
              A_CORR)
BINARY = (A_COVAR_SAMP, A_COVAR_POP, A_CORR)
#: holistic aggregates (_scanner.c's "holistic aggregates"): a group's values held, DuckDB's
#: quantile_cont (median: q = 0.5) and a group's k first values (gateway_csv.topn's rows;
#: plan's ``top`` gives k, the direction and the NULLs' place)
A_MEDIAN, A_TOP = A_CORR + 1, A_CORR + 2
#: the holistic aggregates' column kinds
_HELD_KINDS = (INT, FLOAT)
#: a factor of an aggregate's product (_scanner.c's Factor): x, lit + x, lit - x, x + lit, x - lit
X, LIT_PLUS, LIT_MINUS, X_PLUS, X_MINUS = range(5)
#: factors one product holds (MAX_FACTORS in _scanner.c)
MAX_FACTORS = 4
#: one factor: (column index, X ..., the literal)
Factor = tuple[int, int, float]

#: the scanner's key function truncating to each grain of gateway_csv.temporal (YEAR ...
#: MICROSECOND); at MICROSECOND the value itself is the key
TRUNC_FNS = (F_TRUNC_YEAR, F_TRUNC_MONTH, F_TRUNC_DAY, F_TRUNC_HOUR, F_TRUNC_MINUTE,
             F_TRUNC_SECOND, F_IDENT)
_TEMPORAL_KINDS = (TS, TSTZ, DATE)


class DerivedKey(FrozenRecord):
    """A group key computed after the scan from the scanner's truncated one: strftime,
    date_part or date_trunc of the timestamps truncated to the grain they need.

    Attributes:
        compute: the key of the truncated values (an array of the same length).
        one_to_one: distinct truncated values give distinct keys; when not, the
            groups that now share every key are folded into one.
    """

    __slots__ = ("compute", "one_to_one")
    compute: Final[Callable[[pa.Array], pa.Array]]
    one_to_one: Final[bool]

    def __init__(self, compute: Callable[[pa.Array], pa.Array], one_to_one: bool) -> None:
        self.compute, self.one_to_one = compute, one_to_one


class Key(FrozenRecord):
    """One group key: the scanner's function (F_*) of a column, finished by ``derived``."""

    __slots__ = ("column", "fn", "derived")
    column: Final[int]
    fn: Final[int]
    derived: Final[DerivedKey | None]

    def __init__(self, column: int, fn: int, derived: DerivedKey | None = None) -> None:
        self.column, self.fn, self.derived = column, fn, derived


class FusedAggregate(Record):
    """A whole aggregation the scanner computes: keys and aggregates on raw bytes.

    Attributes:
        key_columns, agg_columns: per key, (column index, fn); per aggregate, (fn,
            column index or -1).
        derived: per key, what computes it from the truncated key after the scan,
            or None when the scanner's key is the answer.
    """

    __slots__ = ("slots", "filters", "keys", "aggs", "key_columns", "agg_columns", "derived")

    def __init__(self, slots: tuple[tuple[int, int], ...],
                 filters: tuple[tuple[int, int, str, Any], ...], keys: tuple[tuple[int, int], ...],
                 aggs: tuple[tuple[Any, ...], ...], key_columns: list[tuple[int, int]],
                 agg_columns: list[tuple[int, int]], derived: list[DerivedKey | None]) -> None:
        self.slots, self.filters, self.keys, self.aggs = slots, filters, keys, aggs
        self.key_columns, self.agg_columns, self.derived = key_columns, agg_columns, derived


def native_column(layout: Layout, name: str) -> int | None:
    """The index of the column ``name``, when the scanner reads it as its own type (no
    conversion after the scan), as the fused scan needs."""
    idx = layout.column_index(name)
    if idx is not None and layout.scan_kind(idx) == layout.kinds[idx]:
        return idx
    return None


def plan(layout: Layout, keys: Sequence[Key], aggs: Sequence[tuple[int, int]],
         filters: Sequence[tuple[int, int, str, Any]],
         products: Sequence[tuple[Factor, ...] | None] = (),
         seconds: Sequence[int] = (),
         top: tuple[int, bool, bool] | None = None,
         quantiles: Sequence[float | None] = ()) -> FusedAggregate | None:
    """The fused plan of an aggregation, or None when the scanner cannot compute it.

    Args:
        keys: the group keys, each of a column :func:`native_column` found.
        aggs: (A_*, column index or -1 for count(*)) of each aggregate.
        products: per aggregate, None or the factors of the product it sums or
            averages (each of a DOUBLE column), its column then the first factor's.
        top: an A_TOP aggregate's (k, descending, nulls first).
        quantiles: per aggregate, None or an A_MEDIAN's quantile (quantile_cont(x, q)).
        filters: the WHERE conditions the scan applies, by column index
            (:func:`gateway_csv.query.pushdown`).
        seconds: per aggregate, the column index of its second argument (covar_samp,
            covar_pop, corr), else -1.
    """
    wanted: set[int] = set()
    for k in keys:
        kind = layout.scan_kind(k.column)
        if (k.fn in (F_YEAR, F_MONTH, F_DAY, F_HOUR) or k.derived is not None) and \
                kind not in _TEMPORAL_KINDS:
            return None
        if k.fn == F_ROUND and kind not in (INT, FLOAT):
            return None
        wanted.add(k.column)
    if any(fn in STATISTICS or fn == A_MEDIAN for fn, _ in aggs) and \
            any(k.derived is not None and not k.derived.one_to_one for k in keys):
        # groups folded after the scan (strftime(ts, '%m') of two years) would join their
        # statistics' states by Chan's formulas where DuckDB folds their rows in one by
        # one, and put a median's values in another order than DuckDB's, which may pick
        # the other of -0.0 and 0.0
        return None
    products = list(products) + [None] * (len(aggs) - len(products))
    quantiles = list(quantiles) + [None] * (len(aggs) - len(quantiles))
    if any(q is not None and (fn != A_MEDIAN or not 0 <= q <= 1)
           for (fn, _), q in zip(aggs, quantiles, strict=True)):
        return None
    seconds = list(seconds) + [-1] * (len(aggs) - len(seconds))
    for (fn, col), second in zip(aggs, seconds, strict=True):
        if (fn in BINARY) != (second >= 0):
            return None
        if fn in STATISTICS:
            if any(layout.scan_kind(c) not in (INT, FLOAT) for c in (col, second) if c >= 0):
                return None
            wanted.update(c for c in (col, second) if c >= 0)
    for (fn, col), product in zip(aggs, products, strict=True):
        if fn in STATISTICS:
            if product is not None:
                return None
            continue
        if product is not None:
            if fn not in (A_SUM, A_AVG) or not 1 <= len(product) <= MAX_FACTORS or \
                    col != product[0][0] or \
                    any(layout.scan_kind(c) != FLOAT or layout.kinds[c] != FLOAT for c, _, _ in product):
                return None
            wanted.update(c for c, _, _ in product)
            continue
        if fn == A_COUNT_STAR:
            continue
        kind = layout.scan_kind(col)
        if fn in (A_MEDIAN, A_TOP) and (kind not in _HELD_KINDS or (fn == A_TOP) != (top is not None)):
            return None
        if fn in (A_SUM, A_AVG) and kind not in (INT, FLOAT):
            return None
        if fn in (A_MIN, A_MAX) and kind not in (INT, FLOAT, *_TEMPORAL_KINDS):
            return None
        wanted.add(col)
    wanted.update(col for col, *_ in filters)
    order = sorted(wanted)
    slot_of = {col: i for i, col in enumerate(order)}
    if len(order) > MAX_COLUMNS or len(keys) > 64 or len(aggs) > 64:
        return None
    return FusedAggregate(
        slots=tuple((col, layout.scan_kind(col)) for col in order),
        filters=tuple((slot_of[c], op, ct, v) for c, op, ct, v in filters),
        keys=tuple((slot_of[k.column], k.fn) for k in keys),
        aggs=tuple((fn, slot_of[c], slot_of[second]) if second >= 0 else
                   (fn, slot_of[c], top) if fn == A_TOP else
                   (fn, slot_of[c], (q,)) if q is not None else
                   (fn, slot_of[c] if c >= 0 else -1) if product is None else
                   (fn, slot_of[c], tuple((slot_of[fc], op, lit) for fc, op, lit in product))
                   for (fn, c), product, second, q in zip(aggs, products, seconds, quantiles,
                                                          strict=True)),
        key_columns=[(k.column, k.fn) for k in keys], agg_columns=list(aggs),
        derived=[k.derived for k in keys],
    )


def run(scanners: list[Scanner], fused: FusedAggregate) -> tuple[list[pa.Array], list[pa.Array], int]:
    """(group keys, aggregates, number of groups) of the fused scan of every file (each of
    the first file's layout), as Arrow arrays of DuckDB's types (an integer sum past
    BIGINT a DECIMAL(38, 0))."""
    layout = scanners[0].layout
    scan = Plan(slots=fused.slots, filters=fused.filters, keys=fused.keys, aggs=fused.aggs)
    states = _combined(scanners, scan)
    if any(fused.derived):
        return _run_derived(layout, fused, states)
    types = [_key_type(layout.kinds[col], fn) for col, fn in fused.key_columns]
    n, key_buffers, agg_buffers = _scanner.export_columns(
        states, "".join(_CODES.get(t, "q") for t in types), True)
    del states
    if not fused.keys and n == 0:
        return [], [arrow_values.array([0] if fn in (A_COUNT_STAR, A_COUNT) else [None],
                                       _agg_type(layout, fn, col, 0))
                    for fn, col in fused.agg_columns], 1
    keys = []
    for (col, fn), type_, buffers in zip(fused.key_columns, types, key_buffers, strict=True):
        arr = _array(type_, n, buffers)
        keys.append(_first_days(arr.to_pylist(), fn, layout.kinds[col])
                    if fn in (F_TRUNC_YEAR, F_TRUNC_MONTH) else arr)
    aggs = []
    for (fn, col), buffers in zip(fused.agg_columns, agg_buffers, strict=True):
        wide = buffers[4]
        if wide > 1:
            raise pa.ArrowInvalid("an integer sum passes 38 digits, which DECIMAL(38, 0) holds")
        aggs.append(_array(_agg_type(layout, fn, col, wide), n, buffers))
    return keys, aggs, n


def run_top(scanners: list[Scanner], fused: FusedAggregate) -> tuple[list[pa.Array], pa.Array]:
    """The rows of a plan of one A_TOP aggregate: per row, its group's keys (plain columns)
    and the value kept (:func:`run`'s keys repeated, by ``_scanner.export_top``).

    Raises:
        ValueError: a group's rows are not determined (see ``held_top`` in _scanner.c).
    """
    layout = scanners[0].layout
    states = _combined(scanners, Plan(slots=fused.slots, filters=fused.filters, keys=fused.keys,
                                      aggs=fused.aggs))
    rows, groups, values, validity, nulls = _scanner.export_top(states, 0)
    types = [_key_type(layout.kinds[col], fn) for col, fn in fused.key_columns]
    n, key_buffers, _ = _scanner.export_columns(
        states, "".join(_CODES.get(t, "q") for t in types), True)
    del states
    call, _ = sort_functions()
    take = pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(groups)])
    keys = [call("take", [_array(type_, n, buffers), take])
            for type_, buffers in zip(types, key_buffers, strict=True)]
    fn, col = fused.agg_columns[0]
    return keys, _array(_agg_type(layout, fn, col, 0), rows,
                        (validity, values, None, nulls, 0))


#: groups of chunks merged at once, partition by partition (memory: these and the
#: merged groups, not every chunk's groups; 4, not 8: q2's peak 10 MB lower, as fast)
_BATCH = 4
#: the tasks one batch's partitions are merged in
_TASKS = 8
#: export_columns' letter of each key type (any other: int64)
_CODES = {pa.string(): "s", pa.float64(): "d", pa.date32(): "i", pa.bool_(): "b"}


def _combined(scanners: list[Scanner], scan: Plan) -> list[Any]:
    """The scan's groups as AggStates to export one after another: a lone chunk's state,
    or every chunk's merged partition by partition (``_scanner.absorb``, on the scanner
    threads, several partitions at once: no group is merged twice, and no table grows
    past a cache's size on the way)."""
    parts: Any = None
    batch: list[Any] = []
    pool = scanners[0].pool
    try:
        for scanner in scanners:
            for _rows, partial in scanner.results(scan):
                batch.append(partial)
                if len(batch) == _BATCH:
                    parts = _absorb(pool, parts, batch)
                    batch = []
            partial = None  # the last one's arrays go back with the batch's
        if parts is None and len(batch) == 1:
            return batch
        if batch:
            parts = _absorb(pool, parts, batch)
            batch = []
        return list(parts)
    finally:
        # the scans' freed table arrays, kept for the next scan's, go back to the system
        # before the export writes the answer beside the merged groups
        batch = []
        _scanner.pool_release()


def _absorb(pool: Any, parts: Any, batch: list[Any]) -> Any:
    if parts is None:
        parts = batch[0].partitions()
    step = -(-_scanner.AGG_PARTS // _TASKS)
    tasks = [pool.submit(_scanner.absorb, parts, batch, first, min(first + step, _scanner.AGG_PARTS))
             for first in range(0, _scanner.AGG_PARTS, step)]
    for task in tasks:
        task.result()
    return parts


def _run_derived(layout: Layout, fused: FusedAggregate, states: list[Any]) \
        -> tuple[list[pa.Array], list[pa.Array], int]:
    """:func:`run` of keys computed after the scan (strftime, date_part, date_trunc), whose
    groups may fold into fewer: through one state and Python values (few groups)."""
    state = states[0]
    for other in states[1:]:
        state.merge(other)
    key_values, agg_values = state.export()
    n = state.groups
    keys = []
    for (col, fn), values in zip(fused.key_columns, key_values, strict=True):
        kind = layout.kinds[col]
        if fn in (F_TRUNC_YEAR, F_TRUNC_MONTH):
            keys.append(_first_days(values, fn, kind))
        else:
            keys.append(arrow_values.array(values, _key_type(kind, fn)))
    keys, folded = _finish_keys(keys, fused)
    if folded is not None:
        call, _ = sort_functions()
        ids, agg_values = state.fold(folded[0]).export()
        keys = [call("take", [k, arrow_values.array(ids[0], pa.int64())]) for k in folded[1]]
        n = len(ids[0])
    aggs = []
    for (fn, col), values in zip(fused.agg_columns, agg_values, strict=True):
        wide = fn == A_SUM and layout.kinds[col] != FLOAT and \
            not all(v is None or -(2**63) <= v < 2**63 for v in values)
        aggs.append(arrow_values.array(values, _agg_type(layout, fn, col, int(wide))))
    return keys, aggs, n


def _key_type(kind: int, fn: int) -> pa.DataType:
    """The Arrow type of the scanner's key ``fn`` of a column of ``kind`` (F_TRUNC_YEAR and
    F_TRUNC_MONTH: the year or month number, made a first day after)."""
    if fn == F_IDENT or fn > F_TRUNC_MONTH:
        return arrow_type(kind)
    if fn == F_ROUND and kind != INT:
        return pa.float64()
    return pa.int64()


def _agg_type(layout: Layout, fn: int, col: int, wide: int) -> pa.DataType:
    """The Arrow type of an aggregate (``wide``: an integer sum passes BIGINT)."""
    if fn in (A_COUNT_STAR, A_COUNT):
        return pa.int64()
    if fn in (A_AVG, A_MEDIAN) or fn in STATISTICS:
        return pa.float64()
    if fn == A_SUM and layout.kinds[col] != FLOAT:
        return pa.decimal128(38, 0) if wide else pa.int64()
    return arrow_type(layout.kinds[col])  # min, max, and the values A_TOP keeps


def _array(type_: pa.DataType, n: int, buffers: tuple[bytes, bytes, bytes | None, int, int]) \
        -> pa.Array:
    """export_columns' buffers of one column as an Arrow array (wrapped, not copied)."""
    validity, values, data, nulls, _ = buffers
    held = [pa.py_buffer(validity) if nulls else None, pa.py_buffer(values)]
    if data is not None:
        held.append(pa.py_buffer(data))
    return pa.Array.from_buffers(type_, n, held, nulls)


def _finish_keys(keys: list[pa.Array], fused: FusedAggregate) \
        -> tuple[list[pa.Array], tuple[list[int], list[pa.Array]] | None]:
    """The keys strftime, date_part and date_trunc give of the scanner's truncated keys.

    Returns the keys, and when two groups now share every key (strftime('%m', ts) of
    two years' Januaries), the group id of each scanner group and the distinct keys
    the ids index, for ``AggState.fold`` to merge their aggregates. (Plain Python on
    the few groups: Arrow's group_by would import pyarrow.compute, see gateway.cli.startup.)
    """
    finished = [arr if derived is None else derived.compute(arr)
                for arr, derived in zip(keys, fused.derived, strict=True)]
    if all(derived is None or derived.one_to_one for derived in fused.derived):
        return finished, None
    ids: dict[tuple[Any, ...], int] = {}
    group_ids = [ids.setdefault(row, len(ids))
                 for row in zip(*(_hashable(k) for k in finished), strict=True)]
    if len(ids) == len(group_ids):
        return finished, None
    first: dict[int, int] = {}
    for group, new in enumerate(group_ids):
        first.setdefault(new, group)
    call, _ = sort_functions()
    take = arrow_values.array([first[new] for new in range(len(ids))], pa.int64())
    return finished, (group_ids, [call("take", [k, take]) for k in finished])


def _hashable(arr: pa.Array) -> list[Any]:
    """The values, NaN as one value (NaN != NaN would keep every NaN key apart)."""
    values = arr.to_pylist()
    if pa.types.is_floating(arr.type):
        return [("NaN",) if v is not None and v != v else v for v in values]
    return values


def _first_days(values: list[int | None], fn: int, kind: int) -> pa.Array:
    """The scanner's year (F_TRUNC_YEAR) or year * 12 + month - 1 (F_TRUNC_MONTH) keys as
    the first day of that year or month, a date or timestamp as the column is."""
    days = [None if v is None else
            _days_from_civil(v, 1) if fn == F_TRUNC_YEAR else _days_from_civil(v // 12, v % 12 + 1)
            for v in values]
    if kind == DATE:
        return arrow_values.array(days, pa.date32())
    return arrow_values.array([None if d is None else d * 86_400_000_000 for d in days],
                              arrow_type(kind))


def _days_from_civil(year: int, month: int) -> int:
    """Days since 1970-01-01 of the first of a month (any year, as the scanner's C)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


__all__ = [
    "A_AVG",
    "A_CORR",
    "A_COUNT",
    "A_COUNT_STAR",
    "A_COVAR_POP",
    "A_COVAR_SAMP",
    "A_MAX",
    "A_MEDIAN",
    "A_MIN",
    "A_STDDEV_POP",
    "A_STDDEV_SAMP",
    "A_SUM",
    "A_TOP",
    "A_VAR_POP",
    "A_VAR_SAMP",
    "BINARY",
    "F_DAY",
    "F_HOUR",
    "F_IDENT",
    "F_MONTH",
    "F_ROUND",
    "F_TRUNC_DAY",
    "F_TRUNC_HOUR",
    "F_TRUNC_MINUTE",
    "F_TRUNC_MONTH",
    "F_TRUNC_SECOND",
    "F_TRUNC_YEAR",
    "F_YEAR",
    "LIT_MINUS",
    "LIT_PLUS",
    "MAX_FACTORS",
    "STATISTICS",
    "TRUNC_FNS",
    "X_MINUS",
    "X_PLUS",
    "DerivedKey",
    "Factor",
    "FusedAggregate",
    "Key",
    "X",
    "native_column",
    "plan",
    "run",
    "run_top",
]
