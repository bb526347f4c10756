"""Text from outside (values, names, messages) made safe to put on the screen.

A value can hold control characters: C0 and C1 codes, DEL, the ESC that opens a
terminal sequence (``ESC ] 2 ; title BEL`` renames the window, ``ESC [ 2 J`` clears
it), and the bidi controls that reorder what follows them. Shown raw they drive the
terminal; here each becomes a visible escape (``\\x1b``, ``\\u202e``) in a dimmed
style. Only what is shown is changed: the clipboard and exports keep the true text.
"""

from __future__ import annotations

import re

from rich.text import Text

#: the style of an escape standing for a control character
ESCAPE_STYLE = "dim"

#: C0 controls, DEL, C1 controls, the bidi marks, embeddings, overrides and isolates,
#: and the Unicode line and paragraph separators
CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                      "\u202a-\u202e\u2066-\u2069]")


def escape_of(char: str) -> str:
    """``\\x1b`` for ESC, ``\\u202e`` for RIGHT-TO-LEFT OVERRIDE."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def has_controls(text: str) -> bool:
    return CONTROLS.search(text) is not None


def visible(text: str, keep: str = "") -> Text:
    """``text`` as Rich text (never markup) with every control character but those in
    ``keep`` (say ``"\\n"`` where lines may break) shown as a dimmed escape."""
    out = Text()
    start = 0
    for match in CONTROLS.finditer(text):
        char = match.group()
        if char in keep:
            continue
        out.append(text[start:match.start()])
        out.append(escape_of(char), style=ESCAPE_STYLE)
        start = match.end()
    out.append(text[start:])
    return out


def visible_plain(text: str, keep: str = "") -> str:
    """:func:`visible` as a plain string, for places that take no styles (notices, titles)."""
    return CONTROLS.sub(lambda m: m.group() if m.group() in keep else escape_of(m.group()),
                        text)
