"""What the taxi benchmarks share: the Q01-Q04 queries and the generated data file.

The queries are DuckDB's NYC-taxi benchmark queries as the csv issue states
them; the data is ``arrowgate data taxi`` output in bench/data/ (made when
missing; a real NYC-taxi extract with the same header can be put there instead).
"""

from __future__ import annotations

from pathlib import Path

from gateway.sql.corpus import Query

DATA = Path(__file__).resolve().parent / "data"

QUERIES = [
    Query("Q01", "SELECT cab_type, count(*) FROM trips GROUP BY cab_type"),
    Query("Q02", "SELECT passenger_count, avg(total_amount) FROM trips GROUP BY passenger_count"),
    Query("Q03", "SELECT passenger_count, year(pickup_datetime), count(*) FROM trips "
                 "GROUP BY 1, 2"),
    Query("Q04", "SELECT passenger_count, year(pickup_datetime), round(trip_distance), count(*) "
                 "FROM trips GROUP BY 1, 2, 3 ORDER BY 2, 4 DESC"),
]

#: csvql's own benchmark queries, as its bench/bench_taxi.sh writes them (FROM its file,
#: here FROM trips): STRFTIME('%Y', ...) first-argument-format, as csvql and SQLite write it
CSVQL_QUERIES = [
    Query("Q01", "SELECT cab_type, COUNT(*) FROM trips GROUP BY cab_type"),
    Query("Q02", "SELECT passenger_count, AVG(total_amount) FROM trips GROUP BY passenger_count"),
    Query("Q03", "SELECT passenger_count, STRFTIME('%Y',pickup_datetime) AS y, COUNT(*) "
                 "FROM trips GROUP BY passenger_count, y"),
    Query("Q04", "SELECT passenger_count, STRFTIME('%Y',pickup_datetime) AS y, "
                 "ROUND(trip_distance) AS d, COUNT(*) AS c FROM trips "
                 "GROUP BY passenger_count, y, d ORDER BY y, c DESC"),
]


def taxi_file(rows: int) -> Path:
    """bench/data/taxi_ROWS.csv, generated (atomically) when missing."""
    path = DATA / f"taxi_{rows}.csv"
    if not path.exists():
        from gateway.cli.commands.data import write_taxi

        DATA.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".partial")
        with open(tmp, "wb") as out:
            write_taxi(out, rows)
        tmp.replace(path)
    return path


def quoted_taxi_file(rows: int, every: int = 500) -> Path:
    """bench/data/taxi_ROWS_quoted.csv: the taxi file with one row in ``every`` holding a
    payment type with a comma in it, quoted as any CSV writer quotes it
    (``"CSH, East"``): a file with a quote here and there, as most real files are."""
    path = DATA / f"taxi_{rows}_quoted.csv"
    if not path.exists():
        tmp = path.with_suffix(".partial")
        with open(taxi_file(rows), "rb") as plain, open(tmp, "wb") as out:
            payment = plain.readline().split(b",").index(b"payment_type")
            plain.seek(0)
            for i, line in enumerate(plain):
                if i and i % every == 0:
                    fields = line.split(b",")
                    fields[payment] = b'"' + fields[payment] + b', East"'
                    line = b",".join(fields)
                out.write(line)
        tmp.replace(path)
    return path

