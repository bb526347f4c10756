"""Pairing the rows of two aligned answers in DuckDB and classifying what differs.

Used by :func:`gateway.verify.compare.compare_tables` once both answers have the same
columns in comparable types. Steps, cheapest first (no hash is ever taken as
proof that two rows are equal):

0. answers equal row for row in Arrow, or once both are sorted on every column
   in Arrow, agree (then only their order is left to check);
1. rows that have an exact copy on the other side cancel (``EXCEPT ALL`` both
   ways: DuckDB compares the values);
2. the rest is paired on its key columns (the GROUP BY keys, else the columns
   that are neither floats nor decimals; ``row_number()`` within a key for
   duplicates) with a hash join, or, when most rows differ and the keys line
   up, by position after sorting;
3. the rows without an equal partner (table ``d``) decide the category.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.sql.query_shape import OrderTerm, QueryShape
from gateway.verify.compare_types import EXACT_FLOAT_RANGE, contains_float
from gateway.verify.verdict import ColumnRule, CompareOptions, Verdict
from gateway.verify.workspace import connection

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.sql.nondeterminism import Cut

#: answers up to this many rows are compared on a cursor of one shared database
_SMALL = 20_000


@dataclass
class CutEdges:
    """The whole reference's row count and its last (then first) row, aligned: what a part
    of two answers cut by a LIMIT is judged against (:mod:`gateway.verify.compare_stream`)."""

    reference_rows: int
    rows: list[dict[str, Any]]


class RowPairing:
    """Pairs the rows of two aligned answers in DuckDB and classifies the differences.

    ``cut``: the LIMIT no total order fixes; ``cut_order``: its ORDER BY (the
    shape's when None). ``edges``: the answers are a part of two longer ones,
    whose cut is judged against these rows. ``hashes``: each side's rows' hashes
    on some of their columns, when known (they only order rows).
    """

    def __init__(self, p: pa.Table, r: pa.Table, shape: QueryShape, opts: CompareOptions,
                 names: list[str], rules: list[ColumnRule] | None = None,
                 cut: Cut | None = None, edges: CutEdges | None = None,
                 cut_order: list[OrderTerm] | None = None,
                 hashes: tuple[pa.ChunkedArray, pa.ChunkedArray] | None = None):
        import pyarrow as pa

        self.hashes = hashes
        self.cut, self.edges = cut, edges
        self.cut_order = shape.order if cut_order is None else cut_order
        self.p, self.r, self.shape, self.opts, self.names = p, r, shape, opts, names
        self.cols = p.column_names
        self.rules = rules or [ColumnRule(a, b) for a, b in zip(p.schema.types, r.schema.types,
                                                               strict=True)]
        self.floats = [contains_float(a) or contains_float(b)
                       for a, b in zip(p.schema.types, r.schema.types, strict=True)]
        if shape.group_keys and len(shape.group_keys) == len(self.cols):
            self.keys = [c for c, k in zip(self.cols, shape.group_keys, strict=True) if k]
        else:
            # floats and decimals are measures (sums, prices), not what identifies a row
            measures = [f or any(pa.types.is_decimal(_plain(x)) for x in
                                 (t, rule.primary_type, rule.reference_type))
                        for f, t, rule in zip(self.floats, p.schema.types, self.rules,
                                              strict=True)]
            self.keys = [c for c, m in zip(self.cols, measures, strict=True) if not m]
        self.values = [c for c in self.cols if c not in self.keys]
        self.evidence: dict[str, Any] = {
            "primary_rows": p.num_rows, "reference_rows": r.num_rows,
            "key_columns": [self._name(c) for c in self.keys],
        }

    def _name(self, col: str) -> str:
        return self.names[int(col[1:])]

    def _same(self, col: str, a: str, b: str) -> str:
        """SQL that is true when cell ``a.col`` agrees with ``b.col``."""
        i = int(col[1:])
        x, y = f"{a}.{col}", f"{b}.{col}"
        rule = self.rules[i]
        if rule.exact_side is not None:
            exact, inexact = (x, y) if rule.exact_side == "p" else (y, x)
            return _nullable(x, y, _exact_vs_float(exact, inexact, self.opts))
        return cell_same(self.p.schema.types[i], rule.primary_type, rule.reference_type, x, y,
                         self.opts)

    def judge(self) -> Verdict:
        if not self.cols:
            return self._judge_row_counts()
        exact = self.opts.nan_equals_nan and self.opts.signed_zero_equal
        if exact and self.p.equals(self.r):
            return self._order_or_match(same_positions=True)
        if exact and self._equal_once_sorted():
            if not self.shape.order and self.opts.ignore_order_without_order_by:
                return self._order_or_match()
            return self._with_connection(lambda con: self._order_or_match())
        return self._tolerance_named(self._with_connection(self._judge))

    def _tolerance_named(self, verdict: Verdict) -> Verdict:
        """A match of answers not equal bit for bit, with float columns: the verdict says
        the float tolerance it was judged with (the answers agree only within it)."""
        opts = self.opts
        if not verdict.ok or not any(self.floats) or not (opts.rel_tol or opts.abs_tol):
            return verdict
        floats = [self._name(c) for c, f in zip(self.cols, self.floats, strict=True) if f]
        verdict.evidence["float_tolerance"] = {"rel_tol": opts.rel_tol, "abs_tol": opts.abs_tol,
                                               "columns": floats}
        return Verdict("match", f"{verdict.message}; not equal bit for bit: {', '.join(floats)} "
                       f"compared within rel_tol={opts.rel_tol:g}, abs_tol={opts.abs_tol:g}",
                       verdict.evidence)

    def _equal_once_sorted(self) -> bool:
        """True when both answers, each sorted the same way in Arrow, are equal row for row.

        Answers holding the same rows in another order (a hash aggregate's) are then
        proven equal by their values without DuckDB. Answers of columns Arrow sorts
        are sorted on every column; others (lists, structs, maps) by each row's hash,
        and only ordered by it (:func:`gateway.verify.row_hashes.equal_as_multisets`). False
        also when the sides' types differ.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.p.num_rows != self.r.num_rows or self.p.schema.types != self.r.schema.types:
            return False
        keys = [(c, "ascending") for c in self.cols]
        try:
            p = self.p.take(pc.sort_indices(self.p, keys))
            r = self.r.take(pc.sort_indices(self.r, keys))
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            from gateway.verify.row_hashes import equal_as_multisets

            return equal_as_multisets(self.p, self.r, self.hashes)
        return bool(p.equals(r))

    def order_verdict(self, offset: int = 0, up_to_a_float: bool = False) -> Verdict:
        """``match`` or ``order`` for answers known to hold the same rows: the order check alone.

        ``offset``: the answers are a slice starting at this row of two longer
        ones; positions in the verdict count from the start of those.
        ``up_to_a_float``: check the keys up to the first float one only (rows
        tied at a LIMIT's edge differ).
        """
        return self._with_connection(lambda con: self._order_or_match(
            offset=offset, up_to_a_float=up_to_a_float))

    def _with_connection(self, judge: Callable[[Any], Verdict]) -> Verdict:
        con = connection(max(self.p.num_rows, self.r.num_rows) > _SMALL)
        self.con = con
        try:
            con.register("p_in", self.p)
            con.register("r_in", self.r)
            return judge(con)
        finally:
            con.close()

    def _judge_row_counts(self) -> Verdict:
        """Answers without columns to compare: only their row counts can differ."""
        n_p, n_r = self.p.num_rows, self.r.num_rows
        if n_p == n_r:
            return Verdict("match", rows_agree(n_p), self.evidence)
        category = "missing_rows" if n_p < n_r else "extra_rows"
        return Verdict(category, f"primary returned {n_p} rows, reference {n_r}", self.evidence)

    def _judge(self, con: Any) -> Verdict:
        n_p, n_r = self.p.num_rows, self.r.num_rows
        if n_p == 0 and n_r == 0:
            return self._order_or_match()
        exact = self.opts.nan_equals_nan and self.opts.signed_zero_equal
        if not exact or self.p.schema.types != self.r.schema.types:
            # DuckDB's equality takes -0.0 as 0.0 and every NaN alike, and an integer
            # kept exact against a float as that float: when those must differ, no row
            # may cancel, and every row is paired.
            con.execute("CREATE TEMP VIEW p_d AS SELECT * FROM p_in")
            con.execute("CREATE TEMP VIEW r_d AS SELECT * FROM r_in")
            return self._pair(con)
        self._cancel_equal_rows(con)
        left = con.execute("SELECT (SELECT count(*) FROM p_d) + (SELECT count(*) FROM r_d)"
                           ).fetchall()[0][0]
        if left == 0:
            return self._order_or_match()
        if n_p == n_r and left > n_p and self._pair_by_position(con):
            # most rows differ (floats a little off everywhere, a narrowed type): sorting
            # and a positional join cost far less than pairing every row on its key
            return self._classify(con)
        return self._pair(con)

    def _cancel_equal_rows(self, con: Any) -> None:
        """Tables ``p_d`` and ``r_d``: the rows of each side left after exact copies cancel.

        A row present k times on one side and m times on the other leaves |k - m| copies
        on the side that has more (``EXCEPT ALL``, which compares the values: a row hash
        would take colliding rows, such as ``[]`` and NULL, as equal). Pairing on keys
        then only sees rows that really differ, so a missing row cannot shift the
        pairing of its equal neighbours.
        """
        for name, this, other in (("p", "p_in", "r_in"), ("r", "r_in", "p_in")):
            con.execute(f"CREATE TEMP TABLE {name}_d AS SELECT * FROM {this} "
                        f"EXCEPT ALL SELECT * FROM {other}")

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
        self.evidence.update(missing_count=missing, extra_count=extra, changed_count=changed)
        if self.cut is not None and (n_p == n_r or self.edges is not None):
            verdict = self._within_the_cut(con, missing + changed)
            if verdict is not None:
                return verdict
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
        return Verdict("values", values_message(changed + missing, n_r,
                                                self.evidence.get("differences")), self.evidence)

    def _within_the_cut(self, con: Any, differing: int) -> Verdict | None:
        """Same row count under a LIMIT no total order fixes: differences the SQL allows.

        With an ORDER BY whose keys are in the answer, rows strictly inside the cut
        are fixed; only rows tied on the ORDER BY keys with the first row (after an
        OFFSET) or the last one may differ. Without it, any rows may be kept, unless
        the reference's answer is shorter than the LIMIT (then nothing was cut).
        Returns None when the differences are not of that kind.
        """
        cut = self.cut
        assert cut is not None
        tied = [self._resolve(t) for t in self.cut_order] if cut.ordered else []
        reference_rows = self.r.num_rows if self.edges is None else self.edges.reference_rows
        if tied and all(c is not None for c in tied):
            if not self._only_ties_at_the_edges(con, [c for c in tied if c is not None]):
                return None
            if self.edges is not None:  # a part of the answers: the order is checked whole
                self.evidence.update(tied_at_cut=differing,
                                     verified=["schema", "row_count", "rows_inside_the_cut"])
                return Verdict("nondeterministic", f"{differing} rows tied on the ORDER BY "
                               "keys at the edge of the LIMIT differ, which the ORDER BY "
                               "allows", self.evidence)
            # rows tied within a float key's tolerance may differ in the keys after it
            verdict = self._order_or_match(up_to_a_float=True)
            if not verdict.ok:
                return verdict
            self.evidence.update(tied_at_cut=differing,
                                 verified=["schema", "row_count", "rows_inside_the_cut", "order"])
            return Verdict("nondeterministic", f"{differing} rows tied on the ORDER BY keys at the "
                           "edge of the LIMIT differ, which the ORDER BY allows; the rows inside "
                           "the cut, the row count and the order agree", self.evidence)
        if cut.limit is not None and not cut.offset and reference_rows < cut.limit:
            return None
        self.evidence.update(differing_rows=differing, verified=["schema", "row_count"])
        return Verdict("nondeterministic", f"LIMIT without an ORDER BY that fixes its rows: the "
                       f"engines kept different rows ({differing} of {self.r.num_rows}); the row "
                       "count and the schema agree", self.evidence)

    def _only_ties_at_the_edges(self, con: Any, tied: list[str]) -> bool:
        """Do the answers differ only in rows tied with the last row (or the first, after OFFSET)?

        Rows whose ORDER BY keys equal the last row's compete for the last places; which of
        them an engine keeps is its own choice. A float key equals within the tolerance,
        and the keys after it are not looked at.
        """
        assert self.cut is not None
        if self.edges is not None:
            rows = self.edges.rows[:2 if self.cut.offset else 1]
        else:
            if self.r.num_rows == 0:
                return False
            edges = [self.r.num_rows - 1] + ([0] if self.cut.offset else [])
            rows = [self.r.slice(i, 1).to_pylist()[0] for i in edges]
        params: list[Any] = []

        def at_edge(side: str) -> str:
            options = []
            for row in rows:
                parts = []
                for c in tied:
                    params.append(row[c])
                    x, edge = f"{side}{c}", f"${len(params)}"
                    if self.floats[int(c[1:])]:
                        # a float key ties within the tolerance (two engines' avg() can
                        # differ in the last bit), and the keys after it then decide
                        # nothing (see _keys_floats_leave_decidable)
                        parts.append(_nullable(x, edge, _float_same(x, edge, self.opts, False)))
                        break
                    parts.append(f"{x} IS NOT DISTINCT FROM {edge}")
                options.append(" AND ".join(parts))
            return "(" + " OR ".join(f"({o})" for o in options) + ")"

        inside = f"NOT ((NOT in_p OR {at_edge('p_')}) AND (NOT in_r OR {at_edge('r_')}))"
        outside = con.execute(f"SELECT count(*) FROM d WHERE {inside}", params).fetchall()[0][0]
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

    def _order_or_match(self, same_positions: bool = False, offset: int = 0,
                        up_to_a_float: bool = False) -> Verdict:
        """``match``, or ``order`` when the ORDER BY keys differ at some position.

        ``same_positions``: the answers are known to be equal row for row.
        ``offset``: added to the positions reported (see :meth:`order_verdict`).
        ``up_to_a_float``: check the keys up to the first float one only.
        """
        n = self.p.num_rows
        shape = self.shape
        if not shape.order:
            if self.opts.ignore_order_without_order_by or n < 2:
                return Verdict("match", rows_agree(n), self.evidence)
            checked = list(self.cols)
        else:
            checked = []
            for term in shape.order:
                key = self._order_key(term)
                if key is None:
                    break
                checked.append(key)
            self.evidence["order_keys"] = [t.text for t in shape.order]
            if not same_positions:
                checked = self._keys_floats_leave_decidable(checked)
            if up_to_a_float:
                first = next((i for i, c in enumerate(checked) if self._float_key(c)), None)
                checked = checked if first is None else checked[:first + 1]
            if not checked and same_positions:
                return Verdict("match", f"{rows_agree(n)}, in the same order", self.evidence)
            if not checked:
                self.evidence["order_checked"] = False
                return Verdict("order_unchecked", f"{rows_agree(n)}, but their order is not "
                               "checked: the ORDER BY keys are not in the answer, nor "
                               "computable from it", self.evidence)
        if n < 2:
            return Verdict("match", rows_agree(n), self.evidence)
        pos = None if same_positions else self._first_position_differing(checked)
        if pos is None:
            return Verdict("match", f"{rows_agree(n)}, in the order the ORDER BY requires",
                           self.evidence)
        lo, hi = max(pos - 1, 0), min(pos + 2, n)
        self.evidence.update(
            first_out_of_order=offset + pos + 1,
            primary_rows_around=[self._row(r) for r in self.p.slice(lo, hi - lo).to_pylist()],
            reference_rows_around=[self._row(r) for r in self.r.slice(lo, hi - lo).to_pylist()],
        )
        return Verdict("order", f"same rows, but row {offset + pos + 1} is out of order for ORDER BY "
                       f"{', '.join(t.text for t in shape.order) or '(all columns)'}", self.evidence)

    def _keys_floats_leave_decidable(self, keys: list[str]) -> list[str]:
        """The ORDER BY keys up to the first float key whose values differ in their last bits.

        Two engines' ``avg()`` can be 5.055 and 5.055000000000001: equal within
        the tolerance, yet each engine orders its rows by its own value, so the
        keys after it (the tie-breakers) decide nothing the other engine must
        repeat. A float key whose values agree exactly keeps its tie-breakers.
        """
        for index, col in enumerate(keys):
            if not self._float_key(col):
                continue
            inexact = self.con.sql(f"SELECT bool_or(p.{col} IS DISTINCT FROM r.{col}) "
                                   "FROM p_in p POSITIONAL JOIN r_in r").fetchall()[0][0]
            if inexact and index + 1 < len(keys):
                self.evidence["order_checked_keys"] = [
                    self._name(c) if _is_column(c) else c.format(t="answer")
                    for c in keys[:index + 1]]
                return keys[:index + 1]
        return keys

    def _first_position_differing(self, cols: list[str]) -> int | None:
        """The first row position where the two answers' ``cols`` disagree."""
        import pyarrow.compute as pc

        differs = " OR ".join(
            f"NOT {self._same(c, 'p', 'r')}" if _is_column(c) else
            f"({c.format(t='p')}) IS DISTINCT FROM ({c.format(t='r')})" for c in cols)
        bad = self.con.sql(f"SELECT {differs} AS bad FROM p_in p POSITIONAL JOIN r_in r"
                               ).to_arrow_table().column(0)
        index = pc.index(bad, True).as_py()
        return None if index is None or index < 0 else int(index)

    def _row(self, row: dict[str, Any]) -> dict[str, Any]:
        return {self._name(c): _jsonable(row[c]) for c in self.cols}

    def _order_key(self, term: OrderTerm) -> str | None:
        """What ``term`` sorts by: an answer column's name, or the SQL computing it from the
        answer's columns (``-{t}.c0``, ``{t}.c2 COLLATE NOCASE``: ``{t}`` is the answer's
        alias); None when neither can be had, or when the key is computed from a float,
        whose last bits would decide an order the other engine need not repeat."""
        col = self._resolve(term)
        if col is not None or term.expression is None:
            return col
        sql = term.expression
        for i, name in enumerate(self.cols):
            token = f"__out_{i}__"
            if token in sql:
                if self.floats[i]:
                    return None
                sql = sql.replace(token, "{t}." + name)
        return None if "__out_" in sql else sql

    def _float_key(self, key: str) -> bool:
        return _is_column(key) and self.floats[int(key[1:])]

    def _resolve(self, term: OrderTerm) -> str | None:
        if term.column is None:
            return None
        if term.column >= 0:
            return self.cols[term.column] if term.column < len(self.cols) else None
        matches = [i for i, name in enumerate(self.names) if name.lower() == term.text.lower()]
        return self.cols[matches[0]] if len(matches) == 1 else None


def _is_column(key: str) -> bool:
    """Whether an ORDER BY key (``_order_key``) is an answer column, not computed SQL."""
    return "{t}" not in key


# -- cell equality in SQL -----------------------------------------------------------
def cell_same(t: pa.DataType, tp: pa.DataType, tr: pa.DataType, x: str, y: str,
              opts: CompareOptions, depth: int = 0) -> str:
    """SQL true when cells ``x`` and ``y`` of aligned type ``t`` agree, at any depth.

    ``tp`` / ``tr`` are the types the engines returned at this position: where
    one was an integer or a decimal, the float tolerance holds only within 2**53.
    Lists are compared element by element, structs field by field, maps entry
    by entry in key order, each with the same options.
    """
    import pyarrow as pa

    tp, tr = _plain(tp), _plain(tr)
    if not contains_float(t):
        return f"({x} IS NOT DISTINCT FROM {y})"
    if pa.types.is_floating(t):
        bounded = any(pa.types.is_integer(s) or pa.types.is_decimal(s) for s in (tp, tr))
        return _nullable(x, y, _float_same(x, y, opts, bounded))
    if pa.types.is_map(t):
        entries = pa.large_list(pa.struct([("key", t.key_type), ("value", t.item_type)]))
        return cell_same(entries, _entries(tp), _entries(tr), f"list_sort(map_entries({x}))",
                         f"list_sort(map_entries({y}))", opts, depth)
    if pa.types.is_struct(t):
        parts = []
        for i in range(t.num_fields):
            name = t.field(i).name.replace("'", "''")
            parts.append(cell_same(t.field(i).type, _part(tp, i), _part(tr, i),
                                   f"struct_extract({x}, '{name}')",
                                   f"struct_extract({y}, '{name}')", opts, depth))
        return _nullable(x, y, "(" + " AND ".join(parts) + ")")
    v = f"z{depth}__"
    inner = cell_same(t.value_type, _part(tp, 0), _part(tr, 0), f"{v}[1]", f"{v}[2]", opts,
                      depth + 1)
    return _nullable(x, y, f"(len({x}) = len({y}) AND coalesce(list_bool_and(list_transform("
                     f"list_zip({x}, {y}), lambda {v}: {inner})), true))")


def _plain(t: pa.DataType) -> pa.DataType:
    import pyarrow as pa

    return t.value_type if pa.types.is_dictionary(t) else t


def _part(t: pa.DataType, i: int) -> pa.DataType:
    """The type of part ``i`` of nested type ``t`` (null when ``t`` is the null type)."""
    import pyarrow as pa

    t = _plain(t)
    return t.field(i).type if i < t.num_fields else pa.null()


def _entries(t: pa.DataType) -> pa.DataType:
    import pyarrow as pa

    t = _plain(t)
    if not pa.types.is_map(t):
        return pa.null()
    return pa.large_list(pa.struct([("key", t.key_type), ("value", t.item_type)]))


def _nullable(x: str, y: str, both_present: str) -> str:
    return f"(({x} IS NULL AND {y} IS NULL) OR ({x} IS NOT NULL AND {y} IS NOT NULL AND " \
           f"{both_present}))"


def _float_same(x: str, y: str, o: CompareOptions, bounded: bool) -> str:
    """Two non-null floats agree: NaN by option, infinities only with themselves."""
    nan = f"(isnan({x}) AND isnan({y}))" if o.nan_equals_nan else "false"
    zero = "" if o.signed_zero_equal else \
        f" AND (({x} <> 0) OR (signbit({x}) = signbit({y})))"
    near = f"isfinite({x}) AND isfinite({y})"
    if bounded:
        near += f" AND abs({x}) <= {EXACT_FLOAT_RANGE} AND abs({y}) <= {EXACT_FLOAT_RANGE}"
    close = (f"(NOT isnan({x}) AND NOT isnan({y}) AND ({x} = {y} OR ({near} AND abs({x} - {y}) "
             f"<= {o.abs_tol!r} + {o.rel_tol!r} * greatest(abs({x}), abs({y})))){zero})")
    return f"({nan} OR {close})"


def _exact_vs_float(e: str, f: str, o: CompareOptions) -> str:
    """An integer or decimal ``e`` (some past 2**53) against a float ``f``, both non-null.

    They agree when ``f`` is exactly the number ``e``, or when both lie within 2**53
    and the float tolerance holds.
    """
    exact = (f"(CASE WHEN isfinite({f}) AND abs({f}) < 1e38 AND {f} = round({f}) "
             f"THEN {f}::HUGEINT = {e}::HUGEINT AND {e} = trunc({e}) ELSE false END)")
    ed = f"{e}::DOUBLE"
    near = (f"(isfinite({f}) AND abs({e}) <= {EXACT_FLOAT_RANGE} AND abs({f}) <= "
            f"{EXACT_FLOAT_RANGE} AND abs({ed} - {f}) <= {o.abs_tol!r} + {o.rel_tol!r} * "
            f"greatest(abs({ed}), abs({f})))")
    return f"({exact} OR {near})"


# -- evidence ---------------------------------------------------------------------
def values_message(differing: int, rows: int, differences: list[dict[str, Any]] | None) -> str:
    """The message of a ``values`` verdict: how many rows differ, and the first difference."""
    first = differences[0] if differences else None
    detail = ""
    if first:
        key = ", ".join(f"{k}={_short(v)}" for k, v in first["key"].items())
        detail = (f"; first: {first['column']} is {_short(first['primary'])} on primary, "
                  f"{_short(first['reference'])} on reference" + (f" at {key}" if key else ""))
    return f"{differing} of {rows} rows differ{detail}"


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


def rows_agree(n: int) -> str:
    """``1 row agrees``, ``3 rows agree``: a match's message."""
    return "1 row agrees" if n == 1 else f"{n} rows agree"
