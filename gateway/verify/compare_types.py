"""The types two answers are compared in, and the casts that bring each side there.

Used by :mod:`gateway.verify.compare` (aligning two answers), :mod:`gateway.verify.row_pairing`
and :mod:`gateway.verify.compare_stream`. The rules, type family by type family, are in
docs/shadow.md ("Equality, type by type"): numbers of mixed types meet in the
type that holds both exactly (a float only where one side is a float),
timestamps in one unit in UTC, strings in large_string, dictionaries and
run-end encoding decoded, list views rebuilt as lists, unions as structs,
intervals as the struct of their fields, UUIDs as their text, decimals past
38 digits as their text at one scale.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.verify.verdict import CompareOptions

#: integers up to this magnitude are exact in a float64; beyond it, only some are
EXACT_FLOAT_RANGE = 2**53


def _kind(t: pa.DataType) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if isinstance(t, pa.BaseExtensionType):
        return "uuid" if t.extension_name == "arrow.uuid" else "other"
    checks = (("null", pa.types.is_null), ("bool", pa.types.is_boolean),
              ("int", pa.types.is_integer), ("float", pa.types.is_floating),
              ("decimal", pa.types.is_decimal), ("timestamp", pa.types.is_timestamp),
              ("date", pa.types.is_date), ("time", pa.types.is_time),
              ("duration", pa.types.is_duration), ("struct", pa.types.is_struct),
              ("map", pa.types.is_map))
    for name, check in checks:
        if check(t):
            return name
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t) \
            or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return "list"
    return "other"


def contains_float(t: pa.DataType) -> bool:
    """True when ``t`` is a float type or a nested type with a float inside."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return contains_float(t.value_type)
    if pa.types.is_floating(t):
        return True
    return any(contains_float(t.field(i).type) for i in range(t.num_fields))


_UNIT_RANK = {"s": 0, "ms": 1, "us": 2, "ns": 3}
#: decimal digits of each integer type's largest value
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def _common_decimal(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """Integers and decimals: the decimal holding both exactly (a 256-bit one past 38 digits,
    which :func:`_cast` then writes as text: DuckDB reads no 256-bit decimal)."""
    import pyarrow as pa

    def digits(t: pa.DataType) -> tuple[int, int]:
        if pa.types.is_integer(t):
            return _INT_DIGITS[t.bit_width] + (t == pa.uint64()), 0
        return t.precision - t.scale, t.scale

    (ia, sa), (ib, sb) = digits(a), digits(b)
    scale = max(sa, sb)
    precision = max(ia, ib) + scale
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


def _common_type(a: pa.DataType, b: pa.DataType, opts: CompareOptions) -> pa.DataType | None:
    """The type both columns are cast to before comparing, or None when incompatible.

    Nested types (lists of every kind, structs with the same field names, maps)
    get the common type of their parts, so the equivalences hold at every depth.
    """
    import pyarrow as pa

    ka, kb = _kind(a), _kind(b)
    if pa.types.is_dictionary(a):
        a = a.value_type
    if pa.types.is_dictionary(b):
        b = b.value_type
    if ka == "null" and kb == "null":
        return pa.null()
    if ka == "null":
        return _common_type(b, b, opts)
    if kb == "null":
        return _common_type(a, a, opts)
    numeric = ("int", "float", "decimal")
    if ka in numeric and kb in numeric:
        if not opts.numeric_types_equivalent and a != b:
            return None
        if ka == kb == "int":
            return a if a == b else (pa.decimal128(38, 0) if pa.uint64() in (a, b) else pa.int64())
        if "float" in (ka, kb):
            return pa.float64()
        return a if a == b else _common_decimal(a, b)
    if "uuid" in (ka, kb) and {ka, kb} <= {"uuid", "string"}:
        # DuckDB hands a UUID out as either, by arrow_lossless_conversion
        return pa.large_string() if "string" in (ka, kb) or opts.strings_equivalent else a
    if ka != kb:
        return None
    if ka in ("string", "binary"):
        if a != b and not opts.strings_equivalent:
            return None
        return pa.large_string() if ka == "string" else pa.large_binary()
    if ka == "timestamp":
        if a == b:
            return pa.timestamp(a.unit, tz="UTC" if a.tz else None)
        if not opts.timestamps_equivalent:
            return None
        if (a.tz is None) != (b.tz is None) and not opts.naive_timestamps_as_utc:
            return None
        unit = max(a.unit, b.unit, key=_UNIT_RANK.__getitem__)
        return pa.timestamp(unit, tz="UTC")
    if ka in ("date", "time", "duration"):
        if a == b:
            return a
        if ka == "date":
            return pa.date32()
        unit = max(a.unit, b.unit, key=_UNIT_RANK.__getitem__)
        return pa.time64(unit) if ka == "time" and unit in ("us", "ns") else (
            pa.time32(unit) if ka == "time" else pa.duration(unit))
    if ka == "list":
        if type(a) is not type(b) and not opts.strings_equivalent:
            return None
        inner = _common_type(a.value_type, b.value_type, opts)
        return None if inner is None else pa.large_list(inner)
    if ka == "struct":
        names = [a.field(i).name for i in range(a.num_fields)]
        if names != [b.field(i).name for i in range(b.num_fields)]:
            return None
        fields = [_common_type(a.field(i).type, b.field(i).type, opts) for i in range(a.num_fields)]
        if any(f is None for f in fields):
            return None
        return pa.struct([pa.field(n, t) for n, t in zip(names, fields, strict=True)])
    if ka == "map":
        key, item = _common_type(a.key_type, b.key_type, opts), \
            _common_type(a.item_type, b.item_type, opts)
        if key is None or item is None:
            return None
        return map_of(a, key, item)
    return a if a == b else None


def map_of(like: Any, key: Any, item: Any) -> Any:
    """The map type of ``like`` with ``key`` and ``item`` types, its fields otherwise kept:
    ``pa.map_(key, item)`` makes a non-nullable key field, which a null key type (the
    empty maps DuckDB types ``MAP(NULL, NULL)``) may not have."""
    import pyarrow as pa

    return pa.map_(like.key_field.with_type(key), like.item_field.with_type(item),
                   keys_sorted=like.keys_sorted)


#: the fields a month_day_nano interval is compared as: each apart, or with 30-day months
INTERVAL_FIELDS = (("months", "int32"), ("days", "int32"), ("nanoseconds", "int64"))
INTERVAL_30_DAY_FIELDS = (("days", "int64"), ("nanoseconds", "int64"))
_DAY_NS = 86_400 * 10**9


def compared_type(a: pa.DataType, b: pa.DataType, opts: CompareOptions) -> pa.DataType | None:
    """The type a column of type ``a`` against one of ``b`` is compared in (None: none).

    :func:`_common_type`, except that an interval becomes a struct of its fields
    (:data:`INTERVAL_FIELDS`, or :data:`INTERVAL_30_DAY_FIELDS` with
    ``interval_month_is_30_days``), at any depth: DuckDB takes a month as 30 days when
    it compares.
    """
    common = _common_type(_plain_type(a), _plain_type(b), opts)
    return None if common is None else _intervals_as_fields(common, opts)


def _intervals_as_fields(t: pa.DataType, opts: CompareOptions) -> pa.DataType:
    """``t`` with every interval in it, at any depth, the struct it is compared as."""
    import pyarrow as pa

    if pa.types.is_interval(t):
        fields = INTERVAL_30_DAY_FIELDS if opts.interval_month_is_30_days else INTERVAL_FIELDS
        return pa.struct([(name, pa.type_for_alias(f)) for name, f in fields])
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_intervals_as_fields(t.field(i).type, opts))
                          for i in range(t.num_fields)])
    if pa.types.is_large_list(t):
        return pa.large_list(_intervals_as_fields(t.value_type, opts))
    if pa.types.is_map(t):
        return map_of(t, t.key_type, _intervals_as_fields(t.item_type, opts))
    return t


def _holds_interval(t: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_interval(t)) or any(_holds_interval(t.field(i).type)
                                                for i in range(t.num_fields))


def _with_interval_fields(column: Any, target: pa.DataType) -> Any:
    """``column`` (holding intervals, at any depth) with each interval the struct ``target``
    has in its place; the rest is cast by :func:`_cast_to`."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([_with_interval_fields(c, target) for c in column.chunks],
                                target)
    t = column.type
    mask = column.is_null() if column.null_count else None
    if pa.types.is_interval(t):
        return _interval_fields(column, target)
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays(
            [_cast_to(column.field(i), target.field(i).type) for i in range(t.num_fields)],
            fields=list(target), mask=mask)
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(column.offsets, column.keys,
                                       _cast_to(column.items, target.item_type), type=target,
                                       mask=mask)
    if not pa.types.is_large_list(t):
        column = column.cast(pa.large_list(t.value_type))
    return pa.LargeListArray.from_arrays(column.offsets, _cast_to(column.values,
                                                                  target.value_type), mask=mask)


def _is_view(t: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_list_view(t) or pa.types.is_large_list_view(t))


def _plain_type(t: pa.DataType) -> pa.DataType:
    """``t`` as :func:`_plain_array` writes it: run-end encoding decoded, list views as
    lists, a union as a struct of its type code and one field per member."""
    import pyarrow as pa

    if pa.types.is_run_end_encoded(t):
        return _plain_type(t.value_type)
    if _is_view(t):
        return pa.large_list(_plain_type(t.value_type))
    if pa.types.is_union(t):
        return pa.struct([("type_code", pa.int8())] + [
            (str(code), _plain_type(t.field(i).type)) for i, code in enumerate(t.type_codes)])
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_plain_type(t.field(i).type))
                          for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.large_list(_plain_type(t.value_type))
    return t


def _plain_array(column: Any) -> Any:
    """``column`` in :func:`_plain_type`'s type (pyarrow 26 casts a list view to a list
    wrongly: ``[[1, 2], [], [3]]`` became ``[[1, 2], [], []]``; it casts no union)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        if _plain_type(column.type) == column.type:
            return column
        return pa.chunked_array([_plain_array(c) for c in column.chunks],
                                _plain_type(column.type))
    t = column.type
    if _plain_type(t) == t:
        return column
    mask = column.is_null() if column.null_count else None
    if pa.types.is_run_end_encoded(t):
        return _plain_array(pc.run_end_decode(column))
    if _is_view(t):
        sizes = pc.if_else(column.is_valid(), column.sizes.fill_null(0).cast(pa.int64()), 0)
        offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(sizes)])
        starts = column.offsets.fill_null(0).cast(pa.int64())
        # the value at place j of list i is at starts[i] + (j - offsets[i]) in column.values
        total = offsets[-1].as_py()
        lists = pa.LargeListArray.from_arrays(offsets, pa.nulls(total))
        shift = pc.subtract(starts, offsets.slice(0, len(column)))
        at = pc.add(shift.take(pc.list_parent_indices(lists)), _counting(total))
        values = _plain_array(column.values.take(at))
        return pa.LargeListArray.from_arrays(offsets, values, mask=mask)
    if pa.types.is_union(t):
        # (UnionArray.type_codes and .offsets ignore a slice's offset)
        n, buffers = len(column), column.buffers()
        codes = pa.Array.from_buffers(pa.int8(), n, [None, buffers[1]], offset=column.offset)
        fields = [codes]
        for i, code in enumerate(t.type_codes):
            member = column.field(i)
            if t.mode == "dense":
                at = pa.Array.from_buffers(pa.int32(), n, [None, buffers[2]], offset=column.offset)
                member = member.take(pc.if_else(pc.equal(codes, code), at, 0))
            fields.append(_plain_array(pc.if_else(pc.equal(codes, code), member,
                                                  pa.scalar(None, member.type))))
        return pa.StructArray.from_arrays(fields, fields=list(_plain_type(t)))
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([_plain_array(column.field(i))
                                           for i in range(t.num_fields)],
                                          fields=list(_plain_type(t)), mask=mask)
    # offsets widened by hand: a cast to a large list aborted the process (an Arrow C++
    # check, not a Status) for DuckDB's empty maps, whose key field is ``null not null``
    return pa.LargeListArray.from_arrays(column.offsets.cast(pa.int64()),
                                         _plain_array(column.values), mask=mask)


def _counting(n: int) -> Any:
    """0, 1, ... n - 1 as an int64 array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), 1)


def _interval_fields(column: Any, target: pa.DataType) -> Any:
    """A month_day_nano interval column as the struct ``target`` (see :func:`compared_type`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n, data = len(column), column.buffers()[1]
    # each value is 16 bytes: months (int32), days (int32), nanoseconds (int64)
    as_int32 = pa.FixedSizeListArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), 4 * n, [None, data], offset=4 * column.offset), 4)
    as_int64 = pa.FixedSizeListArray.from_arrays(
        pa.Array.from_buffers(pa.int64(), 2 * n, [None, data], offset=2 * column.offset), 2)
    months, days = pc.list_element(as_int32, 0), pc.list_element(as_int32, 1)
    nanos = pc.list_element(as_int64, 1)
    mask = column.is_null()
    if target.num_fields == 3:
        arrays = [months, days, nanos]
    else:
        # nanoseconds as whole days and what is left, floored as Python's // and % are
        quotient = pc.divide(nanos, _DAY_NS)
        rest = pc.subtract(nanos, pc.multiply(quotient, _DAY_NS))
        below = pc.less(rest, 0)
        quotient = pc.if_else(below, pc.subtract(quotient, 1), quotient)
        rest = pc.if_else(below, pc.add(rest, _DAY_NS), rest)
        arrays = [pc.add(pc.add(pc.multiply(months.cast(pa.int64()), 30), days.cast(pa.int64())),
                         quotient), rest]
    return pa.StructArray.from_arrays(arrays, fields=list(target), mask=mask)


#: where a UUID's 32 hex digits are cut by DuckDB's dashes (8-4-4-4-12)
_UUID_GROUPS = ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))


def _uuid_text(column: Any) -> Any:
    """An ``arrow.uuid`` column as the 36-character lower-case text DuckDB writes for a UUID."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    storage = column.storage
    n = len(storage)
    raw = memoryview(storage.buffers()[1])[16 * storage.offset:16 * (storage.offset + n)]
    digits = pa.Array.from_buffers(pa.large_string(), n, [
        None, pc.multiply(_counting(n + 1), 32).buffers()[1], pa.py_buffer(raw.hex().encode())])
    strings = pc.binary_join_element_wise(
        *(pc.utf8_slice_codeunits(digits, a, b) for a, b in _UUID_GROUPS),
        pa.scalar("-", pa.large_string()))
    if not storage.null_count:
        return strings
    return pc.if_else(storage.is_null(), pa.scalar(None, pa.large_string()), strings)


def _holds_int_or_decimal(t: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_integer(t) or pa.types.is_decimal(t):
        return True
    return any(_holds_int_or_decimal(t.field(i).type) for i in range(t.num_fields))


def _cast(column: Any, target: pa.DataType) -> Any:
    """``column`` in type ``target``; 256-bit decimals then as their text at their scale
    (exact, and one text per number)."""
    column = _cast_to(column, target)
    as_text = _decimal256_as_text(target)
    return column if as_text == target else column.cast(as_text)


def _decimal256_as_text(t: pa.DataType) -> pa.DataType:
    """``t`` with every 256-bit decimal in it made a large_string."""
    import pyarrow as pa

    if pa.types.is_decimal256(t):
        return pa.large_string()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_decimal256_as_text(t.field(i).type))
                          for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return map_of(t, _decimal256_as_text(t.key_type), _decimal256_as_text(t.item_type))
    if pa.types.is_large_list(t):
        return pa.large_list(_decimal256_as_text(t.value_type))
    return t


def _cast_to(column: Any, target: pa.DataType) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    column = _plain_array(column)
    if pa.types.is_timestamp(column.type) and pa.types.is_timestamp(target) \
            and (column.type.tz is None) != (target.tz is None):
        # a naive timestamp read as UTC: same stored value, zone attached
        column = column.cast(pa.timestamp(column.type.unit, tz=target.tz))
    if _holds_map(column.type):
        column = _maps_in_key_order(column)
    if _holds_interval(column.type) and not _holds_interval(target):
        return _with_interval_fields(column, target)
    if _kind(column.type) == "uuid" and pa.types.is_large_string(target):
        return _uuid_text(column)
    if column.type == target:
        return column
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), target)
    if pa.types.is_floating(target) and pa.types.is_decimal(column.type):
        return pc.cast(column, target, safe=False)
    cast = _cast_holding_maps if _holds_map(column.type) else _cast_plainly
    try:
        return cast(column, target, True)
    except pa.ArrowInvalid:
        # integers past 2**53 inside a nested value: rounded to the nearest float (the
        # one known limit of the equivalences; at the top level they are kept exact)
        if contains_float(target) and _holds_int_or_decimal(column.type):
            return cast(column, target, False)
        raise


def _cast_plainly(column: Any, target: Any, safe: bool) -> Any:
    import pyarrow.compute as pc

    return pc.cast(column, target, safe=safe)


def _cast_holding_maps(column: Any, target: Any, safe: bool) -> Any:
    """``column`` (which holds a map) cast to ``target`` part by part: Arrow's own cast
    of a map aborted the process (a C++ check, not a Status) when it held DuckDB's
    empty maps, whose key field is ``null not null`` (``MAP {[1]: MAP {}}``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = array.type
    if t == target:
        return array
    if not _holds_map(t):
        return pc.cast(array, target, safe=safe)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(t) and pa.types.is_struct(target):
        return pa.StructArray.from_arrays(
            [_cast_holding_maps(array.field(i), target.field(i).type, safe)
             for i in range(t.num_fields)], fields=list(target), mask=mask)
    if pa.types.is_map(t) and pa.types.is_map(target):
        first, last = array.offsets[0].as_py(), array.offsets[-1].as_py()
        keys = _cast_holding_maps(array.keys.slice(first, last - first), target.key_type, safe)
        items = _cast_holding_maps(array.items.slice(first, last - first), target.item_type,
                                   safe)
        return pa.MapArray.from_arrays(pc.subtract(array.offsets, first), keys, items,
                                       type=target, mask=mask)
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and \
            (pa.types.is_list(target) or pa.types.is_large_list(target)):
        first, last = array.offsets[0].as_py(), array.offsets[-1].as_py()
        values = _cast_holding_maps(array.values.slice(first, last - first),
                                    target.value_type, safe)
        offsets = pc.subtract(array.offsets, first).cast(
            pa.int64() if pa.types.is_large_list(target) else pa.int32())
        build = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        return build.from_arrays(offsets, values, type=target, mask=mask)
    return pc.cast(array, target, safe=safe)


def _holds_map(t: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_map(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _holds_map(t.value_type)
    if pa.types.is_struct(t):
        return any(_holds_map(t.field(i).type) for i in range(t.num_fields))
    return False


def _maps_in_key_order(column: Any) -> Any:
    """``column`` with the entries of every map in it sorted by key, at any depth: a map
    in a list or a struct was compared in entry order, so equal answers differed."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = array.type
    if not _holds_map(t):
        return array
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([_maps_in_key_order(array.field(i))
                                           for i in range(t.num_fields)],
                                          fields=list(t), mask=mask)
    if pa.types.is_fixed_size_list(t):
        values = array.values.slice(array.offset * t.list_size, len(array) * t.list_size)
        return pa.FixedSizeListArray.from_arrays(_maps_in_key_order(values),
                                                 type=t, mask=mask)
    if pa.types.is_map(t) and pa.types.is_null(t.key_type):
        # DuckDB's empty maps (MAP(NULL, NULL)): no entry to sort, and rebuilding one
        # aborts the process in Arrow's C++ (its null keys fail a check, not a Status)
        return array
    first, last = array.offsets[0].as_py(), array.offsets[-1].as_py()
    offsets = pc.subtract(array.offsets, first)
    if pa.types.is_map(t):
        items = _maps_in_key_order(array.items.slice(first, last - first))
        keys = _maps_in_key_order(array.keys.slice(first, last - first))
        rebuilt = pa.MapArray.from_arrays(offsets, keys, items, mask=mask)
        return _entries_in_key_order(rebuilt.cast(t) if rebuilt.type != t else rebuilt)
    values = _maps_in_key_order(array.values.slice(first, last - first))
    build = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
    return build.from_arrays(offsets, values, type=t, mask=mask)


def _entries_in_key_order(column: Any) -> Any:
    """A map column with each map's entries sorted by key: a map's entry order means nothing.

    Maps already in key order (checked entry against next entry) are left as they are.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    maps = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    first, last = maps.offsets[0].as_py(), maps.offsets[-1].as_py()
    n = last - first
    if n < 2:
        return maps
    offsets = pc.subtract(maps.offsets, first)
    keys, items = maps.keys.slice(first, last - first), maps.items.slice(first, last - first)
    # each map sorted on its own, in C, for keys of a number or a string (as Arrow's sort)
    from gateway.verify import _row_match

    ordered = _row_match.key_order(keys.__arrow_c_array__(), offsets.__arrow_c_array__())
    if ordered is not None:
        if not ordered:
            return maps
        order = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(ordered)])
        return pa.MapArray.from_arrays(offsets, keys.take(order), items.take(order),
                                       type=maps.type,
                                       mask=maps.is_null() if maps.null_count else None)
    # each entry's map (a null map's entries too, so that none is left out of place)
    owner = pc.list_parent_indices(pa.LargeListArray.from_arrays(offsets.cast(pa.int64()),
                                                                 pa.nulls(n)))
    try:
        ordered = pc.or_kleene(pc.not_equal(owner.slice(1), owner.slice(0, n - 1)),
                               pc.less_equal(keys.slice(0, n - 1), keys.slice(1)))
        if pc.all(ordered, skip_nulls=False).as_py():
            return maps
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass  # keys Arrow does not compare (lists, structs): sorted below
    by = pa.table({"o": owner, "k": keys})
    try:
        order = pc.sort_indices(by, sort_keys=[("o", "ascending"), ("k", "ascending")])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # keys Arrow cannot sort
        order = _sorted_by_duckdb(by)
    return pa.MapArray.from_arrays(offsets, keys.take(order), items.take(order), type=maps.type,
                                   mask=maps.is_null() if maps.null_count else None)


def _sorted_by_duckdb(by: Any) -> Any:
    """The indices that sort ``by`` on its columns ``o`` then ``k``, by DuckDB: map keys
    that are lists or structs (``histogram`` over lists), which Arrow's sort refuses.
    Any total order will do, as long as both answers' maps are sorted the same way."""
    import duckdb
    import pyarrow as pa

    rows = by.append_column("i", pa.array(range(by.num_rows), pa.int64()))
    with duckdb.connect() as con:
        con.register("entries", rows)
        return con.sql("SELECT i FROM entries ORDER BY o, k").to_arrow_table().column(0) \
            .combine_chunks()


def _exact_side_fits_float(column: Any) -> bool:
    """True when every integer or decimal in ``column`` is an exact float64 (|x| <= 2**53)."""
    import pyarrow.compute as pc

    if column.null_count == len(column):
        return True
    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return max(abs(low), abs(high)) <= EXACT_FLOAT_RANGE
