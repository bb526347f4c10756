"""What a short-lived ``arrowgate`` process does to start and stop sooner.

Every such trick in the project lives here, each with the saving it measured
on a one-row ``arrowgate query`` (docs/benchmarks.md, "Startup on a tiny
file": 2026-11-30, 2 cores, load average 1-7). Together they took the command
from 812-817 ms to what importing its dependencies costs; a trick whose
saving is no longer worth its strangeness should be removed here, whole.

- :func:`gateway.cli.console`: the console script's entry; not a saving but a guard: a
  Ctrl-C while the command's modules import (30-60 ms into ``arrowgate query``
  printed a traceback in 3 of 8 timings) exits 130 "interrupted".
- :func:`tune_collector`: the cyclic garbage collector ran 86 times while
  sqlglot and pyarrow import their thousands of classes: 22-39 ms. Long-running
  commands (``serve``, ``tui``) undo it (:func:`restore_collector`).
- :func:`exit_now`: the interpreter's teardown of every imported module frees
  memory the exit frees anyway: 60-100 ms, 130-250 ms with numpy loaded.
- :class:`LazyModule`: ``pyarrow.compute`` builds a Python wrapper for each
  of its ~300 functions when imported (70-100 ms by ``-X importtime``); the
  csv engine's fused aggregations never call it.
- :func:`sort_functions`: an ORDER BY on an aggregation (Q04) needs only
  ``call_function`` and ``SortOptions``, which ``pyarrow._compute`` defines
  (21-27 ms to import, against the 70-100 ms above).

Four savings live where their code does (docs/benchmarks.md, "Start-up (issue
23)": 2026-12-01, ``-X importtime`` and ``csv_bench.py --mode phases``, load
average 5-6 and 10-15):

- :mod:`gateway.drivers.arrow_values`: arrays built from their buffers, because
  ``pa.array`` and ``pa.scalar`` import pandas wherever it is installed: a
  duckdb query whose csv output has a LIST column no longer imports 363
  modules, 181-440 ms (the csv engine's 134-258 ms waits on its call sites).
- :class:`gateway.plugins.EngineTypes`: a built-in engine's classes are
  imported only when the configuration uses its type: 12 modules, 17-59 ms,
  on a csv query.
- :mod:`gateway_csv.shape`: a projection of columns (``SELECT a, b FROM t``)
  is answered without the planner, so sqlglot and its DuckDB dialect are not
  imported: 69 ms of CPU of a one-row query (83 to 13 ms for its execution).
  So are the commonest aggregations (csvql's four: count, sum, avg, min and
  max of columns, grouped by columns, ``strftime('%Y', ts)`` or ``round(x)``),
  through the planner's own fused scan (:mod:`gateway_csv.fused`): 69-175 ms
  of CPU of each whole ``arrowgate query`` on the 1M-row taxi file
  (0.80-0.90x over three runs), 92 modules and 16 MB of peak RSS fewer
  (branch aggshape23, 2026-12-01, load average 4-8). Starting the csv engine
  does not import the planner either (branch h39b, 2026-12-07): a statement
  that needs it does, or :meth:`gateway.engine.Engine.warm`, which the shadow
  and the console call so that a first statement's latency is the engine's own.
- :mod:`gateway.entry_points`: plugins are found without importing
  ``importlib.metadata``: 9 ms of CPU of the same query.

And six more (docs/benchmarks.md, "Start-up (issue 23), branch start23"):

- :func:`gateway.cli.main.build_parser` builds the invoked core command's parser
  alone, the others bare stand-ins, and imports no other command's module.
- :class:`gateway_csv.scan.ScanPool`: a file of one chunk is scanned in the
  reading thread; the pool (and ``concurrent.futures``, ``logging``) starts
  with the first scan of more than one chunk.
- :mod:`gateway.sql` raises sqlglot's logger as sqlglot is imported, not
  by importing ``logging`` itself.
- :mod:`gateway.masking` compiles its patterns on first use.
- ``tempfile``, ``json`` and ``glob`` are imported where a file is written,
  JSON is written or a glob is read (:mod:`gateway.output.writers`,
  :mod:`gateway_csv.opening`, the layout cache's key, :mod:`gateway.config`,
  the ducklake plugin's commands).
- :class:`gateway.cli.commands.Parser` gives argparse's formatters the terminal's
  width, so that none imports ``shutil`` (with ``bz2``, ``lzma``, ``fnmatch``:
  3-4 ms), and :mod:`gateway.masking` imports ``urllib.parse`` (2-3 ms, with
  ``ipaddress``) only to mask a secret (``-X importtime``, 2026-12-01).

And more on branch start23b (2026-12-01, CPU milliseconds of the steps of a
one-row ``arrowgate query`` in the runtime install, medians of 15 fresh
processes alternated with main's, load average 4-6):

- :func:`gateway.cli.main.build_parser` hands its plugin manager to the gateway
  the command opens (:func:`gateway.cli.commands.open_gateway`), which loaded
  every plugin a second time: 1.3-1.8 ms (opening the gateway: 2.2-3.0 to
  0.9-1.2).
- :mod:`gateway_csv.shape_aggregation`: the aggregations read without the
  planner left :mod:`gateway_csv.shape`, so a projection imports neither
  them nor the fused scan, :mod:`gateway_csv.temporal` and
  :mod:`gateway_csv.naming` (7 dataclasses, 2 patterns); and the projection's
  patterns match in ASCII (``re.ASCII``), which compiles them in a third of
  the time Unicode's case folding takes: 3.9-4.8 ms (the engine's start and
  the statement: 15.5-19.2 to 10.7-15.3).
- :class:`LazyPattern`: the csv sniffer's 21 patterns (its reference shapes
  and those of rare files: :mod:`gateway_csv.layout`), ``query -p``'s and
  ``engines install``'s are compiled on first use: 1.2-1.8 ms (load average
  1.7: the engine's start 6.8 to 5.2, the query command's import 0.6 to 0.4).
- :mod:`gateway.engine`: the catalog tree's rows (``CatalogColumn``,
  ``SchemaRef``, ``TableRef``), which :mod:`gateway.engine` names on first
  use: 1.2-1.5 ms (load average 2: importing gateway.plugins 5.4-5.9 to
  4.2-4.4).
- :func:`gateway.cli.main.build_parser` asks a built-in plugin to add its commands
  only when they extend the invoked core command
  (:data:`gateway.plugins.BUILT_IN_COMMANDS`); the others' are stand-ins: the
  ducklake and duckdb plugins' command modules and four parsers, 0.9-1.6 ms
  (load average 5.5: building the parser 8.1-9.3 to 4.2-4.7, less ``pathlib``,
  which the configuration's import now pays: 6.9-8.4 to 9.9-11.4).
- :mod:`gateway_csv.typenames`: DuckDB's type names of a file's columns and
  their Arrow types left :mod:`gateway_csv.native`, so a projection does not
  build the table of the engine's ~260 operations: 0.8-1.2 ms (load average
  5.4: the statement 1.9-2.8 to 1.1-1.6).
- :mod:`gateway.session` imports :mod:`gateway.sql.kinds` (its patterns)
  when a statement may change a session's state; a one-shot statement of the
  local user never does: 0.9-1.5 ms (load average 3.5: importing the config
  and the core 10.0-13.1 to 8.5-12.2).
- :func:`gateway.cli.main.build_parser` makes the stand-ins of the commands not
  invoked only when a plugin left to ask adds commands (an outside one, or
  the duckdb plugin for ``engines``): 12 parsers fewer, 0.7-0.9 ms (load
  average 5.2: building the parser 4.1-4.6 to 3.4-3.7).

And two of 2026-12-02 (A/B of fresh processes alternated, load average 0.2-1.5):

- :func:`preload_arrow`: pyarrow's shared libraries are loaded by the dynamic
  loader in a thread of their own, without the GIL, while the command imports
  its modules: a one-row ``arrowgate query`` 84.5 to 77.0 and 80.1 to 73.4 ms
  (medians of 21 runs each, twice). Importing pyarrow itself in a thread beside
  the csv engine's sniff and scan saved nothing (1M-row taxi query 0.99-1.04x,
  5M 1.04x, one-row 1.06x against importing it at the engine's start): the
  sniff's and the scan's C code keep both cores busy, and the rest holds the GIL.
- :func:`note_interrupts`: not a saving but the guard the thread above needs: a
  Ctrl-C that Python dropped in the import system's module-lock callback while
  two threads imported let the command run on.
- :mod:`gateway.records`: the 24 classes a csv query defines (the core's
  ``Statement``, ``Option``, ``GatewayConfig``..., the csv engine's ``Layout``,
  ``Dialect``, ``Plan``...) are records, not dataclasses, whose methods
  ``@dataclass`` compiled as each module was imported (15.6 ms of CPU, profiled):
  a one-row ``arrowgate query`` 102.8 to 90.1 ms (0.88x, 31 runs each), a
  1M-row Q01 0.93x and Q02 0.90x (41 each; runtime installs run from /tmp).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import re
import sys
import threading
from types import ModuleType
from typing import Any, NoReturn

_EARLY_EXTENSIONS = ("math", "_heapq", "_opcode", "_datetime", "_decimal", "_struct", "_csv")


def preload_arrow() -> threading.Thread | None:
    """Load pyarrow's shared libraries in a thread of their own, without the GIL.

    ``import pyarrow`` spends about 18 of its 45 ms (beyond Python's start) in
    the dynamic loader, relocating libarrow and its siblings, and the
    interpreter holds the GIL throughout. Loaded here, through ``dlopen`` as a
    foreign call (which ctypes makes without the GIL), that work runs on the
    other core while the command imports its own modules; pyarrow's import
    then finds its libraries loaded. Nothing is initialised for Python: the
    import still runs pyarrow's module code, in the importing thread. Returns
    the thread, or None where pyarrow is not on ``sys.path`` or the process may
    run on one processor only (the thread would take the command's turn).
    """
    from importlib.machinery import EXTENSION_SUFFIXES

    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) < 2:
        return None

    for entry in sys.path:
        library = os.path.join(entry or ".", "pyarrow", "lib" + EXTENSION_SUFFIXES[0])
        if os.path.isfile(library):
            break
    else:
        return None

    # The extension modules the command's own imports load first (math for
    # inspect, _datetime, _decimal, ...), loaded now: while the thread below
    # holds the dynamic loader's lock, loading one would wait for it holding
    # the GIL, and the command would wait for both.
    for name in _EARLY_EXTENSIONS:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)

    def load() -> None:
        # any failure (no ctypes, no dlopen to call, a library that does not load) is
        # the import's to report, in the thread that needs pyarrow
        with contextlib.suppress(Exception):
            # libc's dlopen as a foreign call, which ctypes makes without the GIL
            # (_ctypes.dlopen, which ctypes.CDLL uses, holds it throughout: a one-row
            # query took 11 ms longer, its parser's set-up waiting)
            import ctypes

            dlopen = ctypes.CDLL(None).dlopen
            dlopen.restype, dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
            dlopen(os.fsencode(library), sys.getdlopenflags())
            # (OpenSSL's library, for hashlib and the csv engine's sniff cache, loaded
            # here too made a 1M-row query 3-4% slower, in either order of an A/B)

    thread = threading.Thread(target=load, name="preload-arrow", daemon=True)
    thread.start()
    return thread


_interrupted = False


def note_interrupts() -> None:
    """Until the CLI's own handler is in place, a Ctrl-C is noted before it raises.

    The KeyboardInterrupt it raises can land inside a callback whose exceptions
    the interpreter prints and drops ("Exception ignored in: <function
    _get_module_lock.<locals>.cb>", while the background imports above hold module
    locks), and the command then ran on. Such a drop is not printed, and the CLI
    stops on the note (:func:`interrupted`) as soon as its handler is in place.
    """
    import signal

    def on_interrupt(signum: int, frame: Any) -> None:
        global _interrupted
        _interrupted = True
        signal.default_int_handler(signum, frame)

    hook = sys.unraisablehook

    def unraisable(report: Any) -> None:
        if not (_interrupted and issubclass(report.exc_type, KeyboardInterrupt)):
            hook(report)

    signal.signal(signal.SIGINT, on_interrupt)
    sys.unraisablehook = unraisable


def interrupted() -> bool:
    """Whether a Ctrl-C came while the command started (:func:`note_interrupts`)."""
    return _interrupted


#: the collector's thresholds before :func:`tune_collector`
_THRESHOLDS = gc.get_threshold()


def tune_collector() -> None:
    """Raise the first GC generation's threshold (it still runs on long commands)."""
    gc.set_threshold(100_000, *gc.get_threshold()[1:])


def restore_collector() -> None:
    """Python's own thresholds again, for a command that runs for long (``serve``, ``tui``).

    A reference cycle that holds an engine's answer (an error's traceback through a
    reader's frame) is freed by the collector only: under the raised threshold a
    service that answered clients who stopped reading grew by about 1 MB an answer
    (1,000 answers: 180 to 1,100 MB resident), and stayed there.
    """
    gc.set_threshold(*_THRESHOLDS)


def exit_now(code: int) -> NoReturn:
    """Exit with ``code`` without tearing the interpreter's modules down.

    Exit handlers still run and output is flushed first. While a non-daemon
    thread other than this one is alive (a background shadow run), the exit is
    the normal one, which waits for it. Daemon threads (the query deadlines, a
    Ctrl-C's cancel) are not waited for by either exit; tearing the interpreter
    down under one that is inside an engine's C++ code can abort the process
    ("exception not rethrown"), which this exit avoids.
    """
    me = threading.current_thread()
    if any(t is not me and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()  # finalizers, temporary folders, logging: what exit would run
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader left, or the stream is closed
            pass
    os._exit(code)


class LazyModule:
    """A module imported on its first attribute access: ``pc = LazyModule("pyarrow.compute")``."""

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        value = getattr(self._module, attr)
        setattr(self, attr, value)  # found from now on without this call
        return value


class LazyPattern:
    """A regular expression compiled on its first use: ``WORD = LazyPattern(r"[a-z]+", re.I)``
    matches, searches and substitutes as ``re.compile(r"[a-z]+", re.I)`` does.

    After the first use its methods are the compiled pattern's own, so a match
    costs what one of ``re.compile``'s does.
    """

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self._flags = flags

    def __getattr__(self, attr: str) -> Any:
        compiled = re.compile(self.pattern, self._flags)
        for name in ("match", "fullmatch", "search", "finditer", "findall", "sub", "subn",
                     "split", "flags", "groups", "groupindex"):
            setattr(self, name, getattr(compiled, name))  # found from now on without this
        return getattr(compiled, attr)


def sort_functions() -> tuple[Any, Any]:
    """``(call_function, SortOptions)``, from ``pyarrow._compute`` when it defines them.

    (``Table.take`` imports ``pyarrow.compute`` too, so a sort calls ``take``
    through ``call_function`` as well.)
    """
    try:
        from pyarrow._compute import SortOptions, call_function
    except ImportError:  # a pyarrow that moved them: the public names still work
        from pyarrow.compute import SortOptions, call_function
    return call_function, SortOptions
