"""Running an analysed query: the fused aggregation (:mod:`gateway_csv.fused`), or scanner
columns finished by Arrow.

Aggregations end in one shape, whichever path computed them: group key arrays
and aggregate arrays, on which HAVING, the select list and ORDER BY are
evaluated (:func:`finish_aggregate`). Plain queries stream batch by batch
unless they sort or deduplicate.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterator
from typing import Any, ClassVar

import pyarrow as pa
from sqlglot import exp

from gateway.drivers import arrow_values
from gateway.errors import QueryError, Unsupported
from gateway_csv import _scanner, fused
from gateway_csv.columns import answer_table, limited, ordered, scanned, sliced
from gateway_csv.compute import FALSE, ZERO, Frame, broadcast, pc, whole
from gateway_csv.query import ENGINES_FOR_MORE, STATISTICS, Query, column_plan, fused_aggregate, key
from gateway_csv.scan import Scanner


def scan_columns(scanners: list[Scanner], query: Query, limit: int = -1) \
        -> Iterator[tuple[Frame, list[exp.Expression]]]:
    """Frames of the needed columns, batch by batch, with pushed-down filters applied."""
    for scanner in scanners:
        slots, filters, rest, _ = column_plan(query, scanner.layout)
        for rows, columns in scanned(scanner, slots, filters, limit if not rest else -1):
            yield Frame(columns, rows), rest


def filtered(frame: Frame, rest: list[exp.Expression]) -> Frame:
    if not rest:
        return frame
    mask: Any = None
    for cond in rest:
        m = frame.evaluate(cond)
        if isinstance(m, pa.Scalar) or m.type != pa.bool_():
            m = broadcast(m, frame.length)
            if pa.types.is_null(m.type):  # WHERE NULL: unknown, so no row, as in DuckDB
                m = m.cast(pa.bool_())
            if m.type != pa.bool_():
                raise QueryError("WHERE needs a boolean condition", kind="type")
        mask = m if mask is None else pc.and_kleene(mask, m)
    table = pa.table(dict(frame.columns)) if frame.columns else None
    keep = pc.fill_null(mask, FALSE)
    if table is None:
        return Frame({}, int(pc.sum(keep).as_py() or 0))
    table = table.filter(keep)
    return Frame({n: whole(table.column(n)) for n in table.column_names},
                 table.num_rows)


# ------------------------------------------------------------- aggregation

def aggregate(scanners: list[Scanner], query: Query) -> pa.Table:
    """The answer to an aggregate query."""
    layout = scanners[0].layout
    plan = fused_aggregate(query, layout)
    if plan is not None and all(s.layout.names == layout.names and
                                s.layout.kinds == layout.kinds for s in scanners):
        keys, aggs, n = fused.run(scanners, plan)
    else:
        try:
            keys, aggs, n = _arrow_aggregate(scanners, query)
        except _SumsPastBigint:  # rare: scanned again, summing in DECIMAL(38, 0)
            keys, aggs, n = _arrow_aggregate(scanners, query, exact=True)
    return finish_aggregate(query, keys, aggs, n)


_ARROW_AGGS = {exp.Sum: "sum", exp.Avg: "mean", exp.Min: "min", exp.Max: "max"}


class _SumsPastBigint(Exception):
    """An integer sum could pass BIGINT's range: Arrow's would wrap around, silently."""


def _arrow_aggregate(scanners: list[Scanner], query: Query, exact: bool = False) \
        -> tuple[list[pa.Array], list[pa.Array], int]:
    """Aggregates through Arrow's grouping.

    Arrow's sums of int64 wrap around past 2**63 without a word, where DuckDB's
    are HUGEINT. Integer sums are added up as int64 while the rows' largest
    magnitudes bound every sum below 2**63 (one min_max a batch); past that the
    scan raises :class:`_SumsPastBigint` and the caller runs it again with
    ``exact``, which adds them up as DECIMAL(38, 0) (three times the cost of
    int64 sums, so not by default).
    """
    specs: list[tuple[Any, ...]] = []
    arg_nodes: list[exp.Expression | None] = []
    #: min/max aggregate -> index of the extra spec counting its NaNs (Arrow skips
    #: NaN in min/max; DuckDB orders NaN above every number)
    nan_specs: dict[int, int] = {}
    for j, agg in enumerate(query.aggregates):
        arg = agg.this
        name = f"__a{j}"
        if type(agg) in STATISTICS:
            # Arrow's variance is not DuckDB's streaming one, bit for bit
            raise Unsupported(f"the csv engine computes {agg.key} only in its fused scan (of "
                              "columns, grouped by columns, filtered by comparisons with "
                              "constants)", engines=ENGINES_FOR_MORE)
        if isinstance(agg, exp.Count):
            if isinstance(arg, exp.Star):
                specs.append(([], "count_all"))
                arg_nodes.append(None)
                continue
            if isinstance(arg, exp.Distinct):
                if len(arg.expressions) != 1:
                    raise Unsupported("the csv engine does not run count(DISTINCT a, b)",
                                      engines=ENGINES_FOR_MORE)
                specs.append((name, "count_distinct", pc.CountOptions(mode="only_valid")))
                arg_nodes.append(arg.expressions[0])
                continue
            specs.append((name, "count", pc.CountOptions(mode="only_valid")))
            arg_nodes.append(arg)
            continue
        if isinstance(arg, exp.Distinct):
            raise Unsupported(f"the csv engine does not run {type(agg).__name__.lower()}"
                              "(DISTINCT ...)", engines=ENGINES_FOR_MORE)
        if type(agg) not in _ARROW_AGGS:  # median: the fused scan's alone
            raise Unsupported(f"the csv engine runs {type(agg).__name__.lower()} only of a "
                              "numeric column, in a grouping its scan computes whole",
                              engines=ENGINES_FOR_MORE)
        specs.append((name, _ARROW_AGGS[type(agg)]))
        arg_nodes.append(arg)
        if isinstance(agg, exp.Min | exp.Max):
            nan_specs[j] = len(nan_specs) + len(query.aggregates)

    specs += [(f"__nan{j}", "sum") for j in nan_specs]
    #: min/max aggregate -> the indexes of its counters of 0.0 and of -0.0: Arrow keeps
    #: the first of equal doubles, DuckDB the later one, so a group whose min or max is a
    #: zero of both signs has an answer only DuckDB's row order gives
    zero_specs = {j: (len(specs) + 2 * i, len(specs) + 2 * i + 1)
                  for i, j in enumerate(nan_specs)}
    specs += [spec for j in nan_specs for spec in ((f"__pz{j}", "sum"), (f"__nz{j}", "sum"))]
    key_names = [f"__k{i}" for i in range(len(query.group))]
    # count(DISTINCT x) decomposes when x is one expression: the partials are
    # grouped by the keys and x, so what is held is the distinct (group, x)
    # pairs, not the rows. Distinct counts of two expressions would need their
    # pairs apart; those queries keep the needed columns whole.
    distinct_args = [node for node, spec in zip(arg_nodes, specs, strict=False)  # + NaN counters
                     if spec[1] == "count_distinct" and node is not None]
    one_distinct = len({key(node) for node in distinct_args}) == 1
    distinct_node = distinct_args[0] if one_distinct else None
    merger = None if distinct_args and not one_distinct \
        else _Partials(specs, distinct="__d" if one_distinct else None)
    #: sum and avg of integers: an average is its exact sum divided as a double by its
    #: count (Arrow's own mean adds integers up as doubles, losing the low digits of
    #: 2**63-sized values that cancel out)
    exact_sums = {j for j, spec in enumerate(specs[:len(query.aggregates)])
                  if spec[1] in ("sum", "mean")}
    #: sums and averages of any numbers: those of HUGEINT values are bounded too
    totals = {j for j, spec in enumerate(specs[:len(query.aggregates)])
              if spec[1] in ("sum", "mean")}
    huge_bounds = dict.fromkeys(totals, 0)
    #: per sum of doubles: the sum of the finite magnitudes, past which order matters
    float_bounds = dict.fromkeys(totals, 0.0)
    widened: set[int] = set()
    #: per integer sum: the most any of its sums can be (rows times largest magnitude)
    bounds = dict.fromkeys(exact_sums, 0)
    parts: list[pa.RecordBatch] = []
    for frame, rest in scan_columns(scanners, query):
        frame = filtered(frame, rest)
        cols: dict[str, pa.Array] = {}
        for i, g in enumerate(query.group):
            arr = frame.array(g)
            if pa.types.is_floating(arr.type):
                arr = one_zero_one_nan(arr)
            cols[f"__k{i}"] = arr
        for j, node in enumerate(arg_nodes):
            if node is not None:
                arg = frame.array(node)
                if j in nan_specs:
                    nan = pc.fill_null(pc.is_nan(arg), FALSE) if pa.types.is_floating(arg.type) \
                        else pa.nulls(len(arg), pa.bool_()).fill_null(FALSE)
                    cols[f"__nan{j}"] = nan.cast(pa.int64())
                    if pa.types.is_floating(arg.type):
                        arg = pc.if_else(nan, arrow_values.scalar(None, arg.type), arg)
                    cols[f"__pz{j}"], cols[f"__nz{j}"] = _zero_signs(arg)
                if j in totals and pa.types.is_decimal(arg.type):
                    low, high = (v.as_py() or 0 for v in pc.min_max(arg).values())
                    huge_bounds[j] += max(abs(low), abs(high)) * frame.length
                    if huge_bounds[j] >= 10**38:
                        # Arrow's DECIMAL(38, 0) sum wraps around past 38 digits, where
                        # DuckDB's HUGEINT goes on to 2**127 and then fails
                        raise Unsupported("the csv engine does not add up HUGEINT values "
                                          "whose sum can pass 38 digits",
                                          engines=ENGINES_FOR_MORE)
                if j in totals and pa.types.is_floating(arg.type):
                    finite = pc.if_else(pc.is_finite(arg), pc.abs(arg),
                                        arrow_values.scalar(0.0, arg.type))
                    float_bounds[j] += pc.sum(finite).as_py() or 0.0
                    if not float_bounds[j] <= _DOUBLE_MAX:
                        # a partial sum may pass the largest double: whether it becomes
                        # inf, -inf or NaN then depends on the order of the additions,
                        # DuckDB's row order, which partials grouped otherwise lose
                        raise Unsupported("the csv engine does not add up doubles whose "
                                          "sum can pass the largest double",
                                          engines=ENGINES_FOR_MORE)
                if j in exact_sums and pa.types.is_integer(arg.type):
                    if exact:
                        arg = arg.cast(_EXACT_SUM)
                        widened.add(j)
                    else:
                        low, high = (v.as_py() or 0 for v in pc.min_max(arg).values())
                        bounds[j] += max(abs(low), abs(high)) * frame.length
                        if bounds[j] >= 2**63:
                            raise _SumsPastBigint
                if specs[j][1] == "count_distinct" and pa.types.is_floating(arg.type):
                    arg = one_zero_one_nan(arg)
                cols[f"__a{j}"] = arg
        if distinct_node is not None:
            arr = frame.array(distinct_node)
            if pa.types.is_floating(arr.type):
                arr = one_zero_one_nan(arr)
            cols["__d"] = broadcast(arr, frame.length)
        cols["__n"] = pa.nulls(frame.length, pa.bool_())
        batch = pa.RecordBatch.from_pydict(cols)
        if merger is not None:
            merger.add(pa.Table.from_batches([batch]), key_names)
        else:
            parts.append(batch)
    if merger is not None:
        keys, aggs, n = merger.result(key_names)
        _refuse_tied_zeros(aggs, zero_specs)
        return keys, _exact_sums(_with_nans(query, aggs, nan_specs), widened), n
    # distinct counts of several expressions: aggregate the columns whole
    table = pa.Table.from_batches(parts)
    whole_specs = list(specs)
    counts: dict[int, int] = {}  # the average of integers at j: its sum, and its count
    for j, spec in enumerate(specs):
        if spec[1] == "mean" and not pa.types.is_floating(table.column(spec[0]).type):
            whole_specs[j] = (spec[0], "sum")
            counts[j] = len(whole_specs)
            whole_specs.append((spec[0], "count", pc.CountOptions(mode="only_valid")))
    grouped = _group_by(table, key_names, whole_specs)
    keys = [whole(grouped.column(k)) for k in key_names]
    aggs = []
    for spec in whole_specs:
        name = "count_all" if spec[1] == "count_all" else f"{spec[0]}_{spec[1]}"
        aggs.append(whole(grouped.column(name)))
    for j, count in counts.items():
        aggs[j] = _average(aggs[j], aggs[count], bool(key_names))
    _refuse_tied_zeros(aggs, zero_specs)
    return keys, _exact_sums(_with_nans(query, aggs[:len(specs)], nan_specs), widened), \
        grouped.num_rows


def _average(total: pa.Array, count: pa.Array, grouped: bool) -> pa.Array:
    """A sum over its count, as a double (NULL over no value); an exact sum (integers or
    DECIMAL(38, 0)) as DuckDB divides it (``_scanner.average``, the fused scan's own):
    ``grouped``, in a long double (a double's division differed in the last bit for 38 of
    200 groups of BIGINTs near 2**63), else as doubles."""
    if isinstance(total, pa.ChunkedArray):
        total = total.combine_chunks()
    if isinstance(count, pa.ChunkedArray):
        count = count.combine_chunks()
    no_count = arrow_values.scalar(0, pa.int64())  # (a Python 0 makes pyarrow import pandas)
    count = pc.fill_null(count.cast(pa.int64()), no_count)
    none = pc.equal(count, no_count)
    if pa.types.is_floating(total.type):  # a sum of doubles over its count
        return pc.if_else(none, arrow_values.scalar(None, pa.float64()),
                          pc.divide(total, count.cast(pa.float64())))
    if len(count) == 0:
        return pa.array([], pa.float64())
    width = 16 if pa.types.is_decimal(total.type) else 8
    if width == 8:
        total = total.cast(pa.int64())
    sums = total.buffers()[1]
    counts = count.buffers()[1]
    doubles = _scanner.average(
        memoryview(sums)[total.offset * width:(total.offset + len(total)) * width],
        width, memoryview(counts)[count.offset * 8:(count.offset + len(count)) * 8], grouped)
    quotient = pa.Array.from_buffers(pa.float64(), len(count), [None, pa.py_buffer(doubles)])
    return pc.if_else(none, arrow_values.scalar(None, pa.float64()), quotient)


def _group_by(table: pa.Table, keys: list[str], aggregations: list[tuple[Any, ...]]) -> pa.Table:
    """``table.group_by(keys, use_threads=False).aggregate(aggregations)``, on Acero's
    plan nodes themselves: ``Table.group_by`` imports ``pyarrow.acero``, which imports
    ``pyarrow.dataset``, and that imports pandas (0.2 s)."""
    from pyarrow._acero import AggregateNodeOptions, Declaration, TableSourceNodeOptions

    named = []
    for target, func, *options in aggregations:
        targets = target if isinstance(target, list) else [target]
        named.append((targets, f"hash_{func}" if keys else func, options[0] if options else None,
                      "_".join([*targets, func])))
    return Declaration.from_sequence([
        Declaration("table_source", TableSourceNodeOptions(table)),
        Declaration("aggregate", AggregateNodeOptions(named, keys=keys)),
    ]).to_table(use_threads=False)


_DOUBLE_MAX = sys.float_info.max
#: the type integer sums are added up in: DuckDB's sum of integers is a HUGEINT
_EXACT_SUM = pa.decimal128(38, 0)


def _exact_sums(aggs: list[pa.Array], exact: set[int]) -> list[pa.Array]:
    """The DECIMAL(38, 0) sums of ``exact`` (positions) as BIGINT where every one fits, as
    the fused path gives them (DuckDB's value, not a wrapped one, where one does not)."""
    out = list(aggs)
    for j in exact:
        if out[j].type == _EXACT_SUM:
            low, high = (v.as_py() for v in pc.min_max(out[j]).values())
            if low is None or (low >= -(2**63) and high < 2**63):  # (None: no sum at all)
                out[j] = out[j].cast(pa.int64())
    return out


def _zero_signs(arg: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Per row, 1 where ``arg`` is 0.0, and 1 where it is -0.0 (0 elsewhere; NULL for a
    column of no floats)."""
    if not pa.types.is_floating(arg.type):
        none = pa.nulls(len(arg), pa.int64())  # (summed as nothing: no zero of a float)
        return none, none
    zero = pc.fill_null(pc.equal(arg, arrow_values.scalar(0.0, arg.type)), FALSE)
    negative = pc.less(pc.divide(arrow_values.scalar(1.0, arg.type), arg),  # 1 / -0.0 = -inf
                       arrow_values.scalar(0.0, arg.type))
    neg = pc.and_(zero, pc.fill_null(negative, FALSE))
    return (pc.and_(zero, pc.invert(neg)).cast(pa.int64()), neg.cast(pa.int64()))


def _refuse_tied_zeros(aggs: list[pa.Array], zero_specs: dict[int, tuple[int, int]]) -> None:
    """Unsupported where a min or max of doubles is a zero and the group held zeros of both
    signs: DuckDB keeps the later of the tied -0.0 and 0.0, Arrow the first (the fused scan
    keeps DuckDB's; this path leaves them to the fallback)."""
    zero = arrow_values.scalar(0, pa.int64())
    for j, (pz, nz) in zero_specs.items():
        value = aggs[j]
        if not pa.types.is_floating(value.type):
            continue
        both = pc.and_(pc.greater(pc.fill_null(aggs[pz], zero), zero),
                       pc.greater(pc.fill_null(aggs[nz], zero), zero))
        tied = pc.and_(both, pc.fill_null(pc.equal(value, arrow_values.scalar(0.0, value.type)),
                                          FALSE))
        if pc.any(tied).as_py():
            raise Unsupported("the csv engine leaves a min or max of doubles whose group ties "
                              "0.0 and -0.0 to DuckDB (which keeps the later of them)",
                              engines=ENGINES_FOR_MORE)


def _with_nans(query: Query, aggs: list[pa.Array], nan_specs: dict[int, int]) -> list[pa.Array]:
    """min/max of floats as DuckDB has them: max is NaN when a NaN was seen, min only
    when nothing else was; the NaN counters are dropped."""
    out = aggs[:len(query.aggregates)]
    for j, counter in nan_specs.items():
        value, nans = out[j], aggs[counter]
        if not pa.types.is_floating(value.type):
            continue
        zero = arrow_values.scalar(0, pa.int64())
        seen = pc.greater(pc.fill_null(nans, zero), zero)
        if isinstance(query.aggregates[j], exp.Max):
            take_nan = seen
        else:
            take_nan = pc.and_(seen, pc.is_null(value))
        out[j] = pc.if_else(take_nan, arrow_values.scalar(float("nan"), value.type), value)
    return out


class _Partials:
    """Per-batch partial aggregates, merged as they pile up: memory grows with the
    number of groups, not with the rows scanned.

    With ``distinct`` (the name of a column holding count(DISTINCT x)'s x) the
    partials are grouped by the keys and x, so memory grows with the distinct
    (group, x) pairs; the result groups them once more by the keys alone, where
    counting the non-null x of the pairs is the distinct count.
    """

    MERGE_ROWS = 1 << 20
    _MERGE: ClassVar[dict[str, str]] = {"count_all": "sum", "count": "sum", "sum": "sum",
                                        "min": "min", "max": "max"}

    def __init__(self, specs: list[tuple[Any, ...]], distinct: str | None = None):
        self.distinct = distinct
        self.partial: list[tuple[Any, ...]] = []
        self.merge_funcs: list[str] = []
        #: per aggregate: indexes of its partial columns (mean: sum and count)
        self.layout: list[tuple[str, list[int]]] = []
        for spec in specs:
            func = spec[1]
            if func == "count_distinct":
                self.layout.append((func, []))  # counted from the distinct column at the end
            elif func == "mean":
                first = len(self.partial)
                self.partial += [(spec[0], "sum"), (spec[0], "count",
                                                     pc.CountOptions(mode="only_valid"))]
                self.merge_funcs += ["sum", "sum"]
                self.layout.append(("mean", [first, first + 1]))
            else:
                self.layout.append((func, [len(self.partial)]))
                self.partial.append(spec)
                self.merge_funcs.append(self._MERGE[func])
        self.tables: list[pa.Table] = []
        self.rows = 0

    def _groups(self, key_names: list[str]) -> list[str]:
        return key_names + ([self.distinct] if self.distinct else [])

    def _names(self, grouped: pa.Table, specs: list[tuple[Any, ...]], groups: list[str]) \
            -> pa.Table:
        cols = [grouped.column(k) for k in groups]
        for spec in specs:
            name = "count_all" if spec[1] == "count_all" else f"{spec[0]}_{spec[1]}"
            cols.append(grouped.column(name))
        return pa.table(cols, names=groups + [f"__p{m}" for m in range(len(specs))])

    def add(self, table: pa.Table, key_names: list[str]) -> None:
        groups = self._groups(key_names)
        grouped = _group_by(table, groups, self.partial)
        self.tables.append(self._names(grouped, self.partial, groups))
        self.rows += self.tables[-1].num_rows
        if self.rows > self.MERGE_ROWS and len(self.tables) > 1:
            self._merge(key_names)

    def _merge(self, key_names: list[str]) -> None:
        groups = self._groups(key_names)
        table = pa.concat_tables(self.tables)
        specs = [(f"__p{m}", f) for m, f in enumerate(self.merge_funcs)]
        merged = _group_by(table, groups, specs)
        self.tables = [self._names(merged, specs, groups)]
        self.rows = self.tables[0].num_rows

    def result(self, key_names: list[str]) -> tuple[list[pa.Array], list[pa.Array], int]:
        self._merge(key_names)
        table = self.tables[0]
        if self.distinct:
            specs: list[tuple[Any, ...]] = [(f"__p{m}", f)
                                            for m, f in enumerate(self.merge_funcs)]
            specs.append((self.distinct, "count", pc.CountOptions(mode="only_valid")))
            grouped = _group_by(table, key_names, specs)
            table = self._names(grouped, specs, key_names)
            distinct_counts = whole(table.column(f"__p{len(specs) - 1}"))
        keys = [whole(table.column(k)) for k in key_names]
        aggs = []
        for func, cols in self.layout:
            if func == "count_distinct":
                aggs.append(distinct_counts)
                continue
            first = whole(table.column(f"__p{cols[0]}"))
            if func in ("count", "count_all"):
                # a sum of partial counts over no rows is NULL; a count of no rows is 0
                first = pc.fill_null(first, arrow_values.scalar(0, pa.int64()))
            if func == "mean":
                aggs.append(_average(first, whole(table.column(f"__p{cols[1]}")),
                                     bool(key_names)))
            else:
                aggs.append(first)
        return keys, aggs, table.num_rows


def finish_aggregate(query: Query, keys: list[pa.Array], aggs: list[pa.Array], n: int) -> pa.Table:
    subs: dict[str, Any] = {key(g): arr for g, arr in zip(query.group, keys, strict=True)}
    subs.update({key(a): arr for a, arr in zip(query.aggregates, aggs, strict=True)})
    frame = Frame({}, n, subs, strict=True)
    if query.having is not None:
        keep = pc.fill_null(broadcast(frame.evaluate(query.having), n), FALSE)
        subs = {k: v.filter(keep) for k, v in subs.items()}
        n = sum(1 for v in keep.to_pylist() if v)
        frame = Frame({}, n, subs, strict=True)
    return finish(query, frame)


# ----------------------------------------------------------- plain queries

def finish(query: Query, frame: Frame) -> pa.Table:
    """Select list, DISTINCT, ORDER BY, LIMIT/OFFSET over one frame."""
    names = [name for name, _ in query.items]
    outputs = [frame.array(e) for _, e in query.items]
    table = _table(names, outputs, frame.length, query.types)
    if query.distinct:
        table = _distinct(table)
        frame = Frame({n.lower(): whole(table.column(i))
                       for i, n in enumerate(table.column_names)}, table.num_rows)
        outputs = [whole(table.column(i)) for i in range(table.num_columns)]
    if query.order:
        order_arrays = [order_array(o, names, outputs, frame) for o, _, _ in query.order]
        table = ordered(table, order_arrays, [(desc, nulls_first)
                                              for _, desc, nulls_first in query.order])
    return sliced(table, query.offset, query.limit)


def _table(names: list[str], arrays: list[pa.Array], length: int,
           types: list[str] | None = None) -> pa.Table:
    return answer_table(names, [broadcast(a, length) for a in arrays], types)


def one_zero_one_nan(values: Any) -> Any:
    """Doubles as DuckDB groups them: -0.0 is 0.0 (-0.0 + 0.0), and every NaN one NaN
    (Arrow's grouping tells the zeros apart, and NaNs of another sign: -0.0 * inf)."""
    return pc.if_else(pc.is_nan(values), arrow_values.scalar(float("nan"), values.type),
                      pc.add(values, ZERO))


def _distinct(table: pa.Table) -> pa.Table:
    columns = [one_zero_one_nan(c) if pa.types.is_floating(c.type) else c
               for c in table.columns]
    renamed = pa.table(columns, names=[f"c{i}" for i in range(table.num_columns)])
    unique = _group_by(renamed, renamed.column_names, [])
    return unique.select([f"c{i}" for i in range(table.num_columns)]).rename_columns(
        table.column_names)


def order_array(node: exp.Expression, names: list[str], outputs: list[pa.Array],
                frame: Frame) -> pa.Array:
    if isinstance(node, exp.Literal) and not node.is_string:
        pos = int(node.this)
        if not 1 <= pos <= len(outputs):
            raise QueryError(f"ORDER BY position {pos} is not in the select list "
                             f"(1 to {len(outputs)})", kind="syntax")
        return outputs[pos - 1]
    if isinstance(node, exp.Column):
        lowered = [n.lower() for n in names]
        if node.name.lower() in lowered:
            return outputs[lowered.index(node.name.lower())]
    return frame.array(node)


def plain_batches(scanners: list[Scanner], query: Query) -> Generator[pa.Table, None, None]:
    """A non-aggregate query's answer, streamed when it neither sorts nor deduplicates."""
    if query.order or query.distinct:
        frames = [filtered(f, rest) for f, rest in scan_columns(scanners, query)]
        merged = _concat_frames(frames)
        yield finish(query, merged)
        return
    names = [name for name, _ in query.items]
    scan_limit = -1 if query.limit is None else query.offset + query.limit

    def tables() -> Iterator[pa.Table]:
        for frame, rest in scan_columns(scanners, query, scan_limit):
            frame = filtered(frame, rest)
            yield _table(names, [frame.array(e) for _, e in query.items], frame.length,
                         query.types)

    yield from limited(tables(), query.offset, query.limit)


def _concat_frames(frames: list[Frame]) -> Frame:
    if not frames:
        return Frame({}, 0)
    names = list(frames[0].columns)
    columns = {n: whole(pa.chunked_array([f.columns[n] for f in frames]))
               for n in names}
    return Frame(columns, sum(f.length for f in frames))
