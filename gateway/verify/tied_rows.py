"""Leaving out the cells a window function's ties leave undetermined (set to NULL on both sides).

``row_number() OVER (ORDER BY g)`` numbers rows tied on ``g`` in any order, so
two right answers differ in those rows' numbers, and only there.
:class:`~gateway.sql.nondeterminism.TieDependent` says which output column is such
a function and which output columns are its PARTITION BY and ORDER BY terms.
Each side is read twice: first the key tuples held by more than one row are
gathered (for ``lag``, ``first_value``... the partitions holding one), in
DuckDB; then the column's cells in those rows are set to NULL, in Arrow, so the
rows keep their order and every other column its type. Both sides are masked
by their own ties; the rest is compared as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.sql.nondeterminism import TieDependent


class TiedRows:
    """One side's tied rows, per tie-dependent column (see the module).

    Args:
        ties: the tie-dependent columns of the answer.
        tables: called once per pass, returns the side's rows in order, in tables.
        memory_bytes: what DuckDB may hold of the key tuples before it spills them
            to ``folder`` (no limit when None).
    """

    def __init__(self, ties: list[TieDependent], tables: Callable[[], Iterable[pa.Table]],
                 memory_bytes: int | None = None, folder: str | None = None):
        import duckdb

        self.ties, self.tables = ties, tables
        #: cells set to NULL so far (by :meth:`masked`)
        self.cells = 0
        config: dict[str, Any] = {"threads": 1}
        if memory_bytes is not None and folder is not None:
            config.update(memory_limit=f"{max(memory_bytes, 16 << 20) >> 20}MB",
                          temp_directory=folder)
        self._con = duckdb.connect(config=config)
        started = False
        for table in tables():
            for n, tie in enumerate(ties):
                self._con.register("chunk", self._key_table(table, tie))
                group = " GROUP BY ALL" if tie.keys else ""
                into = f"INSERT INTO counts{n}" if started else f"CREATE TABLE counts{n} AS"
                self._con.execute(f"{into} SELECT {self._keys(tie)}count(*) AS c "
                                  f"FROM chunk{group}")
                self._con.unregister("chunk")
            started = True
        for n, tie in enumerate(ties if started else []):
            keys = [f"k{j}" for j in range(len(tie.keys))]
            tied = (f"SELECT {', '.join(keys) or '1'} FROM counts{n} "
                    f"{'GROUP BY ALL ' if keys else ''}HAVING sum(c) > 1")
            if not tie.rows_only:  # the partitions holding a tie
                tied = f"SELECT DISTINCT {', '.join(keys[:tie.partition]) or '1'} FROM ({tied})"
            self._con.execute(f"CREATE TABLE tied{n} AS SELECT *, true AS hit__ FROM ({tied})")

    @staticmethod
    def _keys(tie: TieDependent) -> str:
        return "".join(f"k{j}, " for j in range(len(tie.keys)))

    @staticmethod
    def _key_table(table: pa.Table, tie: TieDependent) -> pa.Table:
        import pyarrow as pa

        columns = [table.column(k) for k in tie.keys] + [pa.array(range(table.num_rows),
                                                                  pa.int64())]
        return pa.table(columns, names=[f"k{j}" for j in range(len(tie.keys))] + ["rn__"])

    def masked(self) -> Iterator[pa.Table]:
        """The side's tables again, the tie-dependent cells of tied rows set to NULL."""
        import pyarrow as pa
        import pyarrow.compute as pc

        for table in self.tables():
            for n, tie in enumerate(self.ties):
                width = len(tie.keys) if tie.rows_only else tie.partition
                on = " AND ".join(f"c.k{j} IS NOT DISTINCT FROM t.k{j}"
                                  for j in range(width)) or "true"
                self._con.register("chunk", self._key_table(table, tie))
                hit = self._con.sql(f"SELECT t.hit__ IS NOT NULL FROM chunk c LEFT JOIN tied{n} t "
                                    f"ON {on} ORDER BY c.rn__").to_arrow_table().column(0)
                self._con.unregister("chunk")
                column = table.column(tie.position)
                self.cells += int(pc.sum(hit).as_py() or 0)
                table = table.set_column(tie.position, table.field(tie.position),
                                         pc.if_else(hit, pa.scalar(None, column.type), column))
            yield table

    def close(self) -> None:
        self._con.close()


def without_tied_cells(table: pa.Table, ties: list[TieDependent]) -> tuple[pa.Table, int]:
    """``table`` with the tie-dependent cells of its tied rows set to NULL, and their count."""
    import pyarrow as pa

    rows = TiedRows(ties, lambda: [table])
    try:
        parts = list(rows.masked())
    finally:
        rows.close()
    return pa.concat_tables(parts), rows.cells


def describe(ties: list[TieDependent], cells: int) -> dict[str, Any]:
    """The evidence of the cells left out."""
    return {"tied_cells": cells,
            "tie_dependent_functions": sorted({t.function for t in ties})}
