"""Reading SQL: what a statement is, before any engine sees it.

One package holds every reading of statement text the gateway does, so the
statement pipeline (:mod:`gateway.statement`) and the front ends agree on it:

- :mod:`gateway.sql.kinds`: what a statement does (a read, a write, a
  setting, a transaction), its placeholders, the session state it changes;
- :mod:`gateway.sql.reach`: what a statement reaches beyond the engine it is
  sent to (settings of global scope, ``ATTACH``, functions that run SQL or open
  databases from a string);
- :mod:`gateway.sql.patterns`: SQL ``LIKE`` patterns for catalog listings;
- :mod:`gateway.sql.nondeterminism`: what in a query leaves its answer
  undetermined by the data (volatile functions, a cut no order fixes, ties);
- :mod:`gateway.sql.query_shape`: what the outermost query tells a comparison
  (order, a LIMIT, GROUP BY keys, the names engines choose);
- :mod:`gateway.sql.corpus`: the ``.sql`` files replays and benchmarks run,
  split into statements on the SQL tokens.

It belongs to the core: it uses :mod:`gateway.errors` and nothing else of arrowgate,
and every layer above reads SQL through it.

sqlglot is imported only when a statement needs a parse, and its warnings
("contains unsupported syntax. Falling back to parsing as a 'Command'") never
reach the terminal or a log: they quote the statement, and statement text is
kept out of logs (docs/flight.md). :func:`parse` is the one way in.
"""

from __future__ import annotations

import sys
from typing import Any


def _quiet_sqlglot() -> None:
    import logging

    logging.getLogger("sqlglot").setLevel(logging.ERROR)


class _QuietSqlglot:
    """A finder that finds nothing: it raises sqlglot's logger to ERROR as sqlglot is
    first imported, so ``logging`` is not imported before something needs it (2-3 ms
    of a one-row ``arrowgate query``, whose projection never imports sqlglot)."""

    def __init__(self) -> None:
        self.done = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "sqlglot" and not self.done:
            self.done = True  # (left in sys.meta_path: importlib is iterating over it)
            _quiet_sqlglot()


#: sqlglot's logger warns with the statement's text; it is raised to ERROR once: here, or
#: as sqlglot is imported when logging is not imported yet
if "logging" in sys.modules or "sqlglot" in sys.modules:
    _quiet_sqlglot()
else:
    sys.meta_path.insert(0, _QuietSqlglot())

#: statements longer than this are read by their leading keywords only: a parse of a
#: multi-megabyte ``IN (...)`` list took sqlglot tens of seconds and gigabytes, in
#: Python, where no timeout can interrupt it (870 kB took 1.7 s of CPU; 256 kB about 0.5 s)
PARSE_LIMIT = 256 << 10


class Unparsed(Exception):
    """sqlglot could not read the statement, or it is longer than :data:`PARSE_LIMIT`."""


def parse(sql: str, dialect: str) -> list[Any]:
    """The statements of ``sql`` as sqlglot trees (empty ones left out).

    Raises:
        Unparsed: sqlglot cannot read it, or it is too long to read safely.
    """
    if len(sql) > PARSE_LIMIT:
        raise Unparsed(f"the statement is longer than {PARSE_LIMIT} characters")
    import sqlglot

    try:
        return [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception as exc:  # sqlglot's ParseError, TokenError, and its own bugs
        raise Unparsed(str(exc)) from None
