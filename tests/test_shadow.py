"""Shadow mode through the gateway: planted bugs caught, writes skipped, timeout, noise, store."""

from __future__ import annotations

import pytest

import gateway
from gateway.shadow.store import ShadowStore, summarize
from gateway.sql.kinds import statement_kind
from tests import planted_bugs
from tests.conformance.corpus import SOURCES, all_cases
from tests.hang_guard import HANG_GUARD

#: bug -> a query on the bundled data that the bug changes
BUG_QUERIES = {
    # a scan keeps the file's order (trip_id ascending), which the bug reverses, so the
    # answer is always out of order; a GROUP BY's order is random and could happen to fit
    "order_by_ignored": "SELECT trip_id, total_amount FROM trips ORDER BY trip_id",
    "null_group_lost": "SELECT passenger_count, count(*) AS n FROM trips GROUP BY passenger_count",
    "round_half_even": "SELECT x, round(x) AS r FROM (VALUES (0.5), (1.5), (2.5)) t(x)",
    "integer_overflow_wraps": "SELECT sum(x)::BIGINT AS s FROM (VALUES (2147483647), (10)) t(x)",
    "limit_off_by_one": "SELECT trip_id FROM trips ORDER BY trip_id LIMIT 5",
    "column_renamed": "SELECT cab_type, count(*) AS n FROM trips GROUP BY cab_type",
    "float_perturbed": "SELECT trip_id, total_amount FROM trips WHERE trip_id <= 20",
    "error_swallowed": "SELECT CAST('not a number' AS INTEGER) AS x",
    "order_by_ignored_under_limit": "SELECT trip_id, total_amount FROM trips "
                                    "ORDER BY total_amount DESC LIMIT 5",
    "round_group_key": "SELECT round(trip_distance) AS d, count(*) AS n FROM trips "
                       "GROUP BY round(trip_distance)",
    "null_groups_dropped": "SELECT passenger_count, count(*) AS n FROM trips "
                           "GROUP BY passenger_count",
    "sum_overflow_wraps": "SELECT sum(x) AS s FROM (VALUES (9223372036854775807), (10)) t(x)",
}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """The default store (.arrowgate/shadow) lands in the test's folder."""
    monkeypatch.chdir(tmp_path)


def verdict(result):
    """Read the shadowed answer to its end: then its record is final."""
    result.to_arrow()
    assert result.shadow.done()
    return result.shadow


@pytest.fixture
def gate(request):
    """The name of a planted engine's gate (closed), opened at the end whatever happens."""
    import threading

    name = request.node.name
    planted_bugs.GATES[name] = threading.Event()
    yield name
    planted_bugs.GATES.pop(name).set()


def connect(tmp_path, reference: dict | None = None, shadow: dict | None = None, **primary):
    config = {
        "default_engine": "primary",
        "engines": {"primary": {"type": "planted", **primary},
                    "reference": reference or {"type": "duckdb"},
                    "clean": {"type": "planted"}},
        "sources": SOURCES,
    }
    if shadow is not None:
        config["shadow"] = {"store": str(tmp_path / "store"), **shadow}
    return gateway.connect(config, plugins=[planted_bugs])


@pytest.mark.parametrize("bug", list(planted_bugs.BUGS))
def test_planted_bug_is_caught_with_its_category(tmp_path, bug):
    with connect(tmp_path, bug=bug) as gw:
        # the wrapper without its bug agrees with DuckDB: what diverges below is the bug
        try:
            clean = verdict(gw.execute(BUG_QUERIES[bug], engine="clean", shadow="reference"))
        except gateway.QueryError as exc:  # error_swallowed's query fails on both, alike
            clean = exc.shadow
        assert clean.category == "match", clean.message
        record = verdict(gw.execute(BUG_QUERIES[bug], shadow="reference"))
    assert record.category == planted_bugs.BUGS[bug], record.message
    assert record.diverged


def test_shadowed_result_is_the_primarys_answer_with_the_record(tmp_path):
    with connect(tmp_path, bug="float_perturbed") as gw:
        result = gw.execute("SELECT 2.0::DOUBLE AS v", shadow="reference")
        assert result.engine == "primary"
        assert result.to_arrow().column(0)[0].as_py() == pytest.approx(2.000002)
        record = result.shadow
    assert (record.primary, record.reference, record.status) == ("primary", "reference", "compared")
    assert record.primary_rows == record.reference_rows == 1
    assert record.primary_ms > 0 and record.reference_ms > 0
    assert record.ratio == pytest.approx(record.primary_ms / record.reference_ms)
    assert "reference" in record.summary() and "x" in record.summary()


def test_primary_error_is_raised_with_its_record(tmp_path):
    with connect(tmp_path) as gw, pytest.raises(gateway.QueryError) as info:
        gw.execute("SELECT no_such_column FROM trips", shadow="reference")
    assert info.value.shadow.category == "match"  # both engines reject it alike


def test_config_section_shadows_every_query(tmp_path):
    with connect(tmp_path, shadow={"reference": "reference", "primary": "primary"},
                 bug="limit_off_by_one") as gw:
        result = gw.execute("SELECT trip_id FROM trips ORDER BY trip_id LIMIT 3")
        assert verdict(result).category == "extra_rows"
        assert gw.execute("SELECT 1", engine="reference").shadow is None  # not the primary
        assert gw.execute("SELECT 1", shadow=False).shadow is None
    records = ShadowStore(tmp_path / "store").read()
    assert records.column("category").to_pylist() == ["extra_rows"]


def test_sampling_zero_shadows_nothing(tmp_path):
    with connect(tmp_path, shadow={"reference": "reference", "sample": 0.0}) as gw:
        assert all(gw.execute("SELECT 1").shadow is None for _ in range(5))


@pytest.mark.parametrize("sql", [
    "CREATE TABLE t2 AS SELECT 1 AS x",
    "INSERT INTO t VALUES (1)",
    "UPDATE t SET x = 2",
    "DELETE FROM t",
    "DROP TABLE t",
    "COPY t TO 'x.csv'",
])
def test_writes_are_never_shadowed_by_default(tmp_path, sql):
    with connect(tmp_path) as gw:
        gw.execute("CREATE TABLE t AS SELECT 1 AS x", shadow=False).to_arrow()
        gw.execute("CREATE TABLE t AS SELECT 1 AS x", engine="reference", shadow=False).to_arrow()
        record = gw.execute(sql.replace("'x.csv'", repr(str(tmp_path / "x.csv"))),
                            shadow="reference").shadow
        assert record.status == "skipped" and record.category is None
        assert "shadow_writes" in record.skip_reason
        # the reference never ran: its copy of t is untouched
        after = gw.execute("SELECT count(*) AS n, max(x) AS m FROM t", engine="reference",
                           shadow=False).to_arrow().to_pylist()
    assert after == [{"n": 1, "m": 1}]


def test_shadow_writes_runs_them_on_a_separate_copy(tmp_path):
    with connect(tmp_path, shadow={"reference": "reference", "shadow_writes": True}) as gw:
        record = verdict(gw.execute("CREATE TABLE t AS SELECT 1 AS x"))
        assert record.status == "compared"
        assert gw.execute("SELECT x FROM t", engine="reference").to_arrow().num_rows == 1


def test_opt_out_comment(tmp_path):
    with connect(tmp_path) as gw:
        record = gw.execute("SELECT 1 -- arrowgate: shadow=off", shadow="reference").shadow
    assert record.status == "skipped" and "opted out" in record.skip_reason


def test_statement_kinds():
    assert statement_kind("SELECT 1") == "read"
    assert statement_kind("WITH a AS (SELECT 1) SELECT * FROM a") == "read"
    assert statement_kind("SELECT 1 UNION ALL SELECT 2") == "read"
    assert statement_kind("INSERT INTO t SELECT 1") == "INSERT"
    assert statement_kind("SELECT 1 INTO t") != "read"
    assert statement_kind("SELECT 1; DROP TABLE t") == "DROP"


@pytest.mark.parametrize("sql", ['SELECT U&"pg\\005freload\\005fconf"()', 'select u&"t" FROM x',
                                 'SELECT * FROM s.U&"lo\\005fimport"(\'/etc/hostname\')'])
def test_a_unicode_escaped_identifier_is_never_a_query(sql):
    """PostgreSQL decodes U&"..." names; no check here could read them as the server does."""
    assert statement_kind(sql, "postgres") != "read"
    assert "Unicode-escaped" in statement_kind(sql, "postgres")
    # (text that merely holds U&" is refused too: the check does not tell strings apart)
    assert statement_kind("SELECT 'U&' AS u, \"U\" AS v", "postgres") == "read"


def test_slow_reference_never_delays_the_primary_beyond_the_timeout(tmp_path, gate):
    # the reference answers only once the gate opens, after the primary's answer is read:
    # that answer coming at all shows it waited for the timeout, not for the reference
    held = {"type": "planted", "gate": gate}
    with connect(tmp_path, reference=held, shadow={"reference": "reference", "timeout": 0.5}) as gw:
        gw.engine("reference")
        gw.engine("primary")
        result = gw.execute("SELECT 42 AS answer")
        answer = result.to_arrow()  # its last read waits for the reference, up to the timeout
        assert not planted_bugs.GATES[gate].is_set()
        planted_bugs.GATES[gate].set()
    assert answer.column(0)[0].as_py() == 42
    assert result.shadow.category == "error"
    assert "QueryTimeout" in result.shadow.message


def test_noise_turns_nondeterminism_into_its_own_category(tmp_path):
    sql = "SELECT random() AS r"
    with connect(tmp_path, shadow={"reference": "reference", "noise": True}) as gw:
        record = verdict(gw.execute(sql))
        assert record.category == "nondeterministic" and record.noise_checked
        assert not record.diverged
        assert verdict(gw.execute("SELECT 1 AS one")).category == "match"
    with connect(tmp_path) as gw:  # without noise, random() is found in the SQL
        record = verdict(gw.execute(sql, shadow="reference"))
        assert record.category == "nondeterministic" and not record.noise_checked


@pytest.mark.parametrize("section, key", [
    ({"reference": "nope"}, "shadow.reference"),
    ({"primary": "nope", "reference": "reference"}, "shadow.primary"),
    ({}, "shadow.reference"),
    ({"reference": "reference", "sample": 2}, "shadow.sample"),
    ({"reference": "reference", "timeout": "soon"}, "shadow.timeout"),
    ({"reference": "reference", "rel_tol": "small"}, "shadow.rel_tol"),
    ({"reference": "reference", "bogus": 1}, "shadow.bogus"),
])
def test_bad_shadow_section_is_a_config_error_naming_the_key(tmp_path, section, key):
    config = {"engines": {"primary": {"type": "duckdb"}, "reference": {"type": "duckdb"}},
              "shadow": {"_": 0, **section}}
    config["shadow"].pop("_")
    if not section:
        config["shadow"] = {"noise": True}
    with pytest.raises(gateway.ConfigError) as info:
        gateway.connect(config)
    assert info.value.key == key and info.value.path == "<dict>"


def test_store_summary(tmp_path):
    with connect(tmp_path, shadow={"reference": "reference"}, bug="float_perturbed") as gw:
        for _ in range(3):
            gw.execute("-- name: q1\nSELECT 1.5::DOUBLE AS v").to_arrow()
        gw.execute("SELECT 1 AS n").to_arrow()
        gw.execute("DROP TABLE IF EXISTS nothing").to_arrow()
    store = ShadowStore(tmp_path / "store")
    store.flush()
    assert len(store.files()) == 1  # one file per flush, not per query
    summary = summarize(store.read())
    assert summary["records"] == 5 and summary["skipped"] == 1
    assert summary["by_category"] == {"values": 3, "match": 1}
    worst = {q["query"]: q for q in summary["queries"]}
    assert worst["-- name: q1 SELECT 1.5::DOUBLE AS v"]["diverged"] == 3
    assert summary["recent_divergences"][0]["category"] == "values"


def test_two_real_engines_agree_on_the_conformance_corpus(tmp_path):
    """DuckDB, two settings apart (threads, insertion order): no divergence on any case."""
    config = {"engines": {"a": {"type": "duckdb", "settings": {"threads": 2}},
                          "b": {"type": "duckdb", "settings": {
                              "threads": 1, "preserve_insertion_order": False}}},
              "sources": SOURCES}
    diverged = []
    with gateway.connect(config) as gw:
        for case in all_cases():
            record = verdict(gw.execute(case.sql, engine="a", shadow="b"))
            if record.category != "match":
                diverged.append(f"{case.name}: {record.category}: {record.message}")
    assert diverged == []


def test_csv_engine_against_duckdb_on_the_conformance_corpus(tmp_path):
    """The native csv scanner (falling back to DuckDB where it reports Unsupported) vs DuckDB."""
    config = {"engines": {"csv": {"type": "csv", "fallback": "duck"}, "duck": {"type": "duckdb"}},
              "sources": SOURCES}
    diverged, fell_back = [], []
    with gateway.connect(config) as gw:
        for case in all_cases():
            record = verdict(gw.execute(case.sql, engine="csv", shadow="duck"))
            if record.category != "match":
                diverged.append(f"{case.name}: {record.category}: {record.message}")
            if record.answered_by:
                fell_back.append(case.name)
    assert diverged == []
    assert "join_inner" in fell_back and "q01_count_by_cab" not in fell_back


def test_two_duckdb_versions_on_the_conformance_corpus(tmp_path_factory):
    """DuckDB 1.5.5 (worker install) vs the installed 2.x: only the known rounding change."""
    from tests.duckdb_support import V155, use_shared_home

    use_shared_home(tmp_path_factory)
    config = {"engines": {"v155": {"type": "duckdb", "version": V155},
                          "installed": {"type": "duckdb"}},
              "sources": SOURCES}
    verdicts = {}
    with gateway.connect(config) as gw:
        for case in all_cases():
            record = verdict(gw.execute(case.sql, engine="v155", shadow="installed"))
            if record.category != "match":
                verdicts[case.name] = (record.category, record.evidence.get("differences"))
    # 1.5.5 rounds the double 19.45 to 19.5 with round(x, 1); 2.x gives 19.4
    assert list(verdicts) == ["numeric_functions"]
    category, differences = verdicts["numeric_functions"]
    assert category == "values"
    assert {(d["column"], d["primary"], d["reference"]) for d in differences} >= {
        ("r1", 19.5, 19.4)}


def test_background_returns_the_primary_at_once_and_the_verdict_follows(tmp_path, gate):
    # the reference is held until the primary's answer is read: no clock needed to show
    # that the primary did not wait for it
    held = {"type": "planted", "gate": gate}
    shadow = {"reference": "reference", "primary": "primary", "background": True,
              "timeout": HANG_GUARD}
    with connect(tmp_path, reference=held, shadow=shadow) as gw:
        gw.engine("reference")
        gw.engine("primary")
        result = gw.execute("SELECT 42 AS answer")
        record = result.shadow
        assert record.status == "pending" and "pending" in record.summary()
        assert result.to_arrow().column(0)[0].as_py() == 42
        assert record.status == "pending"
        planted_bugs.GATES[gate].set()
        assert record.wait(HANG_GUARD)
    assert record.status == "compared" and record.category == "match"
    assert record.reference_ms > 0
    assert ShadowStore(tmp_path / "store").read().column("category").to_pylist() == ["match"]


class _Started:
    """The engines statements started on, in order (the query-started hook)."""

    def __init__(self):
        self.engines: list[str] = []

    @gateway.hookimpl
    def arrowgate_query_started(self, event):
        self.engines.append(event.engine)


@pytest.mark.parametrize("then", ["start", "cancel"])
def test_a_deferred_reference_starts_only_when_the_caller_asks(tmp_path, then):
    from gateway.shadow.run import run_shadowed
    from gateway.shadow.settings import ShadowSettings
    from gateway.statement import Statement

    started = _Started()
    config = {"default_engine": "a", "engines": {"a": {"type": "duckdb"}, "b": {"type": "duckdb"}}}
    settings = ShadowSettings(reference="b", background=True, store=None)
    with gateway.connect(config, plugins=[started]) as gw:
        result, error, record = run_shadowed(gw.pipeline, Statement("SELECT 42 AS x", "a"),
                                             settings, defer_reference=True)
        assert error is None and result is not None
        assert result.to_arrow().column(0).to_pylist() == [42]
        assert not record.wait(0.3)  # the primary's answer is in; the reference waits
        assert started.engines == ["a"] and record.status == "pending"
        if then == "start":
            result.start_reference()
        else:
            result.cancel()
        assert record.wait(HANG_GUARD)
    if then == "start":
        assert started.engines == ["a", "b"]
        assert record.status == "compared" and record.category == "match"
    else:
        assert started.engines == ["a"]
        assert record.status == "skipped"
