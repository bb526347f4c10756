"""``arrowgate init DIR`` and ``arrowgate demo``: the quickstart without the repository.

The wheel carries the quickstart (``gateway/quickstart``: a configuration, a
query, a small corpus and two CSV files); ``init`` writes it into a folder of
the user's, ``demo`` into a temporary one, where it runs the README's
quickstart: one query on the csv scanner shadowed by DuckDB, then the corpus
as a pipeline would run it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from importlib.resources import files
from pathlib import Path
from typing import Any

from gateway.commands import EXIT_OK, UsageError, add_command

#: The files ``init`` writes, relative to the folder (``data/`` holds the CSV files).
QUICKSTART_FILES = ["arrowgate.toml", "demo.sql", "queries.sql", "data/trips.csv",
                    "data/zones.csv"]


def register(sub: Any) -> None:
    p = add_command(
        sub, "init", help="write the quickstart (configuration, queries, sample data) to DIR",
        description="Write the quickstart into DIR: arrowgate.toml (a csv scanner engine "
        "'scan' and a DuckDB engine 'duck' over\ntwo sample CSV files), demo.sql, "
        "queries.sql and data/. Existing files are never overwritten.",
        examples=["arrowgate init quickstart && cd quickstart && arrowgate query -f demo.sql "
                  "--shadow duck"],
    )
    p.add_argument("dir", metavar="DIR", help="the folder to write (made when missing)")
    p.set_defaults(run=run_init)
    d = add_command(
        sub, "demo", help="run the quickstart on the bundled sample data",
        description="Write the quickstart into a temporary folder and run it: one query on the "
        "csv scanner, shadowed by\nDuckDB (the answer, the verdict, the latency ratio), then "
        "a small corpus as a pipeline would.",
        examples=["arrowgate demo"],
    )
    d.set_defaults(run=run_demo)


def write_quickstart(folder: Path) -> list[Path]:
    """Write the quickstart files into ``folder``; return their paths.

    Raises:
        UsageError: a file of that name exists already (nothing is written).
    """
    source = files("gateway") / "quickstart"
    targets = [folder / name for name in QUICKSTART_FILES]
    existing = [str(t) for t in targets if t.exists()]
    if existing:
        raise UsageError("not overwriting " + ", ".join(existing) + ": pick another folder")
    for name, target in zip(QUICKSTART_FILES, targets, strict=True):
        data = (source / name).read_bytes()
        if name == "arrowgate.toml":  # in the repository the data sit beside the quickstart
            data = data.replace(b'"../data/', b'"data/')
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return targets


def run_init(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    try:
        write_quickstart(folder)
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename or folder}: {exc.strerror}") from None
    print(f"wrote the quickstart into {folder}; try:\n  cd {folder}\n"
          "  arrowgate query -f demo.sql --shadow duck\n"
          "  arrowgate shadow --primary scan --reference duck queries.sql", file=sys.stderr)
    return EXIT_OK


def run_demo(args: argparse.Namespace) -> int:
    from gateway.cli import build_parser

    with tempfile.TemporaryDirectory(prefix="arrowgate-demo-") as tmp:
        write_quickstart(Path(tmp))
        config = str(Path(tmp) / "arrowgate.toml")
        parser = build_parser()
        steps = (["query", "--shadow", "duck", "-f", str(Path(tmp) / "demo.sql")],
                 ["shadow", "--primary", "scan", "--reference", "duck", "--no-store",
                  str(Path(tmp) / "queries.sql")])
        for i, argv in enumerate(steps):
            print(("\n" if i else "") + f"$ arrowgate {' '.join(argv[:-1])} "
                  f"{Path(argv[-1]).name}", flush=True)
            step = parser.parse_args(["--config", config, *argv])
            code = int(step.run(step))
            sys.stdout.flush()
            if code != EXIT_OK:
                return code
    return EXIT_OK
