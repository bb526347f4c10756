"""gateway.cli.startup: the start-up tricks of a short-lived process, in one place.

(The exit without teardown is tested through the console script in
test_cli.py, the lazy pyarrow.compute through a csv query in
test_csv_startup.py.) What a one-row csv query leaves unimported is checked
here, in one process, module by module.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from gateway.cli.main import COMMANDS


def python_says(code: str) -> list[str]:
    """The words a fresh interpreter running ``code`` prints."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()


def test_a_lazy_module_is_imported_on_first_use_only():
    code = ("import sys\n"
            "from gateway.cli.startup import LazyModule\n"
            "tool = LazyModule('json.tool')\n"
            "before = 'json.tool' in sys.modules\n"
            "print(before, callable(tool.main), 'json.tool' in sys.modules)\n")
    assert python_says(code) == ["False", "True", "True"]


def test_a_lazy_pattern_is_compiled_on_first_use_only():
    code = ("import re\n"
            "from gateway.cli.startup import LazyPattern\n"
            "word = LazyPattern(r'(?P<w>[a-z]+)-zz', re.I)\n"
            "print('match' in vars(word), word.pattern)\n"
            "print(word.match('Ab-ZZ')['w'], word.fullmatch('a-b'), word.sub('x', 'q-zz!'))\n"
            "print(vars(word)['match'].__self__ is vars(word)['sub'].__self__)\n")
    assert python_says(code) == ["False", "(?P<w>[a-z]+)-zz", "Ab", "None", "x!", "True"]


def test_importing_the_csv_layout_compiles_none_of_its_patterns():
    # the sniffer's reference patterns and those of rare files: a one-row file needs none
    code = ("import re, gateway.cli.startup, gateway_csv.dialect, csv\n"
            "before = len(re._cache)\n"
            "import gateway_csv.layout\n"
            "print(len(re._cache) - before)\n")
    assert python_says(code) == ["0"]


def test_the_console_script_raises_the_collectors_first_threshold():
    code = ("import gc, sys, gateway.cli.main\n"
            "gateway.cli.main.main = lambda: print(gc.get_threshold()[0]) or 0\n"
            "gateway.cli.main.entry()\n")
    assert python_says(code) == ["100000"]


#: prints the modules imported from the first line on: not those the interpreter's start
#: imported (an editable install's finder, in the dev venv, imports urllib.parse)
ONE_ROW_QUERY = """
import sys
before = set(sys.modules)
import threading
started = []
start = threading.Thread.start
threading.Thread.start = lambda thread: started.append(thread.name) or start(thread)
import gateway.plugins
managers = []
init = gateway.plugins.PluginManager.__init__
gateway.plugins.PluginManager.__init__ = lambda pm: managers.append(pm) or init(pm)
from gateway.cli.main import main
code = main(['--config', sys.argv[1], 'query', '--format', 'csv', 'SELECT a, b FROM trips'])
print(code, file=sys.stderr)
print(' '.join(sorted(set(sys.modules) - before)), file=sys.stderr)
print(' '.join(started), file=sys.stderr)
print(len(managers), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def one_row_query(tmp_path_factory):
    """(modules, names of the threads started, plugin managers built) of a process that
    ran a one-row csv ``arrowgate query``."""
    folder = tmp_path_factory.mktemp("one_row")
    (folder / "one.csv").write_text("a,b\n1,x\n")
    config = folder / "arrowgate.toml"
    config.write_text(f'default_engine = "csv"\n[engines.csv]\ntype = "csv"\n'
                      f'[sources.trips]\npath = "{folder / "one.csv"}"\n')
    done = subprocess.run([sys.executable, "-c", ONE_ROW_QUERY, str(config)],
                          capture_output=True, text=True, check=True, cwd=folder)
    assert done.stdout.splitlines() == ["a,b", "1,x"]
    code, modules, threads, managers = done.stderr.splitlines()[-4:]
    assert code == "0"
    return set(modules.split()), threads.split(), int(managers)


@pytest.mark.parametrize("module", [
    # the other commands' modules: only the invoked command's parser is built
    *(f"gateway.cli.commands.{name}" for name in COMMANDS if name != "query"),
    "logging",  # gateway.sql raises sqlglot's logger as sqlglot is imported
    "concurrent.futures",  # a one-chunk file is scanned without the csv engine's pool
    "tempfile",  # gateway.output.writers and gateway_csv.opening import it for files only
    "json",  # the ducklake plugin's commands, the layout cache's key, csv output
    "glob",  # a source of one file
    "shutil",  # argparse's formatters are given the terminal's width (gateway.cli.commands)
    # the aggregations read without the planner, and the fused scan: a projection needs neither
    "gateway_csv.shape_aggregation", "gateway_csv.fused",
    "gateway_csv.native",  # the operations' table: a projection needs only the type names
    "gateway.sql.kinds",  # a one-shot statement of the local user changes no session state
])
def test_a_one_row_query_does_not_import(one_row_query, module):
    modules, _, _ = one_row_query
    assert module not in modules


def test_a_one_row_query_starts_no_scanner_thread(one_row_query):
    _, threads, _ = one_row_query
    assert threads == ["start-csv"]  # the engine's start (gateway.core), no scanner


def test_arrows_libraries_are_preloaded_without_importing_pyarrow():
    code = ("import sys\n"
            "from gateway.cli.startup import preload_arrow\n"
            "preload_arrow().join()\n"
            "maps = open('/proc/self/maps').read()\n"
            "print('pyarrow' in sys.modules, '/libarrow.so' in maps, '/libarrow_python' in maps)\n"
            "import pyarrow\n"
            "print(pyarrow.array([1, None], pyarrow.int64()).null_count)\n")
    assert python_says(code) == ["False", "True", "True", "1"]


def test_no_preload_on_one_processor(monkeypatch):
    import os

    from gateway.cli import startup
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no processor affinity on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert startup.preload_arrow() is None


def test_no_preload_where_pyarrow_is_not_on_the_path():
    code = ("import sys\n"
            "import os\n"
            "sys.path[:] = [p for p in sys.path if not os.path.isdir(os.path.join(p, 'pyarrow'))]\n"
            "from gateway.cli.startup import preload_arrow\n"
            "print(preload_arrow())\n")
    assert python_says(code) == ["None"]


def test_a_one_row_query_loads_the_plugins_once(one_row_query):
    _, _, managers = one_row_query
    assert managers == 1  # the parser's, handed to the gateway (gateway.cli.commands.open_gateway)


def test_the_catalog_rows_are_records_ordered_and_hashed_as_their_dataclasses_were():
    # (records: no class compiled from source as gateway.engine imports, gateway.records)
    import dataclasses

    from gateway.engine import CatalogColumn, SchemaRef, TableRef

    assert not dataclasses.is_dataclass(CatalogColumn)
    assert sorted([SchemaRef("c", "t"), SchemaRef("c", "s")]) == [SchemaRef("c", "s"),
                                                                  SchemaRef("c", "t")]
    assert sorted([TableRef("c", "s", "b"), TableRef("c", "s", "a", "VIEW")])[0].table == "a"
    assert len({TableRef("c", "s", "t"), TableRef("c", "s", "t", "TABLE")}) == 1
    assert CatalogColumn("s", "t", "c", None).nullable is True


def test_importing_the_errors_imports_no_url_parser():
    # gateway.masking URL-encodes a secret only when one is masked (the dev venv's
    # editable-install finder imports urllib.parse at start, hence the pop)
    code = ("import sys\n"
            "sys.modules.pop('urllib.parse', None)\n"
            "import gateway.errors\n"
            "print('urllib.parse' in sys.modules)\n")
    assert python_says(code) == ["False"]


def test_importing_the_errors_compiles_no_masking_pattern():
    code = ("import gateway.errors\n"
            "from gateway import masking\n"
            "print(masking._compiled.cache_info().currsize)\n"
            "masking.mask_text('postgresql://u:secret@h')\n"
            "print(masking._compiled.cache_info().currsize)\n")
    before, after = python_says(code)
    assert before == "0" and int(after) > 0  # compiled when first needed


def test_sqlglots_logger_is_raised_when_sqlglot_is_imported_after_the_sql_package():
    code = ("import sys\n"
            "import gateway.sql\n"
            "print('logging' in sys.modules)\n"
            "import logging, sqlglot\n"
            "print(logging.getLogger('sqlglot').level == logging.ERROR)\n")
    assert python_says(code) == ["False", "True"]


def test_sqlglots_logger_is_raised_when_logging_was_imported_first():
    code = ("import logging\n"
            "import gateway.sql, sqlglot\n"
            "print(logging.getLogger('sqlglot').level == logging.ERROR)\n")
    assert python_says(code) == ["True"]


@pytest.mark.parametrize("columns, expected", [("50", 50), ("0", 80), ("wide", 80), (None, 80)])
def test_help_is_as_wide_as_shutil_says(monkeypatch, columns, expected):
    # gateway.cli.commands.terminal_columns stands in for shutil.get_terminal_size (not imported);
    # under pytest, stdout is no terminal, so both fall back to 80 without $COLUMNS
    import shutil

    from gateway.cli.commands import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns == expected


#: a Ctrl-C whose KeyboardInterrupt lands in a callback, where Python prints and drops it
#: (as it did in the import system's module-lock callback while imports ran in threads)
DROPPED_INTERRUPT = """
import os, signal, sys, weakref
from gateway.cli import startup
startup.note_interrupts()
class Held: pass
held = Held()
def dropped(ref):
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(100_000): pass
ref = weakref.ref(held, dropped)
del held
print(startup.interrupted(), flush=True)
sys.argv = ['arrowgate', 'query', 'SELECT 42']
import gateway.cli
gateway.cli.console()
"""


def test_a_ctrl_c_python_drops_while_the_command_starts_still_stops_it(tmp_path):
    done = subprocess.run([sys.executable, "-c", DROPPED_INTERRUPT], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.stdout.split() == ["True"]  # noted, and the query never ran
    assert done.stderr.strip() == "interrupted"  # no "Exception ignored ... Traceback"
    assert done.returncode == 130


@pytest.mark.parametrize("broken", ["library", "ctypes"])
def test_a_preload_that_cannot_load_is_silent(tmp_path, broken):
    """A pyarrow whose library does not load, or no ctypes: the thread says nothing (the
    import, where pyarrow is needed, says why)."""
    fake = tmp_path / "pyarrow"
    fake.mkdir()
    from importlib.machinery import EXTENSION_SUFFIXES

    (fake / ("lib" + EXTENSION_SUFFIXES[0])).write_bytes(b"not a library")
    code = ("import sys\n"
            + (f"sys.path.insert(0, {str(tmp_path)!r})\n" if broken == "library" else
               "sys.modules['ctypes'] = None\n")
            + "from gateway.cli.startup import preload_arrow\n"
            "preload_arrow().join()\n"
            "print('done')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout.split(), done.stderr) == (0, ["done"], "")


def test_a_csv_query_with_a_duckdb_fallback_configured_reads_no_package_metadata(tmp_path):
    # the duckdb plugin's module is imported to check the config; importlib.metadata (for
    # the running duckdb's release) cost such a process 10-20 ms it never used
    (tmp_path / "one.csv").write_text("a,b\n1,x\n")
    code = ("import sys\n"
            "sys.modules.pop('importlib.metadata', None)\n"
            "import gateway\n"
            f"config = {{'engines': {{'csv': {{'type': 'csv', 'fallback': 'duck'}}, "
            f"'duck': {{'type': 'duckdb'}}}}, "
            f"'sources': {{'t': {{'path': {str(tmp_path / 'one.csv')!r}}}}}}}\n"
            "with gateway.connect(config) as gw:\n"
            "    rows = gw.execute('SELECT b, count(*) FROM t GROUP BY b').to_arrow().num_rows\n"
            "print(rows, 'importlib.metadata' in sys.modules, 'duckdb' in sys.modules)\n")
    assert python_says(code) == ["1", "False", "False"]


def test_the_running_duckdbs_release_is_the_one_its_package_metadata_gives():
    from importlib.metadata import version

    from gateway_duckdb.engine import running_release

    assert running_release() == version("duckdb")
