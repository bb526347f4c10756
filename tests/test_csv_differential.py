"""The csv engine against DuckDB on adversarial files the tests write, with tiny chunks.

Chunks of a few bytes put chunk boundaries inside quoted fields, inside
CRLF pairs and inside multi-byte characters, so the speculative chunking and
its rescans are exercised on every file here.
"""

from __future__ import annotations

import pytest

from tests.csv_support import assert_same, gateway_for, write

AGG_QUERIES = [
    "SELECT count(*) AS n FROM t",
    "SELECT k, count(*) AS n, sum(x) AS s, min(x) AS lo, max(x) AS hi, avg(x) AS a "
    "FROM t GROUP BY k",
    "SELECT k, count(x) AS n FROM t GROUP BY 1 ORDER BY 1 NULLS FIRST",
    "SELECT x, count(DISTINCT k) AS n FROM t GROUP BY x",
    # expression keys and an OR filter: the Arrow path with partial aggregates
    "SELECT lower(k) AS lk, count(*) AS n, sum(x) AS s, avg(x) AS a, min(x) AS lo, "
    "max(k) AS hk FROM t WHERE x IS NULL OR x > -100 GROUP BY lower(k)",
]
ROW_QUERIES = [
    "SELECT * FROM t",
    "SELECT k, x FROM t WHERE x > 0 ORDER BY x DESC, k",
    "SELECT k, length(k) AS len FROM t WHERE k IS NOT NULL",
    # OR keeps the filter on the Arrow path: NaN compares as DuckDB's largest number
    "SELECT k, x FROM t WHERE x > 1 OR x <= -1 OR x <> x + 0",
]

FILES = {
    "quoted_newlines": 'k,x\n"a\nb",1\n"c\r\nd",2\nplain,3\n"e\n\nf",4\n',
    "doubled_quotes": 'k,x\n"say ""hi""",1\n"""",2\n"a""b""c",3\n',
    "delimiters_in_quotes": 'k,x\n"a,b",1\n",,,",2\n"x, y, z",-3\n',
    "crlf": "k,x\r\na,1\r\nb,2\r\nc,3\r\n",
    "bom": "\ufeffk,x\na,1\nb,2\n",
    "no_trailing_newline": "k,x\na,1\nb,2",
    "empty_vs_null": 'k,x\n"",1\n,2\na,\n"",\n',
    "unicode": "k,x\nnaïve,1\n日本語,2\n🙂🙃,3\nnaïve,4\n",
    "exponents": "k,x\na,1e3\nb,-2.5E-2\nc,.5\nd,7\n",
    "nan_infinity": "k,x\na,NaN\nb,inf\nc,-inf\nd,1.5\na,2\n",
    "negative_zero": "k,x\na,-0.0\nb,0.0\na,-0.0\n",
    "big_integers": "k,x\na,9223372036854775807\nb,-9223372036854775808\nc,0\n",
}


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("sql", AGG_QUERIES + ROW_QUERIES)
def test_adversarial_file_matches_duckdb(tmp_path, name, sql):
    if name == "big_integers" and "sum(x)" in sql:
        sql = sql.replace("sum(x) AS s, ", "").replace("avg(x) AS a", "count(*) AS c")
    path = write(tmp_path, f"{name}.csv", FILES[name])
    with gateway_for(path, chunk_bytes=3) as gw:
        assert_same(gw, sql)


def test_timestamps_with_offsets_match_duckdb(tmp_path):
    path = write(tmp_path, "tz.csv", "id,ts\n1,2020-01-01 10:00:00+02\n2,2020-06-30 23:30:00-05:30\n"
                 "3,2021-12-31 23:59:59Z\n4,\n")
    with gateway_for(path, chunk_bytes=5) as gw:
        assert_same(gw, "SELECT * FROM t")
        assert_same(gw, "SELECT year(ts) AS y, count(*) AS n FROM t GROUP BY 1")
        assert_same(gw, "SELECT min(ts) AS lo, max(ts) AS hi FROM t")


def test_dates_timestamps_and_booleans_match_duckdb(tmp_path):
    path = write(tmp_path, "types.csv", "d,ts,b,f\n2020-02-29,2020-02-29 12:34:56.789,true,1.25\n"
                 "1999-12-31,1999-12-31 00:00:00,false,\n,2001-01-01 01:02:03,,3\n")
    with gateway_for(path, chunk_bytes=7) as gw:
        assert_same(gw, "SELECT * FROM t")
        assert_same(gw, "SELECT year(d) AS y, month(ts) AS m, hour(ts) AS h, count(*) AS n "
                        "FROM t GROUP BY 1, 2, 3")
        assert_same(gw, "SELECT b, count(*) AS n, min(d) AS first_day FROM t GROUP BY b")
        assert_same(gw, "SELECT * FROM t WHERE ts >= '2000-01-01' AND d < '2020-01-01'")


def test_a_million_distinct_groups(tmp_path):
    path = tmp_path / "groups.csv"
    with open(path, "w") as fh:
        fh.write("id,v\n")
        fh.writelines(f"{i},{i % 7}\n" for i in range(1_000_000))
    with gateway_for(path, chunk_bytes=1 << 20) as gw:
        got = assert_same(gw, "SELECT id, count(*) AS n, max(v) AS m FROM t GROUP BY id")
        assert got.num_rows == 1_000_000


@pytest.mark.parametrize("chunk_bytes", [1, 2, 16, 1 << 20])
def test_chunk_size_never_changes_the_answer(tmp_path, chunk_bytes):
    rows = [f'"r{i}\n{i % 3}, ""q""",{i}' if i % 4 == 0 else f"r{i % 5},{i}" for i in range(200)]
    path = write(tmp_path, "mixed.csv", "k,x\n" + "\n".join(rows) + "\n")
    with gateway_for(path, chunk_bytes=chunk_bytes) as gw:
        assert_same(gw, "SELECT k, count(*) AS n, sum(x) AS s FROM t GROUP BY k")
        assert_same(gw, "SELECT * FROM t WHERE x % 4 = 0")


def test_number_keys_keep_null_zero_negative_zero_and_nan_apart(tmp_path):
    # keys of numbers only have one width, NULL's included: its value bytes are zero, as 0's are
    rows = []
    for i in range(400):
        a = "" if i % 7 == 0 else str(i % 3 - 1)
        f = ["", "0.0", "-0.0", "NaN", "2.5", "-2.5", "1e300"][i % 7 if i % 11 else (i // 11) % 7]
        ts = "" if i % 13 == 0 else f"20{10 + i % 4}-0{1 + i % 9}-1{i % 10} 0{i % 10}:00:00"
        rows.append(f"{a},{f},{ts},{i}")
    path = write(tmp_path, "keys.csv", "a,f,ts,x\n" + "\n".join(rows) + "\n")
    with gateway_for(path, chunk_bytes=64) as gw:
        assert_same(gw, "SELECT a, f, count(*) AS n, sum(x) AS s, min(f) AS lo FROM t GROUP BY a, f")
        assert_same(gw, "SELECT a, year(ts) AS y, round(f) AS r, count(*) AS n, max(x) AS hi "
                        "FROM t GROUP BY 1, 2, 3 ORDER BY 2, 4 DESC")
        assert_same(gw, "SELECT year(ts) AS y, count(x) AS n, avg(f) AS m FROM t GROUP BY 1")


def test_many_groups_whose_keys_differ_only_in_their_last_bytes(tmp_path):
    # more groups than the table's first size; two-key groups alike in their first 9 bytes;
    # string keys alike but for their last byte or their length
    rows = [f"7,{i % 5000},{'p' * (i % 21)}{'' if i % 2 else 'same prefix here'}{i % 10},{i}"
            for i in range(20_000)]
    path = write(tmp_path, "alike.csv", "a,b,s,x\n" + "\n".join(rows) + "\n")
    with gateway_for(path, chunk_bytes=4096) as gw:
        got = assert_same(gw, "SELECT a, b, count(*) AS n, sum(x) AS s FROM t GROUP BY a, b")
        assert got.num_rows == 5000
        assert_same(gw, "SELECT s, count(*) AS n, min(x) AS lo FROM t GROUP BY s")
        assert_same(gw, "SELECT a, s, b % 3 AS m, count(*) AS n FROM t GROUP BY 1, 2, 3")
