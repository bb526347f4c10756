"""The one comparator: do two answers to the same SQL agree, and if not, how?

Shadow mode, the bench command and the conformance tests all call
:func:`compare_tables` (two Arrow answers) or :func:`compare_outcomes` (an
answer or an exception on each side). A :class:`~gateway.verify.verdict.Verdict` carries one
category, a one-line message and JSON-serializable evidence.

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
``both_error``
    both failed with the same kind of error but different messages: neither
    answered, so nothing was compared (not a divergence, not a match). Both
    failing with the same kind and message is ``match``.
``nondeterministic``
    the SQL leaves the answer undetermined (:mod:`gateway.sql.nondeterminism`:
    volatile functions, a LIMIT no total order fixes, a sample) and nothing
    it determines differs; the evidence says what was verified. Also: the
    reference disagreed with itself (see :func:`compare_with_noise`).

How: both answers are brought column by column, in Arrow, to the types they
are compared in (:mod:`gateway.verify.compare_types`: numbers of mixed types exactly,
timestamps to one unit in UTC, strings to large_string, dictionaries decoded,
intervals as their fields...); :mod:`gateway.sql.query_shape` reads the SQL and
:mod:`gateway.verify.row_pairing` pairs the rows by value (Arrow, then DuckDB), so
nothing loops over rows in Python and no hash decides that two rows are equal.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from gateway.sql.query_shape import QueryShape
from gateway.verify.compare_types import _cast, _exact_side_fits_float, _kind, compared_type
from gateway.verify.verdict import ColumnRule, CompareOptions, Verdict

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.sql.nondeterminism import Nondeterminism
    from gateway.verify.row_pairing import CutEdges, RowPairing

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
    from gateway.sql.nondeterminism import Nondeterminism

    opts = (options or CompareOptions()).for_sql(sql)
    ties = Nondeterminism.of(sql, opts.dialect).ties
    tied = 0
    if ties and primary.num_columns == reference.num_columns:
        from gateway.verify.tied_rows import without_tied_cells

        primary, tied_p = without_tied_cells(primary, ties)
        reference, tied_r = without_tied_cells(reference, ties)
        tied = tied_p + tied_r
    verdict, pairing, found, volatile = pairing_for(primary, reference, sql, opts)
    if verdict is not None:
        return verdict
    assert pairing is not None
    return allow_for(found, volatile, pairing.judge(), tied)


def pairing_for(primary: pa.Table, reference: pa.Table, sql: str | None, opts: CompareOptions,
                *, order: bool = True, edges: CutEdges | None = None,
                hashes: tuple[Any, Any] | None = None
                ) -> tuple[Verdict | None, RowPairing | None, Nondeterminism, list[str]]:
    """The two answers aligned, ready to pair: a ``schema`` verdict, or the pairing.

    Also returns what the SQL leaves undetermined and the names of the columns
    left out as volatile (see :func:`compare_tables`). ``order=False`` pairs
    the rows as a multiset (no order check, no LIMIT cut): the streaming
    comparison (:mod:`gateway.verify.compare_stream`) pairs one part of two answers
    at a time and checks their order on its own; ``edges`` (the whole
    reference's first and last rows) then lets it judge a LIMIT's cut; ``hashes``
    (each side's rows' hashes, from routing them) only order rows.
    """
    from gateway.sql.nondeterminism import Nondeterminism
    from gateway.verify.row_pairing import RowPairing

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
                         cut_order=cut_order, hashes=hashes)
    return None, pairing, found, [primary.column_names[i] for i in volatile]


def _drop_columns(table: pa.Table, keep: list[int]) -> pa.Table:
    return table.select(keep).rename_columns([f"c{i}" for i in range(len(keep))])


def _shape_without(shape: QueryShape, keep: list[int]) -> QueryShape:
    """``shape`` for an answer reduced to the columns at ``keep``."""
    from gateway.sql.query_shape import OrderTerm

    position = {old: new for new, old in enumerate(keep)}

    def expression(sql: str | None) -> str | None:
        """An ORDER BY expression over the kept columns, renumbered; None if it read another."""
        if sql is None:
            return None
        used = [int(i) for i in re.findall(r"__out_(\d+)__", sql)]
        if any(i not in position for i in used):
            return None
        return re.sub(r"__out_(\d+)__", lambda m: f"__out_{position[int(m.group(1))]}__", sql)

    order = [OrderTerm(position.get(t.column) if t.column is not None and t.column >= 0
                       else t.column, t.text, expression(t.expression)) for t in shape.order]
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
        from gateway.verify.tied_rows import describe

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
    classify it) and the same message is a match: the engines agree the query
    is wrong, and why. The same kind with other messages is ``both_error``
    (nothing was compared); one failing, or both with different kinds, is
    ``error``. Both messages are kept in the evidence.
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
            if kp == kr and _message(primary) == _message(reference):
                return Verdict("match", f"both failed with the same {kp} error", evidence)
            if kp == kr:
                return Verdict("both_error", f"both failed with a {kp} error: primary "
                               f"{_message(primary)!r}, reference {_message(reference)!r}",
                               evidence)
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
    if reference_again is None or verdict.category in ("match", "nondeterministic",
                                                        "order_unchecked"):
        return verdict
    noise = compare_outcomes(reference_again, reference, sql=sql, options=options)
    if noise.ok:
        return verdict
    return Verdict("nondeterministic",
                   f"two runs of the reference disagree ({noise.category}), so the answer is "
                   "not determined by the data",
                   {"reference_vs_itself": noise.to_dict(), "primary_vs_reference": verdict.to_dict()})


# -- aligning the two answers ---------------------------------------------------
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
        # Arrow's C data interface carries a name as a NUL-terminated string: an engine
        # answering through it (DuckDB) cuts a name holding NUL at its first one
        np_, nr = np_.split("\0", 1)[0], nr.split("\0", 1)[0]
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


def _message(exc: BaseException) -> str:
    """An error's first line without the engine's name in front (``[duck] ...``), which
    differs between two engines saying the same thing."""
    text = str(exc).strip().splitlines()
    return re.sub(r"^\[[^\]]*\]\s*", "", text[0] if text else "")


def _describe_error(exc: BaseException) -> dict[str, Any]:
    return {"class": error_class(exc), "kind": error_kind(exc), "message": str(exc)}
