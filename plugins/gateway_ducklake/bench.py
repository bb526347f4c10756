"""``arrowgate lakebench``: the catalog benchmark, run on several ducklake engines.

Each configured engine is a template: every run gets an empty lake of the
same kind (a fresh metadata schema in the same PostgreSQL or SQL Server
database, a fresh SQLite or DuckDB file) and a fresh data path. Every
(engine, round) runs in a worker process of its own, so one engine's caches
never help the next and its peak memory (``ru_maxrss``) is its own; the
catalog server's memory is not counted.

Method (``DESIGN.md``): answers first, the order of engines rotates round by
round, warm-up rounds are not counted, each phase reports the median with the
min-max range, and ratios compare medians of the same run. A phase whose check
value (row or file counts) differs from the first engine's gets no figure.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gateway.errors import GatewayError, QueryError
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
class PhaseSummary:
    median: float
    low: float
    high: float

    def text(self) -> str:
        return f"{self.median:.3f} ({self.low:.3f}-{self.high:.3f})"


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

    def summary(self, engine: str, phase: str) -> PhaseSummary | None:
        if engine in self.diverged().get(phase, []):
            return None
        values = [r.times[phase] for r in self.counted(engine) if phase in r.times]
        if not values:
            return None
        return PhaseSummary(statistics.median(values), min(values), max(values))

    def total(self, engine: str) -> PhaseSummary | None:
        if any(engine in e for e in self.diverged().values()):
            return None
        values = [sum(r.times.values()) for r in self.counted(engine)]
        if not values:
            return None
        return PhaseSummary(statistics.median(values), min(values), max(values))

    def peak_rss_mb(self, engine: str) -> float:
        return max((r.peak_rss_mb for r in self.results if r.engine == engine), default=0.0)

    def load_range(self) -> list[float] | None:
        """[lowest, highest] 1-minute load average seen at the start of a run, or None."""
        loads = [r.load_average for r in self.results if r.load_average is not None]
        return [round(min(loads), 2), round(max(loads), 2)] if loads else None

    def rows(self) -> list[tuple[str, list[PhaseSummary | None]]]:
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
                    **asdict(s), "ratio": _ratio(s, base)}
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
            cells = [title] + [s.text() if s else "diverged" for s in sums]
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


def _ratio(s: PhaseSummary, base: PhaseSummary | None) -> float | None:
    if base is None or base.median <= 0:
        return None
    return round(s.median / base.median, 3)


def _ratio_text(s: PhaseSummary | None, base: PhaseSummary | None) -> str:
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
        import adbc_driver_postgresql.dbapi as pgdb

        with pgdb.connect(spec.target) as con, con.cursor() as cur:
            cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            con.commit()
    return drop


# -- one (engine, round) in a worker process -------------------------------------
def run_worker(job: dict[str, Any]) -> dict[str, Any]:
    """Run every phase on one engine in this process (the worker's body)."""
    import gateway

    name = job["engine"]
    shape = Shape(**job["shape"])
    with gateway.connect({"engines": {name: job["section"]}}) as gw:
        def execute(sql: str) -> list[dict[str, Any]]:
            rows: list[dict[str, Any]] = gw.execute(sql, engine=name).to_arrow().to_pylist()
            return rows

        def reattach() -> None:
            gw.engine(name).reattach()  # type: ignore[attr-defined]

        ctx = PhaseContext(execute, reattach, name, shape)
        execute("SELECT 1")  # start the engine (load DuckDB, attach) before any clock
        times, checks = run_phases(ctx, job.get("phases"))
    return {"times": times, "checks": checks}


def _spawn(job: dict[str, Any]) -> tuple[dict[str, Any], float]:
    proc = subprocess.Popen([sys.executable, "-m", "gateway_ducklake.bench"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    peak_mb = usage.ru_maxrss / 1024  # kilobytes on Linux
    try:
        answer = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    except json.JSONDecodeError:
        answer = {}
    if proc.returncode != 0 or "times" not in answer:
        message = answer.get("error") or err.strip()[-1500:] or f"exit {proc.returncode}"
        raise QueryError(f"lakebench on {job['engine']} failed: {message}",
                           engine=job["engine"])
    return answer, peak_mb


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
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                token = f"{r}_{secrets.token_hex(3)}"
                section, cleanup = fresh_lake(name, engines[name], folder, token, base_dir)
                label = "warm-up" if r < warmup else f"round {r - warmup + 1}/{rounds}"
                load = os.getloadavg()[0]
                if progress:
                    progress(f"{label}: {name} ({kinds[name]}), load average {load:.2f}")
                started = time.monotonic()
                try:
                    answer, peak = _spawn({"engine": name, "section": section,
                                           "shape": asdict(shape)})
                finally:
                    with contextlib.suppress(Exception):
                        cleanup()
                    shutil.rmtree(section["data_path"], ignore_errors=True)
                if progress:
                    progress(f"{label}: {name} done in {time.monotonic() - started:.0f} s, "
                             f"peak RSS {peak:.0f} MB")
                report.results.append(RoundResult(name, r, answer["times"], answer["checks"],
                                                  peak, load))
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Worker entry point: a job as JSON on stdin, the result as one JSON line on stdout."""
    job = json.loads(sys.stdin.read())
    try:
        result = run_worker(job)
    except GatewayError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
