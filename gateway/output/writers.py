"""Writing a result stream in the CLI's output formats.

Every writer streams: batches are written as they arrive, so a large answer
never has to sit in memory (the table format keeps only the rows it shows).
A file is written whole or not at all (:func:`output_file`): a full disk never
leaves a truncated ``.parquet`` that looks valid at a glance.

No type makes a writer fail. Values a format cannot hold are written as text,
the same text in every format (:func:`plain_value`): an INTERVAL as an ISO 8601
duration (``P1M2DT3H``), a DuckDB VARINT/BIGNUM as its decimal digits, binary
(BLOB, BIT) as hex, a UNION as its member's value, an ENUM as its label; in
CSV (and Parquet, for the types it lacks) LIST, STRUCT, MAP and UNION values
are JSON text. JSON writes NaN, Infinity and -Infinity as the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (JSON has no such numbers) and
decimals as strings (their digits kept).
"""

from __future__ import annotations

import contextlib
import errno
import io
import math
import os
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from gateway.errors import OutputError

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa

#: ``arrow`` is the Arrow IPC file format (what ``.arrow`` and ``.feather`` mean, read by
#: ``pyarrow.ipc.open_file``), ``arrows`` the IPC stream format (``pyarrow.ipc.open_stream``).
FORMATS = ("table", "csv", "json", "ndjson", "arrow", "arrows", "parquet")
BINARY_FORMATS = ("arrow", "arrows", "parquet")
#: An output file's extension -> the format it means (as DuckDB's CLI reads them).
EXTENSIONS = {".parquet": "parquet", ".arrow": "arrow", ".feather": "arrow", ".arrows": "arrows",
              ".csv": "csv", ".json": "json", ".ndjson": "ndjson"}


def format_of(path: str | os.PathLike[str]) -> str | None:
    """The format an output file's extension names (:data:`EXTENSIONS`), or None."""
    return EXTENSIONS.get(os.path.splitext(os.fspath(path))[1].lower())


def write(reader: pa.RecordBatchReader, fmt: str, out: IO[bytes], *, max_rows: int = 40,
          null_text: str = "") -> int:
    """Write the whole stream to ``out`` in ``fmt``; return the number of rows.

    ``null_text`` is what CSV writes for NULL (DuckDB's CLI ``.nullvalue``).
    """
    if fmt == "csv":
        return _write_csv(reader, out, null_text=null_text)
    if fmt in ("json", "ndjson"):
        return _write_json(reader, out, lines=fmt == "ndjson")
    if fmt in ("arrow", "arrows"):
        return _write_arrow(reader, out, stream=fmt == "arrows")
    if fmt == "parquet":
        return _write_parquet(reader, out)
    if fmt == "table":
        return _write_table(reader, out, max_rows=max_rows)
    raise ValueError(f"unknown format {fmt!r}")


@contextlib.contextmanager
def output_file(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` only once everything was written to it.

    The writing goes to a temporary file in the same folder, renamed into place
    at the end; on any failure (or Ctrl-C, SIGTERM, SIGHUP: see :mod:`gateway.cli.main`) it is
    removed and ``path`` is left as it was. A device or a pipe (``/dev/stdout``)
    is written in place; a symlink's target is replaced, the link kept.

    Raises:
        OutputError: the file could not be created or written, saying why.
    """
    # imported here: a query printed to stdout needs neither (tempfile imports shutil,
    # random, bz2 and lzma: 2-3 ms of a one-row query)
    import tempfile
    from pathlib import Path

    target = Path(path)
    if target.exists() and not target.is_file():
        try:
            with target.open("wb") as device:
                yield device
        except OSError as exc:
            raise OutputError(_why(exc, target)) from None
        return
    # a symlink stays one: the answer replaces the file it points to
    target = Path(os.path.realpath(target))
    try:
        fh = tempfile.NamedTemporaryFile(  # noqa: SIM115 -- renamed or removed below
            dir=target.parent, prefix=f".{target.name}.", suffix=".partial", delete=False)
    except OSError as exc:
        raise OutputError(_why(exc, target)) from None
    try:
        with fh:
            yield fh
        # a temporary file is private (0600); the answer gets what open() would give it
        os.chmod(fh.name, target.stat().st_mode & 0o7777 if target.exists()
                 else 0o666 & ~_umask())
        os.replace(fh.name, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            fh.close()  # flushing what is left fails again on a full disk
        with contextlib.suppress(OSError):
            os.unlink(fh.name)
        if isinstance(exc, OSError):
            raise OutputError(_why(exc, target) + ": nothing written") from None
        raise


def write_text_file(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all (see :func:`output_file`)."""
    with output_file(path) as fh:
        fh.write(text.encode("utf-8"))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _why(exc: OSError, path: Path) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"disk full writing {path}"
    return f"cannot write {path}: {exc.strerror or exc}"


def _write_csv(reader: pa.RecordBatchReader, out: IO[bytes], *, null_text: str) -> int:
    import csv

    header = io.StringIO()
    csv.writer(header, lineterminator="\n").writerow(reader.schema.names)
    out.write(header.getvalue().encode())
    rows = 0
    for batch in reader:
        if batch.num_rows and batch.num_columns:
            text = {i for i, f in enumerate(batch.schema) if not _csv_writes(f.type)}
            out.write(_csv_lines(_as_text(batch, text), null_text))
            rows += batch.num_rows
    return rows


def _csv_lines(batch: pa.RecordBatch, null_text: str) -> bytes:
    """The batch's rows as CSV lines, a value quoted only when it must be (it holds a comma,
    a quote or a line break, or reads as the null text: an empty string is ``""``), as
    DuckDB's CLI writes them. Arrow's writer formats the values (its ``needed`` quoting
    quotes every string, whatever it holds)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from gateway.drivers import arrow_values
    def text(value: str) -> pa.Scalar:  # (pa.scalar imports pandas: gateway.drivers.arrow_values)
        return arrow_values.scalar(value, pa.string())

    quote, comma, newline, empty, null = text('"'), text(","), text("\n"), text(""), text(null_text)
    cells = []
    for column in batch.columns:
        value = pc.cast(column, pa.string())
        must = pc.or_(pc.match_substring_regex(value, '[,"\r\n]'), pc.equal(value, null))
        quoted = pc.binary_join_element_wise(quote, pc.replace_substring(value, '"', '""'),
                                             quote, empty)
        cells.append(pc.fill_null(pc.if_else(must, quoted, value), null))
    lines = pc.binary_join_element_wise(pc.binary_join_element_wise(*cells, comma), newline,
                                        empty)
    offsets = memoryview(lines.buffers()[1]).cast("i")
    data = lines.buffers()[2]
    start, end = offsets[lines.offset], offsets[lines.offset + len(lines)]
    return b"" if data is None else data.to_pybytes()[start:end]


def _csv_writes(t: pa.DataType) -> bool:
    """Whether Arrow's CSV writer writes this type as it is (binary may not be UTF-8)."""
    import pyarrow as pa

    return (pa.types.is_null(t) or pa.types.is_boolean(t) or pa.types.is_integer(t)
            or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_date(t)
            or pa.types.is_time(t) or pa.types.is_timestamp(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t))


def _as_text(batch: pa.RecordBatch, text: set[int]) -> pa.RecordBatch:
    """The batch with the columns at ``text`` as text: JSON for LIST, STRUCT, MAP and UNION
    (NULL stays NULL), :func:`plain_value` for the rest."""
    if not text:
        return batch
    import json

    import pyarrow as pa

    from gateway.drivers import arrow_values
    columns = []
    for i, (column, fld) in enumerate(zip(batch.columns, batch.schema, strict=True)):
        if i in text:
            values = [plain_value(v, fld.type) for v in _pylist(column)]
            as_json = _is_nested(fld.type)
            column = arrow_values.array(
                [None if v is None else json.dumps(_json_value(v), default=str, ensure_ascii=False)
                 if as_json else str(v) for v in values], pa.string())
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _is_nested(t: pa.DataType) -> bool:
    import pyarrow as pa

    if isinstance(t, pa.DictionaryType):
        return _is_nested(t.value_type)
    return pa.types.is_nested(t)  # LIST, STRUCT, MAP and UNION


def _pylist(column: pa.Array) -> list[Any]:
    try:
        return column.to_pylist(maps_as_pydicts="lossy")
    except TypeError:  # a map keyed by lists or maps (histogram of a list): no dict holds it
        return column.to_pylist()  # maps as (key, value) pairs: plain_value takes both


def plain_value(value: Any, t: pa.DataType) -> Any:
    """``value`` (as ``to_pylist`` gives it) in the documented text forms for ``t``: numbers,
    strings, booleans, dates and times as they are; see the module's docstring for the rest."""
    import pyarrow as pa

    if value is None:
        return None
    if isinstance(t, pa.BaseExtensionType):
        if getattr(t, "type_name", None) == "bignum" and isinstance(value, bytes):
            return _bignum(value)
        return plain_value(value, t.storage_type)
    if isinstance(t, pa.DictionaryType):
        return plain_value(value, t.value_type)
    if pa.types.is_interval(t):
        return _iso_duration(value.months, value.days, value.nanoseconds)
    if isinstance(value, bytes):
        return value.hex()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return [plain_value(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return {f.name: plain_value(value.get(f.name), f.type) for f in t}
    if pa.types.is_map(t):
        pairs = value.items() if isinstance(value, dict) else value
        return {_map_key(plain_value(k, t.key_type)): plain_value(v, t.item_type)
                for k, v in pairs}
    if pa.types.is_union(t):  # the member's value; a nested member is converted by its value
        return _json_value(value) if not isinstance(value, (dict, list)) else value
    return value


def _map_key(key: Any) -> str:
    """A map's key as the text a JSON object's key must be: a nested key as its JSON."""
    import json

    return json.dumps(_json_value(key), default=str, ensure_ascii=False) \
        if isinstance(key, (list, dict)) else str(key)


def _bignum(data: bytes) -> int:
    """DuckDB's VARINT (BIGNUM): a 3-byte header (top bit set when not negative) then the
    big-endian magnitude; a negative number has every byte inverted."""
    if data[0] & 0x80:
        return int.from_bytes(data[3:], "big")
    return -int.from_bytes(bytes(~b & 0xFF for b in data[3:]), "big")


def _iso_duration(months: int, days: int, nanoseconds: int) -> str:
    """An interval as ISO 8601: ``P1Y2M3DT4H5M6.5S``; each part keeps its sign."""
    parts = "P"
    sign = "-" if months < 0 else ""
    years, months = divmod(abs(months), 12)
    for n, unit in ((years, "Y"), (months, "M")):
        if n:
            parts += f"{sign}{n}{unit}"
    if days:
        parts += f"{days}D"
    if nanoseconds:
        sign = "-" if nanoseconds < 0 else ""
        seconds, nanos = divmod(abs(nanoseconds), 1_000_000_000)
        hours, seconds = divmod(seconds, 3600)
        minutes, seconds = divmod(seconds, 60)
        parts += "T"
        for n, unit in ((hours, "H"), (minutes, "M")):
            if n:
                parts += f"{sign}{n}{unit}"
        if seconds or nanos:
            fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
            parts += f"{sign}{seconds}{fraction}S"
    return parts if parts != "P" else "PT0S"


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def _write_json(reader: pa.RecordBatchReader, out: IO[bytes], *, lines: bool) -> int:
    import json

    rows = 0
    names = reader.schema.names
    if not lines:
        out.write(b"[")
    for batch in reader:
        columns = [[_json_value(plain_value(v, f.type)) for v in _pylist(c)]
                   for c, f in zip(batch.columns, batch.schema, strict=True)]
        for values in zip(*columns, strict=True):
            text = json.dumps(dict(zip(names, values, strict=True)), default=str,
                              ensure_ascii=False)
            if lines:
                out.write(text.encode() + b"\n")
            else:
                out.write((b",\n" if rows else b"\n") + text.encode())
            rows += 1
    if not lines:
        out.write(b"\n]\n" if rows else b"]\n")
    return rows


def _write_arrow(reader: pa.RecordBatchReader, out: IO[bytes], *, stream: bool) -> int:
    import pyarrow as pa

    rows = 0
    new = pa.ipc.new_stream if stream else pa.ipc.new_file
    with new(out, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


def _write_parquet(reader: pa.RecordBatchReader, out: IO[bytes]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = {i for i, f in enumerate(reader.schema) if not _parquet_writes(f)}
    schema = pa.schema([pa.field(f.name, pa.string()) if i in text else f
                        for i, f in enumerate(reader.schema)])
    rows = 0
    with pq.ParquetWriter(out, schema) as writer:
        for batch in reader:
            writer.write_batch(_as_text(batch, text))
            rows += batch.num_rows
    return rows


def _parquet_writes(field: pa.Field) -> bool:
    """Whether Parquet holds this column's type (it has no INTERVAL of Arrow's kind, no UNION)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pq.ParquetWriter(io.BytesIO(), pa.schema([field])).close()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return False
    return True


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    text = str(value)
    return text.replace("\n", "\\n").replace("\t", "\\t")


def _write_table(reader: pa.RecordBatchReader, out: IO[bytes], *, max_rows: int,
                 max_width: int = 40) -> int:
    import pyarrow as pa

    names = reader.schema.names
    if not names:  # a statement that answers nothing (DDL through some drivers)
        rows = sum(batch.num_rows for batch in reader)
        out.write(b"(no columns)\n")
        return rows
    kept: list[list[str]] = []
    rows = 0
    for batch in reader:
        take = batch.num_rows if max_rows <= 0 else max(0, min(batch.num_rows, max_rows - rows))
        if take:
            part = batch.slice(0, take)
            columns = [[plain_value(v, f.type) for v in _pylist(c)]
                       for c, f in zip(part.columns, part.schema, strict=True)]
            kept.extend([_cell(v) for v in row] for row in zip(*columns, strict=True))
        rows += batch.num_rows
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
               or pa.types.is_decimal(f.type) for f in reader.schema]
    types = [str(f.type) for f in reader.schema]

    def clip(text: str) -> str:
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    kept = [[clip(c) for c in row] for row in kept]
    widths = [max([len(n), len(t)] + [len(r[i]) for r in kept])
              for i, (n, t) in enumerate(zip(names, types, strict=True))]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"

    def fmt_row(cells: list[str], right: list[bool]) -> str:
        parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right,
                                                                      strict=True)]
        return "| " + " | ".join(parts) + " |\n"

    left = [False] * len(names)
    text = line + fmt_row(names, left) + fmt_row(types, left) + line
    text += "".join(fmt_row(r, numeric) for r in kept) + line
    if len(kept) < rows:
        text += f"{len(kept)} of {rows} rows shown; --max-rows 0 shows all\n"
    out.write(text.encode())
    return rows
