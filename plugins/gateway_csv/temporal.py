"""DuckDB's strftime, date_part/extract and date_trunc over Arrow, and the grain each needs.

Each function's answer depends on its timestamp only down to some unit: the
year for ``strftime('%Y', ts)``, the day for ``date_part('dow', ts)``, the
second for ``strftime(ts, '%H:%M:%S')``. :func:`grain_of` names that unit, so
the fused scan can group by the timestamp truncated to it (a few groups, on
the raw bytes) and these functions finish the few keys afterwards, where they
give exactly what they give on every row.

What DuckDB prints or counts differently from Arrow is computed here, not
left to Arrow: ``%-d`` and the other unpadded specifiers, ``%g``/``%f``/``%n``
(fractions of a second), ``%c`` and ``%x``; date_part's ``dow`` (Sunday 0),
``millisecond`` (with the seconds), ``century``. Specifiers and parts DuckDB
has that are not here (``%z``, ``%Z``, ``julian``, ``timezone``) are
Unsupported, so the fallback engine answers them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from gateway.cli.startup import LazyModule
from gateway.drivers import arrow_values
from gateway.errors import Unsupported

if TYPE_CHECKING:
    from sqlglot import exp
else:
    # used only by the functions reading the planner's nodes (strftime_arguments ...
    # grain_of): the aggregations read without the planner (gateway_csv.shape_aggregation) call the
    # others, and import no sqlglot (see gateway.cli.startup)
    exp = LazyModule("sqlglot.expressions")


def _kernels() -> Any:
    """``pyarrow._compute``, whose ``call_function`` and option classes are all these
    functions need: 21-27 ms to import, where ``pyarrow.compute`` (and so ``Array.cast``)
    takes 70-100 ms (see gateway.cli.startup), which a one-query process would pay."""
    try:
        import pyarrow._compute as kernels
    except ImportError:  # a pyarrow that moved them: the public module has them too
        import pyarrow.compute as kernels
    return kernels


#: the Arrow type of each kind of Python constant the functions here pass (the type
#: ``pa.scalar`` would infer; built by gateway.drivers.arrow_values, which imports no pandas)
_CONSTANT_TYPES = {int: pa.int64(), float: pa.float64(), str: pa.string()}


def _call(name: str, *args: Any, options: Any = None) -> Any:
    values = [a if isinstance(a, pa.Array | pa.ChunkedArray | pa.Scalar)
              else arrow_values.scalar(a, _CONSTANT_TYPES[type(a)]) for a in args]
    return _kernels().call_function(name, values, options)


def _cast(value: Any, to: pa.DataType) -> Any:
    return _call("cast", value, options=_kernels().CastOptions.safe(to))


def _floor(value: Any, unit: str) -> Any:
    return _call("floor_temporal", value, options=_kernels().RoundTemporalOptions(unit=unit))


def _strftime(value: Any, fmt: str) -> Any:
    return _call("strftime", value, options=_kernels().StrftimeOptions(format=fmt))


def _weekday(value: Any, count_from_zero: bool, week_start: int) -> Any:
    return _call("day_of_week", value, options=_kernels().DayOfWeekOptions(
        count_from_zero=count_from_zero, week_start=week_start))

#: units a timestamp is truncated to, coarsest first (the fused scan's F_TRUNC_* and
#: F_IDENT for MICROSECOND)
YEAR, MONTH, DAY, HOUR, MINUTE, SECOND, MICROSECOND = range(7)

#: strftime specifiers Arrow prints as DuckDB does, and the grain each needs
_ARROW_SPECS = {
    "Y": YEAR, "y": YEAR, "m": MONTH, "b": MONTH, "B": MONTH, "h": MONTH,
    "d": DAY, "a": DAY, "A": DAY, "w": DAY, "u": DAY, "j": DAY, "U": DAY, "W": DAY, "V": DAY,
    "G": DAY, "H": HOUR, "I": HOUR, "p": HOUR, "M": MINUTE, "S": SECOND, "X": SECOND,
    "T": SECOND, "%": YEAR,
}
#: DuckDB specifiers Arrow lacks or prints otherwise, as Arrow formats
_REWRITTEN = {"c": "%Y-%m-%d %H:%M:%S", "x": "%Y-%m-%d"}
_REWRITTEN_GRAIN = {"c": SECOND, "x": DAY}
_SPEC = re.compile(r"%(-?)(.?)", re.DOTALL)


def _unsupported(what: str) -> Unsupported:
    return Unsupported(f"the csv engine does not run {what}", engines=("duckdb",))


def _timestamps(value: Any) -> Any:
    """Dates as timestamps at midnight (as DuckDB's strftime and date_part read them)."""
    if pa.types.is_date(value.type):
        return _cast(value, pa.timestamp("us"))
    return value


# ----------------------------------------------------------------- strftime

def _pieces(fmt: str) -> list[tuple[str, str]]:
    """The format as ("arrow", an Arrow format) and ("part", a DuckDB-only specifier) runs."""
    if not fmt:
        raise _unsupported("strftime with an empty format")  # DuckDB refuses it
    pieces: list[tuple[str, str]] = []
    run = ""
    pos = 0
    for m in _SPEC.finditer(fmt):
        run += fmt[pos:m.start()].replace("%", "%%")
        pos = m.end()
        dash, spec = m.groups()
        if not dash and spec in _ARROW_SPECS:
            run += m.group()
        elif not dash and spec in _REWRITTEN:
            run += _REWRITTEN[spec]
        elif (dash and spec in _UNPADDED) or (not dash and spec in _FRACTIONS):
            if run:
                pieces.append(("arrow", run))
            run = ""
            pieces.append(("part", dash + spec))
        else:
            raise _unsupported(f"the strftime specifier %{dash}{spec} (in {fmt!r})")
    run += fmt[pos:].replace("%", "%%")
    if run:
        pieces.append(("arrow", run))
    return pieces


def strftime_grain(fmt: str) -> int:
    """The unit strftime(ts, fmt) needs of ts."""
    grain = YEAR
    for m in _SPEC.finditer(fmt):
        dash, spec = m.groups()
        if dash:
            grain = max(grain, _UNPADDED[spec][0]) if spec in _UNPADDED else MICROSECOND
        else:
            grain = max(grain, _ARROW_SPECS.get(spec, _REWRITTEN_GRAIN.get(spec, MICROSECOND)))
    return grain


def strftime(value: Any, fmt: str) -> Any:
    """DuckDB's strftime of timestamps or dates (an array or a scalar) as text."""
    value = _timestamps(value)
    pieces = _pieces(fmt)
    # Arrow's %S prints fractions of a second; DuckDB's does not
    seconds = _cast(_floor(value, "second"), pa.timestamp("s", value.type.tz))
    parts = [_strftime(seconds, text) if kind == "arrow" else _part_text(value, text)
             for kind, text in pieces]
    if len(parts) == 1:
        return parts[0]
    return _call("binary_join_element_wise", *parts, "")


def _part_text(value: Any, spec: str) -> Any:
    if spec in _FRACTIONS:
        digits, scale = _FRACTIONS[spec]
        micros = _micros_of_second(value, with_seconds=False)
        number = micros if scale == 1 else _call("divide", micros, scale) if scale > 1 \
            else _call("multiply", micros, -scale)
        return _call("utf8_lpad", _cast(number, pa.string()),
                     options=_kernels().PadOptions(width=digits, padding="0"))
    return _cast(_UNPADDED[spec[1:]][1](value), pa.string())


def _micros_of_second(value: Any, with_seconds: bool) -> Any:
    micros = _call("add", _call("multiply", _call("millisecond", value), 1000), _call("microsecond", value))
    if with_seconds:
        micros = _call("add", _call("multiply", _call("second", value), 1_000_000), micros)
    return micros


def _remainder(value: Any, divisor: int) -> Any:
    return _call("subtract", value, _call("multiply", _call("divide", value, divisor), divisor))


def _hour12(value: Any) -> Any:
    h = _remainder(_call("hour", value), 12)
    return _call("if_else", _call("equal", h, 0), 12, h)


#: %-X specifiers: DuckDB's numbers without padding (grain, number)
_UNPADDED: dict[str, tuple[int, Callable[[Any], Any]]] = {
    "d": (DAY, lambda v: _call("day", v)), "m": (MONTH, lambda v: _call("month", v)),
    "y": (YEAR, lambda v: _remainder(_call("year", v), 100)), "H": (HOUR, lambda v: _call("hour", v)),
    "I": (HOUR, _hour12), "M": (MINUTE, lambda v: _call("minute", v)),
    "S": (SECOND, lambda v: _call("second", v)), "j": (DAY, lambda v: _call("day_of_year", v)),
}
#: fractions of a second: (digits, microseconds divided by it, or multiplied by -it)
_FRACTIONS = {"g": (3, 1000), "f": (6, 1), "n": (9, -1000)}


def timestamp_text(value: Any) -> Any:
    """Timestamps as DuckDB writes them as VARCHAR: ``2024-03-10 02:30:00``, the fraction
    of a second only when there is one and without its trailing zeros
    (``...:00.12``), and ``+00`` after a TIMESTAMPTZ (DuckDB's session zone here is UTC)."""
    seconds = _floor(value, "second")
    text = _strftime(_cast(seconds, pa.timestamp("s", value.type.tz)), "%Y-%m-%d %H:%M:%S")
    micros = _call("subtract", _cast(_cast(value, pa.timestamp("us", value.type.tz)), pa.int64()),
                   _cast(_cast(seconds, pa.timestamp("us", value.type.tz)), pa.int64()))
    digits = _call("utf8_lpad", _cast(micros, pa.string()),
                   options=_kernels().PadOptions(width=6, padding="0"))
    fraction = _call("if_else", _call("equal", micros, 0), "",
                     _call("binary_join_element_wise", ".",
                           _call("utf8_rtrim", digits,
                                 options=_kernels().TrimOptions(characters="0")), ""))
    zone = "+00" if value.type.tz else ""
    return _call("binary_join_element_wise", text, fraction, zone, "")


# ---------------------------------------------------------------- date_part

def _century(years: Any, size: int) -> Any:
    after = _call("add", _call("divide", _call("subtract", years, 1), size), 1)
    before = _call("subtract", _call("divide", years, size), 1)
    return _call("if_else", _call("greater", years, 0), after, before)


def _epoch(value: Any) -> Any:
    micros = _cast(_cast(value, pa.timestamp("us", value.type.tz)), pa.int64())
    # the nearest double past 2**53 microseconds (before 1685, after 2255), as DuckDB's
    as_double = _call("cast", micros, options=_kernels().CastOptions.unsafe(pa.float64()))
    return _call("divide", as_double, 1_000_000.0)


#: date_part's parts: grain and the function (of timestamps), by DuckDB's name
_PARTS: dict[str, tuple[int, Callable[[Any], Any]]] = {
    "year": (YEAR, lambda v: _call("year", v)),
    "decade": (YEAR, lambda v: _call("divide", _call("year", v), 10)),
    "century": (YEAR, lambda v: _century(_call("year", v), 100)),
    "millennium": (YEAR, lambda v: _century(_call("year", v), 1000)),
    "era": (YEAR, lambda v: _call("if_else", _call("greater", _call("year", v), 0), 1, 0)),
    "quarter": (MONTH, lambda v: _call("quarter", v)),
    "month": (MONTH, lambda v: _call("month", v)),
    "day": (DAY, lambda v: _call("day", v)),
    "dow": (DAY, lambda v: _weekday(v, count_from_zero=True, week_start=7)),
    "isodow": (DAY, lambda v: _weekday(v, count_from_zero=False, week_start=1)),
    "doy": (DAY, lambda v: _call("day_of_year", v)),
    "week": (DAY, lambda v: _call("iso_week", v)),
    "isoyear": (DAY, lambda v: _call("iso_year", v)),
    "yearweek": (DAY, lambda v: _call("add", _call("multiply", _call("iso_year", v), 100),
                                           _call("iso_week", v))),
    "hour": (HOUR, lambda v: _call("hour", v)),
    "minute": (MINUTE, lambda v: _call("minute", v)),
    "second": (SECOND, lambda v: _call("second", v)),
    "millisecond": (MICROSECOND, lambda v: _call("divide", _micros_of_second(v, True), 1000)),
    "microsecond": (MICROSECOND, lambda v: _micros_of_second(v, True)),
    "epoch": (MICROSECOND, _epoch),
}
#: DuckDB's other names for the parts (date_part and date_trunc take them all)
_ALIASES = {
    **{a: "year" for a in ("years", "y", "yr", "yrs")},
    **{a: "month" for a in ("months", "mon", "mons")},
    **{a: "day" for a in ("days", "d", "dayofmonth")},
    **{a: "hour" for a in ("hours", "h", "hr", "hrs")},
    **{a: "minute" for a in ("minutes", "m", "min", "mins")},
    **{a: "second" for a in ("seconds", "s", "sec", "secs")},
    **{a: "millisecond" for a in ("milliseconds", "ms", "msec", "msecs", "msecond",
                                  "mseconds")},
    **{a: "microsecond" for a in ("microseconds", "us", "usec", "usecs", "usecond",
                                  "useconds")},
    "quarters": "quarter", **{a: "week" for a in ("weeks", "w", "weekofyear")},
    "dayofweek": "dow", "weekday": "dow", "dayofyear": "doy",
    **{a: "decade" for a in ("decades", "dec", "decs")},
    **{a: "century" for a in ("centuries", "cent", "c")},
    **{a: "millennium" for a in ("millennia", "millenniums", "mil", "mils", "millenium")},
}


def part_name(text: str) -> str:
    """DuckDB's canonical name of a date part (``yr`` -> ``year``), or the text lowered."""
    lowered = text.lower()
    return _ALIASES.get(lowered, lowered)


def date_part(part: str, value: Any) -> Any:
    """DuckDB's date_part(part, value) / extract(part FROM value): BIGINT, epoch DOUBLE."""
    name = part_name(part)
    if name not in _PARTS:
        raise _unsupported(f"date_part / extract of {part!r}")
    return _PARTS[name][1](_timestamps(value))


# --------------------------------------------------------------- date_trunc

#: date_trunc's units Arrow floors to, and the grain each needs
_TRUNC = {"year": YEAR, "quarter": MONTH, "month": MONTH, "week": DAY, "day": DAY,
          "hour": HOUR, "minute": MINUTE, "second": SECOND, "millisecond": MICROSECOND,
          "microsecond": MICROSECOND}


def date_trunc(unit: str, value: Any) -> Any:
    """DuckDB's date_trunc: a TIMESTAMP for dates and timestamps, TIMESTAMPTZ for those."""
    name = part_name(unit)
    if name not in _TRUNC:
        raise _unsupported(f"date_trunc to {unit!r}")
    if pa.types.is_date(value.type) or pa.types.is_string(value.type):
        value = _cast(value, pa.timestamp("us"))
    return _floor(value, name)


# ---------------------------------------------------------------- the grain

def _text(node: exp.Expression | None) -> str | None:
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    return None


def strftime_arguments(node: exp.TimeToStr) -> tuple[exp.Expression, exp.Expression]:
    """(value, format) of strftime in either argument order: strftime(ts, '%Y') as DuckDB
    writes it, strftime('%Y', ts) as csvql and SQLite do (DuckDB accepts both)."""
    value, fmt = node.this, node.args["format"]
    if _text(value) is not None and _text(fmt) is None:
        value, fmt = fmt, value
    return value, fmt


def date_part_arguments(node: exp.Expression) -> tuple[str, exp.Expression] | None:
    """(part, value) of extract(part FROM value) or date_part('part', value); None when the
    node is neither, or its part is not a constant."""
    if isinstance(node, exp.Extract) and isinstance(node.this, exp.Var | exp.Literal):
        return str(node.this.name), node.expression
    if isinstance(node, exp.Anonymous) and node.name.lower() in ("date_part", "datepart") \
            and len(node.expressions) == 2:
        part = _text(node.expressions[0])
        return None if part is None else (part, node.expressions[1])
    return None


def trunc_unit(node: exp.TimestampTrunc | exp.DateTrunc) -> str:
    unit = node.args["unit"]
    return unit.name if isinstance(unit, exp.Var | exp.Literal) else unit.sql()


#: what a strftime specifier prints of a timestamp (I and p print the hour together)
_FIELDS = {"Y": "Y", "m": "m", "-m": "m", "b": "m", "B": "m", "h": "m", "d": "d", "-d": "d",
           "j": "j", "-j": "j", "H": "H", "-H": "H", "M": "M", "-M": "M", "S": "S", "-S": "S",
           "c": "YmdHMS", "x": "Ymd", "T": "HMS", "X": "HMS", "g": "g", "f": "f", "n": "f"}
#: per grain, the sets of fields that tell its truncated values apart
_TELLS = {YEAR: ["Y"], MONTH: ["Ym"], DAY: ["Ymd", "Yj"], HOUR: ["YmdH", "YjH"],
          MINUTE: ["YmdHM", "YjHM"], SECOND: ["YmdHMS", "YjHMS"], MICROSECOND: ["YmdHMSf", "YjHMSf"]}
#: date_part's parts and date_trunc's units that give each truncated value its own answer
_ONE_TO_ONE_PARTS = {"year", "epoch"}
_ONE_TO_ONE_UNITS = {"year", "month", "day", "hour", "minute", "second", "microsecond"}


def strftime_one_to_one(fmt: str) -> bool:
    """Whether strftime(ts, fmt) gives distinct texts for distinct timestamps truncated
    to its grain (:func:`strftime_grain`)."""
    specs = {m.group(1) + m.group(2) for m in _SPEC.finditer(fmt)}
    fields = {field for spec in specs for field in _FIELDS.get(spec, "")}
    if specs & {"I", "-I"} and "p" in specs:
        fields.add("H")
    return any(set(need) <= fields for need in _TELLS[strftime_grain(fmt)])


def one_to_one(node: exp.Expression) -> bool:
    """Whether the function gives distinct answers for distinct values truncated to its
    grain (strftime('%Y-%m') of months, date_trunc('month') of months), so no two of the
    scanner's groups can share an answer; False when unsure."""
    if isinstance(node, exp.TimeToStr):
        return strftime_one_to_one(_text(strftime_arguments(node)[1]) or "")
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
        return part_name(trunc_unit(node)) in _ONE_TO_ONE_UNITS
    found = date_part_arguments(node)
    return found is not None and part_name(found[0]) in _ONE_TO_ONE_PARTS


def grain_of(node: exp.Expression) -> tuple[exp.Expression, int] | None:
    """(the timestamp argument, the unit the answer needs of it) for strftime with a
    constant format, date_part/extract of a known part and date_trunc to a known unit;
    None for anything else (so the query is not fused on this key)."""
    if isinstance(node, exp.TimeToStr):
        value, fmt = strftime_arguments(node)
        text = _text(fmt)
        if text is None:
            return None
        try:
            _pieces(text)
        except Unsupported:
            return None
        return value, strftime_grain(text)
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
        name = part_name(trunc_unit(node))
        return (node.this, _TRUNC[name]) if name in _TRUNC else None
    found = date_part_arguments(node)
    if found is not None:
        name = part_name(found[0])
        return (found[1], _PARTS[name][0]) if name in _PARTS else None
    return None


__all__ = ["DAY", "HOUR", "MICROSECOND", "MINUTE", "MONTH", "SECOND", "YEAR", "date_part",
           "date_part_arguments", "date_trunc", "grain_of", "one_to_one", "part_name", "strftime",
           "strftime_arguments", "strftime_grain", "trunc_unit"]
