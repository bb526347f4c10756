"""``arrowgate init NAME [DIR]`` and ``arrowgate demo``: the examples without the repository.

The wheel carries every folder of the repository's ``examples/`` (``gateway/examples``
is a link to it, shipped as package data); ``init`` writes one of them into a folder
of the user's, with the sample data its configuration names, and prints the commands its
README.md lists (gateway.cli.example_commands); ``demo`` writes the
quickstart into a temporary one, where it runs the README's quickstart: one query on
the csv scanner shadowed by DuckDB, then the corpus as a pipeline would run it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from gateway.cli.commands import EXIT_OK, UsageError, add_command

#: the folder of examples/ that holds the sample data the examples share
DATA = "data"
#: what is never written out of an example
_SKIPPED = ("__pycache__", ".egg-info", DATA)


def _examples_root() -> Traversable:
    return files("gateway") / "examples"


def example_names() -> list[str]:
    """The examples ``init`` can write, by folder name."""
    return sorted(entry.name for entry in _examples_root().iterdir()
                  if entry.is_dir() and entry.name != DATA and not entry.name.startswith("."))


def register(sub: Any) -> None:
    names = example_names()
    p = add_command(
        sub, "init", help="write an example (configuration, queries, sample data) to a folder",
        description="Write the example NAME into DIR (by default a folder named NAME): its "
        "files, and the sample\nCSV files its configuration reads, under data/. Existing "
        "files are never overwritten.\nExamples: " + ", ".join(names) + ".",
        examples=["arrowgate init quickstart && cd quickstart && arrowgate query -f demo.sql "
                  "--shadow duck",
                  "arrowgate init upgrade my-upgrade"],
    )
    p.add_argument("name", metavar="NAME", help="the example: " + ", ".join(names))
    p.add_argument("dir", metavar="DIR", nargs="?",
                   help="the folder to write (made when missing; default: NAME)")
    p.set_defaults(run=run_init)
    d = add_command(
        sub, "demo", help="run the quickstart on the bundled sample data",
        description="Write the quickstart into a temporary folder and run it: one query on the "
        "csv scanner, shadowed by\nDuckDB (the answer, the verdict, the latency ratio), then "
        "a small corpus as a pipeline would.",
        examples=["arrowgate demo"],
    )
    d.set_defaults(run=run_demo)


def _files(folder: Traversable, prefix: str = "") -> list[tuple[str, Traversable]]:
    found = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if any(entry.name.endswith(s) for s in _SKIPPED) or entry.name.startswith("."):
            continue
        if entry.is_dir():
            found += _files(entry, f"{prefix}{entry.name}/")
        else:
            found.append((prefix + entry.name, entry))
    return found


def write_example(name: str, folder: Path) -> list[Path]:
    """Write the example ``name`` into ``folder``, with the sample data its configuration
    reads (``../data/x.csv`` there becomes ``data/x.csv``); return the paths written.

    Raises:
        UsageError: no example has that name, or a file of that name exists already
            (nothing is written).
    """
    if name not in example_names():
        raise UsageError(f"no example named {name!r}: pick one of "
                         + ", ".join(example_names()))
    root = _examples_root()
    chosen = _files(root / name)
    config = next((entry for rel, entry in chosen if rel == "arrowgate.toml"), None)
    text = config.read_text() if config is not None else ""
    chosen += [(f"{DATA}/{rel}", entry) for rel, entry in _files(root / DATA)
               if f"../{DATA}/{rel}" in text]
    targets = [folder / rel for rel, _ in chosen]
    existing = [str(t) for t in targets if t.exists()]
    if existing:
        raise UsageError("not overwriting " + ", ".join(existing) + ": pick another folder")
    for (rel, entry), target in zip(chosen, targets, strict=True):
        data = entry.read_bytes()
        if rel == "arrowgate.toml":  # in the repository the data sit beside the examples
            data = data.replace(f'"../{DATA}/'.encode(), f'"{DATA}/'.encode())
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return targets


def run_init(args: argparse.Namespace) -> int:
    from gateway.cli.example_commands import describe_needs, read_commands

    folder = Path(args.dir if args.dir is not None else args.name)
    try:
        write_example(args.name, folder)
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename or folder}: {exc.strerror}") from None
    print(f"wrote the example {args.name} into {folder}; try:\n  cd {folder}", file=sys.stderr)
    readme = folder / "README.md"
    for command in read_commands(readme.read_text()) if readme.is_file() else []:
        if command.needs:
            print(f"  # needs {describe_needs(command)}", file=sys.stderr)
        print(f"  {command.text}", file=sys.stderr)
    return EXIT_OK


def run_demo(args: argparse.Namespace) -> int:
    from gateway.cli.main import build_parser

    with tempfile.TemporaryDirectory(prefix="arrowgate-demo-") as tmp:
        write_example("quickstart", Path(tmp))
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
