"""``arrowgate fuzz``: random queries on two engines; each divergence shrunk to a corpus file.

``arrowgate fuzz --primary A --reference B --source NAME`` draws random
queries over the source's columns (filters, expressions, aggregates, GROUP
BY, HAVING, ORDER BY, LIMIT, DISTINCT, NULLs, edge values), runs each on both
engines, compares the answers with the shadow comparator, shrinks every
divergence to a minimal query and writes it to ``--out`` as a ``.sql`` corpus
file (``arrowgate shadow --primary A --reference B DIR`` replays them). It
prints one line per finding and a summary; exit 1 when anything diverged.
Where an engine declares the operations it evaluates itself (the csv engine's
table), the queries draw from them, and ``--coverage`` lists each with the
number of queries that used it.
"""

from __future__ import annotations

import argparse
from typing import Any

from gateway.cli.commands import EXIT_OK, EXIT_QUERY, UsageError, add_command, open_gateway


def register(sub: Any) -> None:
    p = add_command(
        sub, "fuzz", help="find divergences between two engines with random queries",
        description="Run random queries over a source on the primary and the reference "
        "engine, compare the\nanswers, shrink every divergence to a minimal query and "
        "write it to --out as a .sql file.\nExit 1 when any query diverged.",
        examples=[
            "arrowgate fuzz --primary csv --reference duckdb --source trips --minutes 5",
            "arrowgate fuzz --primary new --reference old --source t --seed 7 --out found/",
            "arrowgate fuzz --primary pg --reference duckdb --source t --without round,intdiv",
        ],
    )
    p.add_argument("--primary", metavar="ENGINE", required=True, help="the engine under test")
    p.add_argument("--reference", metavar="ENGINE", required=True,
                   help="the engine taken as right")
    p.add_argument("--source", metavar="NAME", required=True,
                   help="the configured source (table) the queries read")
    p.add_argument("--minutes", type=float, default=1.0, metavar="N",
                   help="how long to fuzz (default 1)")
    p.add_argument("--queries", type=int, metavar="N", help="stop after N queries")
    p.add_argument("--max-findings", type=int, metavar="N", help="stop after N divergences")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="the random seed; the same seed draws the same queries (default 0)")
    p.add_argument("--without", metavar="NAMES", default="",
                   help="constructs to leave out of the queries, comma-separated sqlglot "
                   "expression names (round,intdiv,like,...): divergences already understood")
    p.add_argument("--out", metavar="DIR", default="fuzz-findings",
                   help="folder the shrunk queries are written to (default fuzz-findings)")
    p.add_argument("--coverage", action="store_true",
                   help="list each operation the primary (or the reference) evaluates "
                   "natively and how many generated queries used it")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.minutes <= 0:
        raise UsageError("--minutes must be a positive number")
    from gateway.fuzz.fuzzer import DifferentialFuzzer, Finding

    def show(finding: Finding) -> None:
        print(f"{finding.category} after {finding.after_queries} queries "
              f"({finding.after_seconds:.1f} s, shrunk in {finding.shrink_seconds:.1f} s): "
              f"{finding.shrunk}\n  {' '.join(finding.message.split())}\n"
              + (f"  {finding.flaky}\n" if finding.flaky else "") + f"  -> {finding.path}",
              flush=True)

    without = [name for name in args.without.split(",") if name.strip()]
    with open_gateway(args) as gw:
        for name in (args.primary, args.reference):
            gw.engine_config(name)
        options = getattr(gw, "shadow_settings", None)
        # an engine that declares the operations it evaluates itself (the csv engine's
        # gateway_csv.native) has the queries drawn from them
        operations = None
        for name in (args.primary, args.reference):
            operations = getattr(gw.engine(name), "native_operations", None)
            if operations is not None:
                break
        compare = options.compare if options is not None else None
        if operations is not None:
            # such an engine answers as DuckDB does, the names of its columns included
            # (the comparator otherwise forgives names engines choose: count_star())
            import dataclasses

            from gateway.verify.verdict import CompareOptions

            compare = dataclasses.replace(compare or CompareOptions(),
                                          ignore_engine_chosen_names=False)
        try:
            fuzzer = DifferentialFuzzer(gw, args.primary, args.reference, args.source,
                                        seed=args.seed, without=without, operations=operations,
                                        options=compare)
        except ValueError as exc:
            raise UsageError(f"--without: {exc}") from None
        report = fuzzer.run(seconds=args.minutes * 60, max_queries=args.queries,
                            max_findings=args.max_findings, out_dir=args.out, on_finding=show)
    if args.coverage:
        print(_coverage(report.coverage, args.primary, args.reference))
    print(f"{report.queries} queries in {report.seconds:.1f} s ({report.per_minute:.0f} per "
          f"minute): {len(report.findings)} divergence{'' if len(report.findings) == 1 else 's'} "
          f"written to {args.out}"
          + (f", {report.repeats} more of the same kinds" if report.repeats else "")
          + (f"; {report.unsupported} unsupported by {args.primary}, skipped"
             if report.unsupported else ""))
    return EXIT_QUERY if report.findings else EXIT_OK


def _coverage(counts: dict[str, int], primary: str, reference: str) -> str:
    """The --coverage report: each native entry and the queries that used it, unused first."""
    if not counts:
        return (f"coverage: neither {primary} nor {reference} declares the operations it "
                "evaluates natively (the csv engine does)")
    width = max(len(entry) for entry in counts)
    lines = [f"  {entry:<{width}}  {n}" for entry, n in
             sorted(counts.items(), key=lambda item: (item[1] > 0, item[0]))]
    unused = sum(1 for n in counts.values() if not n)
    return (f"coverage: {len(counts) - unused} of {len(counts)} native operations used"
            + (f", {unused} unused" if unused else "") + "\n" + "\n".join(lines))
