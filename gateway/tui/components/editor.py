"""The SQL editor of one tab: textual-textarea's editor with SQL highlighting and completion."""

from __future__ import annotations

from collections.abc import Callable

from textual_textarea import TextEditor

from gateway.tui.sql_text import complete, offset_of, statement_at


class SqlEditor(TextEditor):
    """A buffer of SQL; knows which statement the cursor or the selection means."""

    def __init__(self, text: str, names: Callable[[], list[str]], *, id: str | None = None):
        super().__init__(language="sql", text=text, theme="textual-dark", id=id,
                         word_completer=lambda prefix: complete(prefix, names()),
                         use_system_clipboard=False)

    def current_statement(self) -> str:
        """The selection when there is one, else the statement under the cursor."""
        if self.selected_text.strip():
            return self.selected_text.strip()
        row, column = self.selection.end
        text = self.text
        return statement_at(text, offset_of(text, row, column))

    def insert(self, text: str) -> None:
        """Put ``text`` at the cursor (replacing any selection) and focus the editor."""
        self.insert_text_at_selection(text)
        self.focus()
