"""Evaluating SQL expressions on Arrow arrays with pyarrow.compute, with DuckDB's semantics.

The scanner hands over the needed columns as Arrow arrays; this module
finishes what the fused path does not cover: projections, the filters it could
not push down, keys and arguments of aggregates, HAVING and ORDER BY
expressions. Every construct outside the documented set raises
:class:`gateway.errors.Unsupported`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
from sqlglot import exp

from gateway.cli.startup import LazyModule
from gateway.drivers import arrow_values
from gateway.errors import QueryError, Unsupported
from gateway_csv import temporal
from gateway_csv.query import ENGINES_FOR_MORE, column_list, key, unsupported

# imported on first use: the fused aggregations never need it (see gateway.cli.startup)
pc: Any = LazyModule("pyarrow.compute")

Value = pa.Array | pa.ChunkedArray | pa.Scalar

#: constants the kernels are given, built without pa.scalar (which imports pandas, see
#: gateway.drivers.arrow_values)
FALSE = arrow_values.scalar(False, pa.bool_())
NULL_BOOL = arrow_values.scalar(None, pa.bool_())
ZERO = arrow_values.scalar(0.0, pa.float64())
_NULL = arrow_values.scalar(None, pa.null())
_EMPTY = arrow_values.scalar("", pa.string())

_CAST_TYPES: dict[str, pa.DataType] = {
    "INT": pa.int32(), "INTEGER": pa.int32(), "BIGINT": pa.int64(), "SMALLINT": pa.int16(),
    "TINYINT": pa.int8(), "UBIGINT": pa.uint64(), "UINT": pa.uint32(),
    "DOUBLE": pa.float64(), "FLOAT": pa.float32(), "REAL": pa.float32(),
    "VARCHAR": pa.string(), "TEXT": pa.string(), "CHAR": pa.string(),
    "BOOLEAN": pa.bool_(), "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us"),
    "TIMESTAMPNTZ": pa.timestamp("us"), "DATETIME": pa.timestamp("us"),
}
_CMP = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.GT: "greater", exp.GTE: "greater_equal",
        exp.LT: "less", exp.LTE: "less_equal"}
_TEMPORAL = {exp.Year: "year", exp.Month: "month", exp.Day: "day", exp.Hour: "hour"}


class Frame:
    """Named columns of equal length that expressions are evaluated against.

    Args:
        columns: column name (lower case) -> array.
        length: the row count.
        substitutions: canonical expression text -> array, used instead of
            evaluating (group keys and aggregates after aggregation).
        strict: a column that is neither a substitution nor in ``columns`` is an
            error naming GROUP BY (the post-aggregation frame).
    """

    def __init__(self, columns: Mapping[str, Value], length: int,
                 substitutions: Mapping[str, Value] | None = None, strict: bool = False):
        self.columns = dict(columns)
        self.length = length
        self.substitutions = dict(substitutions or {})
        self.strict = strict

    def evaluate(self, node: exp.Expression) -> Value:
        try:
            return self._eval(node)
        except pa.ArrowException as exc:
            # Arrow refusing a kernel or an input is the csv engine's limit, not a
            # verdict on the query: Unsupported, so the fallback engine is tried
            message = str(exc).split("\n")[0]
            raise Unsupported(f"the csv engine cannot evaluate "
                              f"{node.sql(dialect='duckdb')[:80]}: {message}",
                              engines=ENGINES_FOR_MORE) from None

    def array(self, node: exp.Expression) -> pa.Array:
        """The expression as an array of the frame's length (scalars broadcast)."""
        return broadcast(self.evaluate(node), self.length)

    def _eval(self, node: exp.Expression) -> Value:
        if self.substitutions:
            hit = self.substitutions.get(key(node))
            if hit is not None:
                return hit
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            return handler(self, node)
        if isinstance(node, exp.AggFunc):
            raise QueryError(f"aggregate {node.sql(dialect='duckdb')} is not allowed here", kind="syntax")
        raise unsupported(node)

    def column(self, node: exp.Column) -> Value:
        name = node.name.lower()
        if name in self.columns:
            return self.columns[name]
        if self.strict:
            raise QueryError(f"column {node.name!r} must appear in the GROUP BY clause or be "
                             "used in an aggregate function", kind="syntax")
        raise QueryError(f"no column named {node.name[:60]!r}",
                         hint=column_list(self.columns, near=node.name), kind="unknown_object")


def broadcast(value: Value, length: int) -> pa.Array:
    if isinstance(value, pa.Scalar):
        if value.type == pa.null():
            return pa.nulls(length)
        return pa.repeat(value, length)
    if isinstance(value, pa.ChunkedArray):
        return whole(value)
    return value


def whole(values: pa.ChunkedArray) -> pa.Array:
    """The chunks as one array (``combine_chunks`` makes an empty one with ``pa.array``,
    which imports pandas)."""
    return pa.concat_arrays(values.chunks) if values.num_chunks else pa.nulls(0, values.type)


def literal(node: exp.Literal) -> pa.Scalar:
    if node.is_string:
        return arrow_values.scalar(node.this, pa.string())
    text = node.this
    try:
        value = int(text)
    except ValueError:
        return arrow_values.scalar(float(text), pa.float64())
    if -(2**63) <= value < 2**63:
        return arrow_values.scalar(value, pa.int64())
    if abs(value) < 10**38:  # DuckDB's HUGEINT, as Arrow holds it
        return arrow_values.scalar(value, pa.decimal128(38, 0))
    return arrow_values.scalar(float(value), pa.float64())


def common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if a == b or b == pa.null():
        return a
    if a == pa.null():
        return b
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        other = b if pa.types.is_decimal(a) else a
        if pa.types.is_integer(other) or pa.types.is_decimal(other):
            return pa.decimal128(38, 0) if a == b or pa.types.is_integer(other) else \
                pa.float64()
        if pa.types.is_floating(other):
            return pa.float64()
    if pa.types.is_integer(a) and pa.types.is_integer(b):
        return pa.int64()
    if (pa.types.is_integer(a) or pa.types.is_floating(a)) and \
            (pa.types.is_integer(b) or pa.types.is_floating(b)):
        return pa.float64()
    if pa.types.is_temporal(a) and pa.types.is_string(b):
        return a
    if pa.types.is_string(a) and pa.types.is_temporal(b):
        return b
    if pa.types.is_timestamp(a) and pa.types.is_date(b):
        return a
    if pa.types.is_date(a) and pa.types.is_timestamp(b):
        return b
    return pa.string() if pa.types.is_string(a) or pa.types.is_string(b) else a


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _sql_type(t: pa.DataType) -> str:
    if pa.types.is_string(t):
        return "VARCHAR"
    if pa.types.is_integer(t):
        return "BIGINT"
    if pa.types.is_decimal(t):
        return "HUGEINT"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_time(t):
        return "TIME"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP WITH TIME ZONE" if t.tz else "TIMESTAMP"
    return "DOUBLE" if pa.types.is_floating(t) else str(t).upper()


def text_as_numbers(values: list[Value], how: str) -> list[Value]:
    """Text meeting numbers, as DuckDB binds it: a text constant is cast to the
    number's type; a text column is cast too where ``how`` is "equal" (=, <>,
    IN), and refused elsewhere (ordering, arithmetic, CASE, COALESCE).

    Raises:
        QueryError: a refused mix, or text that is not a number.
    """
    numbers = [v.type for v in values if _numeric(v.type)]
    if not numbers or not any(pa.types.is_string(v.type) for v in values):
        return values
    target = numbers[0]
    for t in numbers[1:]:
        target = common_type(target, t)
    out = []
    for v in values:
        if pa.types.is_string(v.type):
            if not isinstance(v, pa.Scalar) and how != "equal":
                verb = "compare" if how == "compare" else "mix"
                raise QueryError(f"cannot {verb} values of type VARCHAR and {_sql_type(target)}"
                                 " - an explicit cast is required",
                                 hint="write CAST(x AS BIGINT) or CAST(y AS VARCHAR)", kind="type")
            try:
                v = v.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise QueryError(f"could not convert text to {_sql_type(target)}",
                                 hint="a value of the text side is not a number", kind="type") from None
        out.append(v)
    return out


def refuse_temporal_numbers(values: list[Value], what: str) -> None:
    """DuckDB binds no mix of a date/time and a number (``ts >= 1``, ``COALESCE(d, 0)``):
    refuse it the same way rather than cast the number to a time.

    Raises:
        QueryError: (kind ``type``) a temporal value meets a numeric one.
    """
    temporal = next((v.type for v in values if pa.types.is_temporal(v.type)), None)
    number = next((v.type for v in values if _numeric(v.type)), None)
    if temporal is not None and number is not None:
        verb = "compare values" if what == "compare" else f"mix values in {what}"
        raise QueryError(f"cannot {verb} of type {_sql_type(temporal)} and {_sql_type(number)}"
                         " - an explicit cast is required", kind="type",
                         hint="write CAST(x AS TIMESTAMP) with a time value, or compare "
                              "with a date or timestamp literal")


def coerce(values: list[Value], how: str = "mix") -> list[Value]:
    values = text_as_numbers(values, how)
    target = pa.null()
    for v in values:
        target = common_type(target, v.type)
    return [v if v.type == target else cast_number(v, target) for v in values]


def cast_number(value: Value, target: pa.DataType) -> Value:
    """``value`` as ``target``; an integer past 2**53 becomes the nearest double, as DuckDB
    casts it (Arrow's safe cast refuses it)."""
    if pa.types.is_floating(target) and pa.types.is_decimal(value.type) and \
            value.type.scale == 0:
        return _hugeint_to_double(value, target)
    if pa.types.is_floating(target) and (pa.types.is_integer(value.type) or
                                         pa.types.is_decimal(value.type)):
        return pc.cast(value, target, safe=False)
    return value.cast(target)


_INT64 = pa.int64()
_INT64_RANGE = (-(2**63), 2**63 - 1)


def _hugeint_to_double(value: Value, target: pa.DataType) -> Value:
    """A HUGEINT (a DECIMAL of scale 0: an integer sum) as the nearest double, as DuckDB
    rounds it. Arrow's cast of a decimal is one ulp off past 2**64 (20 of 30,000 random
    values, 1081570205525908323698 among them): every value within BIGINT goes through
    int64 (exact, then rounded once), any other through its digits (parsed to the
    nearest double)."""
    low, high = (pc.min_max(value).values() if isinstance(value, pa.Array | pa.ChunkedArray)
                 else (value, value))
    if low.as_py() is None or (_INT64_RANGE[0] <= low.as_py() and
                               high.as_py() <= _INT64_RANGE[1]):
        return pc.cast(pc.cast(value, _INT64), target, safe=False)
    return pc.cast(pc.cast(value, pa.string()), target)


def _binary_cmp(frame: Frame, node: exp.Expression) -> Value:
    how = "equal" if isinstance(node, exp.EQ | exp.NEQ) else "compare"
    operands = [frame._eval(node.this), frame._eval(node.expression)]
    refuse_temporal_numbers(operands, "compare")
    left, right = coerce(operands, how)
    return compare(_CMP[type(node)], left, right)


def compare(fn: str, left: Value, right: Value) -> Value:
    """Arrow's comparison ``fn`` (equal, less, ...) of two values of one type, with
    DuckDB's order of doubles: NaN equals NaN and is greater than every other number."""
    plain = getattr(pc, fn)(left, right)
    if not pa.types.is_floating(left.type):
        return plain
    ln, rn = pc.is_nan(left), pc.is_nan(right)
    if fn in ("equal", "not_equal"):
        eq = pc.or_kleene(pc.equal(left, right), pc.and_kleene(ln, rn))
        nan_aware = eq if fn == "equal" else pc.invert(eq)
    elif fn == "greater":
        nan_aware = pc.or_kleene(plain, pc.and_kleene(ln, pc.invert(rn)))
    elif fn == "greater_equal":
        nan_aware = pc.or_kleene(plain, ln)
    elif fn == "less":
        nan_aware = pc.or_kleene(plain, pc.and_kleene(rn, pc.invert(ln)))
    else:
        nan_aware = pc.or_kleene(plain, rn)
    # a NULL operand makes the comparison NULL, even where the other is NaN
    # (or_kleene(NULL, TRUE) is TRUE: a NULL row would pass `y <= 'nan'`)
    return pc.if_else(pc.is_null(plain), NULL_BOOL, nan_aware)


def _and(frame: Frame, node: exp.Expression) -> Value:
    return pc.and_kleene(_as_bool(frame._eval(node.this)), _as_bool(frame._eval(node.expression)))


def _or(frame: Frame, node: exp.Expression) -> Value:
    return pc.or_kleene(_as_bool(frame._eval(node.this)), _as_bool(frame._eval(node.expression)))


def _as_bool(v: Value) -> Value:
    if v.type == pa.null():
        return v.cast(pa.bool_())
    if v.type != pa.bool_():
        raise QueryError(f"expected a boolean condition, got a value of type {v.type}", kind="type")
    return v


def _not(frame: Frame, node: exp.Expression) -> Value:
    return pc.invert(_as_bool(frame._eval(node.this)))


def _is(frame: Frame, node: exp.Expression) -> Value:
    if not isinstance(node.expression, exp.Null):
        raise unsupported(node, "IS other than IS [NOT] NULL")
    value = frame._eval(node.this)
    if isinstance(value, pa.Scalar):
        return arrow_values.scalar(not value.is_valid, pa.bool_())
    return pc.is_null(value)


def _in(frame: Frame, node: exp.In) -> Value:
    if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
        raise unsupported(node, "IN with a subquery")
    operands = [frame._eval(node.this), *(frame._eval(e) for e in node.expressions)]
    refuse_temporal_numbers(operands, "compare")
    needle, *items = text_as_numbers(operands, "equal")
    if not all(isinstance(i, pa.Scalar) for i in items):
        result: Value | None = None
        for item in items:
            a, b = coerce([needle, item], "equal")
            eq = compare("equal", a, b)
            result = eq if result is None else pc.or_kleene(result, eq)
        assert result is not None
        return result
    target = needle.type
    for item in items:
        target = common_type(target, item.type)
    values = [cast_number(i, target).as_py() for i in items if i.is_valid]
    probe = cast_number(needle, target) if needle.type != target else needle
    if pa.types.is_floating(target):
        # DuckDB: -0.0 is 0.0 and NaN is NaN; Arrow's hashing tells the zeros apart
        has_nan = any(v != v for v in values)
        values = [v + 0.0 for v in values if v == v]
        probe = pc.add(probe, ZERO)
    haystack = arrow_values.array(values, target)
    found = pc.is_in(probe, value_set=haystack)
    if pa.types.is_floating(target):
        found = pc.or_(found, pc.and_(pc.fill_null(pc.is_nan(probe), FALSE),
                                      arrow_values.scalar(has_nan, pa.bool_())))
    has_null = any(not i.is_valid for i in items)
    # SQL: NULL IN (...) is NULL; x IN (..., NULL) is NULL when not found
    null_mask = pc.is_null(probe)
    if has_null:
        null_mask = pc.or_(null_mask, pc.invert(found))
    return pc.if_else(null_mask, NULL_BOOL, found)


def _between(frame: Frame, node: exp.Between) -> Value:
    operands = [frame._eval(node.this), frame._eval(node.args["low"]),
                frame._eval(node.args["high"])]
    refuse_temporal_numbers(operands, "BETWEEN")
    value, low, high = coerce(operands, "compare")
    return pc.and_kleene(compare("greater_equal", value, low), compare("less_equal", value, high))


def _like(frame: Frame, node: exp.Expression) -> Value:
    pattern = frame._eval(node.expression)
    if not isinstance(pattern, pa.Scalar) or node.args.get("escape"):
        raise unsupported(node, "LIKE with a non-constant pattern or ESCAPE")
    value = frame._eval(node.this)
    if value.type == pa.null():
        return NULL_BOOL
    if not pattern.is_valid:
        return pa.nulls(frame.length, pa.bool_())
    text = pattern.as_py()
    if isinstance(node, exp.ILike):
        # DuckDB folds both sides with its lower() (U+0130 `İ` to `i`), as utf8_lower
        # does; Arrow's ignore_case does not fold `İ`
        value = pc.utf8_lower(value)
        text = pc.utf8_lower(arrow_values.scalar(text, pa.string())).as_py()
    if "\\" in text:
        # DuckDB's LIKE has no escape character unless ESCAPE names one; Arrow's takes
        # the backslash as one (and misses `%\\\\` even escaped): a regular expression
        matched = pc.match_substring_regex(value, like_regex(text))
    else:
        matched = pc.match_like(value, text)
    # sqlglot parses `x NOT LIKE p` as Like(negate=True), not as Not(Like)
    return pc.invert(matched) if node.args.get("negate") else matched


def like_regex(pattern: str) -> str:
    """A LIKE pattern without an escape character as an anchored RE2 expression."""
    import re

    parts = [".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern]
    return "(?s)^" + "".join(parts) + "$"


def _arith(fn: str) -> Callable[[Frame, exp.Expression], Value]:
    def run(frame: Frame, node: exp.Expression) -> Value:
        left, right = coerce([frame._eval(node.this), frame._eval(node.expression)])
        return getattr(pc, fn)(left, right)
    return run


def _div(frame: Frame, node: exp.Expression) -> Value:
    left = frame._eval(node.this)
    right = frame._eval(node.expression)
    return pc.divide(_to_float(left), _to_float(right))


def _to_float(v: Value) -> Value:
    return v if pa.types.is_floating(v.type) else cast_number(v, pa.float64())


def _pow(frame: Frame, node: exp.Expression) -> Value:
    """pow(x, y) of doubles (C's pow, as DuckDB's): NaN, not an error, where it has none."""
    base, exponent = (_to_float(frame._eval(n)) for n in (node.this, node.expression))
    return pc.power(base, exponent)


def _intdiv(frame: Frame, node: exp.Expression) -> Value:
    """``//``: of integers (BIGINT or INTEGER), the quotient truncated toward zero; of
    doubles, DuckDB's plain quotient, but an error where a divisor is zero (``/`` gives
    inf there). Arrow's errors (a zero divisor, INT_MIN // -1) send the query to the
    fallback engine, which says what DuckDB says."""
    left, right = coerce([frame._eval(node.this), frame._eval(node.expression)])
    if pa.types.is_floating(right.type):
        divisor = arrow_values.scalar(0.0, right.type)  # (not 0.0: pyarrow would import pandas)
        zero = pc.any(pc.equal(right, divisor)) if isinstance(right, pa.Array | pa.ChunkedArray) \
            else pc.equal(right, divisor)
        if zero.as_py():
            raise pa.ArrowInvalid("divide by zero")
        return pc.divide(left, right)
    return pc.divide_checked(left, right)


def _mod(frame: Frame, node: exp.Expression) -> Value:
    left, right = coerce([frame._eval(node.this), frame._eval(node.expression)])
    return pc.subtract(left, pc.multiply(right, pc.divide_checked(left, right)))


def _neg(frame: Frame, node: exp.Expression) -> Value:
    return pc.negate_checked(frame._eval(node.this))


def _paren(frame: Frame, node: exp.Expression) -> Value:
    return frame._eval(node.this)


def _null(frame: Frame, node: exp.Expression) -> Value:
    return _NULL


def _boolean(frame: Frame, node: exp.Boolean) -> Value:
    return arrow_values.scalar(bool(node.this), pa.bool_())


def _literal(frame: Frame, node: exp.Expression) -> Value:
    assert isinstance(node, exp.Literal)
    return literal(node)


def _column(frame: Frame, node: exp.Expression) -> Value:
    assert isinstance(node, exp.Column)
    return frame.column(node)


def _case(frame: Frame, node: exp.Case) -> Value:
    if node.this is not None:
        subject = node.this
        conds = [exp.EQ(this=subject, expression=i.this) for i in node.args["ifs"]]
    else:
        conds = [i.this for i in node.args["ifs"]]
    values = [frame._eval(i.args["true"]) for i in node.args["ifs"]]
    default = frame._eval(node.args["default"]) if node.args.get("default") else _NULL
    refuse_temporal_numbers([*values, default], "CASE")
    unified = coerce([*values, default])
    result = broadcast(unified[-1], frame.length)
    for cond, value in reversed(list(zip(conds, unified[:-1], strict=True))):
        mask = pc.fill_null(broadcast(_as_bool(frame._eval(cond)), frame.length), FALSE)
        result = pc.if_else(mask, value, result)
    return result


def _coalesce(frame: Frame, node: exp.Expression) -> Value:
    values = [frame._eval(node.this), *(frame._eval(e) for e in node.expressions)]
    refuse_temporal_numbers(values, "COALESCE")
    return pc.coalesce(*coerce(values))


def _cast(frame: Frame, node: exp.Cast) -> Value:
    value = frame._eval(node.this)
    to = node.to
    name = to.this.name if hasattr(to.this, "name") else str(to.this)
    if name in ("DECIMAL", "NUMERIC"):
        params = [int(p.name) for p in to.expressions] if to.expressions else [18, 3]
        scale = params[1] if len(params) > 1 else 0
        return round_like_duckdb(value, scale)
    target = _CAST_TYPES.get(name)
    if target is None:
        raise unsupported(node, f"CAST to {to.sql(dialect='duckdb')}")
    if pa.types.is_integer(target) and pa.types.is_floating(value.type):
        # DuckDB rounds a DOUBLE to even (nearbyint) but a DECIMAL literal away from zero
        inner = node.this.this if isinstance(node.this, exp.Neg) else node.this
        decimal_literal = isinstance(inner, exp.Literal)
        value = pc.round(value, round_mode="half_towards_infinity" if decimal_literal
                         else "half_to_even")
    if pa.types.is_string(target):
        return text(value)
    if isinstance(node, exp.TryCast):
        try:
            return cast_number(value, target)
        except pa.ArrowInvalid:
            raise unsupported(node, "TRY_CAST of values that fail") from None
    return cast_number(value, target)


def text(value: Value) -> Value:
    """A value as DuckDB writes it as VARCHAR (CAST(x AS VARCHAR), the operands of ||)."""
    if pa.types.is_string(value.type):
        return value
    if pa.types.is_floating(value.type):
        return _float_text(value)
    if pa.types.is_timestamp(value.type):
        return temporal.timestamp_text(value)
    return value.cast(pa.string())


def _float_text(value: Value) -> Value:
    if isinstance(value, pa.Scalar):
        return arrow_values.scalar(None if not value.is_valid else repr(value.as_py()),
                                   pa.string())
    return arrow_values.array([None if v is None else repr(v) for v in value.to_pylist()],
                              pa.string())


def _temporal(frame: Frame, node: exp.Expression) -> Value:
    value = frame._eval(node.this)
    if pa.types.is_string(value.type):
        value = value.cast(pa.timestamp("us"))
    return getattr(pc, _TEMPORAL[type(node)])(value)


def _date_trunc(frame: Frame, node: exp.Expression) -> Value:
    return temporal.date_trunc(temporal.trunc_unit(node), frame._eval(node.this))


def _strftime(frame: Frame, node: exp.TimeToStr) -> Value:
    value_node, fmt_node = temporal.strftime_arguments(node)
    fmt = frame._eval(fmt_node)
    if not isinstance(fmt, pa.Scalar):
        raise unsupported(node, "strftime with a non-constant format")
    if fmt.as_py() == "None":
        # sqlglot parses strftime(ts, '') as the format 'None': the two cannot be told
        # apart, and DuckDB refuses the one and prints the other
        raise unsupported(node, "strftime with the format 'None' or ''")
    return temporal.strftime(frame._eval(value_node), fmt.as_py())


def _date_part(frame: Frame, node: exp.Expression) -> Value:
    found = temporal.date_part_arguments(node)
    if found is None:
        raise unsupported(node)
    part, value = found
    return temporal.date_part(part, frame._eval(value))


def _round(frame: Frame, node: exp.Expression) -> Value:
    value = frame._eval(node.this)
    digits = node.args.get("decimals")
    n = 0
    if digits is not None:
        d = frame._eval(digits)
        if not isinstance(d, pa.Scalar):
            raise unsupported(node, "round with non-constant digits")
        n = int(d.as_py())
    if pa.types.is_integer(value.type) and n >= 0:
        return value
    return round_like_duckdb(value, n)


def round_like_duckdb(value: Value, digits: int) -> Value:
    """Round the exact binary value half away from zero, as DuckDB does.

    ``x * 10**digits`` can land exactly on .5 although x itself is just below
    the decimal midpoint (19.45 is 19.4499...): those ties are settled exactly.
    """
    if isinstance(value, pa.Scalar):
        return arrow_values.scalar(_round_exact(value.as_py(), digits) if value.is_valid
                                   else None, pa.float64())
    value = _to_float(value)
    if digits == 0:
        return pc.round(value, round_mode="half_towards_infinity")
    scale = arrow_values.scalar(10.0 ** digits, pa.float64())
    scaled = pc.multiply(value, scale)
    rounded = pc.divide(pc.round(scaled, round_mode="half_towards_infinity"), scale)
    # DuckDB keeps the value itself where scaling it passes the doubles' range
    rounded = pc.if_else(pc.is_finite(rounded), rounded, value)
    ties = pc.equal(pc.abs(pc.subtract(scaled, pc.trunc(scaled))),
                    arrow_values.scalar(0.5, pa.float64()))
    if not pc.any(ties).as_py():
        return rounded
    at_ties = pc.fill_null(ties, FALSE)
    exact = [_round_exact(x, digits) for x in value.filter(at_ties).to_pylist()]
    return pc.replace_with_mask(rounded, at_ties, arrow_values.array(exact, pa.float64()))


def _round_exact(x: float | None, digits: int) -> float | None:
    import decimal
    import math

    if x is None or not math.isfinite(x):
        return x
    quantum = decimal.Decimal(1).scaleb(-digits)
    exact = decimal.Context(prec=1100)  # every double's digits, 1e308 too
    return float(decimal.Decimal(x).quantize(quantum, rounding=decimal.ROUND_HALF_UP,
                                             context=exact))


def _unary(fn: str, as_double: bool = False) -> Callable[[Frame, exp.Expression], Value]:
    def run(frame: Frame, node: exp.Expression) -> Value:
        value = frame._eval(node.this)
        if as_double and pa.types.is_integer(value.type):
            value = cast_number(value, pa.float64())  # DuckDB 2.0's floor(BIGINT) is a DOUBLE
        return getattr(pc, fn)(value)
    return run


def _length(frame: Frame, node: exp.Expression) -> Value:
    return pc.utf8_length(frame._eval(node.this)).cast(pa.int64())


def _substr(frame: Frame, node: exp.Expression) -> Value:
    value = frame._eval(node.this)
    start = frame._eval(node.args["start"])
    length = frame._eval(node.args["length"]) if node.args.get("length") else None
    if not isinstance(start, pa.Scalar) or (length is not None and not isinstance(length, pa.Scalar)):
        raise unsupported(node, "substr with non-constant positions")
    if not start.is_valid or (length is not None and not length.is_valid):
        return arrow_values.scalar(None, pa.string())
    s = int(start.as_py())  # at least 1 (gateway_csv.native admits no other)
    if length is None or int(length.as_py()) >= 0:
        stop = None if length is None else s - 1 + int(length.as_py())
        return pc.utf8_slice_codeunits(value, start=s - 1, stop=stop)
    # DuckDB: a negative length takes the characters before the start
    return pc.utf8_slice_codeunits(value, start=max(0, s - 1 + int(length.as_py())), stop=s - 1)


def _trim(frame: Frame, node: exp.Trim) -> Value:
    if node.args.get("expression") is not None or node.args.get("position"):
        raise unsupported(node, "TRIM with characters or a position")
    return pc.utf8_trim(frame._eval(node.this), characters=" ")


def _concat(frame: Frame, node: exp.Expression) -> Value:
    left = frame._eval(node.this)
    right = frame._eval(node.expression)
    left, right = text(left), text(right)
    return pc.binary_join_element_wise(left, right, _EMPTY)


_HANDLERS: dict[type, Callable[[Frame, Any], Value]] = {
    exp.Column: _column, exp.Literal: _literal, exp.Null: _null, exp.Boolean: _boolean,
    exp.Paren: _paren, exp.Alias: _paren,
    exp.EQ: _binary_cmp, exp.NEQ: _binary_cmp, exp.GT: _binary_cmp, exp.GTE: _binary_cmp,
    exp.LT: _binary_cmp, exp.LTE: _binary_cmp,
    exp.And: _and, exp.Or: _or, exp.Not: _not, exp.Is: _is, exp.In: _in,
    exp.Between: _between, exp.Like: _like, exp.ILike: _like,
    exp.Add: _arith("add_checked"), exp.Sub: _arith("subtract_checked"),
    exp.Mul: _arith("multiply_checked"), exp.Div: _div, exp.IntDiv: _intdiv, exp.Mod: _mod,
    exp.Pow: _pow, exp.Neg: _neg,
    exp.Case: _case, exp.Coalesce: _coalesce, exp.Cast: _cast, exp.TryCast: _cast,
    exp.Year: _temporal, exp.Month: _temporal, exp.Day: _temporal, exp.Hour: _temporal,
    exp.TimestampTrunc: _date_trunc, exp.DateTrunc: _date_trunc, exp.TimeToStr: _strftime,
    exp.Extract: _date_part, exp.Anonymous: _date_part,
    exp.Round: _round, exp.Abs: _unary("abs_checked"),
    exp.Floor: _unary("floor", as_double=True), exp.Ceil: _unary("ceil", as_double=True),
    exp.Lower: _unary("utf8_lower"), exp.Upper: _unary("utf8_upper"),
    exp.Length: _length, exp.Substring: _substr, exp.Trim: _trim, exp.DPipe: _concat,
}
