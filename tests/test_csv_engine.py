"""The csv engine's own behaviour: routing, fallback, sniffing overrides, bad input, limits."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gateway
from gateway.errors import ConfigError, GatewayError, QueryError, Unsupported
from tests.csv_support import assert_same, gateway_for, write

SIMPLE = "id,name,amount\n1,a,1.5\n2,b,2.5\n3,a,\n"


# -- routing and fallback ---------------------------------------------------

def test_unsupported_names_the_construct_and_engines(tmp_path):
    path = write(tmp_path, "s.csv", SIMPLE)
    with gateway_for(path) as gw, pytest.raises(Unsupported) as info:
        gw.execute("SELECT a.id FROM t a JOIN t b ON a.id = b.id", engine="csv")
    assert "JOIN" in str(info.value)
    # the engine configured as "duck", not its type: the csv plugin says "duckdb"
    assert "(engines that can run it: duck)" in str(info.value)
    assert info.value.engine == "csv"


def test_fallback_answers_and_records_who_answered(tmp_path):
    path = write(tmp_path, "s.csv", SIMPLE)
    with gateway_for(path, fallback="duck") as gw:
        result = gw.execute("SELECT count(*) AS n FROM t a JOIN t b ON a.id = b.id",
                            engine="csv")
        assert result.to_arrow().column("n").to_pylist() == [3]
        assert result.engine == "duck"
        assert result.notes["answered_by"] == "duck"
        assert "JOIN" in result.notes["fallback_reason"]
        # a query the csv engine runs is not handed over
        own = gw.execute("SELECT count(*) AS n FROM t", engine="csv")
        assert own.engine == "csv" and "fallback_reason" not in own.notes


@pytest.mark.parametrize("sql", [
    "SELECT id, mode(id) AS m FROM t GROUP BY id",
    "SELECT id FROM t GROUP BY id HAVING kurtosis(id) IS NULL",
    "SELECT id FROM t GROUP BY id ORDER BY skewness(id)",
])
def test_an_aggregate_it_does_not_run_is_handed_over_without_sniffing_the_file(tmp_path, sql):
    # the sniff of a file's head was most of what the engine cost such a query (h2o q6, q9)
    path = write(tmp_path, "s.csv", SIMPLE)
    with gateway_for(path, fallback="duck") as gw:
        engine = gw.engine("csv")
        sniffed = []
        layout = engine.layout
        engine.layout = lambda *args: sniffed.append(args[0]) or layout(*args)  # type: ignore[method-assign]
        result = gw.execute(sql, engine="csv")
        assert result.to_arrow().num_rows == 3
        assert result.engine == "duck" and "aggregate" in result.notes["fallback_reason"]
        assert sniffed == []
        # a statement it runs reads the file as before
        gw.execute("SELECT id, sum(id) FROM t WHERE id > 0 GROUP BY id", engine="csv").to_arrow()
        assert sniffed == [str(path)]


def test_fallback_to_unknown_engine_is_a_config_error(tmp_path):
    path = write(tmp_path, "s.csv", SIMPLE)
    # caught when the configuration loads, not at the first query it would route
    with pytest.raises(ConfigError, match=r"engines\.csv\.fallback: fallback names no engine"):
        gateway_for(path, fallback="nope")


def test_fallback_cycle_stops_with_the_original_error(tmp_path):
    path = write(tmp_path, "s.csv", SIMPLE)
    config = {"engines": {"one": {"type": "csv", "fallback": "two"},
                          "two": {"type": "csv", "fallback": "one"}},
              "sources": {"t": {"path": str(path)}}}
    with gateway.connect(config) as gw, pytest.raises(Unsupported, match="JOIN"):
        gw.execute("SELECT * FROM t a JOIN t b ON a.id = b.id", engine="one")


def test_query_command_prints_the_fallback_reason(tmp_path):
    path = write(tmp_path, "s.csv", SIMPLE)
    config = tmp_path / "arrowgate.toml"
    config.write_text(f'default_engine = "csv"\n[engines.csv]\ntype = "csv"\nfallback = "duck"\n'
                      f'[engines.duck]\ntype = "duckdb"\n[sources.t]\npath = "{path}"\n')
    done = subprocess.run([sys.executable, "-m", "gateway.cli", "--config", str(config), "query",
                           "SELECT count(*) AS n FROM t a JOIN t b ON a.id = b.id"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "from duck" in done.stderr and "fallback:" in done.stderr and "JOIN" in done.stderr


def test_file_path_in_from(tmp_path, monkeypatch):
    write(tmp_path, "trips.csv", SIMPLE)
    monkeypatch.chdir(tmp_path)
    with gateway.connect({"engines": {"csv": {"type": "csv"}}}) as gw:
        assert gw.execute("SELECT count(*) AS n FROM 'trips.csv'").to_arrow() \
            .column(0).to_pylist() == [3]
        assert gw.execute("SELECT sum(amount) AS s FROM read_csv_auto('trips.csv')") \
            .to_arrow().column(0).to_pylist() == [4.0]


def test_unknown_table_lists_the_sources(tmp_path):
    path = write(tmp_path, "s.csv", SIMPLE)
    with gateway_for(path) as gw, pytest.raises(QueryError, match=r"no table named 'nope'.*t"):
        gw.execute("SELECT * FROM nope", engine="csv")


def test_unknown_column_is_a_query_error(tmp_path):
    path = write(tmp_path, "s.csv", SIMPLE)
    with gateway_for(path) as gw, pytest.raises(QueryError, match="nope"):
        gw.execute("SELECT nope FROM t", engine="csv")


def test_catalog_lists_sniffed_types(tmp_path):
    path = write(tmp_path, "s.csv", SIMPLE)
    with gateway_for(path) as gw:
        cols = {c.column: str(c.type) for c in gw.catalog("csv")}
    assert cols == {"id": "int64", "name": "string", "amount": "double"}


# -- sniffing overrides -------------------------------------------------------

def test_overrides_delimiter_quote_header_null(tmp_path):
    path = write(tmp_path, "o.txt", "1;'x;y';NA\n2;'z';7\n")
    opts = {"delimiter": ";", "quote": "'", "header": False, "null": "NA", "format": "csv"}
    with gateway_for(path, **opts) as gw:
        got = assert_same(gw, "SELECT * FROM t")
    assert got.column_names == ["column0", "column1", "column2"]
    assert got.column("column1").to_pylist() == ["x;y", "z"]
    assert got.column("column2").to_pylist() == [None, 7]


def test_null_texts_of_every_length_are_null_and_only_they(tmp_path):
    """The scanner first looks the field's length up among the null texts' lengths
    (one bit per length below 63, one for 63 and longer) before comparing any bytes."""
    long62, long63, long70 = "n" * 62, "m" * 63, "k" * 70
    nulls = ["", "NA", long62, long63, long70]
    values = ["", "NA", "NAX", "N", long62, long62 + "n", long63, "m" * 64, long70, "k" * 69,
              "x" * 63, "ok"]
    path = write(tmp_path, "n.csv", "i,s\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    with gateway_for(path, null=nulls, columns={"s": "VARCHAR"}) as gw:
        got = gw.execute("SELECT s FROM t ORDER BY i", engine="csv").to_arrow()
        grouped = gw.execute("SELECT s, count(*) AS n FROM t GROUP BY s", engine="csv").to_arrow()
    expected = [None if v in nulls else v for v in values]
    assert got.column("s").to_pylist() == expected
    assert dict(zip(grouped.column("s").to_pylist(), grouped.column("n").to_pylist(),
                    strict=True)) == {None: 5, **{v: 1 for v in values if v not in nulls}}


def test_column_type_override(tmp_path):
    path = write(tmp_path, "c.csv", "zip,n\n01234,1\n98765,2\n")
    with gateway_for(path, columns={"zip": "BIGINT"}) as gw:
        got = gw.execute("SELECT zip FROM t ORDER BY zip", engine="csv").to_arrow()
    assert got.column(0).to_pylist() == [1234, 98765]


def test_column_override_naming_a_missing_column(tmp_path):
    path = write(tmp_path, "c.csv", "a\n1\n")
    with gateway_for(path, columns={"b": "BIGINT"}) as gw, \
            pytest.raises(ConfigError, match=r"'b'.*columns: a"):
        gw.execute("SELECT * FROM t", engine="csv")


def test_timestamp_format(tmp_path):
    path = write(tmp_path, "f.csv", "d,v\n31/12/2020 23:59,1\n01/01/2021 00:00,2\n")
    with gateway_for(path, columns={"d": "TIMESTAMP", "v": "BIGINT"}, header=True,
                     timestamp_format="%d/%m/%Y %H:%M") as gw:
        assert_same(gw, "SELECT year(d) AS y, sum(v) AS s FROM t GROUP BY 1")


def test_escape_character(tmp_path):
    path = write(tmp_path, "e.csv", 'k,v\n"a\\"b",1\n"c",2\n')
    with gateway_for(path, escape="\\") as gw:
        got = assert_same(gw, "SELECT * FROM t")
    assert got.column("k").to_pylist() == ['a"b', "c"]


# -- bad input ----------------------------------------------------------------

# Rows the sniffer sees decide the dialect, as in DuckDB (a ragged row there makes
# a one-column table, a wider one a preamble, an unclosed quote unquoted text), so
# the malformed row comes past its sample of 20,480 rows.
_GOOD = '"1",2\n' + "1,2\n" * 21_000
BAD = {
    "ragged": ("a,b\n" + _GOOD + "3\n4,5\n", "line 21003.*the row has 1 field; the header has 2",
               {}),
    "extra_field": ("a,b\n" + _GOOD + "3,4,5\n", "line 21003.*has 3 fields; the header has 2", {}),
    "unterminated_quote": ("a,b\n" + _GOOD + '3,"open\n', "line 21003.*not closed", {}),
    "invalid_utf8": (b"a,b\nok,1\n\xff\xfe,2\n", "line 3.*column 'a'.*UTF-8", {}),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_an_error_naming_file_line_byte_column(tmp_path, case):
    content, pattern, options = BAD[case]
    path = write(tmp_path, f"{case}.csv", content)
    # a row of the wrong shape is left to DuckDB (see the test below); bad text is an error
    error = QueryError if case == "invalid_utf8" else Unsupported
    with gateway_for(path, chunk_bytes=4 if len(content) < 1000 else 512, **options) as gw:
        with pytest.raises(error, match=pattern) as info:
            gw.execute("SELECT a, b FROM t", engine="csv").to_arrow()
        assert str(path) in str(info.value)
        assert info.value.engine == "csv"
        # the process and the engine stay healthy
        assert gw.execute("SELECT 1 AS one", engine="csv").to_arrow().num_rows == 1


#: rows of the wrong shape past DuckDB's sample, and a query DuckDB answers over them
#: (found by bench/csv_corpus_fuzz.py on DuckDB's corpus: test_default_option.csv,
#: comments/error.csv, afl/null_padding/6.csv)
LATE_SHAPES = {
    # DuckDB drops the empty field of a row ending in one delimiter more than the header
    "trailing_delimiter": ("a,b\n" + _GOOD + "3,4,\n",
                           "SELECT count(*) AS n, max(a) AS m, sum(b) AS s FROM t"),
    "trailing_delimiter_one_column": ("a\n1\n2,\n", "SELECT a FROM t"),
    # DuckDB's optimizer proves these filters false and never reads the file
    "extra_field_where_false": ("a,b\n" + _GOOD + "3,4,5\n", "SELECT max(a) AS m FROM t WHERE NULL"),
    "ragged_contradiction": ("a,b\n" + _GOOD + "3\n",
                             "SELECT min(b) AS m FROM t WHERE b > 0 AND b <= -2147483648"),
    "unterminated_where_false": ("a,b\n" + _GOOD + '3,"open\n',
                                 "SELECT count(*) AS n FROM t WHERE 3 = 1"),
}


@pytest.mark.parametrize("case", sorted(LATE_SHAPES))
def test_a_row_of_the_wrong_shape_is_left_to_duckdb_which_may_answer(tmp_path, case):
    """A malformed row was a QueryError, though DuckDB answers these queries: it is
    Unsupported, so the fallback gives DuckDB's answer (or DuckDB's own refusal)."""
    content, sql = LATE_SHAPES[case]
    path = write(tmp_path, f"{case}.csv", content)
    with gateway_for(path, chunk_bytes=512) as gw:
        with pytest.raises(Unsupported, match=r"line \d+, byte \d+"):
            gw.execute(sql, engine="csv").to_arrow()
        expected = gw.execute(sql, engine="duck").to_arrow()
    with gateway_for(path, chunk_bytes=512, fallback="duck") as gw:
        result = gw.execute(sql, engine="csv")
        assert result.to_arrow() == expected
        assert result.notes["answered_by"] == "duck"


def test_a_row_ending_in_one_delimiter_more_is_not_skipped_but_left_to_duckdb(tmp_path):
    """DuckDB reads `3,4,` under `a,b` as the row 3, 4 (with ignore_errors too); the csv
    engine, skipping malformed rows, dropped it: a count one short, silently."""
    path = write(tmp_path, "wide.csv", "a,b\n" + _GOOD + "3,4,\n5,6\n")
    sql = "SELECT count(*) AS n, sum(a) AS s FROM t"
    with gateway_for(path, chunk_bytes=512, on_error="skip") as gw:
        with pytest.raises(Unsupported, match=r"line 21003.*one delimiter more than the header"):
            gw.execute(sql, engine="csv").to_arrow()
        expected = gw.execute(sql, engine="duck").to_arrow()
    assert expected.column("n").to_pylist() == [21003]
    with gateway_for(path, chunk_bytes=512, on_error="skip", fallback="duck") as gw:
        assert gw.execute(sql, engine="csv").to_arrow() == expected


def test_a_value_the_scanner_cannot_read_is_left_to_duckdb(tmp_path):
    """DuckDB's reader takes forms the scanner's parsers refuse (0x1F, 1_000, 5.0 in a
    BIGINT column): a value the scanner cannot read is Unsupported, naming where it is,
    so that the fallback engine reads it or refuses it as DuckDB does; with on_error =
    "skip" too, since DuckDB skips only the rows it cannot read."""
    path = write(tmp_path, "bad_type.csv", "a,b\n" + "1,2\n" * 30 + "x,3\n")
    for options in ({}, {"on_error": "skip"}):
        with gateway_for(path, chunk_bytes=512, columns={"a": "BIGINT"}, **options) as gw:
            with pytest.raises(Unsupported, match=r"line 32, byte 124, column 'a'.*BIGINT"):
                gw.execute("SELECT a, b FROM t", engine="csv").to_arrow()
            assert gw.execute("SELECT 1 AS one", engine="csv").to_arrow().num_rows == 1


@pytest.mark.parametrize("late", ["0x1F", "0b11", "1_000", "5.0", "1e3",  # DuckDB reads them
                                  "0x1F ", "-0x1F", "abc", "9223372036854775808"])  # refuses
def test_a_late_value_duckdb_reads_otherwise_is_answered_as_duckdb_does(tmp_path, late):
    """Past DuckDB's 20,480-row sample the column is BIGINT, and DuckDB's reader takes
    0x1F as 31: the csv engine failed the statement (or, skipping, dropped the row)."""
    rows = "a,id\n" + "".join(f"{i},{i}\n" for i in range(21000)) + f"{late},-1\n"
    path = write(tmp_path, "late.csv", rows)
    sql = "SELECT count(*) AS n, max(a) AS m, min(a) AS low FROM t"
    for options in ({}, {"on_error": "skip"}):
        with gateway_for(path, fallback="duck", **options) as gw:
            try:
                expected = gw.execute(sql, engine="duck").to_arrow()
            except GatewayError as refused:
                with pytest.raises(GatewayError) as got:
                    gw.execute(sql, engine="csv").to_arrow()
                assert type(got.value) is type(refused)
                continue
            assert gw.execute(sql, engine="csv").to_arrow() == expected


@pytest.mark.parametrize("values", [["0x1F", "0x20"], ["0b101", "0b11"], ["0x10", "17"],
                                    [" 0x10", "2"], ["0x8000000000000000", "1"]])
def test_a_column_of_hexadecimal_or_binary_integers_is_left_to_duckdb(tmp_path, values):
    """DuckDB's sniffer types such a column BIGINT (HUGEINT past it) and reads 0x1F as 31;
    the csv engine typed it VARCHAR: another type, other values."""
    path = write(tmp_path, "hex.csv", "a\n" + "\n".join(values) + "\n")
    with gateway_for(path) as gw:
        with pytest.raises(Unsupported, match="hexadecimal or binary"):
            gw.execute("SELECT a FROM t", engine="csv").to_arrow()
        assert str(gw.execute("SELECT a FROM t", engine="duck").to_arrow().schema.field("a")
                   .type) in ("int64", "decimal128(38, 0)")


def test_a_column_of_hexadecimal_text_among_words_stays_text(tmp_path):
    path = write(tmp_path, "hexwords.csv", "a\n0x1F\nzero\n")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT a FROM t")


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_rows_are_skipped_and_counted(tmp_path, case):
    content, _, options = BAD[case]
    path = write(tmp_path, f"{case}.csv", content)
    with gateway_for(path, chunk_bytes=4 if len(content) < 1000 else 512, on_error="skip",
                     **options) as gw:
        # a value is checked when the query reads its column: count(a) reads a
        agg = gw.execute("SELECT count(*) AS n, count(a) AS c FROM t", engine="csv")
        rows = gw.execute("SELECT a, b FROM t", engine="csv")
        table = rows.to_arrow()
    assert agg.notes["skipped_rows"] == 1
    assert rows.notes["skipped_rows"] == 1
    assert agg.to_arrow().column(0).to_pylist() == [table.num_rows]


def test_rows_wider_than_the_scanners_counting_window(tmp_path):
    """Delimiters after the last needed column are counted in byte lanes flushed every
    255 blocks of 16 bytes: rows of 6 KB cross that, and one row short by one field
    among them is still found."""
    width = 3000
    header = ",".join(f"c{i}" for i in range(width))
    rows = [",".join(str((r + i) % 10) for i in range(width)) for r in range(50)]
    path = write(tmp_path, "wide.csv", "\n".join([header, *rows]) + "\n")
    with gateway_for(path, chunk_bytes=8 << 10) as gw:
        assert_same(gw, "SELECT c1, count(*) AS n, sum(c0) AS s FROM t GROUP BY c1 ORDER BY c1")
    rows[30] = rows[30].rsplit(",", 1)[0]
    path = write(tmp_path, "wide_ragged.csv", "\n".join([header, *rows]) + "\n")
    # with the delimiter given, no other reading of the file is tried
    with gateway_for(path, delimiter=",") as gw, pytest.raises(Unsupported, match=r"line 32.*has 2999 fields; the header has 3000"):
        gw.execute("SELECT c1, count(*) AS n FROM t GROUP BY c1", engine="csv").to_arrow()


def test_empty_file_is_an_empty_table_as_in_duckdb(tmp_path):
    path = write(tmp_path, "empty.csv", "")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT * FROM t")
        assert_same(gw, "SELECT count(*) AS n FROM t")


def test_header_only_file(tmp_path):
    path = write(tmp_path, "h.csv", "a,b\n")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT * FROM t")
        assert_same(gw, "SELECT count(*) AS n FROM t")


def test_missing_file_and_directory(tmp_path):
    path = write(tmp_path, "gone.csv", SIMPLE)
    with gateway_for(path) as gw:
        path.unlink()
        with pytest.raises(QueryError, match="no such file"):
            gw.execute("SELECT * FROM t", engine="csv")
        with pytest.raises(QueryError, match="no such file"):
            gw.execute(f"SELECT * FROM '{tmp_path}/missing.csv'", engine="csv")
    with gateway.connect({"engines": {"csv": {"type": "csv"}}}) as gw, \
            pytest.raises(QueryError, match="folder"):
        gw.execute(f"SELECT * FROM '{tmp_path}/'")


# -- limits and streaming -----------------------------------------------------

def test_limit_without_order_stops_scanning_early(tmp_path):
    # the bad row is far past the first chunk: a full scan would fail on it
    rows = "".join(f"{i},x\n" for i in range(5000))
    path = write(tmp_path, "l.csv", "a,b\n" + rows + "oops\n")
    with gateway_for(path, chunk_bytes=1024, delimiter=",") as gw:
        got = gw.execute("SELECT a FROM t LIMIT 5 OFFSET 2", engine="csv").to_arrow()
        assert got.column(0).to_pylist() == [2, 3, 4, 5, 6]
        with pytest.raises(Unsupported, match="line 5002"):
            gw.execute("SELECT count(*) AS n FROM t", engine="csv").to_arrow()


def test_schema_is_known_before_reading(tmp_path):
    path = write(tmp_path, "s.csv", SIMPLE)
    with gateway_for(path) as gw:
        result = gw.execute("SELECT id, name FROM t", engine="csv")
        assert result.schema.names == ["id", "name"]
        assert result.to_arrow().num_rows == 3


def test_glob_source_reads_every_file(tmp_path):
    write(tmp_path, "p1.csv", "a,b\n1,x\n2,y\n")
    write(tmp_path, "p2.csv", "a,b\n3,x\n")
    with gateway_for(tmp_path / "p*.csv") as gw:
        assert_same(gw, "SELECT b, sum(a) AS s FROM t GROUP BY b")
        assert_same(gw, "SELECT * FROM t")


@pytest.mark.parametrize("second", [
    "a,b\nhello,3\n",       # a's type differs: DuckDB widens it to VARCHAR
    "a,b\n1.5,2024-01-01\n",  # a DOUBLE, b a DATE
    "b,a\nz,3\n",           # the columns in another order: DuckDB matches them by name
])
def test_files_of_one_source_that_differ_are_left_to_the_fallback(tmp_path, second):
    # each file is sniffed on its own; pyarrow failed on the second file's values
    # ("Failed to parse string: 'hello'") or on the schemas ("Schema at index 1 was different")
    write(tmp_path, "p1.csv", "a,b\n1,x\n2,y\n")
    write(tmp_path, "p2.csv", second)
    with gateway_for(tmp_path / "p*.csv") as gw:
        for sql in ("SELECT * FROM t", "SELECT max(a) AS m FROM t", "SELECT count(*) AS n FROM t"):
            with pytest.raises(Unsupported, match=r"p2\.csv .*unlike .*p1\.csv") as caught:
                gw.execute(sql, engine="csv").to_arrow()
            assert caught.value.engines == ("duck",)  # the configured engine, not its type
    with gateway_for(tmp_path / "p*.csv", fallback="duck") as gw:
        assert_same(gw, "SELECT * FROM t ORDER BY ALL")  # the fallback (DuckDB) answers


def test_arrow_path_partial_aggregates_merge_correctly(tmp_path, monkeypatch):
    from gateway_csv import run

    monkeypatch.setattr(run._Partials, "MERGE_ROWS", 3)
    rows = "".join(f"{i % 37},{i * 0.5},{'x' if i % 3 else ''}\n" for i in range(2000))
    path = write(tmp_path, "p.csv", "g,v,s\n" + rows)
    with gateway_for(path, chunk_bytes=512) as gw:
        assert_same(gw, "SELECT g % 5 AS m, count(*) AS n, count(s) AS c, sum(v) AS t, "
                        "avg(v) AS a, min(s) AS lo, max(v) AS hi FROM t GROUP BY g % 5")
        assert_same(gw, "SELECT avg(v) AS a, count(s) AS c FROM t WHERE g > 100 OR v < 0")


def test_count_distinct_merges_partials_with_the_others(tmp_path, monkeypatch):
    from gateway_csv import run

    monkeypatch.setattr(run._Partials, "MERGE_ROWS", 3)
    values = ["0.0", "-0.0", "nan", "", "1.5", "2"]
    rows = "".join(f"{'' if i % 11 == 0 else i % 4},{values[i % 6]},{i % 7}\n"
                   for i in range(3000))
    path = write(tmp_path, "d.csv", "g,v,w\n" + rows)
    with gateway_for(path, chunk_bytes=1024) as gw:
        assert_same(gw, "SELECT g, count(DISTINCT v) AS dv, count(DISTINCT v) + 1 AS dv1, "
                        "count(*) AS n, sum(w) AS s, avg(w) AS a, max(v) AS hi "
                        "FROM t GROUP BY g ORDER BY g")
        # (a min: the NULL key's group ties 0.0 and -0.0, which goes to the fallback)
        assert_same(gw, "SELECT count(DISTINCT w % 3) AS d, max(w) AS m FROM t WHERE w > 2")
        assert_same(gw, "SELECT g, count(DISTINCT w) AS d FROM t WHERE w > 100 GROUP BY g")


def test_count_distinct_holds_distinct_pairs_not_rows(tmp_path):
    """Arrow's memory pool peak while counting distinct values of a 4 MB file read in
    64 KB chunks: the partials hold 3 groups x 10 values, not 400,000 rows."""
    path = write(tmp_path, "many.csv",
                 "g,x\n" + "".join(f"{i % 3},{i % 10}\n" for i in range(400_000)))
    code = ("import pyarrow as pa, gateway\n"
            f"config = {{'engines': {{'csv': {{'type': 'csv', 'chunk_bytes': 65536}}}}, "
            f"'sources': {{'t': {{'path': {str(path)!r}}}}}}}\n"
            "with gateway.connect(config) as gw:\n"
            "    table = gw.execute('SELECT g, count(DISTINCT x) AS d, sum(x) AS s FROM t '\n"
            "                       'GROUP BY g ORDER BY g').to_arrow()\n"
            "print(table.column('d').to_pylist(), pa.default_memory_pool().max_memory())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    counts, peak = done.stdout.rsplit(" ", 1)
    assert counts == "[10, 10, 10]"
    assert int(peak) < 2 << 20, f"Arrow held {int(peak) >> 10} KiB"


def test_an_error_while_other_chunks_scan_leaves_a_clean_error(tmp_path):
    # chunk 0 fails at once while the speculative chunks behind it are still scanning;
    # they must finish before the file is unmapped, and the caller sees the error (a
    # ragged row: Unsupported, left to DuckDB)
    rows = "".join(f"{i},{i % 9},x{i % 13}\n" for i in range(200_000))
    path = write(tmp_path, "big.csv", "a,b,c\n1,2\n" + rows)
    with gateway_for(path, chunk_bytes=32 << 10, delimiter=",") as gw:
        for sql in ("SELECT b, count(*) AS n, sum(a) AS s FROM t GROUP BY b",
                    "SELECT a, c FROM t", "SELECT c, count(DISTINCT a) AS n FROM t GROUP BY c"):
            with pytest.raises(Unsupported, match="line 2"):
                gw.execute(sql, engine="csv").to_arrow()

    good = write(tmp_path, "good.csv", "a,b,c\n" + rows)
    with gateway_for(good, chunk_bytes=32 << 10) as gw:
        # a stream abandoned after its first batch releases the file cleanly
        reader = gw.execute("SELECT a FROM t WHERE b > 100 OR a > 5", engine="csv").reader()
        next(iter(reader))
        del reader
        assert gw.execute("SELECT count(*) AS n FROM t", engine="csv").to_arrow() \
            .column(0).to_pylist() == [200_000]


def test_an_unknown_column_is_answered_with_the_nearest_names_and_every_column(tmp_path):
    """The hint listed 20 of a 51-column file's columns, and no near match."""
    names = [f"column_number_{i}" for i in range(51)] + ["passenger_count"]
    path = tmp_path / "wide.csv"
    path.write_text(",".join(names) + "\n" + ",".join("1" for _ in names) + "\n")
    with gateway_for(path) as gw, pytest.raises(QueryError) as caught:
        gw.execute("SELECT passenger_cuont FROM t", engine="csv").to_arrow()
    hint = caught.value.hint or ""
    assert hint.startswith("did you mean passenger_count?")
    assert all(name in hint for name in names)


def test_a_column_of_128_bit_hexadecimal_hashes_stays_text(tmp_path):
    """Past HUGEINT DuckDB's casts fail and it types the column VARCHAR (num.tsv.gz of its
    corpus holds such hashes)."""
    path = write(tmp_path, "hashes.csv", "a\n0x9036400d9cbfd626f5fba91a3a03e0ac\n"
                                         "0x7036400d9cbfd626f5fba91a3a03e0ac\n")
    with gateway_for(path) as gw:
        assert_same(gw, "SELECT a FROM t")


@pytest.mark.parametrize("late", ["TRUE ", " false", "yes", "0"])
def test_a_late_boolean_with_blanks_is_refused_as_duckdb_refuses_it(tmp_path, late):
    """The scanner trimmed blanks around a boolean and answered where DuckDB's reader
    fails on 'TRUE ' past its sample."""
    rows = "a,id\n" + "".join(f"true,{i}\n" for i in range(21000)) + f"{late},-1\n"
    path = write(tmp_path, "late_bool.csv", rows)
    sql = "SELECT a, id FROM t WHERE id = -1"
    with gateway_for(path) as gw:
        try:
            expected = gw.execute(sql, engine="duck").to_arrow()
        except GatewayError:
            with pytest.raises(GatewayError):  # Unsupported: the fallback fails as DuckDB does
                gw.execute(sql, engine="csv").to_arrow()
            return
        assert gw.execute(sql, engine="csv").to_arrow() == expected
