"""Which delimiter, quote, escape and comment character a CSV file uses: DuckDB's dialect detection.

A port of DuckDB's ``DetectDialect`` (sniffer/dialect_detection.cpp) with its
default options (strict mode, no null padding, errors not ignored). Every
candidate dialect (comment x quote/escape x delimiter, in DuckDB's order) runs
DuckDB's state machine (the compiled ``_dialect.count_rows``) over the first
2,048 rows of the sample; a candidate is kept when every row after its widest
first row has that width (earlier rows are a preamble, skipped), and the
widest, most consistent, quoted candidates win as in DuckDB. The survivors are
checked on the rest of the sample (up to 20,480 rows). So a file whose rows are
ragged under every multi-column dialect is read, as DuckDB reads it, as one
column per line.
"""

from __future__ import annotations

import os
import threading
from typing import Any, AnyStr

from gateway.records import Record
from gateway_csv import _dialect

DELIMITERS = (",", "|", ";", "\t")
QUOTE_ESCAPES = (("", ""), ('"', ""), ('"', '"'), ('"', "'"), ('"', "\\"),
                 ("'", ""), ("'", "'"), ("'", '"'), ("'", "\\"))
COMMENTS = ("", "#")
CHUNK_ROWS = 2048
SAMPLE_CHUNKS = 10

# count_rows' row tuples
_FIELDS, _LAST_EMPTY, _COMMENT, _MID_COMMENT, _EMPTY_LINES = range(5)


class Dialect(Record):
    """A dialect DuckDB would pick, and what it found under it.

    Attributes:
        delimiter, quote, escape, comment: one character each, "" for none.
        ncols: the number of columns.
        skip: rows (not counting blank and comment lines) before the header.
        quoted: some field of the sample is quoted.
        escaped: some quote of the sample is escaped.
        trailing: every row after the header ends in a delimiter, an empty field
            that is not a column (DuckDB drops it).
        rows: the sample's rows as the candidate reads them (left out of its ``repr``).
        duck_skip: DuckDB's skip_rows, which its later candidates are compared with.
    """

    __slots__ = ("delimiter", "quote", "escape", "comment", "ncols", "skip", "quoted", "escaped",
                 "rows", "finished", "duck_skip", "trailing")
    _unshown = ("rows",)

    def __init__(self, delimiter: str, quote: str, escape: str, comment: str, ncols: int = 0,
                 skip: int = 0, quoted: bool = False, escaped: bool = False,
                 rows: list[tuple[Any, ...]] | None = None, finished: bool = False,
                 duck_skip: int = 0, trailing: bool = False) -> None:
        self.delimiter, self.quote, self.escape, self.comment = delimiter, quote, escape, comment
        self.ncols, self.skip, self.quoted, self.escaped = ncols, skip, quoted, escaped
        self.rows: list[tuple[Any, ...]] = [] if rows is None else rows
        self.finished, self.duck_skip, self.trailing = finished, duck_skip, trailing


def detect(sample: bytes, options: dict[str, Any], complete: bool) -> list[Dialect]:
    """The dialects DuckDB would still consider after sniffing ``sample``, best first
    (DuckDB then picks among them by their column types). Empty when none fits.

    Args:
        sample: the head of the file.
        options: the source's options: a given ``delimiter``, ``quote``, ``escape``
            or ``comment`` is the only candidate for it.
        complete: ``sample`` is the whole file.
    """
    newline = newline_kind(sample)
    chosen = _Choice(comment_given=options.get("comment") is not None)
    # A character absent from the sample changes nothing: a candidate using it reads
    # exactly as one without it that DuckDB tries first (no quote, no escape, no
    # comment, the first absent delimiter), which then wins every tie. Skipping
    # them keeps a plain file to a few candidates.
    absent = {c for c in {'"', "'", "\\", "#", *DELIMITERS} if c.encode() not in sample}
    first_absent = next((d for d in DELIMITERS if d in absent), None)
    for comment in _given(options, "comment", COMMENTS):
        for quote, escape in _quote_escapes(options):
            for delimiter in _given(options, "delimiter", DELIMITERS):
                if _same_as_earlier(options, absent, first_absent, delimiter, quote, escape,
                                    comment):
                    continue
                if _beaten(chosen, absent, delimiter, quote):
                    continue
                cand = Dialect(delimiter, quote, escape, comment)
                error, cand.quoted, cand.escaped, cand.finished, cand.rows = _dialect.count_rows(
                    sample, _byte(delimiter), _byte(quote), _byte(escape), _byte(comment), newline,
                    CHUNK_ROWS, complete)
                if not error:
                    chosen.analyze(cand)
    return chosen.refine(sample, newline, complete)


def _counted(cands: list[Dialect], sample: bytes, newline: int, complete: bool,
             ncols: int | None = None) -> dict[int, tuple[Any, ...]]:
    """count_rows over the whole sample for each candidate (by ``id``), the others in
    threads of their own: the count runs without the GIL, and two candidates over an
    8 MiB head took 50-60 ms one after the other. ``ncols``: in place of the rows,
    whether every row past the first chunk and before the last has that many fields
    or is a comment (C's answer: no tuple a row, 20,480 of them)."""
    check = () if ncols is None else ((CHUNK_ROWS, CHUNK_ROWS * (SAMPLE_CHUNKS - 1), ncols),)

    def count(cand: Dialect) -> tuple[Any, ...]:
        return _dialect.count_rows(
            sample, _byte(cand.delimiter), _byte(cand.quote), _byte(cand.escape),
            _byte(cand.comment), newline, CHUNK_ROWS * SAMPLE_CHUNKS, complete, *check)

    counts: dict[int, tuple[Any, ...]] = {}
    failed: list[BaseException] = []
    pending = iter(cands)
    taking = threading.Lock()

    def work() -> None:
        # one candidate after another, as many counts at once as there are processors
        # (a file many dialects read alike leaves dozens of candidates: a thread each
        # would hold all their rows at once for no more speed)
        while not failed:
            with taking:
                cand = next(pending, None)
            if cand is None:
                return
            try:
                counts[id(cand)] = count(cand)
            except BaseException as exc:  # out of memory: raised in the sniffing thread
                failed.append(exc)

    helpers = [threading.Thread(target=work, name="csv-sniff")
               for _ in range(min(len(cands), os.cpu_count() or 1) - 1)]
    for thread in helpers:
        thread.start()
    try:
        work()
    finally:
        for thread in helpers:
            thread.join()
    if failed:
        raise failed[0]
    return counts


def _twins(cands: list[Dialect]) -> dict[int, Dialect]:
    """Each candidate without an escape (by ``id``) -> the candidate of the same
    delimiter, quote and comment whose escape is its quote, when there is one.

    Their state machines differ in one place only: a quote right after a closing one
    (blanks between) starts a quoted field again under the second, where the first
    fails. The second's count says whether that happened (its ``escaped``: it is the
    only way there); where it did not, both read every byte alike, and one count
    stands for both. TPC-H's lineitem, a quoted comment on every row, left both, and
    two counts of its 20,480-row sample (10 ms each)."""
    doubled = {(c.delimiter, c.quote, c.comment): c for c in cands
               if c.quote and c.escape == c.quote}
    found = {}
    for cand in cands:
        twin = doubled.get((cand.delimiter, cand.quote, cand.comment)) \
            if cand.quote and not cand.escape else None
        if twin is not None:
            found[id(cand)] = twin
    return found


def cut_comment(line: AnyStr, mark: AnyStr, quote: AnyStr, in_quote: bool) \
        -> tuple[AnyStr, bool]:
    """``line`` (with its line end) cut at its comment ``mark``, and whether a quoted
    field is still open after it. As in DuckDB's state machine, the mark starts a
    comment outside quoted fields only; a line blank before it stays a bare mark
    (a comment line)."""
    if mark not in line:
        if quote and line.count(quote) % 2:
            in_quote = not in_quote
        return line, in_quote
    body = line.rstrip("\r\n" if isinstance(line, str) else b"\r\n")  # type: ignore[arg-type]
    end = line[len(body):]
    for i in range(len(body)):
        char = body[i:i + 1]
        if quote and char == quote:
            in_quote = not in_quote
        elif char == mark and not in_quote:
            return (mark if not body[:i].strip() else body[:i]) + end, in_quote
    return line, in_quote


def _same_as_earlier(options: dict[str, Any], absent: set[str], first_absent: str | None,
                     delimiter: str, quote: str, escape: str, comment: str) -> bool:
    if any(options.get(k) is not None for k in ("delimiter", "quote", "escape", "comment")):
        return False  # given characters are the only candidates: try them as DuckDB does
    if comment in absent or quote in absent:
        return True
    if escape in absent and escape != quote and escape:
        return True
    return delimiter in absent and delimiter != first_absent


def _beaten(chosen: _Choice, absent: set[str], delimiter: str, quote: str) -> bool:
    """Whether a candidate would be turned down whatever its state machine finds: with
    a delimiter absent from the sample (one field a row) and no quote, once a candidate
    with two columns or more was taken (see :meth:`_Choice.analyze`). A plain comma
    file then runs one state machine over its first 2,048 rows, not two."""
    return not quote and delimiter in absent and chosen.max_columns_found >= 2


def unpad_quotes(line: bytes, delimiter: bytes, quote: bytes, escape: bytes,
                 in_quote: bool) -> tuple[bytes, bool]:
    """``line`` without the blank between a field's start and its opening quote and
    the blanks between its closing quote and the field's end, which DuckDB's state
    machine skips (EMPTY_SPACE, one blank; blanks after UNQUOTED); blanks anywhere
    else stay (two blanks before a quote make the field unquoted text, as in DuckDB).
    Returns the line and whether a quoted field is still open after it."""
    body = line.rstrip(b"\r\n")
    out = bytearray()
    i, n = 0, len(body)
    at_start = not in_quote
    while i < n:
        if in_quote:
            char = body[i:i + 1]
            if escape and escape != quote and char == escape and i + 1 < n:
                out += body[i:i + 2]
                i += 2
                continue
            out += char
            i += 1
            if char == quote:
                if body[i:i + 1] == quote:  # a doubled quote
                    out += quote
                    i += 1
                    continue
                in_quote = False
                j = i
                while j < n and body[j:j + 1] == b" ":
                    j += 1
                if j == n or body[j:j + 1] == delimiter:
                    i = j  # blanks after the closing quote
            continue
        if at_start:
            j = i + 1 if body[i:i + 1] == b" " else i
            if j < n and body[j:j + 1] == quote:
                i = j  # blanks before the opening quote
                out += quote
                i += 1
                in_quote = True
                at_start = False
                continue
            at_start = False
        char = body[i:i + 1]
        out += char
        i += 1
        at_start = char == delimiter
    return bytes(out) + line[len(body):], in_quote


def _byte(char: str) -> int:
    return ord(char) if char else 0


def _given(options: dict[str, Any], key: str, defaults: tuple[str, ...]) -> tuple[str, ...]:
    value = options.get(key)
    return defaults if value is None else (value,)


def _quote_escapes(options: dict[str, Any]) -> list[tuple[str, str]]:
    quote, escape = options.get("quote"), options.get("escape")
    if quote is not None and escape is not None:
        return [(quote, escape)]
    if quote is not None:
        return [c for c in QUOTE_ESCAPES if c[0] == quote] or \
            [(quote, quote), (quote, ""), (quote, "\\"), (quote, '"'), (quote, "'")]
    if escape is not None:
        return [c for c in QUOTE_ESCAPES if c[1] == escape] or \
            [(escape, escape), ('"', escape), ("'", escape)]
    return list(QUOTE_ESCAPES)


def newline_kind(sample: bytes) -> int:
    """DuckDB's DetectNewLineDelimiter: 0 for \\n, 1 for a lone \\r, 2 for \\r\\n."""
    cr = False
    for byte in sample:
        if byte == 13:
            cr = True
        elif byte == 10:
            return 2 if cr else 0
        elif cr:
            return 1
    return 1 if cr else 0


def _comments_acceptable(cand: Dialect, ncols: int) -> bool:
    detected = valid = 0
    full_line = False
    for row in cand.rows:
        if row[_COMMENT] or row[_MID_COMMENT]:
            detected += 1
            if row[_FIELDS] != ncols and row[_COMMENT]:
                full_line = True
                valid += 1
            if row[_FIELDS] == ncols and row[_MID_COMMENT]:
                valid += 1
    if valid == 0 or not full_line:
        return cand.comment == ""
    return valid / detected >= 0.6


class _Choice:
    """DuckDB's AnalyzeDialectCandidate and RefineCandidates, with their state."""

    def __init__(self, comment_given: bool) -> None:
        self.comment_given = comment_given
        self.best_consistent_rows = 0
        self.prev_padding_count = 0
        self.min_ignored_rows = 0
        self.max_columns_found = 0
        self.successful: list[Dialect] = []

    def analyze(self, cand: Dialect) -> None:
        rows = cand.rows
        num_cols = rows[0][_FIELDS] if rows else 1
        padding_count = comment_rows = consistent_rows = 0
        dirty_notes = dirty_minus_comments = empty_lines = 0
        first_valid = False
        header_idx = start = 0
        for i, row in enumerate(rows):
            fields = row[_FIELDS]
            if row[_COMMENT]:
                comment_rows += 1
            elif row[_LAST_EMPTY] and fields == rows[header_idx][_FIELDS] + 1:
                consistent_rows += 1  # a data row ending in one extra, empty field
            elif num_cols < fields:
                first_valid = True
                start = i  # every row before the widest is a preamble
                padding_count = 0
                num_cols = fields
                dirty_notes = i + row[_EMPTY_LINES]
                empty_lines = row[_EMPTY_LINES]
                dirty_minus_comments = dirty_notes - comment_rows
                header_idx = i
                consistent_rows = 1
            elif fields == num_cols:
                if not first_valid:
                    first_valid = True
                    start = i
                    dirty_notes = i + row[_EMPTY_LINES]
                    empty_lines = row[_EMPTY_LINES]
                    dirty_minus_comments = dirty_notes - comment_rows
                consistent_rows += 1
            else:
                padding_count += 1
        consistent_rows += padding_count
        more_values = consistent_rows > self.best_consistent_rows and \
            num_cols >= self.max_columns_found
        more_columns = consistent_rows == self.best_consistent_rows and \
            num_cols > self.max_columns_found
        require_more_padding = padding_count > self.prev_padding_count
        require_less_padding = padding_count < self.prev_padding_count
        single_column_before = self.max_columns_found < 2 and \
            num_cols > self.max_columns_found * len(self.successful)
        rows_consistent = consistent_rows + dirty_minus_comments + comment_rows - empty_lines \
            == len(rows)
        start_good = bool(self.successful) and dirty_notes <= self.successful[0].duck_skip
        comments_ok = self.comment_given or _comments_acceptable(cand, num_cols)
        quoted = cand.quoted and cand.quote != ""
        cand.ncols = num_cols
        cand.skip = sum(1 for row in rows[:start] if not row[_COMMENT])
        body = [row for row in rows[start + 1:] if not row[_COMMENT]]
        cand.trailing = bool(body) and all(row[_FIELDS] == num_cols + 1 and row[_LAST_EMPTY]
                                           for row in body)
        if rows_consistent and (single_column_before or ((more_values or more_columns)
                                                         and not require_more_padding)
                                or (num_cols > 1 and require_less_padding)
                                or (quoted and comment_rows == 0)) \
                and padding_count == 0 and comments_ok:
            front = self.successful[0] if self.successful else None
            if front is not None and front.quoted:
                if not cand.quoted:
                    return  # quoted candidates are preferred
                if not cand.escaped and front.escaped:
                    return
                if self.best_consistent_rows == consistent_rows and \
                        num_cols >= self.max_columns_found:
                    cand.duck_skip = dirty_notes
                    self.successful.append(cand)
                    self.max_columns_found = num_cols
                    return
            if quoted and num_cols < self.max_columns_found and \
                    any(c.quoted and (c.escaped or not cand.escaped) for c in self.successful):
                return  # a narrower quoted reading loses to a wider quoted one
            self.best_consistent_rows = consistent_rows
            self.max_columns_found = num_cols
            self.prev_padding_count = padding_count
            cand.duck_skip = dirty_minus_comments
            self.successful = [cand]
            return
        if consistent_rows > 1 and num_cols > 1 and start_good and rows_consistent and \
                not require_more_padding and padding_count == 0 and \
                num_cols == self.max_columns_found and comments_ok:
            cand.duck_skip = dirty_notes
            self.successful.append(cand)

    def refine(self, sample: bytes, newline: int, complete: bool) -> list[Dialect]:
        """Check the candidates on the rest of the sample; prefer quoted ones."""
        cands = self.successful
        if len(cands) <= 1 or cands[0].finished:
            return cands
        pending = [cand for cand in cands if not cand.finished]
        twins = _twins(pending)
        # the last chunk of the sample is taken unchecked, as in DuckDB
        ncols = self.max_columns_found
        counts = _counted([cand for cand in pending if id(cand) not in twins], sample,
                          newline, complete, ncols)
        for cand in pending:
            twin = twins.get(id(cand))
            if twin is not None:
                found = counts[id(twin)]
                counts[id(cand)] = found if not found[2] else \
                    _counted([cand], sample, newline, complete, ncols)[id(cand)]
        kept = []
        for cand in cands:
            if cand.finished:
                kept.append(cand)
                continue
            error, cand.quoted, cand.escaped, _finished, fits = counts[id(cand)]
            if not error and fits:
                kept.append(cand)
        if not kept:
            return kept
        if any(c.quoted for c in kept):
            for cand in kept:
                if cand.quoted and cand.escaped:
                    return [cand]
            kept = [c for c in kept if c.quoted]
        if len(kept) > 1:
            return [next((c for c in kept if c.quote == c.escape), kept[0])]
        return kept
