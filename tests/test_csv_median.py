"""median per group in the csv engine's fused scan (gateway_csv.fused.A_MEDIAN) against DuckDB.

DuckDB's median is quantile_cont(x, 0.5): its values selected by libstdc++'s
std::nth_element in the order they came, then interpolated. The scan replays both, so
on a file read in one chunk (DuckDB single-threaded, the file's order on both sides)
the answers are equal bit for bit, -0.0 against 0.0 included; on many chunks the
values meet in another order, and which of two equal zeros is chosen may differ.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.errors import QueryError, Unsupported
from tests.csv_support import gateway_for, write

FLOATS = [0.0, -0.0, math.nan, math.inf, -math.inf, 1.5, -2.5, 1e308, -1e308, 5e-324, 1e-323,
          1.5e-323, 0.1, 9007199254740993.0, None]
INTS = [0, 1, -1, 7, 2**53 + 1, 2**63 - 1, -(2**63) + 1, -(2**62), None]
COLUMNS = {"g": "BIGINT", "k": "VARCHAR", "b": "BIGINT", "f": "DOUBLE"}


@st.composite
def grouped_rows(draw: Any) -> str:
    """Groups of 0 (only NULLs), 1, 2 and many values, their rows interleaved."""
    rows = []
    for g in range(draw(st.integers(1, 6))):
        size = draw(st.sampled_from([0, 1, 2, 3, draw(st.integers(4, 80))]))
        nulls = draw(st.integers(0, 2)) if size else draw(st.integers(1, 2))
        values = [(draw(st.sampled_from(INTS[:-1])), draw(st.sampled_from(FLOATS[:-1])))
                  for _ in range(size)] + [(None, None)] * nulls
        rows += [(g, v) for v in values]
    order = draw(st.permutations(range(len(rows))))
    lines = ["g,k,b,f"]
    for i in order:
        g, (b, f) = rows[i]
        lines.append(f"{g},k{g % 2},{'' if b is None else b},{'' if f is None else repr(f)}")
    return "\n".join(lines) + "\n"


def _rows(table: Any, zeros_alike: bool) -> list[tuple[str, ...]]:
    def text(v: Any) -> str:
        return "0" if zeros_alike and isinstance(v, float) and v == 0 else repr(v)
    return sorted(tuple(text(v) for v in row)
                  for row in zip(*(c.to_pylist() for c in table.columns), strict=True))


def _same(gw: Any, sql: str, zeros_alike: bool = False) -> None:
    got = gw.execute(sql, engine="csv")
    have, want = got.to_arrow(), gw.execute(sql, engine="duck").to_arrow()
    assert got.engine == "csv"
    assert have.schema == want.schema, sql
    assert _rows(have, zeros_alike) == _rows(want, zeros_alike), sql


QUERIES = [
    "SELECT g, median(f) AS mf, median(b) AS mb, count(f) FROM t GROUP BY g",
    "SELECT k, g, median(f), median(b) FROM t GROUP BY k, g",
    "SELECT median(f), median(b), avg(b) FROM t",
    "SELECT g, median(f) FROM t WHERE b IS NOT NULL GROUP BY g",
    "SELECT g, quantile_cont(f, 0.1), quantile_cont(b, 0.333) AS qb, quantile_cont(f, 1.0) "
    "FROM t GROUP BY g",
]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=grouped_rows())
def test_median_per_group_is_duckdbs_bit_for_bit(tmp_path_factory, text):
    path = write(tmp_path_factory.mktemp("median"), "t.csv", text)
    with gateway_for(path, columns=COLUMNS, header=True) as gw:
        for sql in QUERIES:
            _same(gw, sql)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=grouped_rows())
def test_median_over_many_chunks_merges_every_value(tmp_path_factory, text):
    path = write(tmp_path_factory.mktemp("median"), "t.csv", text)
    with gateway_for(path, columns=COLUMNS, header=True, chunk_bytes=64) as gw:
        for sql in QUERIES:
            _same(gw, sql, zeros_alike=True)


def test_median_of_many_groups_across_partitions(tmp_path):
    """Enough groups for the partitioned merge (gateway_csv.fused._absorb) and values
    of each group in every chunk."""
    lines = ["g,b,f"]
    lines += [f"{i % 3000},{(i * 7919) % 1001 - 500},{((i * 104729) % 997) / 7}"
              for i in range(60_000)]
    path = write(tmp_path, "t.csv", "\n".join(lines) + "\n")
    with gateway_for(path, chunk_bytes=16 << 10) as gw:
        _same(gw, "SELECT g, median(f) AS mf, median(b) FROM t GROUP BY g")


def test_the_interpolation_is_fused_as_duckdbs(tmp_path):
    """DuckDB's build computes lo * (1 - d) + hi * d with a fused multiply-add: the median
    of 5e-324 and 1e-323 is 1e-323 there (5e-324 rounded twice), and quantiles of large
    integers differ in the last digit."""
    path = write(tmp_path, "t.csv", "g,b,f\n1,3473834591647803859,5e-324\n1,4044614031275815111,"
                                    "1e-323\n2,877818,0.5\n2,877818,0.5\n")
    with gateway_for(path, columns={"g": "BIGINT", "b": "BIGINT", "f": "DOUBLE"},
                     header=True) as gw:
        _same(gw, "SELECT g, median(f), quantile_cont(b, 0.9) AS q9, quantile_cont(b, 0.333) "
                  "AS q3 FROM t GROUP BY g")


@pytest.mark.parametrize("sql", [
    "SELECT g, median(f + 1) FROM t GROUP BY g",  # not a column
    "SELECT g, quantile_cont(f, -0.5) FROM t GROUP BY g",  # DuckDB: descending
    "SELECT g, quantile_cont(f, [0.5, 0.1]) FROM t GROUP BY g",
    "SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY f) FROM t GROUP BY g",
    "SELECT g, median(k) FROM t GROUP BY g",  # text: DuckDB's discrete quantile
    "SELECT g, median(DISTINCT f) FROM t GROUP BY g",
    "SELECT g, median(f) FROM t WHERE f + b > 0 GROUP BY g",  # a filter the scan does not run
    "SELECT g + 1 AS h, median(f) FROM t GROUP BY h",  # a key the scan does not make
    "SELECT g, median(f) OVER (PARTITION BY g) FROM t",
])
def test_median_the_scan_does_not_compute_is_unsupported(tmp_path, sql):
    path = write(tmp_path, "t.csv", "g,k,b,f\n1,x,2,1.5\n1,y,3,2.5\n")
    with gateway_for(path) as gw, pytest.raises(Unsupported):
        gw.execute(sql, engine="csv").to_arrow()
    with gateway_for(path, fallback="duck") as gw:
        assert gw.execute(sql, engine="csv").engine == "duck"


def test_a_quantile_past_one_is_duckdbs_error(tmp_path):
    path = write(tmp_path, "t.csv", "g,f\n1,1.5\n")
    with gateway_for(path) as gw, pytest.raises(Unsupported):
        gw.execute("SELECT g, quantile_cont(f, 1.5) FROM t GROUP BY g", engine="csv").to_arrow()
    with gateway_for(path, fallback="duck") as gw, pytest.raises(QueryError, match="QUANTILE"):
        gw.execute("SELECT g, quantile_cont(f, 1.5) FROM t GROUP BY g", engine="csv").to_arrow()


def test_median_by_a_key_whose_groups_fold_is_unsupported(tmp_path):
    """strftime(ts, '%m') folds two years' Januaries after the scan: their values would
    meet in another order than DuckDB's, which picks between -0.0 and 0.0 by it."""
    # DuckDB: January's values 7, 0.0, -0.0 in the file's order, its median -0.0; folded,
    # 2021's (7, -0.0) then 2020's (0.0), whose median is 0.0
    path = write(tmp_path, "t.csv", "ts,f\n2021-01-05 00:00:00,7\n2020-01-05 00:00:00,0.0\n"
                                    "2021-01-05 00:00:00,-0.0\n")
    with gateway_for(path) as gw, pytest.raises(Unsupported):
        gw.execute("SELECT strftime(ts, '%m') AS m, median(f) FROM t GROUP BY m",
                   engine="csv").to_arrow()
    with gateway_for(path) as gw:  # one year a group: no fold
        _same(gw, "SELECT strftime(ts, '%Y') AS y, median(f) FROM t GROUP BY y")
