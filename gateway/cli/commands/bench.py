"""``arrowgate bench``: the benchmark protocol (``gateway.benchmark.runner``) on the command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from gateway.cli.commands import EXIT_OK, EXIT_QUERY, UsageError, add_command
from gateway.output.writers import write_text_file


def register(sub: Any) -> None:
    p = add_command(
        sub, "bench", help="time engines on a query corpus, answers checked first",
        description="Check every engine's answers against the first engine's, then time the "
        "queries whose answers agree:\none warm-up and the median of --rounds rounds, engines "
        "alternating in rotated order, each in\nits own process (peak memory per query). "
        "Prints a Markdown table of medians, spreads and ratios;\nexits 1 when any answer "
        "differs.\n\nWithout --engines, every engine of the configuration, in its order; "
        "without PATH, the quickstart's\nqueries, and without a configuration too, the "
        "quickstart's (arrowgate init quickstart).",
        examples=[
            "arrowgate bench",
            "arrowgate bench --engines duck,csv queries/",
            "arrowgate bench --engines csv,duck --baseline duck --rounds 7 "
            "--json bench.json --chart bench q.sql",
        ],
    )
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help=".sql files or folders of them (default: the quickstart's queries)")
    p.add_argument("--engines", metavar="A,B,...",
                   help="configured engines; the first one's answers are the reference "
                   "(default: every engine of the configuration)")
    p.add_argument("--baseline", metavar="ENGINE",
                   help="the engine ratios are computed against (default: the first)")
    p.add_argument("--rounds", type=int, default=5, metavar="N",
                   help="timed rounds per query (default 5)")
    p.add_argument("--warmup", type=int, default=1, metavar="N",
                   help="untimed rounds first (default 1)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="the longest one run may take (default 600)")
    p.add_argument("--json", metavar="FILE", help="write the whole report as JSON")
    p.add_argument("--markdown", metavar="FILE", help="write the Markdown table to FILE too")
    p.add_argument("--chart", metavar="STEM",
                   help="draw STEM.png and STEM.svg (per-query latency per engine)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(run=run)


class ProgressBar:
    """A one-line progress bar on a terminal's stderr; silent when stderr is not a terminal."""

    def __init__(self, enabled: bool, width: int = 30):
        self.enabled = enabled and sys.stderr.isatty()
        self.width = width
        self.started = time.monotonic()

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.enabled:
            return
        filled = self.width * done // max(total, 1)
        elapsed = time.monotonic() - self.started
        bar = "#" * filled + "." * (self.width - filled)
        sys.stderr.write(f"\r[{bar}] {done}/{total} {elapsed:5.0f}s {label[:50]:<50}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * (self.width + 70) + "\r")
            sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    from gateway.benchmark.runner import GatewayEngine, run_benchmark
    from gateway.cli.commands import open_gateway
    from gateway.config import find_config_path
    from gateway.sql.corpus import read_queries

    if args.rounds < 1 or args.warmup < 0:
        raise UsageError("--rounds must be at least 1 and --warmup at least 0")
    path = find_config_path(args.config)
    if not args.paths:
        quickstart = _quickstart()
        args.paths = [str(quickstart / "queries.sql")]
        on = f"the engines of {path}"
        if path is None:  # the quickstart's queries read its sample data
            path = quickstart / "arrowgate.toml"
            args.config, on = str(path), "its own configuration"
        print(f"bench: the quickstart's queries ({args.paths[0]}), on {on}", file=sys.stderr)
    queries = read_queries(args.paths)
    with open_gateway(args) as gw:  # checks the configuration and the names before spawning
        names = ([n.strip() for n in args.engines.split(",") if n.strip()]
                 if args.engines is not None else list(gw.config.engines))
        if not names:
            raise UsageError("--engines needs at least one engine name")
        if len(set(names)) != len(names):
            raise UsageError(f"--engines names an engine twice: {args.engines}")
        if args.baseline is not None and args.baseline not in names:
            raise UsageError(f"--baseline {args.baseline} is not one of the engines: "
                             + ",".join(names))
        for name in names:
            gw.engine_config(name)
    config = str(path.resolve()) if path is not None else None
    bar = ProgressBar(not args.no_progress)
    try:
        report = run_benchmark([GatewayEngine(n, config) for n in names], queries,
                               rounds=args.rounds, warmup=args.warmup, baseline=args.baseline,
                               timeout=args.timeout, progress=bar)
    finally:
        bar.close()
    text = report.to_markdown()
    sys.stdout.write(text)
    if args.markdown:
        write_text_file(args.markdown, text)
    if args.json:
        write_text_file(args.json, json.dumps(report.to_dict(), indent=2) + "\n")
    if args.chart:
        for p in report.write_chart(args.chart):
            print(f"chart: {p}", file=sys.stderr)
    return EXIT_QUERY if report.diverged else EXIT_OK


def _quickstart() -> Path:
    """The quickstart example's folder, as installed with the package."""
    from importlib.resources import files

    return Path(str(files("gateway") / "examples" / "quickstart"))
