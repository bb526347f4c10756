"""Error kinds: DuckDB's native errors classified, and two failures agree only on the same kind."""

from __future__ import annotations

import pyarrow as pa
import pytest

import gateway
from gateway.cli.main import main
from gateway.errors import KINDS, GatewayError, QueryError, QueryTimeout, Unsupported
from gateway.verify.compare import compare_outcomes

DUCKDB_ERRORS = {
    "SELEC 1": "syntax",
    "SELECT a, count(*) FROM (SELECT 1 AS a, 2 AS b) t GROUP BY b": "syntax",
    "SELECT x FROM (SELECT 1 AS a) t": "unknown_object",
    "SELECT * FROM no_such_table": "unknown_object",
    "SELECT no_such_function(1)": "unknown_object",
    "SELECT * FROM read_csv('/no/such/file.csv')": "unknown_object",
    "SELECT 'a'::INTEGER": "type",
    "SELECT abs('x')": "type",
    "SELECT 1 // 0": "division_by_zero",
    "SELECT 7 % 0": "division_by_zero",
    "SELECT 2147483647::INTEGER + 1::INTEGER": "out_of_range",
    "SELECT 300::TINYINT": "out_of_range",
    "SELECT 1 UNION SELECT 1, 2": "syntax",
}


@pytest.fixture(scope="module")
def gw():
    with gateway.connect({"engines": {"duck": {"type": "duckdb"}}}) as gw:
        yield gw


@pytest.mark.parametrize("sql, kind", list(DUCKDB_ERRORS.items()))
def test_duckdb_errors_have_kinds(gw, sql, kind):
    with pytest.raises(QueryError) as info:
        gw.execute(sql).to_arrow()
    assert info.value.kind == kind, str(info.value)


def test_constraint_errors(gw):
    gw.execute("CREATE TABLE IF NOT EXISTS k (a INTEGER PRIMARY KEY)").to_arrow()
    with pytest.raises(QueryError) as info:
        gw.execute("INSERT INTO k VALUES (1), (1)").to_arrow()
    assert info.value.kind == "constraint"


def test_a_kind_must_be_known():
    assert QueryError("x", kind="syntax").kind == "syntax"
    assert QueryError("x").kind == "query" and QueryTimeout("x").kind == "timeout"
    with pytest.raises(ValueError, match="unknown error kind"):
        QueryError("x", kind="bogus")
    assert "timeout" in KINDS and "unsupported" in KINDS


def test_the_cli_names_the_engines_own_kind(capsys):
    assert main(["query", "SELEC 1"]) == 1
    assert capsys.readouterr().err.startswith("Parser Error: [duckdb] syntax error")


# -- the comparator ------------------------------------------------------------------------
def test_both_failing_match_only_on_the_same_kind():
    syntax = QueryError("Parser Error: near SELEC", engine="p", kind="syntax")
    missing = QueryError("file not found", engine="r", kind="unknown_object")
    v = compare_outcomes(syntax, missing)
    assert v.category == "error" and "syntax" in v.message and "unknown_object" in v.message
    assert v.evidence["primary_error"]["message"].endswith("near SELEC")
    assert v.evidence["reference_error"]["message"].endswith("file not found")
    # the same kind in other words: both failed, nothing compared (issue 37)
    worded = compare_outcomes(syntax, QueryError("other words", engine="r", kind="syntax"))
    assert worded.category == "both_error" and "other words" in worded.message
    assert worded.evidence["reference_error"]["kind"] == "syntax"
    same = compare_outcomes(syntax, QueryError("Parser Error: near SELEC", engine="r",
                                               kind="syntax"))
    assert same.ok


def test_kinds_not_classes_decide():
    # different classes, one kind: the engines agree
    assert compare_outcomes(Unsupported("no"), QueryError("no", kind="unsupported")).ok
    # an unclassified error (class default) matches only another unclassified one
    assert compare_outcomes(QueryError("a"), QueryError("a")).ok
    assert compare_outcomes(QueryError("a"), QueryError("b", kind="syntax")).category == "error"


def test_an_exception_without_a_kind_is_judged_by_its_class():
    assert compare_outcomes(ValueError("a"), ValueError("a")).ok
    assert compare_outcomes(ValueError("a"), ValueError("b")).category == "both_error"
    assert compare_outcomes(ValueError("a"), KeyError("b")).category == "error"
    assert compare_outcomes(GatewayError("a"), pa.table({"x": [1]})).category == "error"
