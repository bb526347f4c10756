#!/usr/bin/env python3
"""CSV files of nasty values and an arrowgate.toml, for fuzzing the csv engine against DuckDB.

    .venv/bin/python bench/fuzz_nasty_data.py bench/data/nasty
    nice -n 5 .venv/bin/arrowgate fuzz --config bench/data/nasty/arrowgate.toml \\
        --primary csv --reference duck --source nasty --minutes 10 --seed 1 \\
        --coverage --out bench/results/fuzz-nasty-1

Writes, into the folder given (default ``bench/data/nasty``, ignored by git):

- ``nasty.csv``: an ``id`` and a column of every type the csv engine's table of
  native operations names (BIGINT ``i`` and ``j``, HUGEINT ``h``, DOUBLE ``f``
  and ``g``, VARCHAR ``s`` and ``t``, DATE ``d``, TIMESTAMP ``ts``,
  TIMESTAMPTZ ``tz``, TIME ``tm``, BOOLEAN ``b``), holding NULLs, NaN and
  infinity as text, -0.0, the int32/int64 edges, integers past 64 bits, huge
  and tiny doubles, backslashes, ``%`` and ``_``, multi-byte and case-folding
  Unicode, numbers and dates as text, dates from year 1 to 9999 (before 1970,
  at DST changes), and quoted fields holding the delimiter, quotes, CRs and
  newlines. Every value of each column's list appears at least once, then
  rows mix them at random. An empty field is NULL (DuckDB's default).
- ``nasty_nullstr.csv``: the same rows with ``\\N`` as the NULL marker, so
  that its text columns hold empty strings (DuckDB reads a quoted ``""`` as
  NULL when the NULL marker is the empty string).
- ``arrowgate.toml``: a ``csv`` engine, a ``duckdb`` engine named ``duck``,
  and the sources ``nasty`` and ``nasty_nullstr`` with the column types
  declared (both engines read the same types), plus ``nasty_sniffed`` (the
  first file, types sniffed by each engine).

The same ``--seed`` and ``--rows`` write the same bytes.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

BIGINT = ["9223372036854775807", "-9223372036854775808", "9223372036854775806",
          "2147483647", "-2147483648", "2147483648", "-2147483649", "4294967296",
          "3037000500", "-3037000500", "0", "1", "-1", "7", "-7", "42", "1000000007", None]
SMALL = ["0", "1", "-1", "2", "3", "-3", "7", "10", "-10", "100", None]
# past int64, up to 35 digits: the rows times the largest magnitude stay below 10**38,
# so the csv engine sums them itself (a 38-digit value would leave every sum to DuckDB)
HUGE = ["9223372036854775808", "-9223372036854775809", "18446744073709551616",
        "12345678901234567890123", "-12345678901234567890123",
        "99999999999999999999999999999999", "-99999999999999999999999999999999",
        "0", "1", "-1", None]
DOUBLE = ["nan", "NaN", "inf", "-inf", "Infinity", "-Infinity", "-0.0", "0.0",
          "1e308", "-1e308", "1.7976931348623157e308", "5e-324", "2.2250738585072014e-308",
          "0.1", "0.5", "-0.5", "1.5", "2.5", "-2.5", "3.0", "1e16", "9007199254740993.0",
          "123456789.123456789", "-1234.5678", "1e-7", None]
SMALL_DOUBLE = ["0.0", "-0.0", "1.0", "-1.0", "0.5", "2.5", "-2.5", "10.0", "0.001", "3.75",
                None]
TEXT = ["", "a", "A", "x", " x ", "  ", "\\", "a\\b", "\\\\server\\share", "C:\\path\\%",
        "%", "_", "a%b", "100%", "a_c", "%_%", "\\%", "\\_", "İ", "i\u0307", "\u0131", "I", "i",
        "ß", "SS", "ẞ", "ǅ", "ǆ", "Ǆ", "Σ", "\u03c3", "ς", "ﬁ", "straße", "İstanbul", "é", "e\u0301",
        "日本語", "日本", "😀", "a,b", "a;b", "a|b", "line\nbreak", "cr\rinside", "tab\there",
        'say "hi"', '"', "nan", "NaN", "inf", "-0.0", "12", " 12", "+5", "1e2", "007",
        "-7", "9223372036854775808", "2024-03-10", "1969-12-31", "2024-03-10 02:30:00",
        "true", "NULL", "abc", "abcdefghij", None]
SHORT_TEXT = ["", "a", "b", "ab", "%", "_", "\\", "12", "-7", "1.5", "abc", "İ", "ß", "x y",
              None]
DATE = ["0001-01-01", "0099-12-31", "1582-10-15", "1899-12-31", "1900-02-28", "1900-03-01",
        "1969-12-31", "1970-01-01", "2000-02-29", "2024-02-29", "2024-03-10", "2024-03-31",
        "2024-11-03", "2024-12-31", "2038-01-19", "9999-12-31", None]
TIMESTAMP = ["0001-01-01 00:00:00", "1900-01-01 12:00:00.5", "1969-12-31 23:59:59.999999",
             "1970-01-01 00:00:00", "2000-02-29 23:59:59.123456", "2024-03-10 02:30:00",
             "2024-03-31 02:30:00", "2024-11-03 01:30:00", "2024-12-31 23:59:59",
             "9999-12-31 23:59:59.999999", None]
TIMESTAMPTZ = ["1969-12-31 23:59:59.999999+00", "1970-01-01 00:00:00+00",
               "2024-03-10 02:30:00+00", "2024-06-01 12:00:00+05:30",
               "2024-01-01 00:00:00-08", "2024-11-03 01:30:00+01", "1900-01-01 00:00:00+00",
               "2000-02-29 23:59:59.5+00", None]
TIME = ["00:00:00", "23:59:59.999999", "12:30:00", "01:02:03.5", "12:00:00", None]
BOOLEAN = ["true", "false", None]

#: column name -> (DuckDB type, values, quoted): every native table type has a column
COLUMNS = {
    "i": ("BIGINT", BIGINT, False), "j": ("BIGINT", SMALL, False),
    "h": ("HUGEINT", HUGE, False),
    "f": ("DOUBLE", DOUBLE, False), "g": ("DOUBLE", SMALL_DOUBLE, False),
    "s": ("VARCHAR", TEXT, True), "t": ("VARCHAR", SHORT_TEXT, True),
    "d": ("DATE", DATE, False), "ts": ("TIMESTAMP", TIMESTAMP, False),
    "tz": ("TIMESTAMPTZ", TIMESTAMPTZ, False), "tm": ("TIME", TIME, False),
    "b": ("BOOLEAN", BOOLEAN, False),
}


def rows(count: int, seed: int) -> list[list[str | None]]:
    """``count`` rows: each column's values in turn first, then random picks."""
    rng = random.Random(seed)
    longest = max(len(values) for _, values, _ in COLUMNS.values())
    out = []
    for n in range(max(count, longest)):
        row: list[str | None] = [str(n)]
        for _, values, _ in COLUMNS.values():
            row.append(values[n % len(values)] if n < longest else rng.choice(values))
        out.append(row)
    return out


def field(value: str | None, quoted: bool, null: str) -> str:
    if value is None:
        return null
    if quoted or any(c in value for c in ',"\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


def write(folder: Path, count: int, seed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    header = ",".join(["id", *COLUMNS])
    data = rows(count, seed)
    for name, null in (("nasty.csv", ""), ("nasty_nullstr.csv", "\\N")):
        lines = [header] + [
            ",".join([row[0] or ""] + [field(v, quoted, null) for v, (_, _, quoted) in
                                       zip(row[1:], COLUMNS.values(), strict=True)])
            for row in data]
        (folder / name).write_bytes(("\n".join(lines) + "\n").encode())
    types = ", ".join(f'{name} = "{sql_type}"' for name, (sql_type, _, _) in
                      [("id", ("BIGINT", [], False)), *COLUMNS.items()])
    (folder / "arrowgate.toml").write_text(f"""\
# written by bench/fuzz_nasty_data.py (--rows {count} --seed {seed})
default_engine = "csv"

[engines.csv]
type = "csv"

[engines.duck]
type = "duckdb"

[sources.nasty]
path = "{(folder / 'nasty.csv').resolve()}"
columns = {{ {types} }}

[sources.nasty_nullstr]
path = "{(folder / 'nasty_nullstr.csv').resolve()}"
null = "\\\\N"
columns = {{ {types} }}

[sources.nasty_sniffed]
path = "{(folder / 'nasty.csv').resolve()}"
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="bench/data/nasty", type=Path)
    parser.add_argument("--rows", type=int, default=400, help="rows per file (default 400)")
    parser.add_argument("--seed", type=int, default=22, help="the random rows' seed")
    args = parser.parse_args()
    write(args.folder, args.rows, args.seed)
    print(f"wrote {args.folder}/nasty.csv, nasty_nullstr.csv and arrowgate.toml "
          f"({max(args.rows, 1)} rows)")


if __name__ == "__main__":
    main()
