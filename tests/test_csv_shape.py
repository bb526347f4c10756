"""The csv engine's projections read without the planner (gateway_csv.shape) answer as the
planner does: the same plan, the same answers and errors, and sqlglot never imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

import gateway
from gateway_csv import query as q
from gateway_csv.shape import RESERVED, Projection, projection
from tests.csv_support import assert_same, gateway_for, write

#: a statement the recogniser refuses (it takes no comment) and the planner reads as ``sql``
PLANNER = "/* planner */ "

RECOGNISED = [
    ("SELECT a, b FROM trips", Projection("trips", ((None, "a"), (None, "b")), None, 0)),
    ("select A as x FROM T limit 3", Projection("T", (("x", "A"),), 3, 0)),
    ("  SELECT *\n\tFROM t LIMIT 10 OFFSET 2 ;  ",
     Projection("t", None, 10, 2)),
    ('SELECT "Two words" AS "Out Name", b FROM t',
     Projection("t", (("Out Name", "Two words"), (None, "b")), None, 0)),
    ("SELECT a,b,a FROM t LIMIT 0", Projection("t", ((None, "a"), (None, "b"), (None, "a")), 0, 0)),
]

REFUSED = [
    "SELECT a FROM t WHERE a > 1", "SELECT a + 1 FROM t", "SELECT count(*) FROM t",
    "SELECT a FROM t ORDER BY a", "SELECT DISTINCT a FROM t", "SELECT a b FROM t",
    "SELECT *, a FROM t", "SELECT t.a FROM t", "SELECT a FROM main.t", "SELECT a FROM 't.csv'",
    'SELECT a FROM "t.csv"', "SELECT a FROM read_csv('t.csv')", "SELECT a FROM t, u",
    "SELECT a FROM t LIMIT -1", "SELECT a FROM t LIMIT 1.5", "SELECT a FROM t OFFSET 2",
    "SELECT a FROM t LIMIT ?", "SELECT a FROM t; SELECT b FROM t", "SELECT a FROM t -- c",
    "/* c */ SELECT a FROM t", "SELECT current_date FROM t", "SELECT null FROM t",
    "SELECT a AS from FROM t", "SELECT a FROM select", 'SELECT "a""b" FROM t', 'SELECT "" FROM t',
    "SELECT a FROM t LIMIT 1 OFFSET 1 LIMIT 2", "SELECT\u00a0a FROM t", "SELECT é FROM t",
    "SELECT a FROM t LIMIT 99999999999999999999", "SELECT a FROM t LIMIT 1 OFFSET 9223372036854775807",
    "SELECT a FROM", "SELECT FROM t", "WITH x AS (SELECT 1) SELECT a FROM t", "",
    # letters whose case folds to an ASCII one: DuckDB refuses the keyword, and the name is
    # the planner's to read
    "\u017fELECT a FROM t", "SELECT a FROM t LIMIT 1 OFF\u017fET 1", "SELECT \u212a FROM t",
    "SELECT a AS \u017f FROM t",
]


@pytest.mark.parametrize("sql,expected", RECOGNISED)
def test_projection_reads_the_shapes_it_knows(sql, expected):
    assert projection(sql) == expected


@pytest.mark.parametrize("sql", REFUSED)
def test_projection_leaves_everything_else_to_the_planner(sql):
    assert projection(sql) is None


def _words() -> set[str]:
    """Every word sqlglot's DuckDB dialect knows: keywords, functions, niladic functions."""
    words = {k for k in DuckDB.Tokenizer.KEYWORDS if k.replace("_", "").isalnum()}
    words |= {getattr(k, "name", str(k)) for k in DuckDB.Parser.NO_PAREN_FUNCTIONS}
    words |= set(DuckDB.Parser.FUNCTIONS) | set(sqlglot.parser.Parser.FUNCTIONS)
    return {w.upper() for w in words if w.replace("_", "").isalnum()}


def test_every_word_the_recogniser_takes_as_a_name_is_one_to_sqlglot():
    """RESERVED must hold every word sqlglot reads as more than a name in these places."""
    wrong = []
    for word in sorted(_words()):
        for spelled in (word, word.lower()):
            for sql in (f"SELECT {spelled} FROM t", f"SELECT a, {spelled} FROM t LIMIT 1",
                        f"SELECT a AS {spelled} FROM t", f"SELECT a FROM {spelled}"):
                if projection(sql) is not None and _plan(sql) != _plan_of(projection(sql)):
                    wrong.append(sql)
    assert not wrong, wrong[:20]
    assert "CURRENT_DATE" in RESERVED and "SELECT" in RESERVED


def _plan(sql: str) -> tuple:
    """What the planner reads in ``sql``: table, (output name, column) per item, LIMIT, OFFSET."""
    try:
        select = q.parse(sql)
        table = q.source_name(select)
    except Exception as exc:  # the planner refuses it: no projection is the same
        return ("refused", type(exc).__name__)
    if table is None or table[1] or select.args.get("where") or select.args.get("order") \
            or select.args.get("group") or select.args.get("distinct"):
        return ("other",)
    items = []
    for item in select.expressions:
        if isinstance(item, exp.Star):
            items.append("*")
            continue
        node = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(node, exp.Column) or node.table:
            return ("other",)
        items.append((q.output_name(item), node.name))
    limit = select.args.get("limit")
    offset = select.args.get("offset")
    return (table[0], tuple(items), None if limit is None else int(limit.expression.this),
            0 if offset is None else int(offset.expression.this))


def _plan_of(shape: Projection) -> tuple:
    items = None if shape.items is None else \
        tuple((alias if alias is not None else column, column) for alias, column in shape.items)
    return (shape.table, ("*",) if items is None else items, shape.limit, shape.offset)


NAMES = ["a", "B", "Mixed_Case", "two words", "x1", "select", "date", "year", "current_date"]


@st.composite
def statements(draw):
    def name(text: str) -> str:
        quoted = draw(st.booleans()) or not text.replace("_", "").isalnum() or \
            text.upper() in RESERVED
        cased = draw(st.sampled_from([text, text.upper(), text.lower()]))
        return f'"{cased}"' if quoted else cased

    space = st.sampled_from([" ", "  ", "\n", "\t", " \r\n "])
    if draw(st.integers(0, 5)) == 0:
        items = "*"
    else:
        parts = []
        for _ in range(draw(st.integers(1, 4))):
            part = name(draw(st.sampled_from(NAMES)))
            if draw(st.booleans()):
                part += f"{draw(space)}{draw(st.sampled_from(['AS', 'as']))}{draw(space)}" \
                    + name(draw(st.sampled_from([*NAMES, "out", "Out"])))
            parts.append(part)
        items = draw(st.sampled_from([",", ", ", " , "])).join(parts)
    sql = f"{draw(st.sampled_from(['SELECT', 'select']))}{draw(space)}{items}{draw(space)}" \
          f"FROM{draw(space)}{draw(st.sampled_from(['t', 'T']))}"
    if draw(st.booleans()):
        counts = st.one_of(st.integers(0, 12), st.integers(0, 600))  # past a scan chunk too
        sql += f"{draw(space)}LIMIT {draw(counts)}"
        if draw(st.booleans()):
            sql += f"{draw(space)}OFFSET {draw(counts)}"
    return sql + draw(st.sampled_from(["", ";", " ; "]))


@settings(max_examples=300, deadline=None)
@given(statements())
def test_the_planner_reads_what_the_recogniser_reads(sql):
    shape = projection(sql)
    assert shape is not None, sql
    assert _plan(sql) == _plan_of(shape)


# -- answers ------------------------------------------------------------------------
def _table(rows: int) -> str:
    lines = ['a,B,Mixed_Case,two words,x1,select,date,year,current_date,ts,t,big,flag']
    for i in range(rows):
        null = i % 7 == 3
        lines.append(",".join([
            str(i), "" if null else f"{i * 0.25}", f'"s{i}, ""q"""', f"w{i % 3}",
            "" if null else str(-i), "true" if i % 2 else "false",
            f"2024-01-{i % 28 + 1:02d}", str(2000 + i % 30), f"c{i}",
            f"2024-02-03 04:05:{i % 60:02d}", f"{i % 24:02d}:30:00",
            str(10**30 + i), "" if null else ("T" if i % 3 else "F")]))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shape")
    return {"one": write(folder, "one.csv", _table(500)),
            "empty": write(folder, "empty.csv", _table(0)),
            "dup": write(folder, "dup.csv", "a,A,b\n1,2,3\n4,5,6\n")}


def _answers(gw: gateway.Gateway, sql: str) -> tuple[object, object]:
    """The fast path's answer (or error) and the planner's, for the same statement."""
    def run(text: str) -> object:
        try:
            table = gw.execute(text, engine="csv").to_arrow()
        except gateway.GatewayError as exc:
            return (type(exc).__name__, str(exc))
        return table.schema, table.to_pylist()
    assert projection(sql) is not None and projection(PLANNER + sql) is None
    return run(sql), run(PLANNER + sql)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(statements())
def test_a_projection_answers_as_the_planner_does(files, sql):
    with gateway_for(files["one"], chunk_bytes=4096, columns={"t": "TIME", "big": "HUGEINT"},
                     timestamp_format="%Y-%m-%d %H:%M:%S") as gw:
        fast, planned = _answers(gw, sql)
    assert fast == planned, sql


@pytest.mark.parametrize("name,sql,source", [
    ("one", "SELECT * FROM t LIMIT 5 OFFSET 495", {}),
    ("one", "SELECT a, ts, t, big, flag FROM t LIMIT 3 OFFSET 200", {}),
    ("empty", "SELECT a, B FROM t", {}),
    ("empty", "SELECT * FROM t", {}),
    ("dup", "SELECT * FROM t", {}),
    ("dup", "SELECT a, A AS x FROM t", {}),
    ("one", "SELECT nope FROM t", {}),  # the planner's error, word for word
    ("one", "SELECT a FROM nope", {}),
])
def test_projections_answer_as_the_planner_and_duckdb_do(files, name, sql, source):
    with gateway_for(files[name], chunk_bytes=4096, **source) as gw:
        fast, planned = _answers(gw, sql)
        assert fast == planned
        if not isinstance(fast[0], str):
            assert_same(gw, sql)


def test_a_projection_over_a_folder_answers_as_the_planner_does(tmp_path):
    for i in range(3):
        write(tmp_path, f"part{i}.csv", "a,b\n" + "".join(f"{i}{j},x{j}\n" for j in range(50)))
    with gateway_for(tmp_path) as gw:
        for sql in ("SELECT b, a FROM t", "SELECT a FROM t LIMIT 70 OFFSET 20"):
            fast, planned = _answers(gw, sql)
            assert fast == planned


def test_a_projection_skipping_bad_rows_answers_as_the_planner_does(tmp_path):
    path = write(tmp_path, "bad.csv", "a,b\n" + "".join(f"{i},x{i}\n" for i in range(30))
                 + "30,y,extra\n31,z\n")
    with gateway_for(path, on_error="skip", delimiter=",") as gw:
        results = {}
        for sql in ("SELECT a, b FROM t", PLANNER + "SELECT a, b FROM t"):
            result = gw.execute(sql, engine="csv")
            results[sql] = (result.to_arrow().to_pylist(), result.notes.get("skipped_rows"))
        assert len(set(map(json.dumps, results.values()))) == 1, results
        assert results[sql][1] == 1


def test_a_one_row_query_through_the_cli_imports_neither_sqlglot_nor_duckdb(tmp_path):
    """The planner (sqlglot) and DuckDB cost a one-shot ``arrowgate query`` 50-150 ms."""
    data = write(tmp_path, "one.csv", "a,b\n1,x\n")
    config = tmp_path / "arrowgate.toml"
    config.write_text(f'default_engine = "csv"\n[engines.csv]\ntype = "csv"\n'
                      f'[sources.trips]\npath = "{data}"\n')
    code = ("import sys\nfrom gateway.cli.main import main\n"
            f"code = main(['--config', {str(config)!r}, 'query', '--format', 'csv', "
            "'SELECT a, b FROM trips'])\n"
            "print(code, sorted(m for m in ('sqlglot', 'duckdb') if m in sys.modules), "
            "file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=Path(tmp_path))
    assert done.stdout.splitlines() == ["a,b", '1,x']
    assert done.stderr.split("\n")[-2] == "0 []", done.stderr


def test_an_api_process_imports_the_planner_only_for_a_statement_that_needs_it(tmp_path):
    """A program's first statement (gateway.connect, as the field's benchmark runs each
    engine) waits for the engine's start: a projection or a common aggregation needs no
    planner, and starting the engine imported it (sqlglot, 50-100 ms of CPU); the
    statement that needs it imports it, and warm() does (the shadow, the console)."""
    data = write(tmp_path, "one.csv", "a,b\n1,x\n")
    code = ("import sys\nimport gateway\n"
            f"config = {{'engines': {{'csv': {{'type': 'csv', 'fallback': 'duck'}}, "
            f"'duck': {{'type': 'duckdb'}}}}, 'sources': {{'trips': {{'path': {str(data)!r}}}}}}}\n"
            "seen = []\n"
            "with gateway.connect(config) as gw:\n"
            "    seen.append(gw.execute('SELECT a, b FROM trips').to_arrow().num_rows)\n"
            "    seen.append('sqlglot' in sys.modules)\n"
            "    seen.append(gw.execute('SELECT b, sum(a) FROM trips GROUP BY b').to_arrow().num_rows)\n"
            "    seen.append('sqlglot' in sys.modules)\n"
            "    seen.append(gw.execute('SELECT a + 1 FROM trips WHERE a > 0').to_arrow().num_rows)\n"
            "    seen.append('sqlglot' in sys.modules)\n"
            "print(*seen)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=tmp_path)
    assert done.stdout.split() == ["1", "False", "1", "False", "1", "True"]


def test_warming_the_csv_engine_imports_its_planner(tmp_path):
    """What the console and the shadow call before a first statement they time."""
    data = write(tmp_path, "one.csv", "a,b\n1,x\n")
    code = ("import sys\nimport gateway\n"
            f"config = {{'engines': {{'csv': {{'type': 'csv'}}}}, "
            f"'sources': {{'trips': {{'path': {str(data)!r}}}}}}}\n"
            "with gateway.connect(config) as gw:\n"
            "    engine = gw.engine('csv')\n"
            "    before = 'sqlglot' in sys.modules\n"
            "    engine.warm()\n"
            "    print(before, 'sqlglot' in sys.modules, 'pyarrow.compute' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=tmp_path)
    assert done.stdout.split() == ["False", "True", "True"]


def test_answers_are_the_planners_for_a_statement_it_alone_reads(files):
    with gateway_for(files["one"]) as gw:
        table = gw.execute("SELECT a FROM t WHERE a < 2", engine="csv").to_arrow()
    assert table.column("a").to_pylist() == [0, 1]
    assert table.schema.field("a").type == pa.int64()
