"""Query corpora: the ``.sql`` files ``arrowgate shadow`` and ``arrowgate bench`` run.

A path is a ``.sql`` file or a folder searched recursively for them. A file
holds one or more statements separated by ``;`` (split on the SQL tokens, so a
``;`` inside a string or comment does not cut). A ``-- name: NAME`` comment
names the statement after it; otherwise a statement is named after its file
(``report``), with ``:N`` appended when the file holds several (``report:2``).
Comments stay in the statement text, so per-query settings such as
``-- arrowgate: rel_tol=1e-6`` or ``-- arrowgate: shadow=off`` travel with it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import ConfigError, not_utf8

_NAME = re.compile(r"^\s*--\s*name:\s*(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    """One statement of a corpus.

    A replayed capture (:mod:`gateway.capture.captured`) fills the rest: the parameter
    values it ran with, the ``SET`` statements its session ran before it, how
    many captured statements it stands for (``--dedupe``) and the latency
    each of them had.
    """

    name: str
    sql: str
    file: str | None = None
    parameters: tuple[object, ...] | None = None
    settings: tuple[str, ...] = ()
    weight: int = 1
    captured_ms: tuple[float, ...] = ()
    #: a captured statement's kind (:func:`gateway.sql.kinds.capture_kind`); None in a corpus
    kind: str | None = None


def split_statements(text: str) -> list[str]:
    """The statements of a SQL text, cut at the ``;`` tokens, comments kept."""
    import sqlglot  # noqa: F401 - first: sqlglot.tokens alone breaks beside a thread importing sqlglot
    from sqlglot.tokens import Tokenizer, TokenType

    try:
        tokens = Tokenizer().tokenize(text)
    except Exception:
        # Something sqlglot cannot tokenize: fall back to plain splitting.
        return [s for s in (p.strip() for p in text.split(";")) if _has_code(s)]
    statements, start = [], 0
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            statements.append(text[start:tok.start])
            start = tok.end + 1
    statements.append(text[start:])
    return [s.strip() for s in statements if _has_code(s)]


def _has_code(sql: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in sql.splitlines())


#: The path that names standard input.
STDIN = Path("-")


def read_file(path: Path) -> list[Query]:
    """The named statements of one ``.sql`` file.

    Raises:
        ConfigError: the file cannot be read, or a name is used twice.
    """
    try:
        data = sys.stdin.buffer.read() if path == STDIN else path.read_bytes()
        text = data.decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the query file: {exc.strerror}", path=str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(not_utf8(data, exc), path=str(path)) from None
    statements = split_statements(text)
    queries = []
    for i, sql in enumerate(statements, 1):
        names = list(_NAME.finditer(sql))
        if names:
            name = names[-1].group(1)
            sql = sql[names[-1].start():].strip()  # the file's header comment stays behind
        else:
            stem = "stdin" if path == STDIN else path.stem
            name = stem if len(statements) == 1 else f"{stem}:{i}"
        queries.append(Query(name, sql, str(path)))
    return queries


def read_queries(paths: Sequence[str | os.PathLike[str]]) -> list[Query]:
    """Every statement under ``paths`` (files, or folders searched for ``*.sql``), in order.

    ``-`` reads the statements from standard input.

    Raises:
        ConfigError: a path does not exist, holds no ``.sql`` file, no
            statement is found, or two statements share a name.
    """
    queries: list[Query] = []
    for raw in paths:
        path = Path(raw)
        if path == STDIN:
            files = [path]
        elif path.is_dir():
            files = sorted(path.rglob("*.sql"))
            if not files:
                raise ConfigError("no .sql file in this folder", path=str(path))
        elif path.is_file():
            files = [path]
        else:
            raise ConfigError("no such file or folder", path=str(path),
                              hint="give .sql files or folders holding them")
        for f in files:
            queries.extend(read_file(f))
    if not queries:
        raise ConfigError("no SQL statement in " + ", ".join(str(p) for p in paths),
                          hint="statements end with ';' and are not all comments")
    seen: dict[str, Query] = {}
    for q in queries:
        if q.name in seen:
            raise ConfigError(f"query name {q.name!r} is used twice (also in {seen[q.name].file})",
                              path=q.file, hint="give each statement its own -- name: NAME")
        seen[q.name] = q
    return queries
