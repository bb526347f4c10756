"""What a served process holds, component by component, sampled along a bench run.

Bench-only. ``bench/client_model.py --probe FILE`` starts the service with a
``sitecustomize`` on its path that calls :func:`start` when the environment
variable :data:`ENV` names a file; nothing of it is imported, and nothing of the
service changes, when the variable is unset. Every ``ARROWGATE_PROBE_EVERY``
seconds (60 by default) the probe appends one JSON line to that file:

- ``rss``, ``anon``, ``file``: /proc/self/status VmRSS, RssAnon, RssFile (MiB);
- ``glibc_used``, ``glibc_free``: mallinfo2's in-use (arena + mmapped) and free bytes;
- ``je``: each loaded DuckDB library's own jemalloc (``duckdb_je_mallctl``):
  ``stats.allocated`` and ``stats.resident`` (MiB), by library file name;
- ``duckdb_memory``: ``duckdb_memory()`` per tag (MiB, tags above 0.1 MiB), per engine;
- ``arrow``: pyarrow's pool (``total_allocated_bytes``, MiB);
- ``objects``: gc-tracked objects in all (garbage not yet collected too), and the types that grew most since the first
  sample; ``traced``: tracemalloc's total (MiB) when ``ARROWGATE_PROBE_TRACE`` is set
  (it slows the service, so it is off by default);
- ``registries``: the Flight service's sessions, tickets, finished queries, prepared
  statements, transactions, tokens; ``threads``: Python's and the process's.

A probed service died with SIGSEGV in 4 of the 8 runs of docs/benchmarks.md ("The growth
at rest, component by component"): the probe's ``gc.get_objects()`` kept DoGet stream
generators alive past their calls, and the client watch asked their freed call contexts
whether they were cancelled. That was the service's bug (a reference cycle could do the
same), fixed in gateway/flight/watch.py; faulthandler's stacks in the log found it.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ENV = "ARROWGATE_PROBE"
MiB = 2**20


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _status() -> dict[str, float]:
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            found[{"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file"}[key]] = \
                round(int(value.split()[0]) / 1024, 1)
    return found


def _glibc() -> dict[str, float]:
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return {}
    fn.restype = _Mallinfo2
    info = fn()
    return {"glibc_used": round((info.uordblks + info.hblkhd) / MiB, 1),
            "glibc_free": round(info.fordblks / MiB, 1)}


def _jemallocs() -> dict[str, dict[str, float]]:
    libraries = sorted({line.split()[-1] for line in Path("/proc/self/maps").read_text()
                        .splitlines() if "_duckdb" in line and line.rstrip().endswith(".so")})
    out = {}
    for path in libraries:
        try:
            mallctl = ctypes.CDLL(path).duckdb_je_mallctl
        except (OSError, AttributeError):
            continue
        mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                            ctypes.c_void_p, ctypes.c_size_t]
        epoch = ctypes.c_uint64(1)
        mallctl(b"epoch", None, None, ctypes.byref(epoch), ctypes.sizeof(epoch))
        figures = {}
        for name in ("allocated", "resident"):
            value, size = ctypes.c_size_t(0), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
            if mallctl(f"stats.{name}".encode(), ctypes.byref(value), ctypes.byref(size),
                       None, 0) == 0:
                figures[name] = round(value.value / MiB, 1)
        where = "installed" if Path(path).parent.name == "site-packages" \
            else Path(path).parent.parent.name  # a version's folder: <version>/core/
        out[f"{where}/{Path(path).name[:12]}"] = figures
    return out


def _duckdb_memory(objects: list[Any]) -> dict[str, dict[str, float]]:
    query = "SELECT tag, memory_usage_bytes FROM duckdb_memory()"
    out: dict[str, dict[str, float]] = {}
    for o in objects:
        kind = type(o).__name__
        rows: list[tuple[str, int]] = []
        if kind not in ("PythonSession", "AdbcSession"):
            continue
        try:  # through the session's own execute: a cursor or a connection of its own
            table = o.execute(query, None).read_all()
            rows = list(zip(table.column(0).to_pylist(), table.column(1).to_pylist(),
                            strict=True))
        except Exception as exc:  # a closed engine, a busy pool
            out[f"{o.engine}"] = {"error": str(exc)[:80]}  # type: ignore[dict-item]
            continue
        out[str(o.engine)] = {tag: round(n / MiB, 1) for tag, n in rows if n > MiB / 10}
    return out


def _registries(objects: list[Any]) -> dict[str, int]:
    for o in objects:
        if type(o).__name__ == "FlightSqlServer":
            return {"sessions": len(o.sessions._sessions),
                    "tickets": len(o.queries._by_handle),
                    "finished": len(o.queries._finished),
                    "prepared": len(o.prepared._by_handle),
                    "transactions": len(o.transactions._by_id),
                    "tokens": len(o.auth._issued),
                    "trims": o.at_rest.trims}
    return {}


def sample(first: Counter[str] | None) -> tuple[dict[str, Any], Counter[str]]:
    # no gc.collect(): garbage collected from this thread would run the finalizers of
    # objects (DuckDB cursors among them) here, not where the service would run them
    objects = gc.get_objects()
    counts = Counter(type(o).__name__ for o in objects)
    wanted = [o for o in objects if type(o).__name__ in (
        "PythonSession", "AdbcSession", "FlightSqlServer")]
    del objects
    figures: dict[str, Any] = {"t": round(time.time()), **_status(), **_glibc(),
                               "je": _jemallocs(), "duckdb_memory": _duckdb_memory(wanted),
                               "registries": _registries(wanted)}
    try:
        import pyarrow as pa

        figures["arrow"] = round(pa.total_allocated_bytes() / MiB, 1)
    except ImportError:
        pass
    import tracemalloc

    if tracemalloc.is_tracing():
        figures["traced"] = round(tracemalloc.get_traced_memory()[0] / MiB, 1)
    base = first if first is not None else counts
    growth = Counter({k: counts[k] - base.get(k, 0) for k in counts})
    figures["objects"] = {"all": sum(counts.values()),
                          "grew": dict(growth.most_common(8))}
    figures["threads"] = {"python": len(threading._active),  # type: ignore[attr-defined]
                          "process": len(os.listdir("/proc/self/task"))}
    return figures, base


def asked(path: Path) -> Path:
    """The file whose existence asks the probe for a sample now (the bench makes it at
    rest, and the probe removes it once the sample is written)."""
    return path.with_name(path.name + ".now")


def _run(path: Path, every: float) -> None:
    first: Counter[str] | None = None
    last = time.monotonic()
    while True:
        time.sleep(0.5)
        now = asked(path).exists()
        if not now and time.monotonic() - last < every:
            continue
        last = time.monotonic()
        try:
            figures, first = sample(first)
        except Exception as exc:  # the probe must never take the service down
            figures = {"t": round(time.time()), "error": repr(exc)[:200]}
        if now:
            figures["rest"] = True
        with path.open("a") as f:
            f.write(json.dumps(figures) + "\n")
        if now:
            asked(path).unlink()


def start() -> None:
    """Start sampling into the file :data:`ENV` names (nothing when it is unset)."""
    target = os.environ.get(ENV)
    if not target:
        return
    if os.environ.get("ARROWGATE_PROBE_TRACE"):
        import tracemalloc

        tracemalloc.start(1)
    every = float(os.environ.get("ARROWGATE_PROBE_EVERY", "60"))
    threading.Thread(target=_run, args=(Path(target), every), name="arrowgate-bench-probe",
                     daemon=True).start()


def table(path: Path) -> str:
    """The samples in ``path`` as a markdown table, one row a sample (MiB)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out = ["| minute | RSS | anon | file | glibc in use / free | DuckDB jemalloc allocated / "
           "resident | duckdb_memory() tables | objects | tokens | threads (Python / process) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    t0 = rows[0]["t"] if rows else 0
    for r in rows:
        when = f"{(r['t'] - t0) / 60:.0f}" + (" (at rest)" if r.get("rest") else "")
        if "error" in r:
            out.append(f"| {when} | {r['error']} |")
            continue
        je = ", ".join(f"{k.split('/')[0].replace('python3.11', 'installed')}: "
                       f"{v.get('allocated')} / {v.get('resident')}"
                       for k, v in r["je"].items())
        tables = ", ".join(
            f"{engine}: {sum(v for t, v in tags.items() if t.endswith('TABLE')):.1f}"
            for engine, tags in r["duckdb_memory"].items() if isinstance(tags, dict))
        out.append(f"| {when} | {r['rss']:.0f} | {r['anon']:.0f} | {r['file']:.0f} | "
                   f"{r['glibc_used']} / {r['glibc_free']} | {je} | {tables} | "
                   f"{r['objects']['all']:,} | {r['registries'].get('tokens')} | "
                   f"{r['threads']['python']} / {r['threads']['process']} |")
    return "\n".join(out)


if __name__ == "__main__":
    import sys

    print(table(Path(sys.argv[1])))
