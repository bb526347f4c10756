"""Every engine answers the corpus like the DuckDB reference (compared by the shadow comparator)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import gateway
from gateway.verify.compare import compare_tables
from tests.conformance.corpus import all_cases

CASES = all_cases()


def reference_answer(reference: gateway.Gateway, cache: dict[str, Any], sql: str) -> pa.Table:
    if sql not in cache:
        cache[sql] = reference.execute(sql).to_arrow()
    return cache[sql]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_query(case, engine_under_test, reference, reference_answers, request):
    eut, gw = engine_under_test
    gap = eut.gaps.get(case.name)
    if gap is not None:
        request.applymarker(pytest.mark.xfail(reason=f"{gap.kind}: {gap.reason}",
                                              raises=gap.raises, strict=True))
    expected = reference_answer(reference, reference_answers, case.sql)
    got = gw.execute(case.sql).to_arrow()
    verdict = compare_tables(got, expected, sql=case.sql)
    assert verdict.category == "match", f"{case.file}:{case.name}: {verdict.message}"


def test_result_schema_known_before_rows(engine_under_test):
    _, gw = engine_under_test
    result = gw.execute("SELECT trip_id, cab_type FROM trips")
    assert result.schema.names == ["trip_id", "cab_type"]
    assert result.rows == 0
    batches = list(result.reader())
    assert sum(b.num_rows for b in batches) == result.rows == 400


def test_catalog_lists_sources(engine_under_test):
    eut, gw = engine_under_test
    engine = gw.engine(eut.name)
    if not engine.supports_catalog:
        with pytest.raises(gateway.Unsupported):
            engine.catalog()
        return
    columns = {(c.table, c.column): c for c in engine.catalog()}
    assert ("trips", "trip_id") in columns
    assert ("zones", "borough") in columns
    assert pa.types.is_string(columns[("zones", "borough")].type)


def test_parameters(engine_under_test):
    eut, gw = engine_under_test
    engine = gw.engine(eut.name)
    sql = "SELECT count(*) AS n FROM trips WHERE cab_type = ?"
    if not engine.supports_parameters:
        with pytest.raises(gateway.Unsupported):
            gw.execute(sql, parameters=["green"])
        return
    assert gw.execute(sql, parameters=["green"]).to_arrow().column(0)[0].as_py() == 113


#: failing queries and the kind every engine must give their error (gateway.errors.KINDS)
ERROR_KINDS = {
    "error_kind_syntax": ("SELEC trip_id FROM trips", "syntax"),
    "error_kind_unknown_column": ("SELECT no_such_column FROM trips", "unknown_object"),
    "error_kind_unknown_table": ("SELECT * FROM no_such_table", "unknown_object"),
    "error_kind_conversion": ("SELECT CAST(cab_type AS INTEGER) AS x FROM trips", "type"),
    "error_kind_comparison": ("SELECT trip_id FROM trips WHERE pickup_datetime > 1", "type"),
    "error_kind_grouping": ("SELECT cab_type, count(*) AS n FROM trips", "syntax"),
    "error_kind_out_of_range": ("SELECT CAST(trip_id + 1000 AS TINYINT) AS x FROM trips",
                                "out_of_range"),
}


@pytest.mark.parametrize("case", list(ERROR_KINDS))
def test_error_kind(case, engine_under_test, request):
    eut, gw = engine_under_test
    gap = eut.gaps.get(case)
    if gap is not None:
        request.applymarker(pytest.mark.xfail(reason=f"{gap.kind}: {gap.reason}",
                                              raises=gap.raises, strict=True))
    sql, kind = ERROR_KINDS[case]
    with pytest.raises(gateway.GatewayError) as info:
        gw.execute(sql).to_arrow()
    assert info.value.kind == kind, str(info.value)


def test_query_error_is_translated(engine_under_test):
    eut, gw = engine_under_test
    with pytest.raises(gateway.GatewayError) as info:
        gw.execute("SELECT no_such_column FROM trips").to_arrow()
    assert info.value.engine == eut.name
    assert "no_such_column" in str(info.value)


def test_catalog_tree_level_by_level_with_patterns(engine_under_test):
    eut, gw = engine_under_test
    engine = gw.engine(eut.name)
    if not engine.supports_catalog:
        with pytest.raises(gateway.Unsupported):
            gw.catalogs(eut.name)
        return
    catalogs = gw.catalogs(eut.name)
    assert catalogs
    tables = gw.tables(eut.name, pattern="tr%")
    trips = [t for t in tables if t.table == "trips"]
    assert trips, tables
    assert not [t for t in tables if not t.table.startswith("tr")]
    ref = trips[0]
    assert ref.catalog in catalogs
    schemas = gw.schemas(eut.name, catalog=ref.catalog)
    assert (ref.catalog, ref.schema) in {(s.catalog, s.schema) for s in schemas}
    assert not gw.schemas(eut.name, catalog=ref.catalog, pattern="no\\_such%")
    assert gw.tables(eut.name, catalog=ref.catalog, schema=ref.schema, pattern="zone_") \
        == [] or all(t.table.startswith("zone") for t in
                     gw.tables(eut.name, catalog=ref.catalog, schema=ref.schema,
                               pattern="zone_"))
    assert [t.table for t in gw.tables(eut.name, catalog=ref.catalog, schema=ref.schema,
                                       pattern="zone%")] == ["zones"]
    columns = gw.columns(eut.name, table="zones", catalog=ref.catalog, schema=ref.schema)
    assert [c.column for c in columns][:1] and "borough" in [c.column for c in columns]
    assert all(c.catalog == ref.catalog and c.table == "zones" for c in columns)
    only = gw.columns(eut.name, table="zones", catalog=ref.catalog, schema=ref.schema,
                      pattern="bor%")
    assert [c.column for c in only] == ["borough"]
    assert pa.types.is_string(only[0].type)


def test_session_and_prepared_statement(engine_under_test):
    eut, gw = engine_under_test
    with gw.session(eut.name) as session:
        prepared = session.prepare("SELECT trip_id, cab_type FROM trips")
        assert prepared.schema.names == ["trip_id", "cab_type"]
        assert prepared.execute().to_arrow().num_rows == 400
        assert session.execute("SELECT count(*) AS n FROM zones").to_arrow() \
            .column(0)[0].as_py() > 0
        if gw.engine(eut.name).supports_parameters:
            by_type = session.prepare("SELECT count(*) AS n FROM trips WHERE cab_type = ?")
            assert len(by_type.parameter_schema) == 1
            answer = by_type.execute(pa.table({"t": ["green", "yellow"]})).to_arrow()
            assert answer.column(0).to_pylist() == [113, 254]
