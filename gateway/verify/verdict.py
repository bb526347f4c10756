"""What a comparison decides, and with which options: the values the comparator hands on.

:class:`Verdict` (one of :data:`CATEGORIES`, a line, evidence),
:class:`CompareOptions` (tolerances and what is left out, settable per query with
``-- arrowgate: ...``) and :class:`ColumnRule` (how one aligned column is compared).
:mod:`gateway.verify.compare` decides; :mod:`gateway.verify.row_pairing` and the
streamed comparison read these.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

CATEGORIES = ("match", "schema", "row_count", "missing_rows", "extra_rows", "values",
              "order", "error", "both_error", "nondeterministic", "order_unchecked")

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


@dataclass
class ColumnRule:
    """How one aligned column is compared (read by :mod:`gateway.verify.row_pairing`).

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
