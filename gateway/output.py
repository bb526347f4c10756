"""Writing a result stream in the CLI's output formats.

Every writer streams: batches are written as they arrive, so a large answer
never has to sit in memory (the table format keeps only the rows it shows).
A file is written whole or not at all (:func:`output_file`): a full disk never
leaves a truncated ``.parquet`` that looks valid at a glance.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gateway.errors import OutputError

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("table", "csv", "json", "ndjson", "arrow", "parquet")
BINARY_FORMATS = ("arrow", "parquet")


def write(reader: pa.RecordBatchReader, fmt: str, out: IO[bytes], *, max_rows: int = 40) -> int:
    """Write the whole stream to ``out`` in ``fmt``; return the number of rows."""
    if fmt == "csv":
        return _write_csv(reader, out)
    if fmt in ("json", "ndjson"):
        return _write_json(reader, out, lines=fmt == "ndjson")
    if fmt == "arrow":
        return _write_arrow(reader, out)
    if fmt == "parquet":
        return _write_parquet(reader, out)
    if fmt == "table":
        return _write_table(reader, out, max_rows=max_rows)
    raise ValueError(f"unknown format {fmt!r}")


@contextlib.contextmanager
def output_file(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` only once everything was written to it.

    The writing goes to a temporary file in the same folder, renamed into place
    at the end; on any failure (or Ctrl-C) it is removed and ``path`` is left as
    it was. A device or a pipe (``/dev/stdout``) is written in place.

    Raises:
        OutputError: the file could not be created or written, saying why.
    """
    target = Path(path)
    if target.exists() and not target.is_file():
        try:
            with target.open("wb") as device:
                yield device
        except OSError as exc:
            raise OutputError(_why(exc, target)) from None
        return
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


def _write_csv(reader: pa.RecordBatchReader, out: IO[bytes]) -> int:
    import pyarrow.csv as pacsv

    header = io.StringIO()
    csv.writer(header, lineterminator="\n").writerow(reader.schema.names)
    out.write(header.getvalue().encode())
    options = pacsv.WriteOptions(include_header=False, quoting_style="needed")
    rows = 0
    for batch in reader:
        if batch.num_rows:
            pacsv.write_csv(_nested_as_json(batch), out, options)
            rows += batch.num_rows
    return rows


def _nested_as_json(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with its LIST, STRUCT and MAP columns as JSON text (Arrow's CSV writer
    refuses nested types); NULL stays an empty field, a MAP becomes a JSON object."""
    import pyarrow as pa

    if not any(pa.types.is_nested(f.type) for f in batch.schema):
        return batch
    columns = []
    for column, fld in zip(batch.columns, batch.schema, strict=True):
        if pa.types.is_nested(fld.type):
            column = pa.array([None if v is None else json.dumps(_json_value(v), default=str,
                                                                  ensure_ascii=False)
                               for v in column.to_pylist(maps_as_pydicts="lossy")], pa.string())
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def _write_json(reader: pa.RecordBatchReader, out: IO[bytes], *, lines: bool) -> int:
    rows = 0
    if not lines:
        out.write(b"[")
    for batch in reader:
        for row in batch.to_pylist():
            text = json.dumps({k: _json_value(v) for k, v in row.items()}, default=str)
            if lines:
                out.write(text.encode() + b"\n")
            else:
                out.write((b",\n" if rows else b"\n") + text.encode())
            rows += 1
    if not lines:
        out.write(b"\n]\n" if rows else b"]\n")
    return rows


def _write_arrow(reader: pa.RecordBatchReader, out: IO[bytes]) -> int:
    import pyarrow as pa

    rows = 0
    with pa.ipc.new_stream(out, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


def _write_parquet(reader: pa.RecordBatchReader, out: IO[bytes]) -> int:
    import pyarrow.parquet as pq

    rows = 0
    with pq.ParquetWriter(out, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


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
            for row in batch.slice(0, take).to_pylist():
                kept.append([_cell(row[n]) for n in names])
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
