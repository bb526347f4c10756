"""The csv engine never hangs: linear sniffing, lazy sniffing, scans that stop when asked."""

from __future__ import annotations

import itertools
import time

import pytest

import gateway
from gateway.errors import Cancelled
from tests.conftest import DATA
from tests.csv_support import gateway_for, write
from tests.hang_guard import HANG_GUARD


def integers_then_text(n: int) -> str:
    return "a\n" + "".join(f"{i}\n" for i in range(10, 10 + n)) + "x\n"


@pytest.mark.parametrize("body", [
    integers_then_text(40),  # the minimal case of issue #11: 2**40 steps before
    integers_then_text(20_000),
    "a\n" + "1.5e10\n" * 5_000 + "1.5e\n",
    "a\n" + "2024-01-01 10:00:00\n" * 5_000 + "2024-01-01 10:00:0\n",
], ids=["minimal", "long", "floats", "timestamps"])
def test_sniffing_a_column_with_one_odd_value_is_linear(tmp_path, body):
    path = write(tmp_path, "odd.csv", body)
    started = time.perf_counter()
    with gateway_for(path) as gw:
        table = gw.execute("SELECT a FROM t", engine="csv").to_arrow()
    assert time.perf_counter() - started < HANG_GUARD  # 2**40 steps when it was not linear
    assert str(table.schema.field("a").type) == "string"
    assert table.num_rows == body.count("\n") - 1


def test_sources_are_sniffed_by_their_first_query_not_at_connect(tmp_path):
    odd = write(tmp_path, "odd.csv", "a,b\n1,\"never closed\n")
    config = {"engines": {"scan": {"type": "csv"}},
              "sources": {"odd": {"path": str(odd)},
                          "trips": {"path": str(DATA / "trips.csv")}}}
    with gateway.connect(config) as gw:
        engine = gw.engine("scan")
        assert engine._layouts == {}
        assert gw.execute("SELECT 1 AS one").to_arrow()["one"][0].as_py() == 1
        assert engine._layouts == {}
        gw.execute("SELECT count(*) FROM trips").to_arrow()
        assert [k[0] for k in engine._layouts] == [str(DATA / "trips.csv")]


def many_rows(tmp_path):
    return write(tmp_path, "many.csv",
                 "id,k\n" + "".join(f"{i},{i % 7}\n" for i in range(50_000)))


@pytest.mark.parametrize("sql", ["SELECT * FROM t", "SELECT k, count(*) FROM t GROUP BY k",
                                 "SELECT k, count(DISTINCT id) FROM t GROUP BY k"])
def test_a_scan_polls_stop_between_chunks_and_raises_cancelled(tmp_path, sql):
    calls = itertools.count()
    with gateway_for(many_rows(tmp_path), chunk_bytes=4096) as gw:
        engine = gw.engine("csv")
        with pytest.raises(Cancelled):
            engine.execute(sql, stop=lambda: next(calls) >= 3).reader.read_all()
    assert next(calls) == 4  # stopped at the fourth poll, not at the end of the file


def test_a_stop_that_raises_ends_the_scan_with_its_error(tmp_path):
    def check() -> None:
        raise gateway.errors.QueryTimeout("the query ran past its time limit")

    with gateway_for(many_rows(tmp_path), chunk_bytes=4096) as gw, \
            pytest.raises(gateway.errors.QueryTimeout):
        gw.engine("csv").execute("SELECT count(*) FROM t", stop=check)


def test_without_stop_the_scan_runs_to_the_end(tmp_path):
    with gateway_for(many_rows(tmp_path), chunk_bytes=4096) as gw:
        table = gw.engine("csv").execute("SELECT * FROM t", stop=lambda: False).reader.read_all()
    assert table.num_rows == 50_000


def test_a_session_scan_stops_when_its_query_handle_is_cancelled(tmp_path):
    from gateway.result import QueryHandle

    with gateway_for(many_rows(tmp_path), chunk_bytes=4096) as gw:
        session = gw.engine("csv").open_session()
        handle = QueryHandle("csv", 1, "SELECT * FROM t")
        reader = session.execute("SELECT * FROM t", None, handle).reader
        reader.read_next_batch()
        handle.cancel()
        with pytest.raises(Cancelled):
            reader.read_all()
        with pytest.raises(Cancelled):
            session.execute("SELECT count(*) FROM t", None, handle)



def test_an_error_names_columns_briefly_even_when_a_header_is_huge():
    # a 100 MB one-line file with no line end was read as a 100 MB header, and the
    # "no column named" hint then printed all of it
    from gateway_csv.query import column_list

    shown = column_list(["y" * 100_000_000, *(f"c{i}" for i in range(130))])
    assert len(shown) < 1000
    assert "(100000000 characters)" in shown and shown.endswith("... and 31 more")
