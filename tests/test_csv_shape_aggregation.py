"""The csv engine's aggregations read without the planner (gateway_csv.shape_aggregation.aggregation)
answer as the planner does: the same reading, answers, names, types and errors, and
sqlglot never imported by csvql's four benchmark queries."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

import gateway
from bench.taxi import CSVQL_QUERIES, Query
from gateway_csv import query as q
from gateway_csv.shape import RESERVED
from gateway_csv.shape_aggregation import Aggregation, Term, aggregation
from tests.csv_support import assert_same, gateway_for, write
from tests.test_csv_shape import PLANNER, _words

#: the statistics the reader takes (of one column)
STATISTICS = ["stddev", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop"]
RECOGNISED = [
    ("SELECT cab_type, COUNT(*) FROM trips GROUP BY cab_type",
     Aggregation("trips", ((None, Term(None, "cab_type")), (None, Term("count", None))),
                 ("cab_type",), (), None, 0)),
    ("select \"Two words\" as X, avg ( f ) from T group by \"Two words\" order by x desc, "
     "\"Two words\" asc limit 3 offset 1;",
     Aggregation("T", (("X", Term(None, "Two words")), (None, Term("avg", "f"))),
                 ("Two words",), (("x", True), ("Two words", False)), 3, 1)),
    ("SELECT STRFTIME('%Y',ts) AS y, strftime(ts, '%Y') AS z, ROUND(f) AS d, min(n) FROM t "
     "GROUP BY y, d",
     Aggregation("t", (("y", Term("strftime", "ts", True)), ("z", Term("strftime", "ts")),
                       ("d", Term("round", "f")), (None, Term("min", "n"))),
                 ("y", "d"), (), None, 0)),
    ("SELECT count(*) FROM t", Aggregation("t", ((None, Term("count", None)),), (), (), None, 0)),
    ("SELECT id4, id5, STDDEV(v3) AS sd_v3, var_pop(v1) FROM x GROUP BY id4, id5",
     Aggregation("x", ((None, Term(None, "id4")), (None, Term(None, "id5")),
                       ("sd_v3", Term("stddev", "v3")), (None, Term("var_pop", "v1"))),
                 ("id4", "id5"), (), None, 0)),
    ("SELECT a FROM t GROUP BY a LIMIT 0",
     Aggregation("t", ((None, Term(None, "a")),), ("a",), (), 0, 0)),
]

REFUSED = [
    "SELECT a, b FROM t", "SELECT a FROM t ORDER BY a", "SELECT count(*) FROM t WHERE a > 1",
    "SELECT count(DISTINCT a) FROM t", "SELECT count(a, b) FROM t", "SELECT sum(a + 1) FROM t",
    "SELECT round(a, 2) FROM t GROUP BY 1", "SELECT strftime('%m', ts) AS m FROM t GROUP BY m",
    "SELECT strftime(ts) FROM t GROUP BY 1", "SELECT a, count(*) FROM t GROUP BY 1",
    "SELECT a, count(*) FROM t GROUP BY a ORDER BY 2", "SELECT a, count(*) FROM t GROUP BY a HAVING 1",
    "SELECT a, count(*) c FROM t GROUP BY a", "SELECT a, count(*) FROM t GROUP BY ALL",
    "SELECT a, count(*) FROM t GROUP BY a ORDER BY a DESC NULLS FIRST",
    "SELECT a, count(*) FROM t GROUP BY a ORDER BY count(*)", "SELECT t.a, count(*) FROM t GROUP BY a",
    "SELECT count(*) FROM 't.csv'", "SELECT count(*) FROM \"t\"", "SELECT count(*) FROM t -- c",
    "/* c */ SELECT count(*) FROM t", "SELECT count(*) FROM t LIMIT -1",
    "SELECT count(*) FROM t LIMIT 99999999999999999999", "SELECT count(*) FROM t OFFSET 1",
    "SELECT count(*) FROM t; SELECT 1", "SELECT \"count\"(*) FROM t", "SELECT count(\"a\"\"b\") FROM t",
    "SELECT DISTINCT a, count(*) FROM t GROUP BY a", "SELECT sum(select) FROM t",
    "SELECT strftime(x'%Y', a) AS y FROM t GROUP BY y", "SELECT count(*) AS from FROM t",
    "SELECT count(*) FROM t GROUP BY", "SELECT a, count(*) FROM t GROUP BY a,", "",
]


@pytest.mark.parametrize("sql,expected", RECOGNISED)
def test_aggregation_reads_the_shapes_it_knows(sql, expected):
    assert aggregation(sql) == expected


@pytest.mark.parametrize("sql", REFUSED)
def test_aggregation_leaves_everything_else_to_the_planner(sql):
    assert aggregation(sql) is None


def _term(node: exp.Expression) -> Term | None:
    """The planner's select item or key as a Term (None: none of the grammar's)."""
    if isinstance(node, exp.Column) and not node.table:
        return Term(None, node.name)
    if isinstance(node, exp.Count) and isinstance(node.this, exp.Star):
        return Term("count", None)
    names = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
             exp.Stddev: "stddev", exp.VariancePop: "var_pop"}
    extra = [k for k, v in node.args.items() if k not in ("this", "big_int") and v]
    if type(node) in names and isinstance(node.this, exp.Column) and not extra:
        return Term(names[type(node)], node.this.name)
    if isinstance(node, exp.Round) and isinstance(node.this, exp.Column) and not extra:
        return Term("round", node.this.name)
    if isinstance(node, exp.TimeToStr) and set(node.args) <= {"this", "format"}:
        value, fmt = node.this, node.args["format"]
        first = isinstance(value, exp.Literal)
        if first:
            value, fmt = fmt, value
        if isinstance(value, exp.Column) and isinstance(fmt, exp.Literal) and fmt.this == "%Y":
            return Term("strftime", value.name, first)
    return None


def _plan(sql: str) -> object:
    """What the planner reads in ``sql``, as an Aggregation where it is one."""
    try:
        select = q.parse(sql)
        table = q.source_name(select)
    except Exception as exc:
        return ("refused", type(exc).__name__)
    if table is None or table[1] or any(select.args.get(a) for a in (
            "where", "having", "distinct", "qualify", "joins", "windows")):
        return ("other",)
    items = []
    for item in select.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        term = _term(node)
        if term is None:
            return ("other",)
        items.append((item.alias if isinstance(item, exp.Alias) else None, term))
    group = select.args.get("group")
    groups = [_term(g) for g in group.expressions] if group else []
    if group and (any(group.args.get(a) for a in ("all", "rollup", "cube", "grouping_sets"))
                  or any(g is None or g.function is not None for g in groups)):
        return ("other",)
    order = []
    for o in select.args["order"].expressions if select.args.get("order") else []:
        term = _term(o.this)
        if term is None or term.function is not None or o.args.get("nulls_first"):
            return ("other",)
        order.append((term.column, bool(o.args.get("desc"))))
    limit, offset = select.args.get("limit"), select.args.get("offset")
    return Aggregation(table[0], tuple(items), tuple(g.column for g in groups if g and g.column),
                       tuple(order), None if limit is None else int(limit.expression.this),
                       0 if offset is None else int(offset.expression.this))


@pytest.mark.parametrize("sql,_", RECOGNISED)
def test_the_planner_reads_the_known_shapes_alike(sql, _):
    assert _plan(sql) == aggregation(sql)


def test_every_word_the_reader_takes_as_a_name_is_one_to_sqlglot():
    """A word the reader takes as a name in any place of the grammar, sqlglot reads as
    that name there too (RESERVED must hold the others)."""
    wrong = []
    for word in sorted(_words()):
        for w in (word, word.lower()):
            for sql in (f"SELECT {w}, count(*) FROM t GROUP BY {w}",
                        f"SELECT count(*) AS {w} FROM t",
                        f"SELECT sum({w}), max({w}) AS m FROM t",
                        f"SELECT round({w}) AS r, count(*) FROM t GROUP BY r",
                        f"SELECT strftime('%Y', {w}) AS y, count(*) FROM t GROUP BY y",
                        f"SELECT strftime({w}, '%Y') AS y, count(*) FROM t GROUP BY y ORDER BY y",
                        f"SELECT a, count(*) AS c FROM t GROUP BY a, {w} ORDER BY {w} DESC, c",
                        f"SELECT count(*) FROM t GROUP BY a ORDER BY {w}",
                        f"SELECT count(*) FROM {w}"):
                read = aggregation(sql)
                if read is not None and _plan(sql) != read:
                    wrong.append(sql)
    assert not wrong, wrong[:20]


# -- the statements of the grammar ---------------------------------------------------
#: column names of the file, and names that are none
COLUMNS = ["k", "n", "f", "ts", "d", "tz", "flag", "big", "Mixed_Case", "two words", "select",
           "year", "_1x", "count"]
NUMBERS = ["n", "f", "Mixed_Case", "two words", "year", "_1x", "count"]
TEMPORAL = ["ts", "d", "tz"]
NAMES = [*COLUMNS, "nope", "y", "c", "count_star()"]
#: aliases: the first three name no column
ALIASES = ["y", "c", "Out", "d", "n", "k", "select", "two words", "count_star()", "avg(f)"]


@st.composite
def statements(draw):
    """A statement of the grammar (mostly one the planner answers): mixed case, whitespace,
    aliases, reserved and quoted names, names that are no column."""
    space = st.sampled_from([" ", "  ", "\n", "\t", " \r\n "])
    pad = st.sampled_from(["", " ", "\n"])

    def cased(word: str) -> str:
        return draw(st.sampled_from([word, word.upper(), word.lower(), word.capitalize()]))

    def name(text: str) -> str:
        quoted = draw(st.booleans()) or not text.replace("_", "").isalnum() or \
            text.upper() in RESERVED or text[0].isdigit()
        text = cased(text) if text in COLUMNS or text in ("y", "c", "d", "out") else text
        return f'"{text}"' if quoted else text

    def call(fn: str, *args: str) -> str:
        return f"{cased(fn)}{draw(pad)}({draw(pad)}{f'{draw(pad)},{draw(pad)}'.join(args)}{draw(pad)})"

    def rarely(one_in: int) -> bool:
        return draw(st.integers(1, one_in)) == one_in // 2 + 1  # hypothesis favours the ends

    items, keys, outputs = [], [], []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["column", "column", "count_star", "aggregate", "strftime",
                                     "round"]))
        function = draw(st.sampled_from(["count", "sum", "avg", "min", "max", "median",
                                         *STATISTICS]))
        fitting = {"strftime": TEMPORAL, "round": NUMBERS}.get(kind) or \
            {"sum": NUMBERS, "avg": NUMBERS, "median": NUMBERS, "min": NUMBERS + TEMPORAL,
             "max": NUMBERS + TEMPORAL, **dict.fromkeys(STATISTICS, NUMBERS)
             }.get(function, COLUMNS) if kind != "column" else COLUMNS
        column = draw(st.sampled_from(NAMES if rarely(10) else COLUMNS if rarely(6) else fitting))
        alias = name(draw(st.sampled_from(ALIASES if rarely(4) else ALIASES[:3]))) \
            if rarely(3) else None
        if kind == "column":
            text = name(column)
        elif kind == "count_star":
            text = call("count", "*")
        elif kind == "aggregate":
            text = call(function, name(column))
        elif kind == "strftime":
            args = [name(column), "'%Y'"]
            text = call("strftime", *(args if draw(st.booleans()) else args[::-1]))
            alias = alias or name(draw(st.sampled_from(["y", "yr", "Year"])))
        else:
            text = call("round", name(column))
            alias = alias or name(draw(st.sampled_from(["r", "Rd"])))
        if alias is not None:
            text += f"{draw(space)}{cased('as')}{draw(space)}{alias}"
        items.append(text)
        if kind in ("column", "strftime", "round"):
            keys.append(alias if alias is not None else name(column))
        if alias is not None or kind == "column":
            outputs.append(alias if alias is not None else name(column))
    sql = f"{cased('select')}{draw(space)}{draw(st.sampled_from([',', ', ', ' , '])).join(items)}" \
          f"{draw(space)}{cased('from')}{draw(space)}{draw(st.sampled_from(['t', 'T']))}"
    if keys or draw(st.booleans()):
        group = keys if not rarely(5) else draw(st.lists(
            st.sampled_from([*keys, *(name(n) for n in NAMES[:4])]), min_size=1, max_size=3))
        if group:
            sql += f"{draw(space)}{cased('group')}{draw(space)}{cased('by')}{draw(space)}" \
                   + ", ".join(group)
    if draw(st.booleans()):
        names = [*(name(a) for a in ALIASES[:3]), name("count_star()"), name("n")]
        order = [f"{draw(st.sampled_from(outputs if outputs and not rarely(10) else names))}"
                 f"{draw(st.sampled_from(['', ' ASC', ' desc', ' DESC', ' asc']))}"
                 for _ in range(draw(st.integers(1, 3)))]
        sql += f"{draw(space)}{cased('order')} {cased('by')} " + ", ".join(order)
    if draw(st.booleans()):
        sql += f"{draw(space)}{cased('limit')} {draw(st.integers(0, 6))}"
        if draw(st.booleans()):
            sql += f" {cased('offset')} {draw(st.integers(0, 3))}"
    return sql + draw(st.sampled_from(["", ";", " ; "]))


def _table(rows: int) -> str:
    """NULLs, NaN, -0.0, infinities, huge and negative numbers, times before 1970."""
    lines = ["k,n,f,ts,d,tz,flag,big,Mixed_Case,two words,select,year,_1x,count"]
    floats = ["1.5", "-2.5", "nan", "-0.0", "0.0", "inf", "-inf", "2.5", "1e300", "-7.25", ""]
    ints = ["1", "-3", "9223372036854775807", "-9223372036854775807", "0", "", "42",
            "4611686018427387904"]
    for i in range(rows):
        lines.append(",".join([
            ["x", "y", "", "Z z"][i % 4], ints[i % len(ints)], floats[i % len(floats)],
            "" if i % 9 == 4 else f"{1900 + i * 7 % 170}-0{i % 9 + 1}-1{i % 9} 0{i % 10}:30:00",
            "" if i % 11 == 5 else f"{1950 + i % 40}-12-31",
            f"{1960 + i % 30}-06-01 12:00:00+0{i % 3}",
            ["true", "false", ""][i % 3], str(10**30 + i), str(i % 5), str(-i),
            ["a", "b"][i % 2], str(2000 + i % 3), str(i % 4 * 0.5), str(i % 6)]))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def table_file(tmp_path_factory):
    return write(tmp_path_factory.mktemp("shape_agg"), "agg.csv", _table(300))


def _normal(value: object) -> object:
    """NaN as one comparable value."""
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def _answer(gw: gateway.Gateway, sql: str) -> tuple[object, ...]:
    try:
        table = gw.execute(sql, engine="csv").to_arrow()
    except gateway.GatewayError as exc:
        return (type(exc).__name__, str(exc))
    return table.schema, [{k: _normal(v) for k, v in row.items()} for row in table.to_pylist()]


@settings(max_examples=int(os.environ.get("ARROWGATE_SHAPE_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(statements())
def test_an_aggregation_answers_as_the_planner_does(table_file, sql):
    assert aggregation(sql) is not None and aggregation(PLANNER + sql) is None, sql
    with gateway_for(table_file, chunk_bytes=2048) as gw:
        fast, planned = _answer(gw, sql), _answer(gw, PLANNER + sql)
    assert fast == planned, sql


@pytest.mark.parametrize("sql", [
    "SELECT k, count(*), count(f), sum(n), avg(f), min(ts), max(d) FROM t GROUP BY k ORDER BY k",
    "SELECT strftime('%Y', ts) AS y, round(f) AS r, count(*) AS c FROM t GROUP BY y, r "
    "ORDER BY y DESC, r, c",
    "SELECT flag, min(tz), max(n), sum(f) FROM t GROUP BY flag ORDER BY flag",
    "SELECT count(*), sum(n), avg(n), min(f), max(f) FROM t",
    "SELECT k, stddev(f), var_pop(_1x), variance(year), stddev_pop(n) FROM t GROUP BY k ORDER BY k",
    "SELECT k, count(*) AS c FROM t GROUP BY k ORDER BY c DESC LIMIT 0",
    "SELECT k, flag, median(f) AS m, median(n) FROM t GROUP BY k, flag ORDER BY k, flag",
    "SELECT median(f), median(n) FROM t",
])
def test_aggregations_answer_as_the_planner_and_duckdb_do(table_file, sql):
    with gateway_for(table_file, chunk_bytes=2048) as gw:
        assert _answer(gw, sql) == _answer(gw, PLANNER + sql)
        assert_same(gw, sql)


def test_an_aggregation_over_a_folder_answers_as_the_planner_does(tmp_path):
    for i in range(3):
        write(tmp_path, f"part{i}.csv", "a,b\n" + "".join(f"{j % 4},{i * 100 + j}\n" for j in range(50)))
    with gateway_for(tmp_path) as gw:
        for sql in ("SELECT a, count(*), sum(b) FROM t GROUP BY a ORDER BY a",
                    "SELECT max(b) AS m FROM t"):
            assert aggregation(sql) is not None
            assert _answer(gw, sql) == _answer(gw, PLANNER + sql)
            assert_same(gw, sql)


def test_an_aggregation_skipping_bad_rows_answers_as_the_planner_does(tmp_path):
    path = write(tmp_path, "bad.csv", "a,b\n" + "".join(f"{i % 3},{i}\n" for i in range(30))
                 + "30,7,extra\n31,8\n")
    with gateway_for(path, on_error="skip", delimiter=",") as gw:
        results = []
        for sql in ("SELECT a, sum(b) FROM t GROUP BY a ORDER BY a",
                    PLANNER + "SELECT a, sum(b) FROM t GROUP BY a ORDER BY a"):
            result = gw.execute(sql, engine="csv")
            results.append((result.to_arrow().to_pylist(), result.notes.get("skipped_rows")))
    assert results[0] == results[1] and results[0][1] == 1, results


@pytest.fixture
def no_planner(monkeypatch):
    """Fail any statement the planner reads."""
    def refuse(*args: object) -> None:
        raise AssertionError("the statement went to the planner")

    monkeypatch.setattr(q, "analyse", refuse)


@pytest.mark.parametrize("sql", [query.sql for query in CSVQL_QUERIES])
def test_csvqls_queries_answer_as_duckdb_does_without_the_planner(no_planner, sql):
    from tests.conftest import DATA

    config = {"engines": {"csv": {"type": "csv", "chunk_bytes": 4096}, "duck": {"type": "duckdb"}},
              "sources": {"trips": {"path": str(DATA / "trips.csv")}}}
    with gateway.connect(config) as gw:
        assert_same(gw, sql)


@pytest.fixture(scope="module")
def taxi(tmp_path_factory):
    folder = tmp_path_factory.mktemp("taxi")
    subprocess.run([sys.executable, "-m", "gateway.cli", "data", "taxi", "--rows", "2000",
                    "--out", str(folder / "taxi.csv")], check=True, capture_output=True)
    config = folder / "arrowgate.toml"
    config.write_text(f'[engines.csv]\ntype = "csv"\n[sources.trips]\npath = "{folder / "taxi.csv"}"\n')
    return config


@pytest.mark.parametrize("query", CSVQL_QUERIES, ids=[query.name for query in CSVQL_QUERIES])
def test_csvqls_queries_through_the_cli_import_no_sqlglot(taxi, query):
    """sqlglot and its DuckDB dialect cost a one-shot ``arrowgate query`` 110-145 ms."""
    code = ("import sys\nfrom gateway.cli.main import main\n"
            f"code = main(['--config', {str(taxi)!r}, 'query', '--format', 'csv', {query.sql!r}])\n"
            "print(code, 'sqlglot' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=Path(taxi).parent)
    assert len(done.stdout.splitlines()) > 1
    assert done.stderr.split("\n")[-2] == "0 False", done.stderr


@pytest.mark.parametrize("query", [*CSVQL_QUERIES, Query("one-row", "SELECT a, b FROM trips")],
                         ids=[query.name for query in CSVQL_QUERIES] + ["one-row"])
def test_a_csv_query_through_the_cli_makes_no_dataclass(taxi, tmp_path, query):
    """``@dataclass`` compiles each class's methods as its module is imported: 15.6 ms of a
    one-shot ``arrowgate query`` made 24 (gateway.records)."""
    if query.name == "one-row":
        (tmp_path / "one.csv").write_text("a,b\n1,2\n")
        config = tmp_path / "arrowgate.toml"
        config.write_text(f'[engines.csv]\ntype = "csv"\n[sources.trips]\npath = "{tmp_path / "one.csv"}"\n')
    else:
        config = taxi
    code = ("import sys\nfrom gateway.cli.main import main\n"
            f"code = main(['--config', {str(config)!r}, 'query', '--format', 'csv', {query.sql!r}])\n"
            "print(code, sorted(m for m in sys.modules if m.split('.')[0] == 'dataclasses'), "
            "file=sys.stderr)\n")
    # the dev install's example plugin (examples/plugin_minimal) is an outside plugin, which
    # every command imports; left out, as a user without it has it
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=Path(config).parent,
                          env={**os.environ, "ARROWGATE_PLUGINS": "csv"})
    assert len(done.stdout.splitlines()) > 1
    assert done.stderr.split("\n")[-2] == "0 []", done.stderr


def test_an_order_by_name_an_aggregate_and_an_alias_share_is_the_planners(table_file):
    """count(*) is named count_star() by DuckDB, and so is the alias: the planner refuses
    ORDER BY that name (two items of one name), so the reader leaves it to the planner
    (found by the property test above, on main too)."""
    sql = ('select count(*),count(k) as y,k as "count_star()" from t group by "count_star()" '
           'order by "count_star()"')
    with gateway_for(table_file, chunk_bytes=2048) as gw:
        assert _answer(gw, sql) == _answer(gw, PLANNER + sql)
