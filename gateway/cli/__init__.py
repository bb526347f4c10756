"""The command line: ``arrowgate`` and its subcommands.

The package owns what a terminal user meets: :mod:`gateway.cli.main` (argument
parsing, dispatch and exit codes), :mod:`gateway.cli.commands` (one module a
subcommand, and the helpers plugins add theirs with), :mod:`gateway.cli.startup` (what a short-lived process does to start and stop
sooner) and :mod:`gateway.cli.example_commands` (the commands the examples document).

It is a front end: it may use every subsystem (shadow, verify, capture, fuzz, bench,
output), the other front ends (``tui`` and ``serve`` launch them) and the core;
nothing in arrowgate imports it but plugins adding commands (:mod:`gateway.cli.commands`).
:func:`console` is the console script, kept here so that it runs before the
command's own modules import.
"""

from __future__ import annotations

import sys
from typing import NoReturn


def console() -> NoReturn:
    """The ``arrowgate`` console script: imports :mod:`gateway.cli.main` and runs its ``entry``.

    A Ctrl-C during the imports and the parser's set-up, before the CLI's own
    handler is in place, ends the command as a Ctrl-C later does
    (:mod:`gateway.cli.main` exit codes).
    """
    from gateway.cli.startup import exit_now, note_interrupts, preload_arrow, tune_collector

    try:
        note_interrupts()
        tune_collector()
        preload_arrow()
        from gateway.cli.main import entry

        entry()  # exits; a Ctrl-C after its handler is in place is its own to report
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        exit_now(130)
