"""The first k rows of each group (gateway_csv.topn, h2o's q8) against DuckDB.

Each hypothesis example writes a file of adversarial values (ties, NULLs, NaN, -0.0,
infinities, the integer edges; integer and text keys) and asks both engines for
``row_number() OVER (PARTITION BY ... ORDER BY ...) <= k`` in every direction and
NULL order, k larger than a group too: the multisets of rows, the names and the types
must be equal. Where the csv engine refuses a group whose cut falls among zeros of both
signs (DuckDB may keep either), the group must hold such zeros.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.errors import QueryError, Unsupported
from gateway_csv import handover
from tests.csv_support import gateway_for, write

FLOATS = [0.0, -0.0, math.nan, math.inf, -math.inf, 1.5, -2.5, 1e308, 5e-324, 2.5]
INTS = [0, 1, -1, 7, 2**63 - 1, -(2**63) + 1, 3]
TEXTS = ["a", "b", "", "İ", "a b", "0"]
COLUMNS = {"g": "BIGINT", "s": "VARCHAR", "b": "BIGINT", "f": "DOUBLE"}


@st.composite
def files(draw: Any) -> str:
    lines = ["g,s,b,f"]
    for _ in range(draw(st.integers(0, 60))):
        g = draw(st.one_of(st.none(), st.integers(0, 4)))
        s = draw(st.one_of(st.none(), st.sampled_from(TEXTS)))
        b = draw(st.one_of(st.none(), st.sampled_from(INTS)))
        f = draw(st.one_of(st.none(), st.sampled_from(FLOATS)))
        lines.append(",".join(["" if g is None else str(g), "" if s is None else f'"{s}"',
                               "" if b is None else str(b), "" if f is None else repr(f)]))
    return "\n".join(lines) + "\n"


@st.composite
def statements(draw: Any) -> str:
    keys = draw(st.lists(st.sampled_from(["g", "s", "b"]), min_size=0, max_size=2, unique=True))
    order = draw(st.sampled_from(["b", "f"]))
    direction = draw(st.sampled_from(["", " ASC", " DESC"]))
    nulls = draw(st.sampled_from(["", " NULLS FIRST", " NULLS LAST"]))
    outputs = draw(st.lists(st.sampled_from([*keys, order]), min_size=1, max_size=3))
    items = [f"{c} AS o{i}" if draw(st.booleans()) else c for i, c in enumerate(outputs)]
    partition = f"PARTITION BY {', '.join(keys)} " if keys else ""
    inner = sorted({*keys, order})
    where = draw(st.sampled_from(["", f" WHERE {order} IS NOT NULL", " WHERE g IS NULL",
                                  " WHERE b > 0", " WHERE f <= 1.5 AND s IS NOT NULL"]))
    k = draw(st.integers(1, 6))
    cut = draw(st.sampled_from([f"rn <= {k}", f"rn < {k + 1}"]))
    alias = draw(st.sampled_from(["", " sub", " AS sub"]))
    return (f"SELECT {', '.join(items)} FROM (SELECT {', '.join(inner)}, row_number() OVER "
            f"({partition}ORDER BY {order}{direction}{nulls}) AS rn FROM t{where}){alias} "
            f"WHERE {cut}")


def _rows(table: Any) -> list[tuple[str, ...]]:
    return sorted(tuple(repr(v) for v in row)
                  for row in zip(*(c.to_pylist() for c in table.columns), strict=True))


def _check(gw: Any, sql: str) -> None:
    want = gw.execute(sql, engine="duck").to_arrow()
    try:
        got = gw.execute(sql, engine="csv")
    except Unsupported as exc:
        assert "zeros of both signs" in str(exc), sql
        zeros = {repr(v) for v in gw.execute("SELECT f FROM t WHERE f = 0", engine="duck")
                 .to_arrow().column(0).to_pylist()}
        assert zeros == {"0.0", "-0.0"}, sql
        return
    have = got.to_arrow()
    assert got.engine == "csv"
    assert have.schema == want.schema, f"{sql}\n{have.schema}\n{want.schema}"
    assert _rows(have) == _rows(want), sql


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=files(), sqls=st.lists(statements(), min_size=1, max_size=4))
def test_top_n_per_group_answers_as_duckdb(tmp_path_factory, text, sqls):
    path = write(tmp_path_factory.mktemp("topn"), "t.csv", text)
    with gateway_for(path, columns=COLUMNS, header=True) as gw:
        for sql in sqls:
            _check(gw, sql)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=files(), sqls=st.lists(statements(), min_size=1, max_size=3))
def test_top_n_per_group_over_many_chunks(tmp_path_factory, text, sqls):
    path = write(tmp_path_factory.mktemp("topn"), "t.csv", text)
    with gateway_for(path, columns=COLUMNS, header=True, chunk_bytes=64) as gw:
        for sql in sqls:
            _check(gw, sql)


def test_many_groups_across_partitions(tmp_path):
    lines = ["g,b,f"] + [f"{i % 5000},{(i * 7919) % 1001},{((i * 104729) % 997) / 7}"
                         for i in range(80_000)]
    path = write(tmp_path, "t.csv", "\n".join(lines) + "\n")
    with gateway_for(path, chunk_bytes=16 << 10) as gw:
        for order in ("f DESC", "b", "b DESC"):
            _check(gw, f"SELECT g, {order.split()[0]} AS top FROM (SELECT g, b, f, row_number() "
                       f"OVER (PARTITION BY g ORDER BY {order}) AS rn FROM t) WHERE rn <= 3")


def test_a_cut_among_zeros_of_both_signs_is_unsupported(tmp_path):
    path = write(tmp_path, "t.csv", "g,f\n1,0.0\n1,-0.0\n2,-0.0\n2,-0.0\n2,1\n")
    sql = ("SELECT g, f FROM (SELECT g, f, row_number() OVER (PARTITION BY g ORDER BY f) AS rn "
           "FROM t) WHERE rn <= {}")
    with gateway_for(path, columns={"g": "BIGINT", "f": "DOUBLE"}, header=True) as gw:
        with pytest.raises(Unsupported, match="zeros of both signs"):
            gw.execute(sql.format(1), engine="csv").to_arrow()
        _check(gw, sql.format(2))  # every zero kept: one answer


Q8 = ("SELECT id6, v3 AS largest2_v3 FROM (SELECT id6, v3, row_number() OVER (PARTITION BY "
      "id6 ORDER BY v3 DESC) AS order_v3 FROM t WHERE v3 IS NOT NULL) sub_query "
      "WHERE order_v3 <= 2")


def test_h2o_q8_is_answered_by_the_scan(tmp_path):
    lines = ["id6,v3"] + [f"{i % 97},{(i * 31) % 101 / 4}" for i in range(3000)]
    path = write(tmp_path, "t.csv", "\n".join(lines) + "\n")
    assert handover.refusal(Q8) is None
    with gateway_for(path) as gw:
        _check(gw, Q8)


def test_a_column_the_file_lacks_is_an_error_and_rn_named_as_one_unsupported(tmp_path):
    path = write(tmp_path, "t.csv", "g,f\n1,1.5\n")
    sql = ("SELECT g, f FROM (SELECT g, f, nope, row_number() OVER (PARTITION BY g ORDER BY f) "
           "AS rn FROM t) WHERE rn <= 2")
    with gateway_for(path) as gw, pytest.raises(QueryError, match="nope"):
        gw.execute(sql, engine="csv").to_arrow()
    clash = sql.replace(", nope", "").replace("AS rn", "AS f").replace("rn <= 2", "f <= 2")
    with gateway_for(path) as gw, pytest.raises(Unsupported, match="named as a column"):
        gw.execute(clash, engine="csv").to_arrow()


SHAPE = ("SELECT {out} FROM (SELECT g, s, f, row_number() OVER (PARTITION BY g ORDER BY {order})"
         " AS rn FROM t{where}) sub WHERE {cut}")


@pytest.mark.parametrize("sql", [
    SHAPE.format(out="g, rn", order="f", where="", cut="rn <= 2"),  # rn: ties pick
    SHAPE.format(out="g, s", order="f", where="", cut="rn <= 2"),  # another column: ties pick
    SHAPE.format(out="*", order="f", where="", cut="rn <= 2"),
    SHAPE.format(out="g, f + 1", order="f", where="", cut="rn <= 2"),
    SHAPE.format(out="g, f", order="s", where="", cut="rn <= 2"),  # a text order column
    SHAPE.format(out="g, f", order="f, s", where="", cut="rn <= 2"),
    SHAPE.format(out="g, f", order="f + 1", where="", cut="rn <= 2"),
    SHAPE.format(out="g, f", order="f", where="", cut="rn <= 65"),
    SHAPE.format(out="g, f", order="f", where="", cut="rn < 1"),
    SHAPE.format(out="g, f", order="f", where="", cut="rn = 2"),
    SHAPE.format(out="g, f", order="f", where="", cut="rn <= 2 AND g > 0"),
    SHAPE.format(out="g, f", order="f", where=" WHERE f + 1 > 0", cut="rn <= 2"),
    SHAPE.format(out="g, f", order="f", where="", cut="rn <= 2") + " ORDER BY g",
    SHAPE.format(out="g, f", order="f", where="", cut="rn <= 2") + " LIMIT 1",
    SHAPE.format(out="sub.g, f", order="f", where="", cut="rn <= 2"),
    SHAPE.format(out="g, f", order="f", where="", cut="rn <= 2").replace("row_number()", "rank()"),
    SHAPE.format(out="g, f", order="f", where="", cut="rn <= 2").replace(
        "ORDER BY f", "ORDER BY f ROWS BETWEEN 1 PRECEDING AND CURRENT ROW"),
    SHAPE.format(out="g, f", order="f", where="", cut="rn <= 2").replace(
        "PARTITION BY g", "PARTITION BY g + 1"),
    SHAPE.format(out="g, f", order="g", where="", cut="rn <= 2").replace(
        "PARTITION BY g", "PARTITION BY f"),  # a DOUBLE key: -0.0 and 0.0 one group
])
def test_what_is_not_one_answer_of_the_scan_is_unsupported(tmp_path, sql):
    path = write(tmp_path, "t.csv", "g,s,f\n1,x,1.5\n1,y,1.5\n2,z,-0.5\n")
    with gateway_for(path) as gw, pytest.raises(Unsupported):
        gw.execute(sql, engine="csv").to_arrow()
    with gateway_for(path, fallback="duck") as gw:
        result = gw.execute(sql, engine="csv")
        result.to_arrow()
        assert result.engine == "duck"
