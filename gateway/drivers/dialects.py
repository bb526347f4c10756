"""SQL text for an engine's own dialect: transpiling through sqlglot, and placeholder styles.

A query may mark its parameters ``?`` (positional), ``$1`` (numbered),
``@p1`` (numbered, T-SQL style) or by name (``:name``, ``@name``, with the
parameters given in order of each name's first appearance). A driver takes one
style: ``qmark`` (ODBC, SQLite, Flight SQL) or ``numeric`` (PostgreSQL's
``$1``). :class:`SqlRewriter` turns the first into the second, reordering and
repeating the values so each placeholder gets its own, and, when the engine is
told ``transpile_from = "duckdb"``, rewrites the statement for the engine's
dialect with sqlglot first. Placeholders are found by sqlglot's tokenizer, so
a ``?`` inside a string or a comment is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gateway.errors import QueryError, Unsupported

Style = Literal["qmark", "numeric"]
_MARKER = "arrowgate_param_"
_MARKER_RE = re.compile(rf"\b{_MARKER}(\d+)\b")


@dataclass(frozen=True)
class _Placeholder:
    start: int
    end: int  # exclusive
    index: int  # the parameter it takes, 0-based


def find_placeholders(sql: str, dialect: str | None) -> tuple[list[_Placeholder], list[str]]:
    """The placeholders of ``sql`` in text order, and the names of named ones in first-seen order.

    Raises:
        QueryError: positional ``?`` mixed with numbered or named placeholders.
    """
    import sqlglot
    from sqlglot.tokens import TokenType

    try:
        tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(sql)
    except Exception as exc:  # sqlglot's TokenError: an unclosed string or comment
        raise QueryError(f"cannot read the statement: {exc}", kind="syntax") from None
    found: list[_Placeholder] = []
    names: list[str] = []
    positional = numbered = 0
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        adjacent = nxt is not None and nxt.start == tok.end + 1
        if tok.token_type == TokenType.PLACEHOLDER and tok.text == "?":
            if adjacent and nxt is not None and nxt.token_type == TokenType.NUMBER:
                found.append(_Placeholder(tok.start, nxt.end + 1, int(nxt.text) - 1))  # ?1
                numbered += 1
            else:
                found.append(_Placeholder(tok.start, tok.end + 1, positional))
                positional += 1
        elif tok.token_type in (TokenType.PARAMETER, TokenType.COLON) and adjacent and nxt and \
                not (tok.text == ":" and i > 0 and _slice_colon(tokens[i - 1], tok)):
            if nxt.token_type == TokenType.NUMBER and tok.text in ("$", ":"):
                found.append(_Placeholder(tok.start, nxt.end + 1, int(nxt.text) - 1))
                numbered += 1
            elif nxt.token_type == TokenType.VAR and tok.text == "@" and re.fullmatch(
                    r"[pP]\d+", nxt.text):
                found.append(_Placeholder(tok.start, nxt.end + 1, int(nxt.text[1:]) - 1))
                numbered += 1
            elif nxt.token_type in (TokenType.VAR, TokenType.NAME) and tok.text in ("@", ":", "$"):
                if nxt.text not in names:
                    names.append(nxt.text)
                found.append(_Placeholder(tok.start, nxt.end + 1, names.index(nxt.text)))
        elif tok.token_type == TokenType.VAR and tok.text[1:].isdigit() and \
                tok.text[0] in "$:":  # SQLite's tokenizer reads $1 as one word
            found.append(_Placeholder(tok.start, tok.end + 1, int(tok.text[1:]) - 1))
            numbered += 1
        elif tok.token_type == TokenType.VAR and tok.text.startswith("$") and \
                tok.text[1:].isidentifier():  # and $name
            name = tok.text[1:]
            if name not in names:
                names.append(name)
            found.append(_Placeholder(tok.start, tok.end + 1, names.index(name)))
    kinds = sum(1 for n in (positional, numbered, len(names)) if n)
    if kinds > 1:
        raise QueryError("the statement mixes placeholder styles (?, $1/@p1 and names)",
                         hint="use one style in a statement")
    return found, names


class SqlRewriter:
    """Rewrites statements (and their parameters) for one engine.

    Args:
        dialect: the engine's sqlglot dialect (None when unknown: no transpiling).
        style: the placeholder style the driver takes.
        transpile_from: the dialect queries are written in, when not the engine's.
        engine: the engine's name, for errors.
    """

    def __init__(self, dialect: str | None, style: Style, transpile_from: str | None,
                 engine: str):
        self.dialect = dialect
        self.style = style
        self.transpile_from = transpile_from if transpile_from != dialect else None
        self.engine = engine

    def rewrite(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] | None
                ) -> tuple[str, list[Any] | None]:
        """The statement in the engine's dialect and style, and the values in placeholder order.

        Raises:
            Unsupported: sqlglot cannot transpile the statement faithfully.
            QueryError: the statement cannot be parsed, or the values do not fit it.
        """
        source = self.transpile_from or self.dialect
        found, names = find_placeholders(sql, source)
        values = self._values(parameters, found, names)
        if not found:
            return (self._transpile(sql) if self.transpile_from else sql), values
        if self.transpile_from:
            marked = _splice(sql, found, lambda p: f"{_MARKER}{p.index + 1}")
            text = self._transpile(marked)
            slots = [int(m.group(1)) - 1 for m in _MARKER_RE.finditer(text)]
            if self.style == "numeric":
                return _MARKER_RE.sub(lambda m: f"${m.group(1)}", text), values
            return _MARKER_RE.sub("?", text), [values[i] for i in slots] if values else values
        if self.style == "numeric":
            return _splice(sql, found, lambda p: f"${p.index + 1}"), values
        if all(p.index == i for i, p in enumerate(found)) and sql[found[0].start] == "?" \
                and not names and all(p.end - p.start == 1 for p in found):
            return sql, values
        reordered = [values[p.index] for p in found] if values is not None else None
        return _splice(sql, found, lambda p: "?"), reordered

    def placeholder_count(self, sql: str) -> int:
        """How many values the statement takes."""
        found, names = find_placeholders(sql, self.transpile_from or self.dialect)
        return len(names) if names else max((p.index for p in found), default=-1) + 1

    def statement(self, sql: str) -> str:
        """The statement as :meth:`rewrite` writes it, before any values are known (to prepare)."""
        found, names = find_placeholders(sql, self.transpile_from or self.dialect)
        blanks: Sequence[Any] | Mapping[str, Any] = (
            dict.fromkeys(names) if names else [None] * (max((p.index for p in found),
                                                             default=-1) + 1))
        return self.rewrite(sql, blanks if found else None)[0]

    def _values(self, parameters: Sequence[Any] | Mapping[str, Any] | None,
                found: list[_Placeholder], names: list[str]) -> list[Any] | None:
        if parameters is None:
            if found:
                raise QueryError(f"the statement has {len(found)} placeholder(s) and no values",
                                 engine=self.engine, hint="pass parameters=[...]")
            return None
        if isinstance(parameters, Mapping):
            missing = [n for n in names if n not in parameters]
            if missing or not names:
                raise QueryError(f"no value for the placeholder(s) {', '.join(missing)}"
                                 if missing else "named values given, and the statement has "
                                 "no named placeholders", engine=self.engine)
            return [parameters[n] for n in names]
        values = list(parameters)
        needed = max((p.index for p in found), default=-1) + 1
        if needed != len(values):
            raise QueryError(f"the statement takes {needed} parameter(s); {len(values)} given",
                             engine=self.engine)
        return values

    def _transpile(self, sql: str) -> str:
        import sqlglot
        from sqlglot.errors import ErrorLevel, ParseError, UnsupportedError

        try:
            out = sqlglot.transpile(sql, read=self.transpile_from, write=self.dialect,
                                    unsupported_level=ErrorLevel.RAISE)
        except UnsupportedError as exc:
            raise Unsupported(f"sqlglot cannot write this {self.transpile_from} statement "
                              f"faithfully in {self.dialect}: {exc}", engine=self.engine,
                              hint=f"write it in {self.dialect}'s dialect, or run it on an "
                                   f"engine that speaks {self.transpile_from}") from None
        except ParseError as exc:
            raise QueryError(f"cannot parse the statement as {self.transpile_from} SQL: "
                             f"{str(exc).splitlines()[0]}", engine=self.engine,
                             kind="syntax") from None
        if len(out) != 1:
            raise QueryError(f"one statement at a time ({len(out)} given)", engine=self.engine)
        return out[0]


def _slice_colon(before: Any, colon: Any) -> bool:
    """The ``:`` is an array slice's (``a[1:2]``), not a placeholder's."""
    import sqlglot  # noqa: F401 - first: sqlglot.tokens alone breaks beside a thread importing sqlglot
    from sqlglot.tokens import TokenType

    return bool(before.end + 1 == colon.start or before.token_type in (
        TokenType.NUMBER, TokenType.L_BRACKET, TokenType.VAR))


def _splice(sql: str, found: list[_Placeholder], text: Any) -> str:
    parts, pos = [], 0
    for p in found:
        parts += [sql[pos:p.start], text(p)]
        pos = p.end
    parts.append(sql[pos:])
    return "".join(parts)
