#!/usr/bin/env python3
"""Run ``arrowgate lakebench`` on PostgreSQL, SQLite and DuckDB-file catalogs, on this machine.

Starts a throwaway PostgreSQL cluster (durable: fsync on, as a catalog server
runs in use), writes a configuration with one ducklake engine per catalog
kind, runs lakebench with the arguments given, and stops the cluster.
Results go to bench/results/lakebench-N<tables>.{json,md}.

    .venv/bin/python bench/lakebench.py --tables 100
    .venv/bin/python bench/lakebench.py --tables 500 --rounds 3
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pg import find_bin_dir, start_cluster  # noqa: E402


def main(argv: list[str]) -> int:
    tables = argv[argv.index("--tables") + 1] if "--tables" in argv else "100"
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    bin_dir = find_bin_dir()
    if bin_dir is None:
        sys.exit("PostgreSQL server binaries not found: apt-get install -y postgresql")
    cluster = start_cluster(bin_dir, durable=True)
    try:
        dsn = cluster.create_database("lakebench")
        with tempfile.TemporaryDirectory(prefix="lakebench-") as work:
            config = Path(work) / "arrowgate.toml"
            config.write_text(
                '[engines.postgres]\ntype = "ducklake"\n'
                'catalog = "postgres:' + dsn.replace(cluster.password, "${LAKEBENCH_PG_PASSWORD}")
                + f'"\ndata_path = "{work}/pg/"\n\n'
                f'[engines.sqlite]\ntype = "ducklake"\ncatalog = "sqlite:{work}/c.sqlite"\n'
                f'data_path = "{work}/sqlite/"\n\n'
                f'[engines.duckdb]\ntype = "ducklake"\ncatalog = "duckdb:{work}/c.ducklake"\n'
                f'data_path = "{work}/duckdb/"\n')
            env = {**os.environ, "LAKEBENCH_PG_PASSWORD": cluster.password}
            cmd = [str(ROOT / ".venv" / "bin" / "arrowgate"), "--config", str(config),
                   "lakebench", *argv, "--workdir", f"{work}/runs",
                   "--json", str(results / f"lakebench-N{tables}.json"),
                   "--markdown", str(results / f"lakebench-N{tables}.md")]
            return subprocess.run(cmd, env=env).returncode
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
