"""``arrowgate serve``: the gateway as an Arrow Flight SQL service."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from gateway.cli.commands import EXIT_OK, add_command, open_gateway


def register(sub: Any) -> None:
    s = add_command(
        sub, "serve", help="serve the engines over Arrow Flight SQL",
        description="Serve the configured engines over Arrow Flight SQL, for the ADBC, JDBC "
                    "and ODBC Flight SQL drivers and DBeaver. Each engine is a catalog; a "
                    "client picks one with the session option 'engine'. The [serve] section "
                    "of the configuration sets users, TLS and limits (docs/flight.md).",
        examples=[
            "arrowgate serve",
            "arrowgate serve --config arrowgate.toml --port 31337",
            "arrowgate serve --host 0.0.0.0   # needs [serve.users] and TLS, or --insecure",
            "arrowgate serve --hash-password  # prints a password_hash for [serve.users.NAME]",
        ],
    )
    s.add_argument("--host", metavar="ADDRESS",
                   help="the address to listen on (default: [serve] host, else 127.0.0.1)")
    s.add_argument("--port", type=int, metavar="PORT",
                   help="the port (default: [serve] port, else 31337; 0 picks a free one)")
    s.add_argument("--insecure", action="store_true",
                   help="allow a non-loopback address without users and TLS")
    s.add_argument("--hash-password", action="store_true",
                   help="read a password (prompted, or from stdin) and print its password_hash")
    s.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gateway.flight.serve_config import hash_password

    if args.hash_password:
        password = getpass.getpass("password: ") if sys.stdin.isatty() else \
            sys.stdin.readline().rstrip("\n")
        print(hash_password(password))
        return EXIT_OK
    import faulthandler

    from gateway.cli.startup import restore_collector

    # a crash in a library (a segfault in an engine or in gRPC) leaves the Python stack of
    # every thread in the log, where it went out with nothing (issue 36): names and lines
    # of code only, never a value
    faulthandler.enable(all_threads=True)
    restore_collector()
    from gateway.flight.service import serve

    with open_gateway(args) as gw:
        serve(gw, host=args.host, port=args.port, insecure=args.insecure or None)
    return EXIT_OK
