"""Every key the console binds, gathered from the bindings themselves.

The help screen (f1) and the keys table of docs/tui.md (:mod:`gateway.tui.keys_table`)
are both made from :func:`binding_rows`, so neither can miss a binding: our own
widgets' bindings that have a description, and every binding a widget we did not
write shows in the footer (the editor's ctrl+s, f3...).
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.keys import key_to_character

#: keys that are no binding of ours (the editor's own, typing), for the help screen
EDITOR_EXTRAS = [
    ("editor", "typing a word",
     "completion: keywords, functions, engines, tables, columns (tab or enter takes one)"),
    ("editor", "ctrl+a", "select all"),
    ("editor", "ctrl+z / ctrl+y", "undo / redo"),
    ("editor", "ctrl+_", "comment or uncomment the line"),
]


def _places(app: type[Any]) -> list[tuple[str, type[Any]]]:
    from gateway.tui.components.catalog_tree import CatalogTree
    from gateway.tui.components.editor import SqlEditor
    from gateway.tui.components.query_tab import QueryTab
    from gateway.tui.components.results_grid import ResultsTable
    from gateway.tui.components.verdict_panel import VerdictPanel

    return [("app", app), ("tab", QueryTab), ("editor", SqlEditor),
            ("grid", ResultsTable), ("catalog", CatalogTree), ("verdict", VerdictPanel)]


def _bindings(cls: type[Any]) -> list[tuple[str, Binding, bool]]:
    """``cls``'s bindings, its bases' included (a subclass's key wins): the keys still
    bound to each, the binding, and whether the class declaring it is one of ours."""
    by_key: dict[str, tuple[Binding, bool]] = {}
    for base in reversed(cls.__mro__):
        ours = base.__module__.startswith("gateway.")
        for item in base.__dict__.get("BINDINGS", []):
            binding = item if isinstance(item, Binding) else Binding(*item)
            for key in binding.key.split(","):
                by_key[key.strip()] = (binding, ours)
    out: dict[int, tuple[list[str], Binding, bool]] = {}
    for key, (binding, ours) in by_key.items():
        out.setdefault(id(binding), ([], binding, ours))[0].append(key)
    return [(" / ".join(keys), binding, ours) for keys, binding, ours in out.values()]


def binding_rows(app: type[Any]) -> list[tuple[str, str, str]]:
    """``(where, keys, what it does)`` for every binding of the console ``app`` (the
    :class:`~gateway.tui.app.ArrowgateApp` class): ours with a description, and the
    footer's (``show``) of the widgets we did not write."""
    rows = []
    for where, cls in _places(app):
        for keys, binding, ours in _bindings(cls):
            if not binding.description or not (ours or binding.show):
                continue
            does = binding.description
            if binding.tooltip:
                does += f": {binding.tooltip}"
            rows.append((where, _shown_keys(keys), does))
        if where == "app":
            rows.append(("app", cls.COMMAND_PALETTE_BINDING, "Command palette: every command "
                         "by name (the footer's palette)"))
    return rows


def _shown_keys(keys: str) -> str:
    """``equals_sign`` as ``=``, ``left_square_bracket`` as ``[`` (``escape`` stays a name)."""
    def one(key: str) -> str:
        char = key_to_character(key) if "+" not in key else None
        return char if char and char.isprintable() and not char.isspace() else key

    return " / ".join(one(k) for k in keys.split(" / "))
