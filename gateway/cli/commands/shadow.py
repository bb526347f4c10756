"""``arrowgate shadow``: run a query corpus on two engines and gate a pipeline on the verdicts.

``arrowgate shadow --primary A --reference B PATH...`` runs every statement
under the paths on both engines (one after the other, so latencies do not
compete), prints one line per query, writes ``--json``, ``--junit`` and
``--markdown`` reports, appends the records to the shadow store, and exits 1
when any answer diverges or any latency ratio passes ``--max-ratio``.

``arrowgate shadow report`` (an action of its own) summarizes the store; ``shadow run PATH...``
spells out the default action.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import UserDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.cli.commands import (
    EXIT_OK,
    EXIT_QUERY,
    UsageError,
    add_command,
    examples_epilog,
    formatter,
    open_gateway,
)

if TYPE_CHECKING:
    from gateway.shadow.record import ShadowRecord
    from gateway.sql.corpus import Query
    from gateway.statement import Statement


def register(sub: Any) -> None:
    p = add_command(
        sub, "shadow", help="run queries on a primary and a reference engine and compare",
        description="Run every statement under PATH... on the primary and the reference "
        "engine, compare the answers, and\nexit 1 when any diverges or is slower than "
        "--max-ratio times the reference.\n\n'arrowgate shadow report' summarizes the "
        "records kept in the shadow store.",
        examples=[
            "arrowgate shadow --primary csv --reference duckdb queries/",
            "arrowgate shadow --primary new --reference old --max-ratio 1.5 "
            "--junit shadow.xml --json shadow.json q.sql",
            "arrowgate shadow report --store .arrowgate/shadow",
        ],
    )
    _run_options(p, None)
    actions = p.add_subparsers(action=_RunByDefault, dest="action", required=True,
                               metavar="PATH... | report",
                               help="the corpus to run, or 'report' to summarize the store "
                               "('run PATH...' runs a corpus folder named report)")
    # The options again on each action, so they may follow the paths as a CI script writes
    # them; SUPPRESS keeps those given before the action instead of resetting them.
    corpus = actions.add_parser(
        "run", argument_default=argparse.SUPPRESS, formatter_class=formatter,
        help="run the corpus under PATH... (the default)",
        description="Run every statement under PATH... on both engines (as 'arrowgate shadow "
        "PATH...' does).", epilog=examples_epilog([
            "arrowgate shadow run --primary csv --reference duck report/",
            "arrowgate shadow run queries/ --primary csv --reference duck --json out.json"]))
    corpus.add_argument("paths", nargs="+", metavar="PATH", help=".sql files or folders of them")
    _run_options(corpus, argparse.SUPPRESS)
    corpus.set_defaults(run=run)
    report = actions.add_parser(
        "report", argument_default=argparse.SUPPRESS, formatter_class=formatter,
        help="summarize the records kept in the shadow store",
        description="Summarize the shadow store: records by category, latency ratios per "
        "query (worst first), recent divergences.", epilog=examples_epilog([
            "arrowgate shadow report",
            "arrowgate shadow report --store .arrowgate/shadow --top 20 --json summary.json"]))
    report.add_argument("--store", metavar="DIR",
                        help="the shadow store folder (default: [shadow] store, .arrowgate/shadow)")
    report.add_argument("--json", metavar="FILE", help="write the summary as JSON to FILE")
    report.add_argument("--top", type=int, default=10, metavar="N",
                        help="how many worst offenders to list (default 10)")
    report.set_defaults(run=run_report)


def _run_options(p: argparse.ArgumentParser, default: Any) -> None:
    """The options of a corpus run; ``default`` SUPPRESS on the ``run`` action."""
    def add(*names: str, **kwargs: Any) -> None:
        if default is argparse.SUPPRESS:
            kwargs["default"] = argparse.SUPPRESS
        p.add_argument(*names, **kwargs)

    add("--primary", metavar="ENGINE", help="the engine under test "
        "(default: [shadow] primary, else the default engine)")
    add("--reference", metavar="ENGINE",
        help="the engine taken as right (default: [shadow] reference)")
    add("--max-ratio", type=float, metavar="X",
        help="fail when a query's primary time exceeds X times the reference's")
    add("--min-ms", type=float, default=0.0, metavar="MS",
        help="--max-ratio applies only to queries where either engine took at "
        "least MS milliseconds (tiny queries have noisy ratios; default 0)")
    add("--json", metavar="FILE", help="write one JSON record per query to FILE")
    add("--junit", metavar="FILE", help="write a JUnit XML report to FILE")
    add("--markdown", metavar="FILE", help="write a Markdown report to FILE")
    add("--timeout", type=float, metavar="SECONDS",
        help="how long the reference may take per query (default: [shadow] timeout, 30)")
    add("--noise", action="store_true",
        help="run the reference twice; what differs is nondeterministic, not divergent")
    add("--shadow-writes", action="store_true",
        help="also run statements that change data (the reference is a separate copy)")
    add("--store", metavar="DIR",
        help="the shadow store folder (default: [shadow] store, .arrowgate/shadow)")
    add("--no-store", action="store_true", help="do not append records to the store")
    add("--warmup", type=int, default=0, metavar="N",
        help="run each engine's first N statements once untimed before the corpus, and "
        "report those times apart (the first statement pays for imports and caches)")
    add("--since", metavar="TIME", help="replaying a capture: only statements captured at or "
        "after TIME (ISO 8601, e.g. 2026-12-01T14:00; UTC unless it says)")
    add("--until", metavar="TIME", help="replaying a capture: only statements captured before TIME")
    add("--dedupe", action="store_true", help="replaying a capture: run each statement shape "
        "once, weighted by how often it was seen")
    add("--chart", metavar="FILE", help="replaying a capture: draw the latency ratio by "
        "statement shape (PNG or SVG; needs matplotlib)")


class _RunByDefault(argparse._SubParsersAction):
    """``shadow``'s actions, where a first word that names none is a PATH of ``run``.

    (argparse has no default subcommand: its choices check would refuse the
    word before :meth:`__call__` could take it as a path.)
    """

    class _AnyWord(UserDict):
        def __contains__(self, word: object) -> bool:
            return True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = self._AnyWord()
        choices.data = self._name_parser_map  # the actions themselves, seen through _AnyWord
        self.choices = choices  # type: ignore[assignment]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if not dict.__contains__(self._name_parser_map, values[0]):
            values = ["run", *values]
        super().__call__(parser, namespace, values, option_string)


def run(args: argparse.Namespace) -> int:
    if args.max_ratio is not None and args.max_ratio <= 0:
        raise UsageError("--max-ratio must be a positive number")
    if args.min_ms < 0:
        raise UsageError("--min-ms must not be negative")
    gate = RatioGate(args.max_ratio, args.min_ms)
    from gateway.shadow.record import ShadowRecord
    from gateway.shadow.run import run_shadowed
    from gateway.shadow.settings import settings_from_mapping
    from gateway.shadow.store import ShadowStore

    if args.warmup < 0:
        raise UsageError("--warmup must not be negative")
    queries, replayed = _corpus(args)
    with open_gateway(args) as gw:
        configured = dict(gw.config.shadow)
        reference = args.reference or configured.get("reference")
        if reference is None:
            raise UsageError("no reference engine: pass --reference ENGINE or set [shadow] "
                             "reference in the configuration")
        primary = args.primary or configured.get("primary") or gw.default_engine
        gw.engine_config(primary)  # an unknown name is a ConfigError listing the engines
        gw.engine_config(reference)
        if primary == reference:
            raise UsageError(f"the primary and the reference are the same engine ({primary})")
        raw = {**configured, "primary": primary, "reference": reference, "sample": 1.0}
        if args.timeout is not None:
            raw["timeout"] = args.timeout
        if args.noise:
            raw["noise"] = True
        if args.shadow_writes:
            raw["shadow_writes"] = True
        if args.store is not None:
            raw["store"] = args.store
        settings = settings_from_mapping(raw, gw.config)
        warmup = _warm_up(gw, queries[:args.warmup], (primary, reference))
        records = []
        for q in queries:
            reason = _not_run(q, settings, gw.dialect(primary))
            if reason is not None:  # never on one engine alone: not at all
                record = ShadowRecord(sql=q.sql, primary=primary, reference=reference,
                                      name=q.name, status="skipped", skip_reason=reason)
            else:
                _, _, record = run_shadowed(gw.pipeline, _statement(q, primary), settings,
                                            name=q.name, concurrent=False, store=False)
            records.append(record)
            print(_line(record, gate), flush=True)
        if settings.store and not args.no_store:
            ShadowStore(settings.store).append(records)
        shapes = None
        if replayed:
            from gateway.capture import replay_report
            shapes = replay_report.shapes(queries, records)
            replay_report.shrink_divergences(
                shapes, lambda sql: _still_diverges(gw, sql, primary, settings),
                gw.dialect(primary))
    report = build_report(records, primary, reference, gate,
                          {q.name: q.file for q in queries}, queries)
    if warmup:
        report["warmup"] = warmup
    if shapes is not None:
        report["shapes"] = shapes
        if args.chart:
            from gateway.capture import replay_report
            replay_report.chart(shapes, args.chart)
    print(report["summary"]["decision"])
    print(report["summary"]["line"])
    if args.json:
        _write(args.json, json.dumps(report, indent=2, default=str) + "\n")
    if args.junit:
        _write(args.junit, junit_xml(report))
    if args.markdown:
        _write(args.markdown, markdown(report))
    return EXIT_QUERY if report["summary"]["failed"] else EXIT_OK


def _corpus(args: argparse.Namespace) -> tuple[list[Query], bool]:
    """The statements under ``args.paths``: ``.sql`` corpora, and captures to replay."""
    from gateway.capture.captured import is_capture, replay_queries
    from gateway.sql.corpus import read_queries

    queries: list[Query] = []
    replayed = False
    for path in args.paths:
        if path != "-" and is_capture(Path(path)):
            replayed = True
            queries += replay_queries(Path(path), since=args.since, until=args.until,
                                      dedupe=args.dedupe)
        else:
            queries += read_queries([path])
    if not replayed and (args.since or args.until or args.dedupe or args.chart):
        raise UsageError("--since, --until, --dedupe and --chart apply to a capture folder "
                         "([serve.capture]), and no PATH is one")
    return queries, replayed


#: why a captured statement of a kind is not replayed without --shadow-writes
_NOT_REPLAYED = {
    "settings": "a setting: replayed with each statement its session ran after it",
    "transaction": "a transaction statement: a replay runs each statement on its own",
    "write": "a write: replayed only with --shadow-writes, on both engines",
    "ddl": "DDL: replayed only with --shadow-writes, on both engines",
}


def _not_run(q: Query, settings: Any, dialect: str) -> str | None:
    """Why ``q`` is not run at all, or None: a statement that changes something runs on
    both engines or on neither (run on the primary alone, it changed what later
    statements read there, and only there)."""
    from gateway.shadow.settings import skip_reason

    if q.kind in ("settings", "transaction"):
        return _NOT_REPLAYED[q.kind]
    if q.kind in ("write", "ddl") and not settings.shadow_writes:
        return _NOT_REPLAYED[q.kind]
    return skip_reason(q.sql, settings, dialect)


def _statement(q: Query, engine: str) -> Statement:
    from gateway.statement import Statement

    return Statement(q.sql, engine, None if q.parameters is None else list(q.parameters),
                     prelude=q.settings)


def _warm_up(gw: Any, queries: list[Query], engines: tuple[str, str]) -> list[dict[str, Any]]:
    """Run each of ``queries`` once per engine, untimed by the corpus; their times."""
    import time

    from gateway.errors import GatewayError

    found = []
    for q in queries:
        times: dict[str, Any] = {"name": q.name}
        for engine in engines:
            started = time.perf_counter()
            try:
                gw.pipeline.run(_statement(q, engine)).to_arrow()
                times[engine] = round((time.perf_counter() - started) * 1000, 3)
            except GatewayError as exc:
                times[engine] = f"failed: {exc.message}"
        print(f"  warm-up  {q.name}  " + ", ".join(f"{e} {times[e]}" +
                                                  (" ms" if isinstance(times[e], float) else "")
                                                  for e in engines), flush=True)
        found.append(times)
    return found


def _still_diverges(gw: Any, sql: str, primary: str, settings: Any) -> bool:
    from gateway.shadow.run import run_shadowed
    from gateway.statement import Statement

    _, _, record = run_shadowed(gw.pipeline, Statement(sql, primary), settings,
                                concurrent=False, store=False)
    return record.diverged


@dataclass(frozen=True)
class RatioGate:
    """``--max-ratio`` and ``--min-ms``: when a query's latency ratio fails the run."""

    max_ratio: float | None = None
    min_ms: float = 0.0

    def over(self, record: ShadowRecord) -> bool:
        if self.max_ratio is None or record.ratio is None:
            return False
        slowest = max(record.primary_ms or 0.0, record.reference_ms or 0.0)
        return record.ratio > self.max_ratio and slowest >= self.min_ms


def _line(record: ShadowRecord, gate: RatioGate) -> str:
    if record.status == "skipped":
        return f"  skipped  {record.key}: {record.skip_reason}"
    mark = "ok" if not record.diverged and not gate.over(record) else "FAIL"
    ratio = f"{record.ratio:.2f}x" if record.ratio is not None else "-"
    slow = f" (over --max-ratio {gate.max_ratio:g})" if gate.over(record) else ""
    detail = "" if record.category == "match" else f": {record.message}"
    if record.answered_by:
        detail += f" (answered by the fallback {record.answered_by})"
    return (f"{mark:>6}  {record.key}  {record.category}{detail}  "
            f"[{record.primary_ms or 0:.1f} ms vs {record.reference_ms or 0:.1f} ms, {ratio}{slow}]")


def build_report(records: list[ShadowRecord], primary: str, reference: str,
                 gate: RatioGate, files: dict[str, str | None],
                 queries_run: list[Query] | None = None) -> dict[str, Any]:
    """The JSON report: one entry per query, and a summary that opens with the decision
    and accounts for every statement (:func:`_accounting`)."""
    queries = []
    for r in records:
        entry: dict[str, Any] = {
            "name": r.key, "file": files.get(r.name or ""), "sql": r.sql, "status": r.status,
            "category": r.category, "message": r.message if r.status != "skipped" else r.skip_reason,
            "primary_ms": _round(r.primary_ms), "reference_ms": _round(r.reference_ms),
            "ratio": _round(r.ratio), "over_max_ratio": gate.over(r),
            "primary_rows": r.primary_rows, "reference_rows": r.reference_rows,
            "noise_checked": r.noise_checked, "answered_by": r.answered_by,
            "evidence": r.evidence,
        }
        entry["failed"] = r.diverged or entry["over_max_ratio"]
        queries.append(entry)
    counts: dict[str, int] = {}
    for r in records:
        counts[r.category or "skipped"] = counts.get(r.category or "skipped", 0) + 1
    diverged = sum(r.diverged for r in records)
    slow = sum(gate.over(r) for r in records)
    failed = sum(bool(q["failed"]) for q in queries)
    parts = [f"{n} {c}" for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    line = (f"{len(records)} queries, {primary} vs {reference}: " + ", ".join(parts)
            + (f"; {slow} over --max-ratio {gate.max_ratio:g}" if slow and gate.max_ratio else "")
            + (f". FAILED ({failed})" if failed else ". OK"))
    accounting = _accounting(records, queries_run)
    return {
        "primary": primary, "reference": reference, "max_ratio": gate.max_ratio,
        "min_ms": gate.min_ms,
        "summary": {"queries": len(records), "by_category": counts, "diverged": diverged,
                    "over_max_ratio": slow, "failed": failed, "line": line,
                    "accounting": accounting,
                    "decision": _decision(accounting, counts, slow, primary, reference)},
        "queries": queries,
    }


def _accounting(records: list[ShadowRecord], queries: list[Query] | None) -> dict[str, Any]:
    """Where every statement went: compared, skipped (by kind), failed on both sides."""
    kinds = [q.kind for q in queries] if queries is not None else [None] * len(records)
    skipped: dict[str, int] = {}
    for record, kind in zip(records, kinds, strict=True):
        if record.status == "skipped":
            what = kind if kind not in (None, "read") else "other"
            skipped[what] = skipped.get(what, 0) + 1
    both = sum(1 for r in records if r.evidence.get("primary_error") is not None
               and r.evidence.get("reference_error") is not None)
    compared = sum(r.status == "compared" for r in records)
    return {"statements": len(records), "compared": compared, "skipped": skipped,
            "failed_on_both_sides": both, "diverged": sum(r.diverged for r in records)}


def _decision(accounting: dict[str, Any], counts: dict[str, int], slow: int,
              primary: str, reference: str) -> str:
    """The report's first line: safe or not, and why, in words."""
    total, compared = accounting["statements"], accounting["compared"]
    diverged, both = accounting["diverged"], accounting["failed_on_both_sides"]
    skipped = accounting["skipped"]
    left = []
    if skipped:
        left.append(f"{sum(skipped.values())} not replayed ("
                    + ", ".join(f"{n} {k}" for k, n in sorted(skipped.items())) + ")")
    if both:
        left.append(f"{both} failed on both engines, so their answers were not compared")
    tail = ("; " + "; ".join(left)) if left else ""
    if diverged:
        why = ", ".join(f"{counts[c]} {c}" for c in sorted(counts)
                        if c not in ("match", "nondeterministic", "both_error", "skipped",
                                     "order_unchecked"))
        return (f"NOT SAFE: {diverged} of {compared} compared statements answered differently "
                f"on {primary} than on {reference} ({why}){tail}.")
    if slow:
        return (f"NOT SAFE: answers agree, but {slow} statements are slower than --max-ratio "
                f"allows on {primary}{tail}.")
    if not compared:
        return f"NOT VERIFIED: none of the {total} statements was compared{tail}."
    return (f"SAFE: all {compared} compared statements answered alike on {primary} and "
            f"{reference}{tail}.")


def junit_xml(report: dict[str, Any]) -> str:
    """The report as JUnit XML: one testcase per query, a failure per divergence or slow query."""
    import xml.etree.ElementTree as ET

    queries = report["queries"]
    total_s = sum((q["primary_ms"] or 0) + (q["reference_ms"] or 0) for q in queries) / 1000
    suites = ET.Element("testsuites", name="arrowgate shadow", tests=str(len(queries)),
                        failures=str(report["summary"]["failed"]), errors="0",
                        time=f"{total_s:.3f}")
    suite = ET.SubElement(
        suites, "testsuite", name=f"shadow {report['primary']} vs {report['reference']}",
        tests=str(len(queries)), failures=str(report["summary"]["failed"]), errors="0",
        skipped=str(sum(q["status"] == "skipped" for q in queries)), time=f"{total_s:.3f}")
    for q in queries:
        classname = Path(q["file"]).stem if q["file"] else "shadow"
        case = ET.SubElement(suite, "testcase", name=q["name"], classname=classname,
                             time=f"{(q['primary_ms'] or 0) / 1000:.3f}")
        if q["status"] == "skipped":
            ET.SubElement(case, "skipped", message=q["message"] or "")
            continue
        if q["category"] not in ("match", "nondeterministic", "order_unchecked"):
            failure = ET.SubElement(case, "failure", message=q["message"] or "",
                                    type=q["category"] or "")
            failure.text = json.dumps(q["evidence"], indent=2, default=str)
        elif q["over_max_ratio"]:
            ET.SubElement(case, "failure", type="latency",
                          message=f"{report['primary']} took {q['ratio']}x the reference's time "
                          f"(limit {report['max_ratio']})")
        out = ET.SubElement(case, "system-out")
        out.text = (f"{q['category']}: {q['message']}\nprimary {q['primary_ms']} ms, "
                    f"reference {q['reference_ms']} ms, ratio {q['ratio']}\n{q['sql']}\n")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def markdown(report: dict[str, Any]) -> str:
    """The report for a pull-request comment: a verdict line, failures first, then every query."""
    s = report["summary"]
    head = "❌" if s["failed"] else "✅"
    lines = [f"### {head} Shadow: `{report['primary']}` vs `{report['reference']}`", "",
             f"**{s['decision']}**", "", s["line"], ""]
    failed = [q for q in report["queries"] if q["failed"]]
    if failed:
        lines += ["**Failures**", ""]
        for q in failed:
            why = q["message"] if q["category"] not in ("match", "nondeterministic",
                                                        "order_unchecked") else \
                f"latency ratio {q['ratio']} over {report['max_ratio']}"
            lines.append(f"- `{q['name']}`: **{q['category']}**: {why}")
            sample = _evidence_line(q["evidence"])
            if sample:
                lines.append(f"  - {sample}")
        lines.append("")
    lines += ["| query | verdict | primary ms | reference ms | ratio |", "|---|---|---:|---:|---:|"]
    for q in report["queries"]:
        verdict = q["category"] or f"skipped: {q['message']}"
        ratio = f"{q['ratio']:.2f}x" if q["ratio"] is not None else "-"
        if q["over_max_ratio"]:
            ratio = f"**{ratio}**"
        lines.append(f"| `{q['name']}` | {verdict} | {_cell(q['primary_ms'])} | "
                     f"{_cell(q['reference_ms'])} | {ratio} |")
    if report.get("shapes"):
        from gateway.capture import replay_report
        lines += replay_report.markdown(report["shapes"])
    if report.get("warmup"):
        lines += ["", f"Warm-up, untimed by the verdicts above ({len(report['warmup'])} "
                  "statements per engine, run first):", ""]
        engines = (report["primary"], report["reference"])
        lines += [f"- `{w['name']}`: " + ", ".join(f"{e} {w.get(e)}" for e in engines)
                  for w in report["warmup"]]
    return "\n".join(lines) + "\n"


def _evidence_line(evidence: dict[str, Any]) -> str:
    if evidence.get("differences"):
        d = evidence["differences"][0]
        key = ", ".join(f"{k}={v!r}" for k, v in d["key"].items())
        return (f"`{d['column']}` is `{d['primary']!r}` on primary, `{d['reference']!r}` on "
                f"reference" + (f" at {key}" if key else ""))
    if evidence.get("missing"):
        return f"missing row: `{json.dumps(evidence['missing'][0], default=str)}`"
    if evidence.get("extra"):
        return f"extra row: `{json.dumps(evidence['extra'][0], default=str)}`"
    return ""


def _cell(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _write(path: str, text: str) -> None:
    from gateway.output.writers import write_text_file

    write_text_file(path, text)


def run_report(args: argparse.Namespace) -> int:
    from gateway.shadow.settings import DEFAULT_STORE
    from gateway.shadow.store import ShadowStore, summarize

    store = args.store
    if store is None:
        with open_gateway(args) as gw:
            settings = gw.shadow_settings
        store = settings.store if settings is not None and settings.store else DEFAULT_STORE
    summary = summarize(ShadowStore(store).read(), top=args.top)
    if args.json:
        _write(args.json, json.dumps(summary, indent=2, default=str) + "\n")
    print(f"{summary['records']} records in {store} ({summary['skipped']} skipped)")
    print("by category: " + ", ".join(f"{c} {n}" for c, n in summary["by_category"].items()))
    print("\nlatency ratio (primary / reference) per query, worst first:")
    print(f"  {'p50':>7} {'p90':>7} {'p99':>7} {'runs':>5} {'diverged':>8}  query")
    for q in summary["worst_ratio"]:
        print(f"  {q['ratio_p50']:>7} {q['ratio_p90']:>7} {q['ratio_p99']:>7} {q['runs']:>5} "
              f"{q['diverged']:>8}  {q['query']}")
    if summary["recent_divergences"]:
        print("\nrecent divergences:")
        for d in summary["recent_divergences"]:
            print(f"  {d['time']}  {d['query']}  {d['primary']} vs {d['reference']}: "
                  f"{d['category']}: {d['message']}")
    return EXIT_OK


def print_record(record: ShadowRecord) -> None:
    """The line ``arrowgate query --shadow`` prints under the answer (on stderr)."""
    print(record.summary(), file=sys.stderr)
