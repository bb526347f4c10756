"""Flight SQL transactions: ``BeginTransaction`` and ``EndTransaction`` on engines that have them.

A transaction is a core session of its own in which ``BEGIN`` has run;
statements that carry its id run in it, and ``EndTransaction`` commits or
rolls back and closes it. An id works only for the user who began it. A
transaction unused for ``transaction_idle`` seconds (default 60) is rolled
back (its session closed): its client may have died holding its locks.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.session import Session


@dataclass
class Transaction:
    user: str
    engine: str
    session: Session
    used: float = field(default_factory=time.monotonic)


class Transactions:
    """Open transactions by id."""

    def __init__(self, idle: float):
        self.idle = idle
        self._by_id: dict[bytes, Transaction] = {}
        self._lock = threading.Lock()

    def begin(self, user: str, engine: str, session: Session) -> bytes:
        """Run ``BEGIN`` in ``session`` (which the transaction then owns) and name it.

        Raises:
            gateway.errors.GatewayError: the engine refused ``BEGIN`` (the session is closed).
        """
        try:
            session.execute("BEGIN").to_arrow()
        except BaseException:
            session.close()
            raise
        transaction_id = secrets.token_bytes(16)
        with self._lock:
            self._by_id[transaction_id] = Transaction(user, engine, session)
        return transaction_id

    def get(self, transaction_id: bytes, user: str) -> Transaction:
        """Raises KeyError: no open transaction with that id for this user."""
        with self._lock:
            found = self._by_id.get(transaction_id)
            if found is None or found.user != user:
                raise KeyError("no such transaction: it was ended, expired, or never begun")
            found.used = time.monotonic()
            return found

    def end(self, transaction_id: bytes, user: str, commit: bool) -> None:
        """``COMMIT`` or ``ROLLBACK``, then close the transaction's session.

        Raises:
            KeyError: no such transaction for this user.
            gateway.errors.GatewayError: the engine refused the commit.
        """
        transaction = self.get(transaction_id, user)
        with self._lock:
            self._by_id.pop(transaction_id, None)
        try:
            transaction.session.execute("COMMIT" if commit else "ROLLBACK").to_arrow()
        finally:
            transaction.session.close()

    def expire(self, idle: float | None = None) -> None:
        """Roll back transactions unused for ``idle`` seconds (default: ``transaction_idle``)."""
        cutoff = time.monotonic() - (self.idle if idle is None else idle)
        with self._lock:
            stale = [self._by_id.pop(t) for t, x in list(self._by_id.items()) if x.used <= cutoff]
        for transaction in stale:
            transaction.session.close()

    def close_all(self) -> None:
        self.expire(idle=-1.0)
