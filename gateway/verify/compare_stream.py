"""Comparing two answers too big to hold: streamed, spilled to disk, proven by their values.

:func:`gateway.verify.compare.compare_tables` holds both answers. The shadow runner
uses this module once the answers pass ``max_compare_bytes``; the verdict is
the same one, in the same format (``evidence["compared"] == "streamed"``).

Per side (:class:`SpilledAnswer`), as the batches arrive: each batch is kept
in memory while the side's share of the cap allows and written to Arrow
IPC files (an eighth of the cap each) in a temporary folder after that, read
back memory-mapped.

Then (:meth:`StreamingComparison.compare`), no hash is ever taken as proof
of equality:

1. **In place**: both spills are read in step, a slice of rows at a time;
   each pair of slices is cast to the common types (only where the cast is
   exact) and compared by value (Arrow's equality: validity, lengths and
   values at every nesting level). Equal slices hold the same rows and drop
   out; an unequal one is halved while few halves differ, so a few changed
   rows leave a few short runs. A side made after the other is finished
   (``side(after=...)``, as :func:`compare_streams` does) is proven this way
   as it arrives (:mod:`gateway.verify.spilled_answer`): it is not spilled unless
   it must be kept whole.
2. **The rest**, the rows not proven in place, are first matched by value where
   each column has one type on both sides (:mod:`gateway.verify.row_match`: a C
   kernel gives each reference row a primary row whose values equal its own, found
   by a hash, and both drop out). What is left is paired by the in-memory
   comparator (:func:`gateway.verify.compare.pairing_for`, which cancels rows by
   value with ``EXCEPT ALL``), a group at a time: a row's group is the hash
   of its key columns (the hash only routes: rows that pair share their
   keys), each group a sixteenth of the cap (4 MiB at least), written to
   files of its own first when there are several; a group more than twice
   that (keys with few values) is split again by every column
   (:mod:`gateway.verify.pairing_groups`). Where Arrow's equality is the
   comparator's (as in 1.), a group's primary rows, put in the reference's
   order by a hash join on the routing hashes and equal to the reference's
   rows, prove the group without the pairing; in a group that differs, only
   the rows not equal to their hash partner are paired
   (:func:`gateway.verify.pairing_groups.unproven_rows`).
3. **Order**: answers proven in place are in the same order; otherwise, with
   an ORDER BY, both spills are read in step and the ORDER BY keys compared
   position by position.
4. **A LIMIT no total order fixes**: rows that differ are checked against
   the reference's first and last rows, as in memory.

The rules and limits are in docs/shadow.md ("Memory").
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gateway.sql.query_shape import QueryShape
from gateway.verify.compare import allow_for, pairing_for
from gateway.verify.compare_types import _cast, compared_type, contains_float
from gateway.verify.pairing_groups import (
    Route,
    left_in_parts,
    read_and_remove,
    route_to_files,
    unproven_rows,
    without_row_hash,
)
from gateway.verify.spilled_answer import (
    _MAX_RUNS,
    _MIN_RUN,
    _PROOF_ROWS,
    SpilledAnswer,
    _differing_runs,
)
from gateway.verify.verdict import CompareOptions, Verdict

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.sql.nondeterminism import Nondeterminism
    from gateway.verify.row_pairing import CutEdges

#: the least bytes of rows paired at once, whatever the cap
_MIN_GROUP_BYTES = 4 << 20
#: rows per step when the order of two spilled answers is compared
_ORDER_ROWS = 1 << 20


class StreamingComparison:
    """One comparison of answers to ``sql``, each fed batch by batch; spills to a temp folder.

    Args:
        sql: the query the answers answer (order, keys, volatile columns).
        options: the comparator's options (``-- arrowgate:`` overrides in
            ``sql`` apply).
        memory_bytes: what the comparison may hold of the answers at once:
            each side keeps up to a quarter of it in memory before it spills,
            rows are compared in place a sixteenth of it at a time, and paired
            in groups of a sixteenth of it (4 MiB at least).
        folder: where the temporary folder goes (the system's temp folder
            when None); it is removed by :meth:`close`.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, sql: str | None, options: CompareOptions | None = None,
                 memory_bytes: int = 256 << 20, folder: str | None = None):
        from gateway.sql.nondeterminism import Nondeterminism

        self.sql = sql
        self.opts = (options or CompareOptions()).for_sql(sql)
        self.shape = QueryShape.of(sql, self.opts.dialect)
        self.found: Nondeterminism = Nondeterminism.of(sql, self.opts.dialect)
        self.memory_bytes = memory_bytes
        self.folder = tempfile.mkdtemp(prefix="arrowgate-compare-", dir=folder)
        self._sides = 0

    def side(self, keep: bool = True, after: SpilledAnswer | None = None,
             shared: bool = False) -> SpilledAnswer:
        """A new side to feed (``add`` each batch, then ``finish``).

        ``keep``: hold batches in memory up to the side's share of the cap
        before spilling; False spills from the first batch (the shadow runner's
        sides, which held the cap's worth already).
        ``after``: the other side, finished: this one's rows are compared as
        they arrive with the rows at the same positions of that one, and only
        the runs that differ are kept (:mod:`gateway.verify.spilled_answer`), unless
        the first rows already differ throughout (answers in another order)
        or window functions' ties must be masked; when an order may have to
        be checked, every row is kept as well.
        ``shared``: the caller holds every batch anyway; they are kept in memory,
        never spilled (dictionary columns are decoded: a copy).
        """
        self._sides += 1
        in_step = after is not None and not self.found.ties
        return SpilledAnswer(self, f"side{self._sides}", keep,
                             after=after if in_step else None,
                             keep_all=bool(self.shape.order
                                           or not self.opts.ignore_order_without_order_by),
                             shared=shared)

    def __enter__(self) -> StreamingComparison:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the spilled files."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def compare(self, primary: SpilledAnswer, reference: SpilledAnswer) -> Verdict:
        """The verdict on two finished sides, as :func:`compare_tables` would give it."""
        assert primary.schema is not None and reference.schema is not None
        verdict, _, found, volatile = pairing_for(_empty(primary.schema),
                                                  _empty(reference.schema), self.sql,
                                                  self.opts)
        evidence: dict[str, Any] = {
            "compared": "streamed", "memory_bytes": self.memory_bytes,
            "spilled_bytes": primary.spilled_bytes + reference.spilled_bytes,
            "primary_rows": primary.rows, "reference_rows": reference.rows,
        }
        if verdict is not None:
            verdict.evidence.update(evidence)
            return verdict
        tied = 0
        if found.ties:
            primary, reference, tied = self._without_tied_cells(primary, reference)
        n_p, n_r = primary.rows, reference.rows
        if not primary.schema:
            category = "match" if n_p == n_r else ("missing_rows" if n_p < n_r else "extra_rows")
            return Verdict(category, f"primary returned {n_p} rows, reference {n_r}", evidence)
        rest = self._proven_in_step(primary, reference, evidence) or \
            self._proven_in_place(primary, reference, evidence)
        verdict = self._pair(primary, reference, rest, evidence)
        ordered = self.shape.order or not self.opts.ignore_order_without_order_by
        if ordered and evidence["paired_rows"] and verdict.category in ("match",
                                                                        "nondeterministic"):
            order = self._check_order(primary, reference, dict(evidence),
                                      up_to_a_float=not verdict.ok)
            if not order.ok:
                return allow_for(found, volatile, order, tied)
        return allow_for(found, volatile, verdict, tied)

    def _without_tied_cells(self, primary: SpilledAnswer, reference: SpilledAnswer
                            ) -> tuple[SpilledAnswer, SpilledAnswer, int]:
        """Both sides again, with the cells their window functions' ties leave undetermined
        set to NULL (:mod:`gateway.verify.tied_rows`), and how many."""
        from gateway.verify.tied_rows import TiedRows

        masked, cells = [], 0
        for side in (primary, reference):
            assert side.schema is not None
            rows = TiedRows(self.found.ties, functools.partial(_tables, side),
                            self.memory_bytes // 4, self.folder)
            out = self.side()
            try:
                for table in rows.masked():
                    out.add_table(table)
            finally:
                rows.close()
            out.finish(side.schema)
            masked.append(out)
            cells += rows.cells
        return masked[0], masked[1], cells

    # -- in place --------------------------------------------------------------------
    def _aligned(self, primary: SpilledAnswer,
                 reference: SpilledAnswer) -> Callable[[pa.Table], pa.Table] | None:
        """A function casting a slice of either side to the common types, or None when some cast is not exact (an integer to a float) or Arrow's equality is
        not the comparator's (``signed_zero_equal = false``)."""
        import pyarrow as pa

        columns = self._compared_columns(primary, reference)
        if columns is None:
            return None
        names = [f"c{i}" for i, _ in columns]

        def aligned(table: pa.Table) -> pa.Table:
            return pa.table([table.column(i) if t is None else _cast(table.column(i), t)
                             for i, t in columns], names=names)
        return aligned

    def _compared_columns(self, primary: SpilledAnswer, reference: SpilledAnswer
                          ) -> list[tuple[int, pa.DataType | None]] | None:
        """The columns compared by value (all but the volatile ones), each with the type both
        sides are cast to (None: one type on both sides, compared as stored); None when some
        cast is not exact or Arrow's equality is not the comparator's (see :meth:`_aligned`)."""
        assert primary.stored_schema is not None and reference.stored_schema is not None
        assert primary.schema is not None
        if not self.opts.signed_zero_equal:
            return None
        volatile = set(self.found.columns_in(primary.schema.names))
        columns: list[tuple[int, pa.DataType | None]] = []
        for i in range(len(primary.stored_schema)):
            if i in volatile:
                continue
            tp, tr = primary.stored_schema.field(i).type, reference.stored_schema.field(i).type
            common = compared_type(tp, tr, self.opts)
            if common is None or not (_exact_cast(tp, common) and _exact_cast(tr, common)):
                return None
            # one type on both sides: Arrow's equality is the comparator's already (or
            # stricter: map entry order, NaN, floats within the tolerance go to pairing)
            columns.append((i, None if tp == tr else common))
        return columns

    @staticmethod
    def _proven_in_step(primary: SpilledAnswer, reference: SpilledAnswer,
                        evidence: dict[str, Any]) -> tuple[SpilledAnswer, SpilledAnswer] | None:
        """The rows of each side left by a proof made as one side arrived, if one was."""
        for first, second in ((primary, reference), (reference, primary)):
            proof = second.proof
            if proof is not None and proof.first is first:
                rest = (proof.rest_first, proof.rest_second) if first is primary else \
                    (proof.rest_second, proof.rest_first)
                evidence.update(paired_rows=rest[0].rows + rest[1].rows, proven_in_place=True)
                return rest
        return None

    def _proven_in_place(self, primary: SpilledAnswer, reference: SpilledAnswer,
                         evidence: dict[str, Any]) -> tuple[SpilledAnswer, SpilledAnswer]:
        """The rows of each side not proven equal to the other's row at the same position.

        When the first slices differ in every run (answers in another order), nothing is
        tried further and the sides themselves are the rest (no copy).
        """
        aligned = self._aligned(primary, reference)
        evidence.update(paired_rows=primary.rows + reference.rows, proven_in_place=False)
        if aligned is None:
            return primary, reference
        row_bytes = max(side.row_bytes() for side in (primary, reference)) or 1.0
        rows = int(max(1024, min(_PROOF_ROWS, self.memory_bytes // 16 / row_bytes)))
        rest_p, rest_r = self.side(), self.side()
        steps = itertools.zip_longest(_rechunked(primary.batches(), rows),
                                      _rechunked(reference.batches(), rows))
        for step, (p, r) in enumerate(steps):
            if p is None or r is None:
                for table, rest in ((p, rest_p), (r, rest_r)):
                    if table is not None:
                        rest.add_table(table)
                continue
            n = min(p.num_rows, r.num_rows)
            runs = _differing_runs(aligned(p.slice(0, n)), aligned(r.slice(0, n)))
            if step == 0 and n > _MIN_RUN * _MAX_RUNS and \
                    sum(stop - start for start, stop in runs) == n:
                return primary, reference
            for start, stop in [*runs, (n, None)]:
                for table, rest in ((p, rest_p), (r, rest_r)):
                    part = table.slice(start) if stop is None else table.slice(start, stop - start)
                    if part.num_rows:
                        rest.add_table(part)
        for side, rest in ((primary, rest_p), (reference, rest_r)):
            assert side.schema is not None
            rest.finish(side.schema)
        evidence.update(paired_rows=rest_p.rows + rest_r.rows, proven_in_place=True)
        return rest_p, rest_r

    # -- pairing the rest ----------------------------------------------------------------
    def _pair(self, primary: SpilledAnswer, reference: SpilledAnswer,
              rest: tuple[SpilledAnswer, SpilledAnswer], evidence: dict[str, Any]) -> Verdict:
        from gateway.verify.row_pairing import rows_agree

        n_p, n_r = primary.rows, reference.rows
        rest_p, rest_r = rest
        if not evidence["paired_rows"]:
            return Verdict("match", rows_agree(n_p), evidence)
        unmatched = self._unmatched(rest_p, rest_r, evidence)
        if unmatched is not None:
            rest_p, rest_r = unmatched
            if not rest_p.rows and not rest_r.rows:
                return Verdict("match", rows_agree(n_p), evidence)
        row_bytes = max(side.row_bytes() for side in (rest_p, rest_r))
        wanted = (rest_p.rows + rest_r.rows) * row_bytes
        # pairing holds a group several times over (casts, DuckDB's hash tables); below
        # a few MiB a group costs more in set-up than in pairing
        group_bytes = max(_MIN_GROUP_BYTES, self.memory_bytes // 16)
        groups = max(1, math.ceil(wanted / group_bytes))
        assert rest_p.stored_schema is not None and rest_r.stored_schema is not None
        assert rest_p.schema is not None
        route = Route(rest_p.stored_schema, rest_r.stored_schema, rest_p.schema.names,
                      self.opts, self.shape, self.found)
        evidence.update(pairing_groups=groups, key_columns=route.key_names)
        edges = self._cut_edges(reference) if n_p == n_r else None
        aligned = self._aligned(rest_p, rest_r)
        verdicts = [self._judge_group(p, r, edges, aligned) for p, r in
                    self._groups(rest_p, rest_r, route, groups, group_bytes, evidence)]
        return _merged(verdicts, n_p, n_r, self.opts, evidence)

    def _unmatched(self, primary: SpilledAnswer, reference: SpilledAnswer,
                   evidence: dict[str, Any]) -> tuple[SpilledAnswer, SpilledAnswer] | None:
        """The rows of each side without a partner equal by value on the other
        (:func:`gateway.verify.row_match.unmatched_rows`), as sides of their own; None where
        that is not asked (a column's type differs between the sides, or the kernel does
        not read it). Rows equal by value cancel in the pairing all the same."""
        from gateway.verify.row_match import unmatched_rows

        columns = self._compared_columns(primary, reference)
        if not columns or any(t is not None for _, t in columns):
            return None
        batches = [list(primary.batches()), list(reference.batches())]
        left = unmatched_rows(batches[0], batches[1], [i for i, _ in columns], self.folder,
                              max(1 << 20, self.memory_bytes // 16))
        if left is None:
            return None
        evidence["matched_by_values"] = primary.rows + reference.rows - len(left[0]) - \
            len(left[1])
        if len(left[0]) == primary.rows and len(left[1]) == reference.rows:
            return primary, reference
        sides = []
        for side, side_batches, rows in zip((primary, reference), batches, left, strict=True):
            assert side.schema is not None
            out = self.side()
            for part in _rows_of(side_batches, rows):
                out.add(part)
            out.finish(side.schema)
            sides.append(out)
        return sides[0], sides[1]

    def _groups(self, primary: SpilledAnswer, reference: SpilledAnswer, route: Route,
                groups: int, group_bytes: int, evidence: dict[str, Any]
                ) -> Iterator[tuple[pa.Table, pa.Table]]:
        """Every row of both sides, in ``groups`` pairs of tables (by ``route``).

        One group is gathered in memory; more are first written to files of their own,
        so each side is read once whatever their number (a sixteenth of the cap at a
        time). A group more than twice its share (keys with few values) is split
        again, and only the rows of parts that differ are paired
        (:func:`gateway.verify.pairing_groups.left_in_parts`).
        """
        import pyarrow as pa

        sides = (primary, reference)
        if groups == 1:
            tables = []
            for side in sides:
                assert side.stored_schema is not None
                parts = [pa.Table.from_batches([b]) for b in side.batches()]
                tables.append(pa.concat_tables(parts) if parts else _empty(side.stored_schema))
            yield tables[0], tables[1]
            return
        chunks = []
        row_bytes = max(side.row_bytes() for side in sides) or 1.0
        rows = int(max(1024, min(1 << 18, self.memory_bytes // 16 / row_bytes)))
        for side in sides:
            chunks.append((_rechunked(side.batches(), rows), side.stored_schema))
        paths = route_to_files(chunks, route, groups, self.folder, "g", with_hashes=True)
        assert primary.schema is not None
        for g, files in enumerate(paths):
            size = sum(os.path.getsize(path) for path in files)
            left = None
            if size > 2 * group_bytes:
                left = left_in_parts(files, math.ceil(size / group_bytes),
                                     int(max(rows, group_bytes // 4 / row_bytes)),
                                     primary.schema.names,
                                     self.sql, self.opts, self.shape, self.found, self.folder,
                                     f"g{g}.")
            if left is None:
                yield read_and_remove(files[0]), read_and_remove(files[1])
                continue
            for path in files:
                os.remove(path)
            evidence["split_groups"] = evidence.get("split_groups", 0) + 1
            yield left

    def _judge_group(self, p: pa.Table, r: pa.Table, edges: CutEdges | None,
                     aligned: Callable[[pa.Table], pa.Table] | None = None) -> Verdict:
        """The verdict on one group's rows of both sides.

        ``aligned`` (:meth:`_aligned`, when Arrow's equality is the comparator's): the
        group's rows of both sides, in those types, put in one order by their routing
        hashes and found equal by Arrow, are a match without the pairing's casts.
        """
        from gateway.verify.row_hashes import matched_by_hash

        (p, p_hashes), (r, r_hashes) = without_row_hash(p), without_row_hash(r)
        hashes = None if p_hashes is None or r_hashes is None else (p_hashes, r_hashes)
        if aligned is not None and hashes is not None:
            if p.num_rows == r.num_rows and matched_by_hash(aligned(p), aligned(r), hashes):
                from gateway.verify.row_pairing import rows_agree

                return Verdict("match", rows_agree(p.num_rows), {})
            left = unproven_rows(aligned(p), aligned(r), hashes)
            if left is not None:
                # rows equal to their partner cancel in the pairing all the same
                (p_left, r_left), (p_hashes, r_hashes) = left, hashes
                p, r = p.combine_chunks().take(p_left), r.combine_chunks().take(r_left)
                hashes = (p_hashes.take(p_left), r_hashes.take(r_left))
        verdict, pairing, _, _ = pairing_for(p, r, self.sql, self.opts, order=False, edges=edges,
                                             hashes=hashes)
        if verdict is not None:  # a column's values do not cast (schema), as in memory
            return verdict
        assert pairing is not None
        return pairing.judge()

    def _cut_edges(self, reference: SpilledAnswer) -> CutEdges | None:
        """The reference's first and last rows, aligned, when the SQL cuts with a LIMIT."""
        import pyarrow as pa

        from gateway.verify.row_pairing import CutEdges

        if self.found.cut is None or not reference.rows:
            return None
        assert reference.first_row is not None and reference.last_row is not None
        both = pa.Table.from_batches([reference.last_row, reference.first_row])
        _, pairing, _, _ = pairing_for(both, both, self.sql, self.opts, order=False)
        if pairing is None:
            return None
        return CutEdges(reference.rows, pairing.r.to_pylist())

    # -- order ----------------------------------------------------------------------
    def _check_order(self, primary: SpilledAnswer, reference: SpilledAnswer,
                     evidence: dict[str, Any], up_to_a_float: bool = False) -> Verdict:
        offset, message = 0, ""
        for p, r in zip(_rechunked(primary.batches(), _ORDER_ROWS),
                        _rechunked(reference.batches(), _ORDER_ROWS), strict=True):
            _, pairing, _, _ = pairing_for(p, r, self.sql, self.opts)
            assert pairing is not None
            verdict = pairing.order_verdict(offset, up_to_a_float)
            if not verdict.ok:
                verdict.evidence.update(evidence, primary_rows=primary.rows,
                                        reference_rows=reference.rows)
                return verdict
            if offset == 0:
                evidence.update({k: v for k, v in verdict.evidence.items()
                                 if k.startswith("order_")})
                message = re.split(r" rows? agrees?", verdict.message, maxsplit=1)[1]
            offset += p.num_rows
            if evidence.get("order_checked") is False:
                break
        from gateway.verify.row_pairing import rows_agree

        return Verdict("match", f"{rows_agree(primary.rows)}{message}", evidence)


def _rows_of(batches: list[pa.RecordBatch], rows: pa.Array) -> Iterator[pa.RecordBatch]:
    """The rows ``rows`` (ascending int64 indices over ``batches`` in order), batch by batch."""
    import bisect

    import pyarrow as pa
    import pyarrow.compute as pc

    at = memoryview(rows.buffers()[1]).cast("q")[rows.offset:rows.offset + len(rows)]
    start = first = 0
    for batch in batches:
        stop = start + batch.num_rows
        last = bisect.bisect_left(at, stop, first)
        if last > first:
            taken = pc.subtract(rows.slice(first, last - first), pa.scalar(start, pa.int64()))
            yield batch.take(taken)
        start, first = stop, last


def _tables(side: SpilledAnswer) -> Iterator[pa.Table]:
    """A side's stored batches, as tables."""
    import pyarrow as pa

    for batch in side.batches():
        yield pa.Table.from_batches([batch])


def _empty(schema: pa.Schema) -> pa.Table:
    """A table of no rows in ``schema`` (``Schema.empty_table`` refuses unions)."""
    import pyarrow as pa

    return pa.table([pa.nulls(0, f.type) for f in schema], schema=schema)


def _exact_cast(source: pa.DataType, target: pa.DataType) -> bool:
    """True when casting ``source`` to ``target`` keeps every value (no integer becomes a float)."""
    import pyarrow as pa

    if pa.types.is_dictionary(source):
        source = source.value_type
    if pa.types.is_floating(target):
        return pa.types.is_floating(source) or pa.types.is_null(source)
    if not contains_float(target):
        return True
    if source.num_fields != target.num_fields:
        return pa.types.is_null(source)
    return all(_exact_cast(source.field(i).type, target.field(i).type)
               for i in range(target.num_fields))


def _rechunked(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """The batches as tables of ``rows`` rows each (the last one shorter)."""
    import pyarrow as pa

    held: list[pa.RecordBatch] = []
    count = 0
    schema = None
    for batch in batches:
        schema = batch.schema
        while batch.num_rows:
            take = min(rows - count, batch.num_rows)
            held.append(batch.slice(0, take))
            count += take
            batch = batch.slice(take)
            if count == rows:
                yield pa.Table.from_batches(held, schema=schema)
                held, count = [], 0
    if count:
        yield pa.Table.from_batches(held, schema=schema)


def _merged(verdicts: list[Verdict], n_p: int, n_r: int, opts: CompareOptions,
            evidence: dict[str, Any]) -> Verdict:
    """One verdict from the verdicts on each group of rows (as RowPairing classifies)."""
    from gateway.verify.row_pairing import rows_agree, values_message

    for v in verdicts:
        if v.category == "schema":
            v.evidence.update(evidence)
            return v
    counts = {k: sum(int(v.evidence.get(f"{k}_count", 0)) for v in verdicts)
              for k in ("missing", "extra", "changed")}
    missing, extra, changed = counts["missing"], counts["extra"], counts["changed"]
    for v in verdicts:
        evidence.setdefault("key_columns", v.evidence.get("key_columns"))
    if not (missing or extra or changed):
        return Verdict("match", rows_agree(n_p), evidence)
    evidence.update(missing_count=missing, extra_count=extra, changed_count=changed)
    for name in ("missing", "extra", "differences"):
        sample = [row for v in verdicts for row in v.evidence.get(name, [])][:opts.sample_size]
        if sample:
            evidence[name] = sample
    allowed = [v for v in verdicts if v.category == "nondeterministic"]
    if n_p == n_r and allowed and all(v.category in ("match", "nondeterministic")
                                      for v in verdicts):
        evidence["verified"] = allowed[0].evidence.get("verified")
        return Verdict("nondeterministic", f"{missing + changed} rows differ, all where the "
                       f"LIMIT allows it: {allowed[0].message}", evidence)
    if n_p != n_r:
        if missing and not extra and not changed:
            return Verdict("missing_rows", f"primary lacks {missing} of the reference's "
                           f"{n_r} rows", evidence)
        if extra and not missing and not changed:
            return Verdict("extra_rows", f"primary has {extra} rows the reference does not "
                           f"({n_p} vs {n_r})", evidence)
        return Verdict("row_count", f"primary returned {n_p} rows, reference {n_r}", evidence)
    return Verdict("values", values_message(changed + missing, n_r, evidence.get("differences")),
                   evidence)


def compare_streams(primary: Iterator[pa.RecordBatch] | pa.RecordBatchReader,
                    reference: Iterator[pa.RecordBatch] | pa.RecordBatchReader,
                    primary_schema: pa.Schema, reference_schema: pa.Schema, *,
                    sql: str | None = None, options: CompareOptions | None = None,
                    memory_bytes: int = 256 << 20, folder: str | None = None,
                    on_spill: Callable[[str], None] | None = None) -> Verdict:
    """Compare two answers read batch by batch (one after the other), within ``memory_bytes``.

    ``on_spill(folder)`` is called with the temporary folder before it is removed
    (for tests and benchmarks that look at what was spilled).
    """
    with StreamingComparison(sql, options, memory_bytes, folder) as comparison:
        sides: list[SpilledAnswer] = []
        for batches, schema in ((primary, primary_schema), (reference, reference_schema)):
            side = comparison.side(after=sides[0] if sides else None)
            for batch in batches:
                side.add(batch)
            side.finish(schema)
            sides.append(side)
        verdict = comparison.compare(sides[0], sides[1])
        if on_spill is not None:
            on_spill(comparison.folder)
        return verdict
