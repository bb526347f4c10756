"""The SQL editor of one tab: textual-textarea's editor with SQL highlighting and completion."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.geometry import Size
from textual.widgets import Label, TextArea
from textual_textarea import TextEditor
from textual_textarea.autocomplete import CompletionList
from textual_textarea.containers import FooterContainer, TextContainer

from gateway.tui.components.vim import VimTextArea
from gateway.tui.sql_text import complete, offset_of, statement_at, wants_table


class SqlTextArea(VimTextArea):
    """The editor's text area: vim keys when asked, and a key repaints this widget only."""

    def _refresh_size(self) -> None:
        # TextArea sets virtual_size, a reactive with layout=True, so every key that
        # lengthens a line laid out and repainted the whole screen, a 1M-row grid
        # included (tens of ms a key). A new virtual size concerns this widget's own
        # scrolling only: set it without the layout pass; scrollbars appearing or going
        # still lay out (their own reactives).
        if self.soft_wrap:
            size = Size(0, self.wrapped_document.height)
        else:  # +1 width: room for the cursor resting at the end of the line
            width, height = self.document.get_size(self.indent_width)
            size = Size(width + self.gutter_width + 1, height)
        if size != self.virtual_size:
            self.set_reactive(TextArea.virtual_size, size)
            self.refresh()
        self._refresh_scrollbars()


class SqlEditor(TextEditor):
    """A buffer of SQL; knows which statement the cursor or the selection means."""

    def __init__(self, text: str, names: Callable[[], list[str]], *, vim: bool = False,
                 tables: Callable[[], frozenset[str]] = frozenset, id: str | None = None):
        """``names``: every catalog name to complete; ``tables``: those that are tables
        (ranked first where a table's name goes, after FROM or JOIN)."""
        super().__init__(language="sql", text=text, theme="textual-dark", id=id,
                         word_completer=self.completions, use_system_clipboard=False)
        self._vim = vim
        self._names = names
        self._tables = tables

    def completions(self, prefix: str) -> list[tuple[tuple[str, str], str]]:
        """What completes ``prefix``, the word ending at the cursor."""
        row, column = self.selection.end
        text = self.text
        before = text[:max(0, offset_of(text, row, column) - len(prefix))]
        return complete(prefix, self._names(), self._tables(), wants_table(before))

    def compose(self) -> ComposeResult:
        # TextEditor.compose with the vim-capable text area in place of TextAreaPlus
        self.text_container = TextContainer()
        self.text_input = SqlTextArea(language=self._language, text=self._initial_text,
                                      read_only=self.read_only, show_cursor=self._show_cursor)
        self.completion_list = CompletionList()
        self.footer = FooterContainer(classes="hide")
        self.footer_label = Label("", id="textarea__save_open_input_label")
        with self.text_container:
            yield self.text_input
            yield self.completion_list
        with self.footer:
            yield self.footer_label

    def on_mount(self) -> None:  # TextEditor's on_mount runs too: Textual calls each class's
        self.set_vim(self._vim)

    @property
    def area(self) -> SqlTextArea:
        assert isinstance(self.text_input, SqlTextArea)
        return self.text_input

    def focus_now(self) -> None:
        """Focus the text area at once, not with the next message: a grid replacing its
        answer in between still saw the focus as its own and took it back."""
        self.screen.set_focus(self.area)

    @property
    def vim(self) -> bool:
        return self.area.mode != ""

    def set_vim(self, on: bool) -> None:
        """Vim-style modal editing on (starting in normal mode) or off."""
        self._vim = on
        self.area.set_vim(on)

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
