#!/usr/bin/env python3
"""``arrowgate fuzz`` on real engine pairs, set up from nothing (docs/benchmarks.md).

    .venv/bin/python bench/fuzz_pairs.py versions --source taxi --minutes 3 --seed 1
    .venv/bin/python bench/fuzz_pairs.py postgres --source taxi --minutes 3 --seed 1 \\
        --without round,cast,div

Pairs (primary against reference):

- ``versions``: DuckDB 2.0.1 (``duck201``) against DuckDB 1.5.5 (``duck155``,
  installed into the arrowgate cache on first use, run as an ADBC driver);
- ``postgres``: PostgreSQL through the ``adbc`` engine (``pg``, queries written
  in DuckDB's dialect, ``transpile_from = "duckdb"``) against DuckDB 2.0.1 in
  process (``duck``). A throwaway cluster is started (tests/pg.py) and the
  source is loaded into it as DuckDB reads it (tests/sql_databases.py); both
  are gone at the end.

Sources: ``trips`` (examples/data/trips.csv, 400 rows, read as CSV) and
``taxi`` (``arrowgate data taxi --rows 20000``, 51 columns, written as
Parquet so that each query does not pay for CSV sniffing). Both engines get
``threads = 1``. The fuzzer's own output follows, then the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.cli.main import main as arrowgate  # noqa: E402

PRIMARY = {"versions": ("duck201", "duck155"), "postgres": ("pg", "duck")}


def taxi_parquet(folder: Path, rows: int) -> Path:
    import duckdb

    from gateway.cli.commands.data import write_taxi

    csv, parquet = folder / "taxi.csv", folder / "taxi.parquet"
    with open(csv, "wb") as out:
        write_taxi(out, rows)
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{csv}')) TO '{parquet}' (FORMAT parquet)")
    return parquet


def engines_toml(pair: str, pg_uri: str | None) -> str:
    if pair == "versions":
        return "\n".join(
            f'[engines.{name}]\ntype = "duckdb"\nversion = "{version}"\n'
            'settings = { threads = 1 }\n'
            for name, version in (("duck201", "2.0.1"), ("duck155", "1.5.5")))
    return (f'[engines.pg]\ntype = "adbc"\ndriver = "postgresql"\nuri = "{pg_uri}"\n'
            'transpile_from = "duckdb"\n\n'
            '[engines.duck]\ntype = "duckdb"\nsettings = { threads = 1 }\n')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pair", choices=sorted(PRIMARY))
    parser.add_argument("--source", choices=("taxi", "trips"), default="taxi")
    parser.add_argument("--rows", type=int, default=20000, help="taxi rows (default 20000)")
    parser.add_argument("--minutes", default="3")
    parser.add_argument("--seed", default="1")
    parser.add_argument("--without", default="")
    parser.add_argument("--out", default="fuzz-findings")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="fuzz-pairs-") as tmp:
        folder = Path(tmp)
        path = taxi_parquet(folder, args.rows) if args.source == "taxi" else \
            ROOT / "examples" / "data" / "trips.csv"
        source = {args.source: {"path": str(path)}}
        cluster = None
        try:
            pg_uri = None
            if args.pair == "postgres":
                from tests import pg
                from tests import sql_databases as db

                bin_dir = pg.find_bin_dir()
                if bin_dir is None:
                    raise SystemExit("PostgreSQL server binaries not found (apt-get install -y "
                                     "postgresql, or set ARROWGATE_PG_BIN)")
                cluster = pg.start_cluster(bin_dir)
                name = db.new_pg_database(cluster)
                db.load_sources(db.adbc_pg(cluster, name), source)
                pg_uri = cluster.uri(name)
            config = folder / "arrowgate.toml"
            config.write_text(engines_toml(args.pair, pg_uri)
                              + f'\n[sources.{args.source}]\npath = "{path}"\n')
            primary, reference = PRIMARY[args.pair]
            code = arrowgate(["--config", str(config), "fuzz", "--primary", primary,
                              "--reference", reference, "--source", args.source,
                              "--minutes", args.minutes, "--seed", args.seed,
                              "--without", args.without, "--out", args.out])
        finally:
            if cluster is not None:
                cluster.stop()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return code


if __name__ == "__main__":
    sys.exit(main())
