"""gateway.records: what the record classes keep of ``@dataclass``."""

from __future__ import annotations

import math
import pickle

import pytest

from gateway import records
from gateway.config import EngineConfig
from gateway.engine import Option
from gateway.hookspecs import QueryEvent
from gateway.statement import LOCAL, Principal, Statement
from gateway_csv.dialect import Dialect
from gateway_csv.layout import Layout


def test_a_record_shows_its_fields_and_compares_by_them():
    stmt = Statement("SELECT 1", engine="duck")
    assert repr(stmt).startswith("Statement(sql='SELECT 1', engine='duck', parameters=None,")
    assert stmt == Statement("SELECT 1", engine="duck")
    assert stmt != Statement("SELECT 1", engine="csv")
    assert stmt != ("SELECT 1", "duck")  # another class is never equal
    with pytest.raises(TypeError):
        hash(stmt)  # mutable: unhashable, as a dataclass


def test_a_frozen_record_hashes_its_fields():
    assert Principal() == LOCAL and hash(Principal()) == hash(LOCAL)
    assert {Principal("ann"), Principal("ann"), Principal("bob")} == {Principal("ann"),
                                                                      Principal("bob")}
    assert Option((int,), default=1) == Option((int,), default=1)
    assert Option((int,), default=1) != Option((int,), default=2)


def test_the_same_nan_is_equal_as_in_a_tuple():
    nan = math.nan
    assert Option((float,), default=nan) == Option((float,), default=nan)


def test_fields_and_replace_stand_for_the_dataclass_functions():
    assert records.fields(Principal) == ("name", "engines", "read_only", "shared")
    changed = records.replace(Principal("ann"), read_only=True)
    assert changed == Principal("ann", read_only=True)
    with pytest.raises(TypeError, match="no field 'reads'"):
        records.replace(Principal("ann"), reads=True)


def test_replace_works_out_again_what_init_works_out():
    layout = records.replace(Layout(["a", "b"], [0, 0]), names=["X", "y"])
    assert layout.names == ["X", "y"] and layout.column_index("x") == 0
    assert layout.column_index("a") is None
    with pytest.raises(ValueError, match="lower_names is worked out"):
        records.replace(layout, lower_names={})


def test_a_field_left_out_of_repr():
    dialect = Dialect(",", '"', '"', "", rows=[("a", "b")] * 1000)
    assert "rows" not in repr(dialect) and "delimiter=','" in repr(dialect)


def test_records_pickle_and_keep_their_defaults_apart():
    layout = Layout(["a", "B"], [0, 0])
    again = pickle.loads(pickle.dumps(layout))
    assert again == layout and again.column_index("b") == 1
    first, second = Layout(["a"], [0]), Layout(["a"], [0])
    first.formats[0] = "%d"
    assert second.formats == {}  # a default dict is each record's own


def test_an_engine_configs_repr_masks_its_secrets():
    """A dataclass's repr showed the password of an engine's section (in a traceback's
    locals, a log line)."""
    cfg = EngineConfig("pg", "adbc", {"uri": "postgresql://u:hunter2@db/x", "password": "hunter2",
                                      "batch_rows": 10}, secret_keys=frozenset({"password"}))
    shown = repr(cfg)
    assert "hunter2" not in shown
    assert shown.startswith("EngineConfig(name='pg', type='adbc', options={") and "10" in shown


def test_a_plugin_keeps_its_own_attributes_on_a_query_event():
    """The hooks get the same event at the start and the end of a query; a plugin may
    carry its own state on it, as it could on the dataclass it was."""
    event = QueryEvent(1, "SELECT 1", "duck", "duckdb", None, 0.0, "SELECT 1")
    event.my_timer = 42.0
    assert event.my_timer == 42.0
    assert records.fields(QueryEvent)[-1] == "tags" and "my_timer" not in repr(event)
    assert event == QueryEvent(1, "SELECT 1", "duck", "duckdb", None, 0.0, "SELECT 1")


def test_a_configurations_repr_names_its_parts_and_shows_no_section():
    """[serve] holds users' password hashes and token digests; a dataclass's repr
    printed them (in a traceback's locals, a log line)."""
    import gateway

    config = {"engines": {"duck": {"type": "duckdb"}},
              "serve": {"users": {"ann": {"password_hash": "scrypt$abc$def"}}}}
    with gateway.connect(config) as gw:
        shown = repr(gw.config)
    assert "scrypt" not in shown
    assert shown.startswith("GatewayConfig(path='<dict>', engines=['duck'], sources=[],")
