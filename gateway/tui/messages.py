"""Messages between the console's workers and widgets (posted from worker threads too)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from gateway.errors import GatewayError
    from gateway.tui.components.results_grid import ShownBackend
    from gateway.tui.console import ConsoleAnswer


class QuerySubmitted(Message):
    """A tab asks to run ``sql``."""

    def __init__(self, sql: str) -> None:
        super().__init__()
        self.sql = sql


class ResultsFetched(Message):
    """Rows of an answer are ready: the first ones (``answer.complete`` False) or all."""

    def __init__(self, answer: ConsoleAnswer, backend: ShownBackend) -> None:
        super().__init__()
        self.answer = answer
        self.backend = backend


class ReferenceFetched(Message):
    """The reference's answer to ``sql``, run again for ctrl+r (too large to have been kept),
    or the error it failed with."""

    def __init__(self, sql: str, engine: str, backend: ShownBackend | None,
                 error: GatewayError | None = None) -> None:
        super().__init__()
        self.sql = sql
        self.engine = engine
        self.backend = backend
        self.error = error


class VerdictReady(Message):
    """The shadow verdict of ``answer`` is final."""

    def __init__(self, answer: ConsoleAnswer) -> None:
        super().__init__()
        self.answer = answer


class QueryFailed(Message):
    """The statement failed, was cancelled or could not start."""

    def __init__(self, sql: str, engine: str, error: GatewayError, elapsed: float) -> None:
        super().__init__()
        self.sql = sql
        self.engine = engine
        self.error = error
        self.elapsed = elapsed


class NameChosen(Message):
    """A name picked in the catalog tree, to insert into the editor."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
