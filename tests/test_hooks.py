"""Every hook in gateway/hookspecs.py: documented, and tested by a test named after it."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gateway
from gateway import hookspecs
from gateway.engine import Engine, EngineResult
from tests.hang_guard import HANG_GUARD

TESTS = Path(__file__).parent


@pytest.mark.parametrize("name", hookspecs.HOOK_NAMES)
def test_hook_is_documented(name):
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert "Called" in doc, f"{name}: say when it is called"
    assert "Returns" in doc or "Return" in doc, f"{name}: say what it returns"
    spec_opts = getattr(hookspecs, name).arrowgate_spec
    if spec_opts.get("firstresult"):
        assert "firstresult" in doc, f"{name}: say that the first answer wins"
    else:
        # "Called" contains "all": ask for the phrase itself
        assert re.search(r"\ball (answers|implementations)\b", doc, re.IGNORECASE), \
            f"{name}: say that all answers are collected"
    for param in inspect.signature(getattr(hookspecs, name)).parameters:
        assert param in doc, f"{name}: document the argument {param!r}"


@pytest.mark.parametrize("name", hookspecs.HOOK_NAMES)
def test_hook_has_a_test_named_after_it(name):
    pattern = re.compile(rf"^def test_{name}\b", re.MULTILINE)
    assert any(pattern.search(p.read_text()) for p in TESTS.rglob("test_*.py")), (
        f"no test named test_{name}")


class Recorder:
    def __init__(self):
        self.events = []

    @gateway.hookimpl
    def arrowgate_query_started(self, event):
        self.events.append(("started", event.engine, event.sql))

    @gateway.hookimpl
    def arrowgate_query_finished(self, event, rows, elapsed):
        self.events.append(("finished", event.engine, rows, elapsed >= 0))

    @gateway.hookimpl
    def arrowgate_query_failed(self, event, error, elapsed):
        self.events.append(("failed", event.engine, type(error).__name__, error.engine))


def test_arrowgate_query_started():
    rec = Recorder()
    with gateway.connect(plugins=[rec]) as gw:
        result = gw.execute("SELECT 1 AS x")
        assert rec.events == [("started", "duckdb", "SELECT 1 AS x")]
        result.to_arrow()


def test_arrowgate_query_finished():
    rec = Recorder()
    with gateway.connect(plugins=[rec]) as gw:
        result = gw.execute("SELECT * FROM range(300000)")
        assert not any(e[0] == "finished" for e in rec.events)  # not until the stream ends
        assert result.to_arrow().num_rows == 300000
    assert rec.events[-1] == ("finished", "duckdb", 300000, True)


def test_arrowgate_query_failed():
    rec = Recorder()
    with gateway.connect(plugins=[rec]) as gw:
        with pytest.raises(gateway.QueryError):
            gw.execute("SELECT * FROM nowhere")
        # a failure while streaming is reported too
        with pytest.raises(gateway.QueryError):
            gw.execute("SELECT CAST('x' || range AS INTEGER) FROM range(10)").to_arrow()
    failed = [e for e in rec.events if e[0] == "failed"]
    assert failed == [("failed", "duckdb", "QueryError", "duckdb")] * 2


def test_arrowgate_rewrite_sql():
    class Rewriter:
        @gateway.hookimpl
        def arrowgate_rewrite_sql(self, sql, engine, engine_type):
            if engine_type == "duckdb":
                return sql.replace("NOW_ANSWER", "42")
            return None

    rec = Recorder()
    with gateway.connect(plugins=[Rewriter(), rec]) as gw:
        table = gw.execute("SELECT NOW_ANSWER AS answer").to_arrow()
    assert table.to_pylist() == [{"answer": 42}]
    assert rec.events[0] == ("started", "duckdb", "SELECT 42 AS answer")


def test_arrowgate_engine_types():
    class EchoEngine(Engine):
        """Answers every query with the SQL text itself."""

        type_name = "echo"

        def execute(self, sql, parameters=None):
            import pyarrow as pa

            table = pa.table({"sql": [sql]})
            return EngineResult(pa.RecordBatchReader.from_batches(table.schema,
                                                                  table.to_batches()))

    class Registers:
        @gateway.hookimpl
        def arrowgate_engine_types(self):
            return [EchoEngine]

    with gateway.connect({"engines": {"e": {"type": "echo"}}}, plugins=[Registers()]) as gw:
        assert gw.execute("hello").to_arrow().to_pylist() == [{"sql": "hello"}]
        assert "echo" in gw.engine_types and "duckdb" in gw.engine_types


def test_arrowgate_shadow_finished(tmp_path):
    """Fired once per record: compared in the caller's last read, in the background, skipped."""
    finished = []

    class Watcher:
        @gateway.hookimpl
        def arrowgate_shadow_finished(self, record):
            finished.append((record.status, record.category, record.done()))

    config = {"engines": {"a": {"type": "duckdb"}, "b": {"type": "duckdb"}},
              "shadow": {"reference": "b", "primary": "a", "store": str(tmp_path / "store")}}
    with gateway.connect(config, plugins=[Watcher()]) as gw:
        result = gw.execute("SELECT * FROM range(100000)", engine="a")
        assert finished == []  # not before the answer is read
        result.to_arrow()
        assert finished == [("compared", "match", True)]
        gw.execute("CREATE TABLE t AS SELECT 1 AS x", engine="a").to_arrow()
        assert finished[1] == ("skipped", None, True)
    background = {**config, "shadow": {**config["shadow"], "background": True}}
    with gateway.connect(background, plugins=[Watcher()]) as gw:
        result = gw.execute("SELECT 42 AS x", engine="a")
        result.to_arrow()
        assert result.shadow.wait(HANG_GUARD)
    deadline = time.monotonic() + HANG_GUARD
    while len(finished) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # the hook runs after the record is marked done
    assert finished == [("compared", "match", True), ("skipped", None, True),
                        ("compared", "match", True)]



TWO_ENGINES = {"engines": {"a": {"type": "duckdb"}, "b": {"type": "duckdb"}}}


#: the name the shadow layer is registered under (gateway.plugins.OWN_LAYERS)
OWN_SHADOW = "arrowgate.shadow"


def _without_the_shadow_layer():
    from gateway.plugins import build_plugin_manager

    pm = build_plugin_manager()
    pm.unregister(name=OWN_SHADOW)
    return pm


def test_arrowgate_shadow_settings(tmp_path, monkeypatch):
    """The core hands the [shadow] section to the shadow layer, which checks it; the layer
    loads whatever ARROWGATE_PLUGINS says, and its absence is an error that says so."""
    config = {**TWO_ENGINES, "shadow": {"reference": "b", "sample": 0.5,
                                        "store": str(tmp_path / "store")}}
    monkeypatch.setenv("ARROWGATE_PLUGINS", "duckdb")
    with gateway.connect(config) as gw:
        assert (gw.shadow_settings.reference, gw.shadow_settings.sample) == ("b", 0.5)
    with pytest.raises(gateway.ConfigError, match=r"shadow.sample.*between 0 and 1"):
        gateway.connect({**config, "shadow": {"reference": "b", "sample": 2.0}})
    from gateway.core import Gateway

    with pytest.raises(gateway.ConfigError, match="no plugin shadows statements") as info:
        Gateway(config, plugin_manager=_without_the_shadow_layer())
    assert "reinstall arrowgate" in str(info.value)


def test_arrowgate_shadowed():
    """Step 7 of the pipeline is the hook's: a plugin answering it (registered later, so
    asked first) decides, the shadow layer answers otherwise, and without it a
    shadowed statement fails rather than running unshadowed."""
    seen = []

    class Decides:
        @gateway.hookimpl
        def arrowgate_shadowed(self, pipeline, statement):
            seen.append((statement.sql, statement.engine, statement.shadow))
            return pipeline.run_plain(statement) if statement.sql.startswith("SELECT 1") else None

    with gateway.connect(TWO_ENGINES, plugins=[Decides()]) as gw:
        answered = gw.execute("SELECT 1 AS x", engine="a", shadow="b")
        assert answered.to_arrow().to_pylist() == [{"x": 1}] and answered.shadow is None
        shadowed = gw.execute("SELECT 2 AS x", engine="a", shadow="b")
        shadowed.to_arrow()
        assert shadowed.shadow.category == "match"  # the shadow layer's answer
        gw.execute("SELECT 3 AS x", engine="a").to_arrow()  # no reference: not asked
    assert seen == [("SELECT 1 AS x", "a", "b"), ("SELECT 2 AS x", "a", "b")]
    from gateway.core import Gateway

    with Gateway(TWO_ENGINES, plugin_manager=_without_the_shadow_layer()) as gw:
        assert gw.execute("SELECT 4 AS x", engine="a").to_arrow().num_rows == 1
        with pytest.raises(gateway.Unsupported, match="shadowing is not available"):
            gw.execute("SELECT 4 AS x", engine="a", shadow="b")


def test_arrowgate_shadowed_is_answered_beside_an_outside_plugin_named_shadow(tmp_path):
    """An outside distribution's entry point may be named ``shadow`` too, and found first
    on the path: both load, and the shadow layer still answers the hooks."""
    (tmp_path / "outside-1.0.dist-info").mkdir()
    (tmp_path / "outside-1.0.dist-info" / "entry_points.txt").write_text(
        "[arrowgate]\nshadow = outside_shadow\n")
    (tmp_path / "outside_shadow.py").write_text("LOADED = True\n")
    code = ("import sys\n"
            f"sys.path.insert(0, {str(tmp_path)!r})\n"
            "from gateway.plugins import build_plugin_manager\n"
            "pm = build_plugin_manager()\n"
            "print(sorted(n for n, _ in pm.list_name_plugin() if 'shadow' in n))\n"
            "print(len(pm.hook.arrowgate_shadowed.get_hookimpls()))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split("\n")[:2] == [f"[{OWN_SHADOW!r}, 'shadow']", "1"], done.stdout

#: the contract's declarations an engine type makes (besides type_name, options, description)
DECLARED = ("supports_streaming", "supports_parameters", "supports_cancel", "supports_write",
            "supports_catalog", "supports_transactions", "dialect", "session_state",
            "holds_credentials")


def test_every_capability_flag_of_the_engine_contract_is_documented():
    docs = (TESTS.parent / "docs" / "plugins.md").read_text()
    contract = {name for name in vars(Engine) if name.startswith("supports_")}
    contract |= {"dialect", "session_state", "holds_credentials"}
    assert contract == set(DECLARED), "update DECLARED and docs/plugins.md together"
    for name in DECLARED:
        assert f"`{name}`" in docs, f"docs/plugins.md does not document {name}"
