"""Running the service as a process: settings, logging, and a clean stop on SIGTERM.

On SIGTERM or SIGINT the service stops taking queries, gives running streams
``shutdown_grace`` seconds to finish, cancels the rest (their clients get
CANCELLED; nothing is written half-way), then stops. The process keeps the
memory of the answers it sent for the next ones (:mod:`gateway.flight.allocator`).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from gateway.flight.allocator import keep_freed_memory
from gateway.flight.serve_config import ServeSettings
from gateway.flight.server import FlightSqlServer

if TYPE_CHECKING:
    from gateway.core import Gateway


def serve(gw: Gateway, **overrides: Any) -> None:
    """Serve ``gw`` until SIGTERM or SIGINT; ``overrides`` win over the ``[serve]`` section.

    Raises:
        gateway.errors.ConfigError: a wrong ``[serve]`` section, or an exposed
            address without users and TLS.
    """
    settings = ServeSettings.from_config(gw.config, **overrides)
    settings.check_exposure()
    keep_freed_memory()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    log = logging.getLogger("arrowgate.flight")
    log.addHandler(handler)
    log.setLevel(logging.INFO)

    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with FlightSqlServer(gw, settings) as server:
            auth = f"{len(settings.users)} users" if settings.auth else "no authentication"
            log.info("listening on %s (%s, %s)", server.location,
                     "TLS" if settings.tls else "no TLS", auth)
            while not stop.wait(1.0):
                pass
            log.info("stopping: %d running queries get %g s to finish",
                     len(server.queries.running()), settings.shutdown_grace)
            server.drain(settings.shutdown_grace)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        log.removeHandler(handler)
