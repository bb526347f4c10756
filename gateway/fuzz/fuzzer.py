"""Differential fuzzing: random queries on two engines, every divergence shrunk and kept.

``DifferentialFuzzer(gw, primary, reference, source).run(seconds=60)`` reads
the source's columns and a sample of its values from the reference, then
repeatedly draws a query (:mod:`gateway.fuzz.generator`), runs it on both
engines one after the other and judges the two outcomes with the shadow
comparator (:func:`gateway.verify.compare.compare_outcomes`). A divergence (any
category but ``match`` and ``nondeterministic``) is shrunk
(:mod:`gateway.fuzz.reduction`) to a minimal query that still diverges the
same way, and written as a corpus file (``-- name:`` header and one
statement) that ``arrowgate shadow`` and the tests read as they are.

Queries the primary refuses as unsupported are counted and skipped: they are
outside its subset, not wrong answers. SQLancer (its oracles found hundreds of
bugs in DuckDB and SQLite) and SQLsmith are the models.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError, Unsupported
from gateway.verify.compare import compare_outcomes
from gateway.verify.verdict import CompareOptions, Verdict

if TYPE_CHECKING:
    from sqlglot import exp

    from gateway.core import Gateway
    from gateway.fuzz.generator import Operations

#: divergences of one category shrunk at most this often (later ones are only counted)
SHRUNK_PER_CATEGORY = 3
#: a smaller query replaces the one being shrunk only when it diverges the same way this many
#: times in a row: an answer that hangs on the engines' scheduling (a LIMIT over groups a
#: parallel hash table hands out in any order) otherwise shrinks into one that diverges only
#: sometimes
CONFIRMATIONS = 2
#: the shrunk query is judged again this many times; the finding says how often it diverged
REPLAYS = 5


@dataclass
class Finding:
    """One divergence the fuzzer found.

    Attributes:
        category: the comparator's verdict on the shrunk query.
        message: the verdict's message on the shrunk query.
        sql: the query as generated.
        shrunk: the minimal query that still diverges the same way.
        after_queries: queries run before it was found (itself included).
        after_seconds: seconds from the start until it was found.
        shrink_seconds: seconds spent shrinking it.
        reproduced: of :data:`REPLAYS` judgements of the shrunk query after shrinking, how
            many diverged the same way (fewer than all: the divergence depends on the
            engines' scheduling, and a replay may pass).
        path: the corpus file it was written to, or None.
    """

    category: str
    message: str
    sql: str
    shrunk: str
    after_queries: int
    after_seconds: float
    shrink_seconds: float
    reproduced: int = REPLAYS
    path: str | None = None

    @property
    def flaky(self) -> str:
        """Empty when every replay diverged, else a sentence saying how often one did."""
        if self.reproduced >= REPLAYS:
            return ""
        return (f"diverged in {self.reproduced} of {REPLAYS} replays: the answer depends on "
                "the engines' scheduling, so a replay may pass")


@dataclass
class FuzzReport:
    """What one run did and found."""

    primary: str
    reference: str
    source: str
    seed: int
    queries: int = 0
    unsupported: int = 0
    seconds: float = 0.0
    #: divergences of a category already shrunk SHRUNK_PER_CATEGORY times
    repeats: int = 0
    findings: list[Finding] = field(default_factory=list)
    #: per entry of the operations table (when one was given): the queries that used it
    coverage: dict[str, int] = field(default_factory=dict)

    @property
    def per_minute(self) -> float:
        return 60.0 * self.queries / self.seconds if self.seconds else 0.0


class DifferentialFuzzer:
    """Runs random queries over one source on a primary and a reference engine.

    Args:
        gw: the gateway both engines belong to.
        primary: the engine under test.
        reference: the engine taken as right.
        source: the table the queries read (a configured source's name).
        seed: the random seed; the same seed draws the same queries.
        options: the comparator's options (its ``dialect`` is the SQL's).
        without: constructs the queries leave out (sqlglot expression names, such as
            ``round``): divergences already understood, so the run finds others.
        operations: a table of native operations the queries draw expressions from
            (:class:`gateway.fuzz.generator.Operations`); the report counts the queries
            using each of its entries.
    """

    def __init__(self, gw: Gateway, primary: str, reference: str, source: str, *, seed: int = 0,
                 options: CompareOptions | None = None, without: Sequence[str] = (),
                 operations: Operations | None = None):
        from gateway.fuzz.generator import expression_types

        self.gw, self.primary, self.reference, self.source = gw, primary, reference, source
        self.seed = seed
        self.options = options or CompareOptions()
        expression_types(without)  # a wrong name fails here, before any query runs
        self.without = list(without)
        self.operations = operations

    def columns(self) -> list[Any]:
        """The source's columns with a sample of their values, read from the reference."""
        from sqlglot import exp

        from gateway.fuzz.generator import Column

        table = exp.Table(this=exp.to_identifier(self.source, quoted=True))
        sample = self.gw.execute(f"SELECT * FROM {table.sql(self.options.dialect)} LIMIT 1000",
                                 engine=self.reference, shadow=False).to_arrow()
        return Column.from_arrow(sample)

    def judge(self, sql: str) -> Verdict:
        """Both engines' outcomes for ``sql``, compared."""
        return compare_outcomes(self._outcome(sql, self.primary),
                                self._outcome(sql, self.reference), sql=sql,
                                options=self.options)

    def _outcome(self, sql: str, engine: str) -> Any:
        try:
            return self.gw.execute(sql, engine=engine, shadow=False).to_arrow()
        except GatewayError as exc:
            return exc

    def run(self, *, seconds: float, max_queries: int | None = None,
            max_findings: int | None = None, out_dir: str | Path | None = None,
            on_finding: Callable[[Finding], None] | None = None) -> FuzzReport:
        """Fuzz for ``seconds`` (or ``max_queries``, or until ``max_findings``).

        Returns:
            the report; each finding's corpus file is in ``out_dir`` when given.
        """
        from gateway.fuzz.generator import QueryGenerator

        report = FuzzReport(self.primary, self.reference, self.source, self.seed)
        generator = QueryGenerator(self.source, self.columns(), random.Random(self.seed),
                                   without=self.without, operations=self.operations)
        if self.operations is not None:
            report.coverage = {str(entry): 0 for entry in self.operations.NATIVE}
        seen: set[str] = set()
        shrunk_per_category: dict[str, int] = {}
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            if max_queries is not None and report.queries >= max_queries:
                break
            tree = generator.query()
            for entry in generator.used:
                report.coverage[entry] = report.coverage.get(entry, 0) + 1
            sql = tree.sql(self.options.dialect)
            primary = self._outcome(sql, self.primary)
            report.queries += 1
            if isinstance(primary, Unsupported) or getattr(primary, "kind", "") == "unsupported":
                report.unsupported += 1
                continue
            verdict = compare_outcomes(primary, self._outcome(sql, self.reference), sql=sql,
                                       options=self.options)
            if verdict.category in ("match", "nondeterministic", "order_unchecked"):
                continue
            if shrunk_per_category.get(verdict.category, 0) >= SHRUNK_PER_CATEGORY:
                report.repeats += 1
                continue
            found_at = time.perf_counter() - started
            finding = self._shrink(tree, verdict, report.queries, found_at)
            shrunk_per_category[verdict.category] = shrunk_per_category.get(verdict.category, 0) + 1
            if finding.shrunk in seen:
                report.repeats += 1
                continue
            seen.add(finding.shrunk)
            if out_dir is not None:
                finding.path = str(self.write(finding, Path(out_dir)))
            report.findings.append(finding)
            if on_finding is not None:
                on_finding(finding)
            if max_findings is not None and len(report.findings) >= max_findings:
                break
        report.seconds = time.perf_counter() - started
        return report

    def _shrink(self, tree: exp.Expr, verdict: Verdict, queries: int,
                found_at: float) -> Finding:
        from gateway.fuzz.reduction import shrink

        dialect = self.options.dialect
        signature = _signature(verdict)
        last: dict[str, Verdict] = {}

        def diverges(sql: str) -> Verdict | None:
            candidate_verdict = self.judge(sql)
            return candidate_verdict if _signature(candidate_verdict) == signature else None

        def still_fails(candidate: exp.Expr) -> bool:
            sql = candidate.sql(dialect)
            first = diverges(sql)
            if first is None or any(diverges(sql) is None for _ in range(CONFIRMATIONS - 1)):
                return False
            last["verdict"] = first
            return True

        started = time.perf_counter()
        small = shrink(tree, still_fails)
        final = last.get("verdict", verdict)
        shrunk = small.sql(dialect)
        reproduced = sum(diverges(shrunk) is not None for _ in range(REPLAYS))
        return Finding(final.category, final.message, tree.sql(dialect), shrunk,
                       queries, found_at, time.perf_counter() - started, reproduced)

    def write(self, finding: Finding, out_dir: Path) -> Path:
        """Write ``finding`` as a corpus file in ``out_dir``; returns its path."""
        digest = hashlib.sha1(finding.shrunk.encode()).hexdigest()[:8]
        name = f"fuzz_{finding.category}_{digest}"
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{name}.sql"
        message = " ".join(finding.message.split())
        path.write_text(
            f"-- Found by arrowgate fuzz --primary {self.primary} --reference {self.reference} "
            f"--source {self.source} --seed {self.seed}"
            + (f" --without {','.join(self.without)}" if self.without else "") + "\n"
            f"-- after {finding.after_queries} queries ({finding.after_seconds:.1f} s): "
            f"{finding.category}: {message}\n"
            + (f"-- {finding.flaky}\n" if finding.flaky else "") +
            f"-- as generated: {finding.sql}\n"
            f"-- name: {name}\n{finding.shrunk};\n")
        return path


def _signature(verdict: Verdict) -> tuple[str, str | None, str | None]:
    """What must stay the same while shrinking: the category and each side's error kind.

    With the kinds (not only which side failed), a query failing on both
    engines for one reason does not shrink into one failing for another.
    """
    evidence = verdict.evidence

    def kind(side: str) -> str | None:
        error = evidence.get(f"{side}_error")
        return str(error.get("kind")) if isinstance(error, dict) else None

    return verdict.category, kind("primary"), kind("reference")
