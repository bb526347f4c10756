"""`arrowgate shadow` times each engine as `arrowgate bench` does (issue 37): the statement
run and its answer read, not the comparison's share of the work, nor the reference's
thread starting."""

from __future__ import annotations

import sys
import time

import pytest

import gateway
from gateway.shadow.answer import Answer
from gateway.shadow.run import run_shadowed
from gateway.shadow.settings import settings_from_mapping
from gateway.statement import Statement

CONFIG = {"engines": {"a": {"type": "duckdb"}, "b": {"type": "duckdb"}}}


@pytest.fixture
def gw():
    with gateway.connect(CONFIG) as gw:
        yield gw


def _shadowed(gw):
    settings = settings_from_mapping({"primary": "a", "reference": "b", "sample": 1.0},
                                     gw.config)
    for _ in range(2):  # imports and the engines' first queries
        _, _, record = run_shadowed(gw.pipeline, Statement("SELECT 42 AS x", "a"), settings,
                                    concurrent=False, store=False)
    assert record.status == "compared" and record.category == "match", record.message
    return record


def test_handing_batches_to_the_comparison_is_not_the_engines_time(gw, monkeypatch):
    added = Answer.add

    def slow_add(self, batch):
        time.sleep(0.2)
        return added(self, batch)

    monkeypatch.setattr(Answer, "add", slow_add)
    record = _shadowed(gw)
    assert record.primary_ms < 150 and record.reference_ms < 150, \
        (record.primary_ms, record.reference_ms)


def test_the_reference_starting_is_not_the_primarys_time(gw, monkeypatch):
    """The reference's thread took the interpreter before the primary's clock stopped
    (for up to a switch interval; made long here, so that it shows every time)."""
    opened = type(gw).session

    def busy_session(self, *args, **kwargs):
        until = time.perf_counter() + 0.2
        while time.perf_counter() < until:  # holds the interpreter, as Python work does
            pass
        return opened(self, *args, **kwargs)

    monkeypatch.setattr(type(gw), "session", busy_session)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        record = _shadowed(gw)
    finally:
        sys.setswitchinterval(interval)
    assert record.primary_ms < 150, record.primary_ms


def test_a_statement_text_is_read_once_for_its_kind(monkeypatch):
    """A replay asks a statement's kind twice (whether to run it, then the shadow's own
    check), and a prepared text comes back with every parameter set: sqlglot read it
    each time (a sixth of a replay's work besides the engines')."""
    from gateway.sql import kinds

    parsed = []
    parse = kinds.parse

    def counted(sql, dialect):
        parsed.append(sql)
        return parse(sql, dialect)

    monkeypatch.setattr(kinds, "parse", counted)
    sql = "SELECT count(*) AS n FROM trips WHERE passenger_count = ? -- read once"
    assert kinds.is_read(sql, "duckdb") and kinds.is_read(sql, "duckdb")
    assert kinds.statement_kind(sql, "duckdb") == "read"
    assert parsed == [sql]
    long = "SELECT 1 AS a" + " " * kinds._COUNT_KEPT_CHARS
    assert kinds.statement_kind(long, "duckdb") == kinds.statement_kind(long, "duckdb")
    assert parsed == [sql, long, long]  # long texts are not kept


def test_both_engines_are_timed_from_opening_their_session(gw, monkeypatch):
    """The primary's statement opens its session inside its time (as `arrowgate bench`'s
    does); the reference's session was opened before its clock started, so a 1 ms
    statement's ratio was twice bench's."""
    engine_type = type(gw.engine("a"))
    opened = engine_type.open_session

    def slow_open(self, *args, **kwargs):
        time.sleep(0.2)
        return opened(self, *args, **kwargs)

    monkeypatch.setattr(engine_type, "open_session", slow_open)
    record = _shadowed(gw)
    assert record.primary_ms >= 200 and record.reference_ms >= 200, \
        (record.primary_ms, record.reference_ms)
