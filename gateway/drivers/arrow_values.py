"""Arrow arrays and scalars from Python values, without importing pandas.

``pa.array`` and ``pa.scalar`` ask pandas whether their argument is one of
its objects, and so import it (about 0.2 s) wherever it is installed: a
one-row ``arrowgate query`` spent a third of its time there. :func:`array`
builds the same array from its buffers (``pa.Array.from_buffers``), which
asks nothing: fixed-width values packed by :mod:`array`, strings and binary
as offsets and data, NULLs as a validity bitmap.

The values a type takes are the ones ``pa.array`` takes for it, narrowed to
plain Python objects: ``int`` for the integer types (``bool`` too), ``float``
or ``int`` for the floating ones, anything for ``bool`` (its truth),
``str`` for strings and ``bytes``/``str`` for binary, ``datetime.date`` or
days for ``date32``, ``datetime.datetime`` or ticks of the unit for
timestamps (an aware one is converted to UTC, a naive one taken as UTC),
``datetime.time`` or ticks of the unit for ``time32`` and ``time64``,
``decimal.Decimal`` or ``int`` for decimals; ``None`` is NULL in every type.
"""

from __future__ import annotations

import datetime as dt
import decimal
from array import array as packed
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

import pyarrow as pa

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_UTC = dt.UTC


def _code(kind: str, size: int) -> str:
    """The :mod:`array` type code for ``size``-byte values of ``kind`` (signed, unsigned)."""
    codes = "bhilq" if kind == "signed" else "BHILQ"
    return next(c for c in codes if packed(c).itemsize == size)


_FIXED = {
    pa.int8(): _code("signed", 1), pa.int16(): _code("signed", 2),
    pa.int32(): _code("signed", 4), pa.int64(): _code("signed", 8),
    pa.uint8(): _code("unsigned", 1), pa.uint16(): _code("unsigned", 2),
    pa.uint32(): _code("unsigned", 4), pa.uint64(): _code("unsigned", 8),
    pa.float32(): "f", pa.float64(): "d",
}
_TICKS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def array(values: Sequence[Any], type: pa.DataType) -> pa.Array:
    """The array ``pa.array(values, type)`` makes, for the types this module covers.

    Raises:
        TypeError: ``type`` is one this module does not build.
        pa.ArrowInvalid: a value does not fit the type (out of range, a decimal
            with more digits than its scale or precision holds, a string over
            the 2 GiB a ``string`` array holds).
        pa.ArrowTypeError: a value is of the wrong Python type.
    """
    n = len(values)
    if pa.types.is_null(type):
        if any(v is not None for v in values):
            raise pa.ArrowInvalid("a null array holds only None")
        return pa.nulls(n)
    nulls = sum(1 for v in values if v is None)
    validity = _bitmap([v is not None for v in values]) if nulls else None
    if type in _FIXED:
        data = _pack(_FIXED[type], [0 if v is None else v for v in values])
    elif pa.types.is_boolean(type):
        data = _bitmap([bool(v) for v in values])
    elif pa.types.is_date32(type):
        data = _pack("i" if packed("i").itemsize == 4 else "l",
                     [0 if v is None else _days(v) for v in values])
    elif pa.types.is_timestamp(type):
        ticks = _TICKS[type.unit]
        data = _pack(_FIXED[pa.int64()], [0 if v is None else _ticks(v, ticks) for v in values])
    elif pa.types.is_time(type):
        ticks = _TICKS[type.unit]
        data = _pack(_FIXED[pa.int32() if pa.types.is_time32(type) else pa.int64()],
                     [0 if v is None else _time_ticks(v, ticks) for v in values])
    elif pa.types.is_decimal128(type) or pa.types.is_decimal256(type):
        width = type.byte_width
        data = pa.py_buffer(b"".join(
            bytes(width) if v is None else _unscaled(v, type).to_bytes(width, "little", signed=True)
            for v in values))
    elif type in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary()):
        text = type in (pa.string(), pa.large_string())
        encoded = [b"" if v is None else _encoded(v, text) for v in values]
        large = type in (pa.large_string(), pa.large_binary())
        offsets = _pack(_FIXED[pa.int64() if large else pa.int32()],
                        list(accumulate(map(len, encoded), initial=0)))
        return pa.Array.from_buffers(type, n, [validity, offsets, pa.py_buffer(b"".join(encoded))],
                                     null_count=nulls)
    else:
        raise TypeError(f"gateway.drivers.arrow_values does not build {type} arrays")
    return pa.Array.from_buffers(type, n, [validity, data], null_count=nulls)


def scalar(value: Any, type: pa.DataType) -> pa.Scalar:
    """The scalar ``pa.scalar(value, type)`` makes (the same values and errors as :func:`array`)."""
    return array([value], type)[0]


def _pack(code: str, values: list[Any]) -> pa.Buffer:
    try:
        return pa.py_buffer(packed(code, values))
    except OverflowError as exc:
        raise pa.ArrowInvalid(f"a value does not fit: {exc}") from None
    except TypeError as exc:
        raise pa.ArrowTypeError(str(exc)) from None


def _bitmap(flags: list[bool]) -> pa.Buffer:
    """Arrow's bit order: value i is bit i % 8 of byte i // 8."""
    if not flags:
        return pa.py_buffer(b"")
    bits = "".join(["1" if f else "0" for f in reversed(flags)])
    return pa.py_buffer(int(bits, 2).to_bytes((len(flags) + 7) // 8, "little"))


def _days(value: Any) -> int:
    if isinstance(value, dt.date):
        return value.toordinal() - _EPOCH_ORDINAL
    if isinstance(value, int):
        return value
    raise pa.ArrowTypeError(f"a date32 value must be a date or days, not {type(value).__name__}")


def _ticks(value: Any, per_second: int) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_UTC).replace(tzinfo=None)
        seconds = ((value.toordinal() - _EPOCH_ORDINAL) * 86_400 + value.hour * 3_600
                   + value.minute * 60 + value.second)
        return seconds * per_second + value.microsecond * per_second // 1_000_000
    if isinstance(value, int):
        return value
    raise pa.ArrowTypeError(
        f"a timestamp value must be a datetime or ticks, not {type(value).__name__}")


def _time_ticks(value: Any, per_second: int) -> int:
    if isinstance(value, dt.time):
        seconds = value.hour * 3_600 + value.minute * 60 + value.second
        return seconds * per_second + value.microsecond * per_second // 1_000_000
    if isinstance(value, int):
        return value
    raise pa.ArrowTypeError(
        f"a time value must be a time or ticks, not {type(value).__name__}")


def _unscaled(value: Any, type: Any) -> int:
    """``value`` times 10**scale, exactly; raises when that is not a whole number in range."""
    if isinstance(value, int):
        unscaled = value * 10 ** type.scale
    elif isinstance(value, decimal.Decimal) and value.is_finite():
        sign, digits, exponent = value.as_tuple()
        assert isinstance(exponent, int)  # a finite Decimal's exponent is a number
        coefficient = int("".join(map(str, digits)) or "0")
        shift = exponent + type.scale
        if shift < 0:
            coefficient, lost = divmod(coefficient, 10 ** -shift)
            if lost:
                raise pa.ArrowInvalid(f"{value} has more digits than scale {type.scale} holds")
        else:
            coefficient *= 10 ** shift
        unscaled = -coefficient if sign else coefficient
    else:
        raise pa.ArrowTypeError(f"a decimal value must be a Decimal or int, not {value!r}")
    if abs(unscaled) >= 10 ** type.precision:
        raise pa.ArrowInvalid(f"{value} does not fit in precision {type.precision}")
    return unscaled


def _encoded(value: Any, text: bool) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview) and not text:
        return bytes(value)
    raise pa.ArrowTypeError(f"expected {'str' if text else 'bytes'}, got {type(value).__name__}")
