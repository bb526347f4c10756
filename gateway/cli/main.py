"""The ``arrowgate`` command: argument parsing, dispatch and exit codes.

Each core subcommand lives in its own module under ``gateway.cli.commands`` and
is listed in :data:`COMMANDS`; a module exposes ``register(subparsers)``,
which adds its parser and sets ``run`` to a function taking the parsed
arguments and returning an exit code. Plugins add theirs through the hook
``arrowgate_register_commands``, called after the core commands. Command
modules import heavy libraries inside ``run``, so ``arrowgate --help`` stays
fast.

Exit codes: 0 success; 1 a query failed (or, for the shadow and bench
commands, answers diverged or latency regressed, or the answer could not be
written); 2 a usage or configuration error; 130 interrupted (Ctrl-C); 143 or 129
terminated by SIGTERM or SIGHUP. A reader that goes
away (``| head``) ends the command quietly with 0.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NoReturn

from gateway.cli.commands import (
    EPILOG,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_QUERY,
    EXIT_USAGE,
    Parser,
    UsageError,
)
from gateway.cli.startup import exit_now, interrupted, tune_collector
from gateway.errors import ConfigError, GatewayError, error_label
from gateway.result import cancel_all

#: The core subcommand modules, in the order ``--help`` lists them (plugins' follow).
COMMANDS = ["query", "engines", "sources", "data", "shadow", "bench", "fuzz", "serve", "tui",
            "init"]
#: The commands each core module adds: its own, and ``init``'s ``demo`` too.
COMMAND_NAMES = {name: (name,) for name in COMMANDS} | {"init": ("init", "demo")}


def build_parser(plugins: Iterable[object] = (), *,
                 command: str | None = None) -> argparse.ArgumentParser:
    """The ``arrowgate`` parser: the core commands, then those plugins register.

    ``plugins`` are registered beside the installed ones (as in
    :func:`gateway.connect`). ``command``, a core command module's name
    (:data:`COMMANDS`), builds that module's commands alone: the other core
    commands, and those of the built-in plugins that do not extend it
    (:data:`gateway.plugins.BUILT_IN_COMMANDS`), are bare stand-ins (their
    modules not imported), there for the other plugins' hook to find as it
    would the real ones (absent when no other plugin adds commands), so the
    parser reads the arguments of the command :func:`invoked_command` found as
    the whole parser does.

    The parsed arguments carry the plugin manager built here as
    ``plugin_manager``, so the gateway a command opens
    (:func:`gateway.cli.commands.open_gateway`) loads no plugin a second time.

    Raises:
        ConfigError: a plugin failed to import, or to add its commands (a name
            already taken, a command to extend that does not exist).
    """
    from gateway import __version__
    from gateway.plugins import BUILT_IN_COMMANDS, build_plugin_manager

    parser = Parser(
        prog="arrowgate",
        description="A multi-engine SQL gateway that returns Apache Arrow.",
        epilog=EPILOG + '\nexample:\n  arrowgate query "SELECT 42 AS answer"',
    )
    parser.add_argument("--config", metavar="FILE", help="the arrowgate.toml to use")
    parser.add_argument("--version", action="version", version=f"arrowgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    pm = build_plugin_manager(plugins)  # its own errors (ARROWGATE_PLUGINS) say what is wrong
    register = pm.hook.arrowgate_register_commands
    idle: list[str] = []
    if command is not None:
        # a built-in plugin whose commands neither are nor extend this one is not asked
        # (importing its commands' module and building their parsers took a one-row
        # query 1 ms): its commands are stand-ins too
        idle = [name for name, names in BUILT_IN_COMMANDS.items()
                if name in pm.on_demand and command not in names]
        register = pm.subset_hook_caller("arrowgate_register_commands",
                                         [pm.get_plugin(name) for name in idle])
    # the stand-ins are there for the plugins asked below; with none to ask, none is made
    # (a one-row query: 12 parsers, 0.5-1 ms)
    with_stand_ins = bool(register.get_hookimpls())
    stand_ins: set[int] = set()
    for name in COMMANDS:
        if command is None or name == command:
            importlib.import_module(f"gateway.cli.commands.{name}").register(sub)
        elif with_stand_ins:
            stand_ins.update(id(sub.add_parser(n, add_help=False)) for n in COMMAND_NAMES[name])
    if with_stand_ins:
        for name in idle:
            stand_ins.update(id(sub.add_parser(n, add_help=False))
                             for n in BUILT_IN_COMMANDS[name] if n not in sub.choices)
    try:
        register(subparsers=sub)
    except Exception as exc:  # a plugin's bug must not make every command a traceback
        raise ConfigError(f"a plugin failed to add its commands: {type(exc).__name__}: {exc}",
                          hint="reinstall it, or leave it out with ARROWGATE_PLUGINS") from exc
    parser.set_defaults(plugin_manager=pm)
    for child in _subcommands(parser):
        if id(child) in stand_ins:
            continue
        # `arrowgate serve --config F` as well as `arrowgate --config F serve`, and after
        # an action's arguments too; SUPPRESS keeps a --config given earlier
        child.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                           help="the arrowgate.toml to use (also before the command)")
        # a usage error names the command as typed, whatever the command's own options are
        # called (tui's -c/--command once overwrote it)
        child.set_defaults(usage_label=child.prog)
    return parser


def invoked_command(argv: Sequence[str]) -> str | None:
    """The module of the core command ``argv`` runs, when its parser alone can read
    ``argv``; else None.

    That is when the first word that is no top-level option (``--config FILE``,
    ``--config=FILE``) is a core command's name. Anything else (``--help``,
    ``--version``, an abbreviated or unknown option, a plugin's command, no
    command) needs the whole parser, for its help or its error message.
    """
    args = iter(argv)
    for arg in args:
        if arg == "--config":
            next(args, None)
        elif not arg.startswith("--config="):
            return next((m for m, names in COMMAND_NAMES.items() if arg in names), None)
    return None


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every command and action parser under ``parser``, each once."""
    seen: set[int] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.values(action._name_parser_map):
                if id(child) not in seen:  # an alias maps to the same parser
                    seen.add(id(child))
                    yield child
                    yield from _subcommands(child)


def main(argv: Sequence[str] | None = None) -> int:
    # sqlglot's warnings ("Falling back to parsing as a 'Command'") never reach the
    # terminal: gateway.sql, which every engine imports, raises its logger to ERROR
    if argv is None:
        argv = sys.argv[1:]
    try:
        # only the invoked command's parser: building all of them took a one-row
        # query 5-9 ms of CPU, and importing their modules 3-4 ms more
        parser = build_parser(command=invoked_command(argv))
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    with _signals_noted() as received:
        try:
            code = int(args.run(args))
            _store_shadow_records()
            sys.stdout.flush()  # a full or closed stdout fails here, not in the exit's flush
            return code
        except UsageError as exc:
            print(f"{args.usage_label}: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except ConfigError as exc:
            print(f"configuration error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except GatewayError as exc:
            if received:  # an engine turned the signal into its own error
                return _stopped_by(received[0])
            label, said = error_label(exc)
            print(f"{label}: {str(exc).replace(said, '', 1) if said else exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            return _stopped_by(received[0] if received else signal.SIGINT)
        except Terminated as exc:
            return _stopped_by(exc.signum)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                # the reader (head, less) went away: not an error, and nothing more to say
                _silence_stdout()
                return EXIT_OK
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
                _silence_stdout()
                why = ("disk full writing standard output"
                       if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                       else f"cannot write standard output: {exc.strerror}")
                print(f"output error: {why}", file=sys.stderr)
                return EXIT_QUERY
            raise


def _store_shadow_records() -> None:
    """Write the shadow records this command made before it returns (they wait for up to
    5 s otherwise, and a flush at interpreter exit cannot import pyarrow.parquet)."""
    store = sys.modules.get("gateway.shadow.store")
    if store is not None:
        store.flush_all()


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwinds like Ctrl-C, so a partial ``--output`` is removed."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


#: What ends a command like Ctrl-C does: a timeout's or systemd's kill, a closed terminal.
_TERMINATING = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]


def _stopped_by(signum: int) -> int:
    """Report the signal that stopped the command; its exit code is 128 + the signal."""
    print("interrupted" if signum == signal.SIGINT
          else f"terminated by {signal.Signals(signum).name}", file=sys.stderr)
    return EXIT_INTERRUPTED if signum == signal.SIGINT else 128 + signum


@contextlib.contextmanager
def _signals_noted() -> Iterator[list[int]]:
    """Note every Ctrl-C, SIGTERM and SIGHUP, then raise KeyboardInterrupt (or Terminated).

    An engine that sees the interrupt first (DuckDB in process, an ADBC driver)
    answers with its own cancelled or interrupted error; the note lets the
    command still exit 130 (or 128 + the signal), as it does when the
    exception arrives itself. Either exception unwinds through ``--output``'s
    file, which removes its ``.partial`` copy.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        # an engine may swallow the exception below and run on: stop its queries from
        # another thread (not from a signal handler, which may have interrupted the
        # engine's own code)
        threading.Thread(target=cancel_all, name="signal-cancel", daemon=True).start()
        if signum == signal.SIGINT:
            signal.default_int_handler(signum, frame)
        raise Terminated(signum)

    previous = {signum: signal.signal(signum, on_signal)
                for signum in (signal.SIGINT, *_TERMINATING)}
    if interrupted():  # a Ctrl-C while the command started, which Python dropped
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        raise KeyboardInterrupt
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _silence_stdout() -> None:
    """Point stdout at the null device, so what is still buffered fails nowhere at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def entry() -> NoReturn:
    """The ``arrowgate`` console script: :func:`main`, tuned for a short-lived process
    (:mod:`gateway.cli.startup` says how, and what each step saves)."""
    tune_collector()
    exit_now(main())

