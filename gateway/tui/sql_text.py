"""The SQL text in the editor: statements by position, formatting, completion words."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class BufferStatement:
    """One statement of a buffer: its text and where it starts and ends (offsets)."""

    text: str
    start: int
    end: int


def statements(text: str) -> list[BufferStatement]:
    """The buffer's statements, split on the semicolons sqlglot's tokenizer sees.

    Semicolons inside strings and comments do not split; text that does not
    tokenize (an unclosed quote) is one statement.
    """
    import sqlglot  # noqa: F401 - first: sqlglot.tokens alone breaks beside a thread importing sqlglot
    from sqlglot.tokens import Tokenizer, TokenType

    try:
        tokens = Tokenizer().tokenize(text)
    except Exception:
        return [BufferStatement(text.strip(), 0, len(text))] if text.strip() else []
    cuts = [t.start for t in tokens if t.token_type == TokenType.SEMICOLON]
    out = []
    start = 0
    for cut in [*cuts, len(text)]:
        piece = text[start:cut]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            out.append(BufferStatement(piece.strip(), start + lead, start + len(piece.rstrip())))
        start = cut + 1
    return out


def statement_at(text: str, offset: int) -> str:
    """The statement the cursor (a character offset) is in or just after; "" when none."""
    found = statements(text)
    if not found:
        return ""
    before = [s for s in found if s.start <= offset]
    return (before[-1] if before else found[0]).text


def offset_of(text: str, row: int, column: int) -> int:
    """The character offset of a (row, column) location in ``text``."""
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[:row]) + column


def format_sql(sql: str, dialect: str) -> str:
    """``sql`` pretty-printed by sqlglot; unchanged when it does not parse.

    Comments are kept; statements stay separated by semicolons.
    """
    import sqlglot

    try:
        parsed = sqlglot.parse(sql, read=dialect)
    except Exception:
        return sql
    parts = [p.sql(dialect=dialect, pretty=True) for p in parsed if p is not None]
    return ";\n\n".join(parts) + (";" if sql.rstrip().endswith(";") else "") if parts else sql


@functools.cache
def keywords() -> tuple[str, ...]:
    """SQL keywords as sqlglot's tokenizer knows them (words only)."""
    import sqlglot  # noqa: F401 - first: sqlglot.tokens alone breaks beside a thread importing sqlglot
    from sqlglot.tokens import Tokenizer

    return tuple(sorted({k for k in Tokenizer.KEYWORDS if k.replace(" ", "").isalpha()}))


@functools.cache
def functions() -> tuple[str, ...]:
    """Function names sqlglot can parse."""
    from sqlglot import exp

    return tuple(sorted({name.lower() for name in exp.FUNCTION_BY_NAME
                         if name.replace("_", "").isalnum()}))


#: keywords after which a table's name comes; any other keyword ends that place
_TABLE_PLACES = {"from", "join", "into", "update", "table"}
_OTHER_PLACES = {"select", "where", "on", "by", "having", "set", "and", "or", "when", "then",
                 "else", "values", "as", "using", "returning", "limit", "case"}
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def wants_table(before: str) -> bool:
    """Whether the word being typed after ``before`` (the text up to it) is where a
    table's name goes: the last keyword before it is FROM, JOIN, INTO, UPDATE or TABLE."""
    for word in reversed(_WORDS.findall(before)):
        low = word.lower()
        if low in _TABLE_PLACES:
            return True
        if low in _OTHER_PLACES:
            return False
    return False


def complete(prefix: str, names: list[str], tables: frozenset[str] = frozenset(),
             table_first: bool = False) -> list[tuple[tuple[str, str], str]]:
    """Completions for ``prefix``: catalog and engine names first, then functions, keywords;
    with ``table_first`` (after FROM, JOIN...) the names in ``tables`` before other names.

    Each is ``((label, kind), text to insert)``, as textual-textarea's completer expects.
    """
    low = prefix.lower()
    if not low:
        return []
    out: list[tuple[tuple[str, str], str]] = []
    seen: set[str] = set()
    if table_first:
        names = [n for n in names if n in tables] + [n for n in names if n not in tables]
    for kind, words in (("name", names), ("fn", functions()), ("kw", keywords())):
        for word in words:
            if word.lower().startswith(low) and word.lower() not in seen:
                seen.add(word.lower())
                out.append(((word, kind), word))
    return out[:50]
