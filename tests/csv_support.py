"""Helpers for the csv engine's tests: one file, the csv engine and DuckDB side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

import gateway
from gateway.verify.compare import compare_tables


def gateway_for(path: Path | str, *, chunk_bytes: int = 1 << 20, fallback: str | None = None,
                **source: Any) -> gateway.Gateway:
    """A gateway with engines ``csv`` and ``duck`` over one source ``t`` at ``path``."""
    csv: dict[str, Any] = {"type": "csv", "threads": 2, "chunk_bytes": chunk_bytes}
    if fallback:
        csv["fallback"] = fallback
    return gateway.connect({
        "engines": {"csv": csv, "duck": {"type": "duckdb", "settings": {"threads": 1}}},
        "sources": {"t": {"path": str(path), **source}},
    })


def both(gw: gateway.Gateway, sql: str) -> tuple[pa.Table, pa.Table]:
    return gw.execute(sql, engine="csv").to_arrow(), gw.execute(sql, engine="duck").to_arrow()


def assert_same(gw: gateway.Gateway, sql: str) -> pa.Table:
    """Run ``sql`` on both engines; fail with the comparator's message when they differ."""
    got, expected = both(gw, sql)
    verdict = compare_tables(got, expected, sql=sql)
    assert verdict.category == "match", f"{sql}: {verdict.message}\ncsv: {got}\nduckdb: {expected}"
    # the comparator forgives engine-chosen names (count(*) vs count_star()); the csv
    # engine answers as DuckDB does, names included
    assert got.schema.names == expected.schema.names, sql
    return got


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path
