"""The benchmark protocol, as a library every benchmark in the project reuses.

The method (docs/benchmarks.md, "Method"):

1. Answers first. Every engine answers every query once and each answer is
   compared with the first engine's by :func:`gateway.verify.compare.compare_outcomes`.
   A query whose answers differ gets no speed figure; it is listed with the
   verdicts instead.
2. Timing second. For each query whose answers agree: one warm-up round, then
   ``rounds`` rounds (default 5). In each round every engine runs the query
   once, and the order of the engines rotates by one every round, so no
   engine always runs first (cold caches) or last (warm ones).
3. Each engine runs in a process of its own, started once, so one engine's
   caches, threads and allocations do not touch another's, and its peak
   resident memory is measured per query (Linux resets the process's
   high-water mark through ``/proc/self/clear_refs`` before each run).
   Time is measured inside that process around the run, so sending the
   answer back is not counted.
4. Reported: median with the min-max spread, peak memory, and ratios against
   a baseline engine (the first unless named), all from the same run.

Engines are *contenders*:

- :class:`GatewayEngine`: an engine of an arrowgate configuration;
- :class:`Command`: any program that reads SQL on stdin and writes CSV with a
  header to stdout (the DuckDB CLI: ``Command("duckdb-cli", ["duckdb",
  "-csv"], setup="CREATE VIEW trips AS FROM 'trips.csv';")``). Its output goes
  through a pipe and is parsed, never thrown at a null device; its time
  includes starting the program, and its memory is the program's own peak;
- :class:`Function`: any picklable callable ``fn(sql) -> pyarrow.Table``
  (define it at module level).

Example (a script under ``bench/``)::

    from gateway.benchmark.runner import Command, GatewayEngine, run_benchmark
    from gateway.sql.corpus import read_queries

    if __name__ == "__main__":  # workers are spawned: the guard is required
        report = run_benchmark(
            [GatewayEngine("duck", "arrowgate.toml"), GatewayEngine("csv", "arrowgate.toml")],
            read_queries(["bench/queries"]), rounds=5)
        print(report.to_markdown())
        report.write_json("bench/results/run.json")
        report.write_chart("bench/results/run")  # run.png and run.svg

``arrowgate bench --engines A,B PATH...`` is this library on the command line.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.benchmark.contenders import (
    ANSWERED_BY,
    AdbcDriver,
    Command,
    Contender,
    Function,
    GatewayEngine,
    RemoteError,
    Worker,
)
from gateway.sql.corpus import Query
from gateway.verify.compare import compare_outcomes
from gateway.verify.verdict import CompareOptions, Verdict

__all__ = ["AdbcDriver", "BenchReport", "Command", "Contender", "EngineTiming", "Function", "GatewayEngine",
           "QueryOutcome", "Spread", "rotated", "run_benchmark"]

if TYPE_CHECKING:
    import pyarrow as pa

Progress = Callable[[int, int, str], None]


# -- the method's statistic and order ------------------------------------------------
@dataclass
class Spread:
    """Timed rounds of one thing: the median with the min-max spread beside it."""

    seconds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def low(self) -> float:
        return min(self.seconds)

    @property
    def high(self) -> float:
        return max(self.seconds)

    def ratio(self, baseline: Spread | None) -> float | None:
        """This median over ``baseline``'s (above 1: slower); None without a baseline."""
        if baseline is None or baseline.median <= 0:
            return None
        return self.median / baseline.median


def rotated(names: Sequence[str], shift: int) -> list[str]:
    """``names`` in the order of round ``shift``: rotated by one more each round, so no
    engine always runs first (cold caches) or last (warm ones)."""
    shift %= len(names)
    return [*names[shift:], *names[:shift]]


# -- results -----------------------------------------------------------------------
@dataclass
class EngineTiming(Spread):
    """One engine's timed rounds of one query."""

    rows: int
    peak_rss: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"median_ms": _ms(self.median), "min_ms": _ms(self.low), "max_ms": _ms(self.high),
                "rounds_ms": [_ms(s) for s in self.seconds], "rows": self.rows,
                "peak_rss_mb": _mb(self.peak_rss)}


@dataclass
class QueryOutcome:
    """What the benchmark found for one query.

    ``status``: ``timed`` (answers agree, timed), ``diverged`` (answers
    differ: no speed figure), ``failed`` (every engine failed alike, or a
    run failed during timing; see ``errors``).
    """

    query: Query
    status: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    timings: dict[str, EngineTiming] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    #: per engine whose fallback gave the answer, the engine that did
    answered_by: dict[str, str] = field(default_factory=dict)

    def ratio(self, engine: str, baseline: str) -> float | None:
        """``engine``'s median time over ``baseline``'s (above 1: slower)."""
        if engine not in self.timings:
            return None
        return self.timings[engine].ratio(self.timings.get(baseline))


@dataclass
class BenchReport:
    """A whole benchmark run: method, environment, and one outcome per query."""

    engines: list[str]
    baseline: str
    rounds: int
    warmup: int
    queries: list[QueryOutcome]
    descriptions: dict[str, str] = field(default_factory=dict)
    idle_rss: dict[str, int | None] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def diverged(self) -> list[QueryOutcome]:
        return [q for q in self.queries if q.status == "diverged"]

    @property
    def timed(self) -> list[QueryOutcome]:
        return [q for q in self.queries if q.status == "timed"]

    def geomean_ratio(self, engine: str) -> float | None:
        """The geometric mean over timed queries of ``engine``'s ratio to the baseline,
        leaving out those a fallback answered for either (:meth:`fallback_queries`)."""
        ratios = [r for q in self.timed if (r := q.ratio(engine, self.baseline))
                  and not {engine, self.baseline} & q.answered_by.keys()]
        if not ratios:
            return None
        return math.exp(sum(math.log(r) for r in ratios) / len(ratios))

    def fallback_queries(self, engine: str) -> list[str]:
        """The timed queries a fallback answered for ``engine`` or the baseline."""
        return [q.query.name for q in self.timed
                if {engine, self.baseline} & q.answered_by.keys()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": {"answers_checked_against": self.engines[0], "warmup_rounds": self.warmup,
                       "rounds": self.rounds, "statistic": "median, min-max spread",
                       "order": "engines alternate, order rotated every round",
                       "isolation": "one process per engine; peak RSS per query"},
            "environment": self.environment,
            "engines": [{"name": e, "description": self.descriptions.get(e, e),
                         "idle_rss_mb": _mb(self.idle_rss.get(e))} for e in self.engines],
            "baseline": self.baseline,
            "summary": {"timed": len(self.timed), "diverged": len(self.diverged),
                        "failed": sum(q.status == "failed" for q in self.queries),
                        "geomean_ratio": {e: _round(self.geomean_ratio(e)) for e in self.engines},
                        "geomean_leaves_out": {e: self.fallback_queries(e) for e in self.engines
                                               if self.fallback_queries(e)}},
            "queries": [{
                "name": q.query.name, "file": q.query.file, "sql": q.query.sql, "status": q.status,
                "verdicts": {e: v.to_dict() for e, v in q.verdicts.items()},
                "timings": {e: t.to_dict() for e, t in q.timings.items()},
                "ratios": {e: _round(q.ratio(e, self.baseline)) for e in q.timings},
                "errors": q.errors, "answered_by": q.answered_by,
            } for q in self.queries],
        }

    def write_json(self, path: str | os.PathLike[str]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    def to_markdown(self) -> str:
        """A Markdown report: method line, the timing table, then what was not timed."""
        others = [e for e in self.engines if e != self.baseline]
        lines = [
            f"Answers checked against **{self.engines[0]}** before timing; {self.warmup} warm-up "
            f"round, then the median of {self.rounds} rounds (min-max), engines alternating in "
            f"rotated order, each in its own process. Ratios are against **{self.baseline}** "
            "(above 1 is slower).", "",
        ]
        header = ["query"] + [f"{e} ms (min-max)" for e in self.engines] \
            + [f"{e} / {self.baseline}" for e in others] + [f"{e} peak MB" for e in self.engines]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for q in self.timed:
            cells = [f"`{q.query.name}`"]
            for e in self.engines:
                t = q.timings[e]
                mark = f" (by {q.answered_by[e]}, fallback)" if e in q.answered_by else ""
                cells.append(f"{_ms(t.median):g} ({_ms(t.low):g}-{_ms(t.high):g}){mark}")
            cells += [_times(q.ratio(e, self.baseline)) for e in others]
            cells += [_fmt_mb(q.timings[e].peak_rss) for e in self.engines]
            lines.append("| " + " | ".join(cells) + " |")
        if others and self.timed:
            lines.append("| **geometric mean** | " + " | ".join("" for _ in self.engines) + " | "
                         + " | ".join(f"**{_times(self.geomean_ratio(e))}**" for e in others)
                         + " | " + " | ".join("" for _ in self.engines) + " |")
            for e in others:
                if left_out := self.fallback_queries(e):
                    lines += ["", f"The geometric mean of {e} leaves out "
                              + ", ".join(f"`{n}`" for n in left_out)
                              + ": answered by a fallback engine, not the one named."]
        if self.diverged:
            lines += ["", "Answers differ, so no speed figure:", ""]
            for q in self.diverged:
                for e, v in q.verdicts.items():
                    if not v.ok:
                        lines.append(f"- `{q.query.name}` on {e}: **{v.category}**: {v.message}")
        failed = [q for q in self.queries if q.status == "failed"]
        if failed:
            lines += ["", "Failed:", ""]
            for q in failed:
                detail = "; ".join(f"{e}: {m}" for e, m in q.errors.items())
                lines.append(f"- `{q.query.name}`: {detail}")
        env = self.environment
        lines += ["", f"Machine: {env.get('cpus')} CPUs, {env.get('platform')}, Python "
                  f"{env.get('python')}. Engines: "
                  + "; ".join(f"{e} = {self.descriptions.get(e, e)}" for e in self.engines) + "."]
        return "\n".join(lines) + "\n"

    def write_chart(self, stem: str | os.PathLike[str]) -> list[Path]:
        """Draw per-query latency per engine to ``STEM.png`` and ``STEM.svg`` (needs matplotlib)."""
        from gateway.benchmark.chart import latency_chart

        return latency_chart(self, Path(stem))


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3 if seconds < 0.01 else 1)


def _mb(nbytes: int | None) -> float | None:
    return None if nbytes is None else round(nbytes / 2**20, 1)


def _fmt_mb(nbytes: int | None) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:.0f}"


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _times(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


# -- the protocol --------------------------------------------------------------------
def run_benchmark(
    contenders: Sequence[Contender],
    queries: Sequence[Query],
    *,
    rounds: int = 5,
    warmup: int = 1,
    baseline: str | None = None,
    timeout: float = 600.0,
    compare_options: CompareOptions | None = None,
    progress: Progress | None = None,
) -> BenchReport:
    """Run the benchmark protocol (see the module docstring).

    Args:
        contenders: the engines; the first one's answers are the reference.
        queries: the statements (see :func:`gateway.sql.corpus.read_queries`).
        rounds: timed rounds per query (at least 1; the method asks for 5).
        warmup: untimed rounds before them.
        baseline: the engine ratios are computed against (default: the first).
        timeout: seconds one run may take; a run over it is killed and the
            query is reported failed for that engine.
        compare_options: equivalences and tolerances for the answer check.
        progress: called as ``progress(done, total, label)`` after each run.

    Raises:
        ValueError: no contender, duplicate names, an unknown baseline, rounds < 1.
    """
    names = [c.name for c in contenders]
    if not contenders:
        raise ValueError("no engine to benchmark")
    if len(set(names)) != len(names):
        raise ValueError(f"engine names must differ: {names}")
    baseline = baseline or names[0]
    if baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not one of the engines {names}")
    if rounds < 1 or warmup < 0:
        raise ValueError("rounds must be at least 1 and warmup at least 0")
    workers = {c.name: Worker(c, timeout) for c in contenders}
    per_query = len(names) * (1 + warmup + rounds)
    total, done = per_query * len(queries), 0

    def tick(label: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, label)

    outcomes: list[QueryOutcome] = []
    try:
        for q in queries:
            outcome = _check(q, names, workers, compare_options, tick)
            outcomes.append(outcome)
            if outcome.status != "timed":
                total -= len(names) * (warmup + rounds)
        for index, outcome in enumerate(o for o in outcomes if o.status == "timed"):
            _time(outcome, names, workers, rounds, warmup, index, tick)
    finally:
        for w in workers.values():
            w.stop()
    return BenchReport(
        engines=names, baseline=baseline, rounds=rounds, warmup=warmup, queries=outcomes,
        descriptions={n: w.description for n, w in workers.items()},
        idle_rss={n: w.idle_rss for n, w in workers.items()},
        environment={"cpus": os.cpu_count(), "platform": platform.platform(),
                     "python": platform.python_version(),
                     "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
    )


def _check(q: Query, names: list[str], workers: dict[str, Worker],
           options: CompareOptions | None, tick: Callable[[str], None]) -> QueryOutcome:
    answers: dict[str, pa.Table | BaseException] = {}
    outcome = QueryOutcome(q, "timed")
    for name in names:
        run = workers[name].call("answer", q.sql)
        if run.table is not None and run.table.schema.metadata \
                and ANSWERED_BY in run.table.schema.metadata:
            outcome.answered_by[name] = run.table.schema.metadata[ANSWERED_BY].decode()
            run.table = run.table.replace_schema_metadata(None)
        answers[name] = run.error if run.error is not None else run.table
        tick(f"{q.name}: checking {name}")
    first = names[0]
    outcome.errors = {n: f"{type(a).__name__ if not isinstance(a, RemoteError) else a.error_class}"
                      f": {a}" for n, a in answers.items() if isinstance(a, BaseException)}
    for name in names[1:]:
        outcome.verdicts[name] = compare_outcomes(answers[name], answers[first], sql=q.sql,
                                                  options=options)
    if any(not v.ok for v in outcome.verdicts.values()):
        outcome.status = "diverged"
    elif outcome.errors:
        outcome.status = "failed"
    return outcome


def _time(outcome: QueryOutcome, names: list[str], workers: dict[str, Worker], rounds: int,
          warmup: int, index: int, tick: Callable[[str], None]) -> None:
    seconds: dict[str, list[float]] = {n: [] for n in names}
    peaks: dict[str, int | None] = dict.fromkeys(names)
    rows: dict[str, int] = {}
    q = outcome.query
    for r in range(warmup + rounds):
        for name in rotated(names, r + index):
            run = workers[name].call("time", q.sql)
            tick(f"{q.name}: {'warm-up' if r < warmup else f'round {r - warmup + 1}'} {name}")
            if run.error is not None:
                outcome.status = "failed"
                outcome.errors[name] = f"{run.error.error_class}: {run.error}"
                continue
            if r >= warmup:
                seconds[name].append(run.seconds)
                peaks[name] = max(peaks[name] or 0, run.peak or 0) or None
            rows[name] = run.rows
    if outcome.status == "timed":
        outcome.timings = {n: EngineTiming(seconds[n], rows[n], peaks[n]) for n in names}
