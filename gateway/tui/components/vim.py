"""Vim-style modal editing for the SQL editor: normal, insert and visual modes.

Off by default (``[tui] vim = true`` or f9 turn it on). Normal mode moves with
``h j k l w b e 0 $ gg G``, enters insert mode with ``i a I A o O``, edits with
``x dd yy p P u ctrl+r`` and selects with ``v``; escape returns to normal mode.
A count repeats a motion or an edit (``3j``, ``2dd``, ``5x``, ``4G`` goes to line
4); the operators ``d c y`` take a motion (``dw``, ``c$``, ``y2w``, ``dj``; ``D``
and ``C`` are ``d$`` and ``c$``). Keys vim does not use here (ctrl+enter, f-keys,
arrows) keep their usual meaning.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.widgets.text_area import Document, Location, Selection
from textual_textarea.messages import TextAreaHideCompletionList
from textual_textarea.text_editor import TextAreaPlus

Mode = Literal["", "normal", "insert", "visual"]

#: the digits a count keeps (the last typed)
_COUNT_DIGITS = 4


def _kind(char: str) -> int:
    """0 blank, 1 word character, 2 anything else (vim's word classes)."""
    if char.isspace():
        return 0
    return 1 if char.isalnum() or char == "_" else 2


def word_start_after(text: str, i: int) -> int:
    """``w``: the start of the next word after offset ``i``."""
    n = len(text)
    if i >= n:
        return i
    kind = _kind(text[i])
    while kind and i < n and _kind(text[i]) == kind:
        i += 1
    while i < n and text[i].isspace():
        i += 1
    return min(i, max(n - 1, 0))


def word_end_after(text: str, i: int) -> int:
    """``e``: the last character of the word ending after offset ``i``."""
    n = len(text)
    i += 1
    while i < n and text[i].isspace():
        i += 1
    if i >= n:
        return max(n - 1, 0)
    while i + 1 < n and _kind(text[i + 1]) == _kind(text[i]):
        i += 1
    return i


def word_start_before(text: str, i: int) -> int:
    """``b``: the start of the word before offset ``i``."""
    i -= 1
    while i > 0 and text[i].isspace():
        i -= 1
    if i <= 0:
        return 0
    while i > 0 and _kind(text[i - 1]) == _kind(text[i]):
        i -= 1
    return i


class VimTextArea(TextAreaPlus):
    """textual-textarea's text area with vim's modes when ``mode`` is not ``""``."""

    #: "" when vim keys are off
    mode: reactive[Mode] = reactive("")

    class ModeChanged(Message):
        """The editing mode changed (``""``: vim keys off)."""

        def __init__(self, mode: Mode) -> None:
            super().__init__()
            self.mode = mode

    #: operators that take a motion (or themselves again: the count's lines)
    OPERATORS: ClassVar[frozenset[str]] = frozenset("dcy")
    #: motions an operator takes whole lines with
    LINEWISE: ClassVar[frozenset[str]] = frozenset({"j", "k", "G", "gg", "enter"})
    #: motions whose target character is included in an operator's range
    INCLUSIVE: ClassVar[frozenset[str]] = frozenset({"e", "$"})

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.register = ""
        self.register_lines = False
        self._pending = ""
        self._count = ""
        self._operator = ""
        self._anchor: Location = (0, 0)
        self._head: Location = (0, 0)

    def watch_mode(self, mode: Mode) -> None:
        self.post_message(self.ModeChanged(mode))

    def set_vim(self, on: bool) -> None:
        """Turn vim keys on (in normal mode) or off (plain editing)."""
        self._pending = self._count = self._operator = ""
        self.mode = "normal" if on else ""
        if on:
            self._to_normal()

    # -- keys -------------------------------------------------------------------
    async def _on_key(self, event: events.Key) -> None:
        if self.mode in ("", "insert") or self.read_only:
            if self.mode == "insert" and event.key == "escape":
                self._consume(event)
                self.post_message(TextAreaHideCompletionList())
                self.history.checkpoint()
                self.mode = "normal"
                row, col = self.cursor_location
                self._to_normal((row, max(col - 1, 0)))
            return
        key = event.key
        if key == "ctrl+r":
            self._consume(event)
            self._edit_with(self.action_redo)
        elif key in ("escape", "enter", "tab", "backspace", "delete") or event.is_printable:
            self._consume(event)
            name = event.character if event.is_printable and event.character else key
            if self.mode == "visual":
                self._visual_key(name)
            else:
                self._normal_key(name)

    @staticmethod
    def _consume(event: events.Key) -> None:
        event.stop()
        event.prevent_default()

    def _normal_key(self, key: str) -> None:
        if key.isdigit() and (key != "0" or self._count):
            # at most 9999: a count is a loop, and typing 99999999j must not hang the console
            self._count = (self._count + key)[-_COUNT_DIGITS:]
            return
        count, given = int(self._count or "1"), bool(self._count)
        operator = self._operator
        pending, self._pending = self._pending, ""
        if key == "escape":
            self._count = self._operator = ""
            return
        if key == "g" and not pending:
            self._pending = key  # gg
            return
        name = "gg" if pending == "g" and key == "g" else key
        if pending == "g" and key != "g":
            self._count = self._operator = ""
            return
        if operator:
            self._count = self._operator = ""
            if name == operator:  # dd, cc, yy: the count's lines
                self._lines(operator, count)
            elif name in ("w", "b", "e", "h", "l", "0", "$", "j", "k", "G", "gg",
                          "backspace", "enter"):
                self._operate(operator, name, count, given)
            return
        if name in self.OPERATORS:
            self._operator = name  # the count stays for the motion
            return
        self._count = ""
        if name in ("D", "C"):
            self._operate("d" if name == "D" else "c", "$", count, given)
            return
        target = self._counted_motion(name, self.cursor_location, count, given)
        if target is not None:
            self._to_normal(target)
        elif name in ("i", "a", "I", "A", "o", "O"):
            self._insert(name)
        elif name in ("x", "delete"):
            self._delete_char(count)
        elif name in ("p", "P"):
            self._put(after=name == "p", count=count)
        elif name == "u":
            for _ in range(count):
                self._edit_with(self.action_undo)
        elif name == "v":
            self.mode = "visual"
            self._anchor = self._head = self.cursor_location
            self._select_visual()

    def _counted_motion(self, key: str, at: Location, count: int,
                        given: bool) -> Location | None:
        """Where ``key`` moves from ``at``, ``count`` times (``4G``: to line 4)."""
        if key in ("G", "gg") and given:
            return min(count, self.document.line_count) - 1, 0
        if key == "gg":
            return 0, 0
        if key == "$":  # 3$: the end of the line two below
            return self._motion("$", (min(at[0] + count - 1, self.document.line_count - 1), 0))
        target = self._motion(key, at)
        for _ in range(count - 1):
            if target is None:
                break
            moved = self._motion(key, target)
            if moved == target:  # at the document's edge: nothing more to repeat
                break
            target = moved
        return target

    def _operate(self, operator: str, motion: str, count: int, given: bool) -> None:
        """``d``, ``c`` or ``y`` over what ``motion`` (``count`` times) moves across."""
        at = self.cursor_location
        if operator == "c" and motion == "w" and at[1] < len(self.document[at[0]]) and \
                not self.document[at[0]][at[1]].isspace():
            # vim's cw changes to the end of the cursor's word (then of count - 1 more)
            motion = "e"
            text = self.text
            i = self._text.get_index_from_location(at)
            while i + 1 < len(text) and _kind(text[i + 1]) == _kind(text[i]):
                i += 1
            at_end = self._text.get_location_from_index(i)
            target = self._counted_motion("e", at_end, count - 1, given) if count > 1 else at_end
        else:
            target = self._counted_motion(motion, at, count, given)
        if target is None:
            return
        if motion in self.LINEWISE:
            first, last = sorted((at[0], target[0]))
            self._to_normal((first, 0))
            self._lines(operator, last - first + 1)
            return
        start, end = sorted((at, target))
        if motion == "w" and end[0] > start[0]:  # dw on a line's last word stops at its end
            end = (start[0], len(self.document[start[0]]))
        if motion in self.INCLUSIVE:
            end = (end[0], min(end[1] + 1, len(self.document[end[0]])))
        if start == end:
            return
        self.register, self.register_lines = self.get_text_range(start, end), False
        if operator == "y":
            self._to_normal(start)
            return
        self._edit_with(lambda: self.delete(start, end))
        if operator == "c":
            self.history.checkpoint()
            self.selection = Selection.cursor(start)
            self.mode = "insert"
        else:
            self._to_normal(start)

    def _visual_key(self, key: str) -> None:
        pending, self._pending = self._pending, ""
        if pending == "g" and key == "g":
            self._head = (0, 0)
            self._select_visual()
            return
        if key == "g":
            self._pending = key
            return
        target = self._motion(key, self._head)
        if target is not None:
            self._head = target
            self._select_visual()
        elif key in ("y", "d", "x"):
            start, end = sorted(self.selection)
            self.register, self.register_lines = self.selected_text, False
            if key != "y":
                self._edit_with(lambda: self.delete(start, end))
            self.mode = "normal"
            self._to_normal(start)
        elif key in ("escape", "v"):
            self.mode = "normal"
            self._to_normal(self._head)

    # -- motions ---------------------------------------------------------------
    @property
    def _text(self) -> Document:
        """The document, as the type that converts locations to offsets."""
        assert isinstance(self.document, Document)
        return self.document

    def _motion(self, key: str, at: Location) -> Location | None:
        """Where ``key`` moves from ``at``, or None when it is no motion."""
        row, col = at
        last_row = self.document.line_count - 1
        if key in ("h", "backspace"):
            return row, max(col - 1, 0)
        if key == "l":
            return row, col + 1
        if key in ("j", "enter"):
            return min(row + 1, last_row), col
        if key == "k":
            return max(row - 1, 0), col
        if key == "0":
            return row, 0
        if key == "$":
            return row, len(self.document[row])
        if key == "G":
            return last_row, 0
        if key in ("w", "b", "e"):
            text = self.text
            i = self._text.get_index_from_location(at)
            move = {"w": word_start_after, "b": word_start_before, "e": word_end_after}[key]
            return self._text.get_location_from_index(move(text, i))
        return None

    def _clamp(self, at: Location) -> Location:
        """Normal mode's cursor sits on a character: never past a line's last one."""
        row = min(max(at[0], 0), self.document.line_count - 1)
        return row, max(0, min(at[1], len(self.document[row]) - 1))

    def _to_normal(self, at: Location | None = None) -> None:
        self.selection = Selection.cursor(self._clamp(self.cursor_location if at is None
                                                      else at))

    def _select_visual(self) -> None:
        """Select from the anchor to the head, both characters included, as vim shows it."""
        anchor, head = self._clamp(self._anchor), self._clamp(self._head)
        self._head = head
        if head >= anchor:
            self.selection = Selection(anchor, (head[0], head[1] + 1))
        else:
            self.selection = Selection((anchor[0], anchor[1] + 1), head)

    # -- edits ------------------------------------------------------------------
    def _edit_with(self, edit: object) -> None:
        """One normal-mode command: a single undo step; the cursor back on a character."""
        self.history.checkpoint()
        edit()  # type: ignore[operator]
        self.history.checkpoint()
        if self.mode == "normal":
            self._to_normal(self.selection.end)

    def _insert(self, key: str) -> None:
        row, col = self.cursor_location
        line = self.document[row]
        if key == "a":
            at = (row, min(col + 1, len(line)))
        elif key == "I":
            at = (row, len(line) - len(line.lstrip()))
        elif key == "A":
            at = (row, len(line))
        elif key == "o":
            self.history.checkpoint()
            self.insert("\n", (row, len(line)), maintain_selection_offset=False)
            at = (row + 1, 0)
        elif key == "O":
            self.history.checkpoint()
            self.insert("\n", (row, 0), maintain_selection_offset=False)
            at = (row, 0)
        else:
            at = (row, col)
        self.history.checkpoint()
        self.selection = Selection.cursor(at)
        self.mode = "insert"

    def _delete_char(self, count: int = 1) -> None:
        row, col = self.cursor_location
        end = min(col + count, len(self.document[row]))
        if col >= end:
            return
        self.register, self.register_lines = self.document[row][col:end], False
        self._edit_with(lambda: self.delete((row, col), (row, end)))

    def _lines(self, operator: str, count: int) -> None:
        """``dd``, ``cc`` or ``yy`` on ``count`` lines from the cursor's."""
        row = self.cursor_location[0]
        last = min(row + count, self.document.line_count) - 1
        self.register = "\n".join(self.document[r] for r in range(row, last + 1)) + "\n"
        self.register_lines = True
        if operator == "y":
            return
        if operator == "c":  # the lines' text goes, one empty line stays, in insert mode
            start, end = (row, 0), (last, len(self.document[last]))
            self._edit_with(lambda: self.delete(start, end))
            self.history.checkpoint()
            self.selection = Selection.cursor((row, 0))
            self.mode = "insert"
            return
        final = self.document.line_count - 1
        if last < final:
            start, end = (row, 0), (last + 1, 0)
        elif row > 0:
            start, end = (row - 1, len(self.document[row - 1])), (last, len(self.document[last]))
        else:
            start, end = (0, 0), (last, len(self.document[last]))
        self._edit_with(lambda: self.delete(start, end))
        self._to_normal((min(row, self.document.line_count - 1), 0))

    def _put(self, after: bool, count: int = 1) -> None:
        """``p``/``P``: the register after/before the cursor, ``count`` times in one edit."""
        if not self.register:
            return
        row, col = self.cursor_location
        if self.register_lines:
            body = self.register[:-1] if self.register.endswith("\n") else self.register
            body = "\n".join([body] * count)
            if after:
                at, text, target = (row, len(self.document[row])), "\n" + body, (row + 1, 0)
            else:
                at, text, target = (row, 0), body + "\n", (row, 0)
            self._edit_with(lambda: self.insert(text, at))
            self._to_normal(target)
            return
        at = (row, min(col + 1, len(self.document[row]))) if after else (row, col)
        text = self.register * count
        self._edit_with(lambda: self.insert(text, at, maintain_selection_offset=False))
        end = self._text.get_location_from_index(
            self._text.get_index_from_location(at) + len(text) - 1)
        self._to_normal(end)
