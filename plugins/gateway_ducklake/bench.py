"""``arrowgate lakebench``: the catalog benchmark, run on several ducklake engines.

Each configured engine is a template: every run gets an empty lake of the
same kind (a fresh metadata schema in the same PostgreSQL or SQL Server
database, a fresh SQLite or DuckDB file) and a fresh data path. Every
(engine, round) runs in a worker process of its own (the benchmark's,
:class:`gateway.benchmark.contenders.Worker`), so one engine's caches never help the
next and its peak memory is its own; the catalog server's memory is not
counted.

Method (docs/benchmarks.md, "Method"): answers first, the order of engines
rotates round by round, warm-up rounds are not counted, each phase reports the
median with the min-max range, and ratios compare medians of the same run;
the statistic and the order are :mod:`gateway.benchmark.runner`'s. A phase whose check
value (row or file counts) differs from the first engine's gets no figure.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gateway.benchmark.contenders import Contender, Worker
from gateway.benchmark.runner import Spread, rotated
from gateway.errors import QueryError
from gateway_ducklake.catalog import CatalogSpec
from gateway_ducklake.phases import PHASE_NAMES, PHASES, PhaseContext, Shape, run_phases


@dataclass
class RoundResult:
    engine: str
    round: int
    times: dict[str, float]
    checks: dict[str, Any]
    peak_rss_mb: float
    #: the machine's 1-minute load average when the run started
    load_average: float | None = None


@dataclass
class BenchReport:
    """Everything one lakebench run measured."""

    engines: list[str]
    kinds: dict[str, str]
    shape: Shape
    rounds: int
    warmup: int
    results: list[RoundResult] = field(default_factory=list)

    def counted(self, engine: str) -> list[RoundResult]:
        return [r for r in self.results if r.engine == engine and r.round >= self.warmup]

    def diverged(self) -> dict[str, list[str]]:
        """Phase -> engines whose check value differs from the first engine's."""
        reference = {r.round: r.checks for r in self.results if r.engine == self.engines[0]}
        out: dict[str, list[str]] = {}
        for r in self.results:
            base = reference.get(r.round) or next(iter(reference.values()), {})
            for phase, value in r.checks.items():
                if base.get(phase) != value and r.engine not in out.get(phase, []):
                    out.setdefault(phase, []).append(r.engine)
        return out

    def summary(self, engine: str, phase: str) -> Spread | None:
        if engine in self.diverged().get(phase, []):
            return None
        values = [r.times[phase] for r in self.counted(engine) if phase in r.times]
        return Spread(values) if values else None

    def total(self, engine: str) -> Spread | None:
        if any(engine in e for e in self.diverged().values()):
            return None
        values = [sum(r.times.values()) for r in self.counted(engine)]
        return Spread(values) if values else None

    def peak_rss_mb(self, engine: str) -> float:
        return max((r.peak_rss_mb for r in self.results if r.engine == engine), default=0.0)

    def load_range(self) -> list[float] | None:
        """[lowest, highest] 1-minute load average seen at the start of a run, or None."""
        loads = [r.load_average for r in self.results if r.load_average is not None]
        return [round(min(loads), 2), round(max(loads), 2)] if loads else None

    def rows(self) -> list[tuple[str, list[Spread | None]]]:
        titles = {p.name: p.title for p in PHASES}
        out = [(titles[name], [self.summary(e, name) for e in self.engines])
               for name in PHASE_NAMES]
        out.append(("total", [self.total(e) for e in self.engines]))
        return out

    def to_dict(self) -> dict[str, Any]:
        phases: dict[str, Any] = {}
        for name in [*PHASE_NAMES, "total"]:
            phases[name] = {}
            for e in self.engines:
                s = self.total(e) if name == "total" else self.summary(e, name)
                base = (self.total(self.engines[0]) if name == "total"
                        else self.summary(self.engines[0], name))
                phases[name][e] = None if s is None else {
                    "median": s.median, "low": s.low, "high": s.high, "ratio": _ratio(s, base)}
        return {
            "engines": self.engines, "catalogs": self.kinds, "shape": asdict(self.shape),
            "rounds": self.rounds, "warmup": self.warmup, "phases": phases,
            "peak_rss_mb": {e: round(self.peak_rss_mb(e), 1) for e in self.engines},
            "load_average": self.load_range(),
            "diverged": self.diverged(),
            "runs": [asdict(r) for r in self.results],
        }

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The per-phase table: medians with ranges, ratios to the first engine."""
        header = ["phase"] + [f"{e} ({self.kinds[e]}) s" for e in self.engines]
        header += [f"{e}/{self.engines[0]}" for e in self.engines[1:]]
        body = []
        for title, sums in self.rows():
            cells = [title] + [f"{s.median:.3f} ({s.low:.3f}-{s.high:.3f})" if s else "diverged"
                               for s in sums]
            cells += [_ratio_text(s, sums[0]) for s in sums[1:]]
            body.append(cells)
        body.append(["peak RSS (MB)"] + [f"{self.peak_rss_mb(e):.0f}" for e in self.engines]
                    + [""] * (len(self.engines) - 1))
        return header, body

    def markdown(self) -> str:
        header, body = self.table()
        lines = ["| " + " | ".join(header) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines) + "\n"


def _ratio(s: Spread, base: Spread | None) -> float | None:
    ratio = s.ratio(base)
    return None if ratio is None else round(ratio, 3)


def _ratio_text(s: Spread | None, base: Spread | None) -> str:
    if s is None or base is None:
        return "-"
    ratio = _ratio(s, base)
    return "-" if ratio is None else f"{ratio:.2f}x"


# -- fresh lakes ---------------------------------------------------------------
def fresh_lake(name: str, section: dict[str, Any], workdir: Path, token: str,
               base_dir: Path | None = None) -> tuple[dict[str, Any], Callable[[], None]]:
    """A copy of an engine section that points at an empty lake, and how to remove it.

    Raises:
        GatewayError: the template's catalog is not a kind lakebench can empty.
    """
    spec = CatalogSpec.parse(section["catalog"], key=f"engines.{name}.catalog", base_dir=base_dir)
    out = dict(section)
    out["data_path"] = str(workdir / f"{name}-{token}-data") + "/"
    cleanup: Callable[[], None] = lambda: None  # noqa: E731 - files go with the workdir
    if spec.kind in ("sqlite", "duckdb"):
        suffix = "sqlite" if spec.kind == "sqlite" else "ducklake"
        out["catalog"] = f"{spec.kind}:{workdir / f'{name}-{token}.{suffix}'}"
    else:
        schema = f"lakebench_{token}"
        out["metadata_schema"] = schema
        if spec.kind == "postgres":
            cleanup = _drop_pg_schema(spec, schema)
    return out, cleanup


def _drop_pg_schema(spec: CatalogSpec, schema: str) -> Callable[[], None]:
    def drop() -> None:
        # installed: the health check connected through it (pip install 'arrowgate[ducklake]')
        import adbc_driver_postgresql.dbapi as pgdb

        with pgdb.connect(spec.target) as con, con.cursor() as cur:
            cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            con.commit()
    return drop


# -- one (engine, round) in a worker process -------------------------------------
@dataclass
class LakeRound(Contender):
    """Every phase on one fresh lake, run by the benchmark's worker process.

    :meth:`run`'s answer is one row per phase: its seconds (timed around its
    statements alone) and its check value as JSON. The statement it is given
    is not used: a round is the phases, in order.
    """

    name: str
    section: dict[str, Any]
    shape: Shape

    def start(self) -> str:
        import gateway

        self._gw = gateway.connect({"engines": {self.name: self.section}})
        self._execute("SELECT 1")  # start the engine (load DuckDB, attach) before any clock
        return self.name

    def _execute(self, sql: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._gw.execute(sql, engine=self.name).to_arrow().to_pylist()
        return rows

    def run(self, sql: str) -> Any:
        import pyarrow as pa

        def reattach() -> None:
            self._gw.engine(self.name).reattach()

        times, checks = run_phases(PhaseContext(self._execute, reattach, self.name, self.shape))
        return pa.table({"phase": list(times), "seconds": list(times.values()),
                         "check": [json.dumps(checks[p]) for p in times]})

    def stop(self) -> None:
        self._gw.close()


def run_round(name: str, section: dict[str, Any], shape: Shape
              ) -> tuple[dict[str, float], dict[str, Any], float]:
    """One round on one engine in a new process: (seconds and check per phase, peak RSS MB).

    Raises:
        QueryError: the round failed; the message is the worker's error.
    """
    worker = Worker(LakeRound(name, section, shape), timeout=None)
    try:
        run = worker.call("answer", "")
    finally:
        worker.stop()
    if run.error is not None or run.table is None:
        raise QueryError(f"lakebench on {name} failed: {run.error}", engine=name)
    phases = run.table.to_pylist()
    return ({p["phase"]: p["seconds"] for p in phases},
            {p["phase"]: json.loads(p["check"]) for p in phases}, (run.peak or 0) / 2**20)


def run_bench(engines: dict[str, dict[str, Any]], shape: Shape, *, rounds: int = 5,
              warmup: int = 1, workdir: Path | None = None, base_dir: Path | None = None,
              progress: Callable[[str], None] | None = None) -> BenchReport:
    """Run lakebench on ``engines`` (name -> engine section, type ducklake).

    Args:
        engines: the engines, first one the baseline of every ratio.
        shape: the size of the run.
        rounds: counted rounds per engine.
        warmup: rounds run first and not counted.
        workdir: where catalog files and data paths go (a temp folder when None;
            removed afterwards unless given).

    Raises:
        GatewayError: an engine failed; the message is the worker's error.
    """
    names = list(engines)
    kinds = {n: CatalogSpec.parse(engines[n]["catalog"], base_dir=base_dir).kind for n in names}
    report = BenchReport(names, kinds, shape, rounds, warmup)
    own = workdir is None
    folder = Path(tempfile.mkdtemp(prefix="lakebench-")) if workdir is None else workdir
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for r in range(warmup + rounds):
            for name in rotated(names, r):
                token = f"{r}_{secrets.token_hex(3)}"
                section, cleanup = fresh_lake(name, engines[name], folder, token, base_dir)
                label = "warm-up" if r < warmup else f"round {r - warmup + 1}/{rounds}"
                load = os.getloadavg()[0]
                if progress:
                    progress(f"{label}: {name} ({kinds[name]}), load average {load:.2f}")
                started = time.monotonic()
                try:
                    times, checks, peak = run_round(name, section, shape)
                finally:
                    with contextlib.suppress(Exception):
                        cleanup()
                    shutil.rmtree(section["data_path"], ignore_errors=True)
                if progress:
                    progress(f"{label}: {name} done in {time.monotonic() - started:.0f} s, "
                             f"peak RSS {peak:.0f} MB")
                report.results.append(RoundResult(name, r, times, checks, peak, load))
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    return report

