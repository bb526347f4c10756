"""Every engine's catalogs, schemas, tables and columns, loaded one level at a time.

Expanding a node asks the core for its children in a worker thread and adds them in
chunks, so a schema with 10,000 tables never stops the screen. Configured sources
are marked; ``i`` (or ctrl+enter) puts the name under the cursor into the editor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.binding import Binding, BindingType
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from gateway.errors import GatewayError
from gateway.tui.messages import NameChosen
from gateway.tui.visible import visible

if TYPE_CHECKING:
    from gateway.tui.console import ConsoleCore

#: Nodes added per screen update while a level loads.
CHUNK = 500
SOURCE_MARK = "◆"
_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")


def quote(name: str) -> str:
    """A name as SQL text: bare when it is a plain lower-case identifier, else double-quoted."""
    return name if _PLAIN.match(name) else '"' + name.replace('"', '""') + '"'


@dataclass
class Entry:
    """What a node stands for: its level and the path down to it."""

    level: str  # engine, catalog, schema, table, column
    engine: str
    catalog: str = ""
    schema: str = ""
    table: str = ""
    name: str = ""
    loaded: bool = False

    def sql_name(self) -> str:
        if self.level == "table":
            return ".".join(quote(p) for p in (self.schema, self.table) if p)
        return quote(self.name)


class CatalogTree(Tree[Entry]):
    """The data catalog, in the sidebar."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("i,ctrl+enter", "insert_name", "Insert name")]

    def __init__(self, core: ConsoleCore, *, id: str | None = None) -> None:
        super().__init__("engines", id=id)
        self.core = core
        self.show_root = False
        self.names: set[str] = set()
        #: the table names among them
        self.tables: set[str] = set()
        self.sources = set(core.sources)

    def on_mount(self) -> None:
        for engine in self.core.engines:
            self.root.add(Text(engine, style="bold"), Entry("engine", engine))
            self.names.add(engine)
        self.root.expand()

    @on(Tree.NodeExpanded)
    def _expanded(self, event: Tree.NodeExpanded[Entry]) -> None:
        entry = event.node.data
        if entry is None or entry.loaded or entry.level == "column":
            return
        entry.loaded = True
        event.node.add_leaf(Text("loading…", style="dim italic"))
        self._load(event.node, entry)

    @work(thread=True, group="catalog")
    def _load(self, node: TreeNode[Entry], entry: Entry) -> None:
        try:
            children = self._children(entry)
        except GatewayError as exc:
            self.app.call_from_thread(self._fill, node, [], str(exc))
            return
        except Exception as exc:  # a broken catalog must not take the console down
            self.app.call_from_thread(self._fill, node, [], f"{type(exc).__name__}: {exc}")
            return
        self.app.call_from_thread(self._fill, node, children[:CHUNK], None, True)
        for start in range(CHUNK, len(children), CHUNK):
            self.app.call_from_thread(self._fill, node, children[start:start + CHUNK], None)

    def _children(self, entry: Entry) -> list[tuple[Text, Entry, bool]]:
        c = self.core
        out: list[tuple[Text, Entry, bool]] = []
        if entry.level == "engine":
            catalogs = c.catalogs(entry.engine)
            if len(catalogs) == 1:  # one catalog: its schemas hang from the engine
                entry = Entry("catalog", entry.engine, catalogs[0])
            else:
                return [(visible(name), Entry("catalog", entry.engine, name), True)
                        for name in catalogs]
        if entry.level == "catalog":
            return [(visible(name), Entry("schema", entry.engine, entry.catalog, name), True)
                    for name in c.schemas(entry.engine, entry.catalog)]
        if entry.level == "schema":
            for name, kind in c.tables(entry.engine, entry.catalog, entry.schema):
                label = visible(name)
                if kind.upper() == "VIEW":
                    label.append(" view", style="dim")
                if name in self.sources:
                    label = Text(f"{SOURCE_MARK} ", style="yellow") + label
                out.append((label, Entry("table", entry.engine, entry.catalog, entry.schema,
                                         name, name), True))
            return out
        if entry.level == "table":
            for name, type_name in c.columns(entry.engine, entry.catalog, entry.schema,
                                             entry.table):
                kind_text = visible(f"  {type_name}")
                kind_text.stylize("dim")
                label = visible(name) + kind_text
                out.append((label, Entry("column", entry.engine, entry.catalog, entry.schema,
                                         entry.table, name), False))
        return out

    def _fill(self, node: TreeNode[Entry], children: list[tuple[Text, Entry, bool]],
              error: str | None, first: bool = False) -> None:
        if first or error is not None:
            node.remove_children()
        if error is not None:
            label = visible(error)
            label.stylize("red")
            node.add_leaf(label)
            assert node.data is not None
            node.data.loaded = False  # expanding again retries
            return
        for label, entry, expandable in children:
            self.names.add(entry.name)
            if entry.level == "table":
                self.tables.add(entry.name)
            if expandable:
                node.add(label, entry)
            else:
                node.add_leaf(label, entry)

    def action_insert_name(self) -> None:
        node = self.cursor_node
        if node is not None and node.data is not None and node.data.level in ("table",
                                                                               "column"):
            self.post_message(NameChosen(node.data.sql_name()))

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected[Entry]) -> None:
        if event.node.data is not None and event.node.data.level == "column":
            self.post_message(NameChosen(event.node.data.sql_name()))
