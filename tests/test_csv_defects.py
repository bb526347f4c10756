"""The csv engine's defects found by hostile probing (issue #11), each pinned by a test."""

from __future__ import annotations

from tests.csv_support import assert_same, gateway_for, write

CABS = "cab_type,n\nyellow,1\ngreen,2\nYellow,3\n,4\nyel,5\n"


def test_not_like_and_not_ilike_negate(tmp_path):
    path = write(tmp_path, "cabs.csv", CABS)
    with gateway_for(path) as gw:
        for sql in ("SELECT count(*) AS n FROM t WHERE cab_type NOT LIKE 'y%'",
                    "SELECT count(*) AS n FROM t WHERE cab_type NOT ILIKE 'Y%'",
                    "SELECT n FROM t WHERE cab_type NOT LIKE '%l_w' ORDER BY n",
                    "SELECT cab_type NOT ILIKE 'yel%' AS x FROM t ORDER BY n"):
            assert_same(gw, sql)
        got = gw.execute("SELECT count(*) AS n FROM t WHERE cab_type NOT LIKE 'y%'",
                         engine="csv").to_arrow()
        assert got.column("n").to_pylist() == [2]
