"""gateway.drivers.arrow_values builds what pa.array builds, without importing pandas."""

from __future__ import annotations

import datetime as dt
import decimal
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.drivers import arrow_values

ZONES = [None, "UTC", "Europe/Paris", "+05:30"]


def _ints(bits: int, signed: bool) -> st.SearchStrategy[int]:
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed \
        else st.integers(0, 2 ** bits - 1)


def _datetimes() -> st.SearchStrategy[dt.datetime]:
    fixed = st.just(dt.timezone(dt.timedelta(hours=-7)))
    return st.datetimes(min_value=dt.datetime(1700, 1, 1), max_value=dt.datetime(2250, 1, 1),
                        timezones=st.none() | st.timezones() | fixed)


def _decimals(precision: int, scale: int) -> st.SearchStrategy[Any]:
    whole = 10 ** (precision - scale) - 1
    return st.decimals(min_value=-whole, max_value=whole, places=scale, allow_nan=False,
                       allow_infinity=False) | st.integers(-whole, whole)


CASES: list[tuple[pa.DataType, st.SearchStrategy[Any]]] = [
    *[(getattr(pa, f"{'' if s else 'u'}int{b}")(), _ints(b, s))
      for b in (8, 16, 32, 64) for s in (True, False)],
    (pa.float32(), st.floats(width=32) | st.integers(-2 ** 24, 2 ** 24)),
    (pa.float64(), st.floats() | st.integers(-2 ** 53, 2 ** 53)),
    (pa.bool_(), st.booleans()),
    (pa.string(), st.text()),
    (pa.large_string(), st.text()),
    (pa.binary(), st.binary()),
    (pa.large_binary(), st.binary()),
    (pa.date32(), st.dates()),
    *[(pa.timestamp(unit, tz), _datetimes()) for unit in ("s", "ms", "us", "ns") for tz in ZONES],
    (pa.timestamp("us"), st.integers(-2 ** 62, 2 ** 62)),
    *[(getattr(pa, f"time{32 if unit in ('s', 'ms') else 64}")(unit), st.times())
      for unit in ("s", "ms", "us", "ns")],
    (pa.time64("us"), st.integers(0, 86_400_000_000 - 1)),
    (pa.time32("s"), st.integers(0, 86_399)),
    (pa.decimal128(38, 0), _decimals(38, 0)),
    (pa.decimal128(10, 2), _decimals(10, 2)),
    (pa.decimal128(38, 10), _decimals(38, 10)),
    (pa.decimal256(50, 5), _decimals(50, 5)),
]


@pytest.mark.parametrize(("arrow_type", "values"), CASES, ids=[str(t) for t, _ in CASES])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_an_array_equals_what_pa_array_builds(arrow_type, values, data):
    items = data.draw(st.lists(st.none() | values, max_size=40))
    if pa.types.is_timestamp(arrow_type) and arrow_type.unit == "ns":
        # pa.array refuses nanosecond timestamps outside 1677-2262; so does int64
        items = [v for v in items if v is None or dt.datetime(1678, 1, 1) < v.replace(tzinfo=None)
                 < dt.datetime(2261, 1, 1)]
    built = arrow_values.array(items, arrow_type)
    built.validate(full=True)
    expected = pa.array(items, arrow_type)
    assert built.type == expected.type
    assert built.null_count == expected.null_count
    assert built.equals(expected) or _same_floats(built, expected)


def _same_floats(a: pa.Array, b: pa.Array) -> bool:
    """NaN is not equal to itself in Array.equals: compare the bits."""
    return pa.types.is_floating(a.type) and a.to_pylist().__repr__() == b.to_pylist().__repr__()


@given(st.lists(st.none(), max_size=10))
def test_a_null_array(items):
    assert arrow_values.array(items, pa.null()).equals(pa.array(items, pa.null()))


@pytest.mark.parametrize(("value", "arrow_type"), [
    (3, pa.int64()), (None, pa.int8()), (2.5, pa.float64()), ("é", pa.string()),
    (decimal.Decimal("1.50"), pa.decimal128(10, 2)), (dt.date(2024, 2, 29), pa.date32()),
    (dt.datetime(2024, 1, 1, 12), pa.timestamp("ms", "UTC")), (None, pa.null()),
    (dt.time(23, 59, 59, 999_999), pa.time64("us")), (None, pa.time64("us")),
])
def test_a_scalar_equals_what_pa_scalar_builds(value, arrow_type):
    assert arrow_values.scalar(value, arrow_type).equals(pa.scalar(value, arrow_type))


@pytest.mark.parametrize(("values", "arrow_type", "error"), [
    ([300], pa.int8(), pa.ArrowInvalid),
    ([-1], pa.uint32(), pa.ArrowInvalid),
    (["1"], pa.int64(), pa.ArrowTypeError),
    ([1], pa.string(), pa.ArrowTypeError),
    ([decimal.Decimal("1.234")], pa.decimal128(10, 2), pa.ArrowInvalid),
    ([decimal.Decimal("123456789.1")], pa.decimal128(10, 2), pa.ArrowInvalid),
    ([decimal.Decimal("NaN")], pa.decimal128(10, 2), pa.ArrowTypeError),
    ([1], pa.null(), pa.ArrowInvalid),
    ([[1]], pa.list_(pa.int64()), TypeError),
])
def test_what_does_not_fit_is_refused(values, arrow_type, error):
    with pytest.raises(error):
        arrow_values.array(values, arrow_type)


def test_building_arrays_imports_no_pandas():
    code = ("import sys, datetime, decimal, pyarrow as pa\n"
            "from gateway.drivers import arrow_values as av\n"
            "av.array([1, None], pa.int64()); av.array(['a', None], pa.string())\n"
            "av.array([True], pa.bool_()); av.array([datetime.date(2020, 1, 1)], pa.date32())\n"
            "av.array([decimal.Decimal('1.5')], pa.decimal128(5, 1)); av.scalar(1.5, pa.float64())\n"
            "av.array([datetime.time(1, 2), 3], pa.time64('us'))\n"
            "print('pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
