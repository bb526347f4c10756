"""A cut's rows checked against the reference's answer without the cut (``[shadow] uncut_rows``).

A LIMIT (OFFSET, FETCH, TOP) that no total order fixes lets two correct
engines keep different rows; the comparator then says ``nondeterministic``
and what it could verify (:mod:`gateway.sql.nondeterminism`). With
``uncut_rows = N``, the shadow runner asks the reference once more, for the
statement without its outermost cut and ORDER BY (at most N rows), and checks
that every row of the primary's answer is in that answer, as often as it
appears there (multiset containment, with the comparator's equivalences):

- every row is there: the verdict stays ``nondeterministic`` and
  ``rows_in_the_uncut_answer`` joins its ``verified`` list;
- a row is not there: ``values``; no choice of rows the cut allows gives it;
- the answer without the cut is longer than N rows, the reference fails on
  it, or the cut's count is a parameter: the verdict stays as it was, and
  ``uncut`` in its evidence says why nothing more was checked.

It costs a third query, on the reference only, so it is off by default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError
from gateway.verify.compare import compare_tables
from gateway.verify.verdict import Verdict

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.shadow.settings import ShadowSettings
    from gateway.statement import Pipeline, Principal

_CUT_CLAUSES = ("limit", "offset", "fetch", "order")


def uncut_sql(sql: str, dialect: str, cap: int) -> tuple[str, str] | None:
    """``sql`` without its outermost cut and ORDER BY: as it is compared, and as it runs
    (limited to ``cap + 1`` rows, so a longer answer is seen without being read whole).

    None when that is not a faithful rewrite: the statement cannot be read,
    is not a query, or its cut or order holds a parameter (removing it would
    shift the others).
    """
    import sqlglot
    from sqlglot import exp

    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except sqlglot.errors.SqlglotError:
        return None
    if len(statements) != 1 or not isinstance(statements[0], (exp.Select, exp.SetOperation)):
        return None
    tree = statements[0].copy()
    for clause in _CUT_CLAUSES:
        node = tree.args.get(clause)
        if node is not None and node.find(exp.Placeholder, exp.Parameter) is not None:
            return None
        tree.set(clause, None)
    compared = tree.sql(dialect)
    tree.set("limit", exp.Limit(expression=exp.Literal.number(cap + 1)))
    return compared, tree.sql(dialect)


def check_without_the_cut(pipeline: Pipeline, principal: Principal, reference: str, sql: str,
                          parameters: Any, primary: pa.Table, verdict: Verdict,
                          settings: ShadowSettings) -> Verdict:
    """``verdict`` (``nondeterministic``) made stronger, or ``values``, as the module says."""
    from gateway.sql.nondeterminism import Nondeterminism
    from gateway.statement import Statement

    dialect = pipeline.gw.dialect(reference)
    found = Nondeterminism.of(sql, dialect)
    if found.cut is None or found.functions or found.rows_undetermined is not None:
        return verdict  # undetermined for a reason besides the cut
    cap = settings.uncut_rows
    texts = uncut_sql(sql, dialect, cap)
    if texts is None:
        return _unchecked(verdict, "the cut's count or order holds a parameter, or the "
                          "statement could not be rewritten")
    text, capped = texts
    try:
        uncut = pipeline.run_plain(Statement(
            capped, reference, parameters, settings.timeout, principal=principal,
            part_of="shadow")).to_arrow()
    except GatewayError as exc:
        return _unchecked(verdict, f"the reference failed without the cut: {exc}")
    if uncut.num_rows > cap:
        return _unchecked(verdict, f"the answer without the cut has more than {cap} rows "
                          "(uncut_rows)")
    contained = compare_tables(primary, uncut, sql=text, options=settings.compare)
    evidence = dict(verdict.evidence)
    evidence["uncut"] = {"sql": text, "rows": uncut.num_rows}
    if contained.category in ("match", "missing_rows"):
        evidence["verified"] = [*evidence.get("verified", []), "rows_in_the_uncut_answer"]
        return Verdict("nondeterministic", f"{verdict.message}; every row of the primary's is "
                       f"in the reference's answer without the cut ({uncut.num_rows} rows)",
                       evidence)
    evidence["uncut"]["comparison"] = contained.to_dict()
    return Verdict("values", "the primary has rows the reference's answer without the cut "
                   f"({uncut.num_rows} rows) does not hold ({contained.message}), so no choice "
                   "of rows the cut allows gives its answer", evidence)


def _unchecked(verdict: Verdict, why: str) -> Verdict:
    evidence = dict(verdict.evidence)
    evidence["uncut"] = {"not_checked": why}
    return Verdict(verdict.category, verdict.message, evidence)
