"""What the csv engine hands to its fallback, read from the statement's words alone.

The planner refuses a window function, a subquery and an aggregate other than
count, sum, avg, min, max, median, quantile_cont, the variances, standard
deviations, covariances and corr; to say so it imports sqlglot and its DuckDB dialect (about 90 ms of CPU)
and parses the statement, all of which a query answered by the fallback pays on
top of DuckDB's own time (h2o's q6, q8 and q9: 13-23% over DuckDB alone, where
the issue allows 5%). :func:`refusal` finds
those constructs in the statement's tokens first: a name of such an aggregate
called (``mode(``), ``OVER (``, ``(SELECT``, outside strings, quoted names
and comments. What it finds, the planner refuses too (tests/test_csv_handover.py
holds every name and form to the planner's refusal); what it does not find,
the planner reads as before. A statement holding a backslash, a dollar or a
block comment (an escaped string, a dollar-quoted one, nested comments, which
this reading does not follow) is left to the planner whole, and so is one holding
``row_number() OVER (``, which may be the first k rows of each group
(:mod:`gateway_csv.topn`).
"""

from __future__ import annotations

import re

from gateway.errors import Unsupported

#: DuckDB's aggregates the planner refuses (sqlglot reads each as an aggregate it does
#: not run: query.refuse_unrun_aggregates), lower case; not first, last and list, words
#: another construct may put before a parenthesis (FETCH FIRST (n) ROWS)
AGGREGATES = frozenset({
    "any_value", "approx_count_distinct", "approx_quantile", "arg_max", "arg_min",
    "argmax", "argmin", "array_agg", "bit_and", "bit_or", "bit_xor", "bool_and", "bool_or",
    "count_if", "group_concat", "kurtosis", "listagg",
    "max_by", "min_by", "mode", "percentile_cont", "quantile",
    "quantile_disc", "regr_slope", "skewness", "string_agg",
})
#: one token: a string, a quoted name, a line comment, a word, an opening parenthesis, or
#: anything else one character at a time
#: a row_number window, which gateway_csv.topn may read (or refuse) itself
TOP_N = re.compile(r"(?i)\brow_number\s*\(\s*\)\s*over\s*\(")
_TOKEN = re.compile(r"""'(?:[^']|'')*'?|"(?:[^"]|"")*"?|--[^\n]*|(?P<word>[A-Za-z_][A-Za-z0-9_]*)
                        |(?P<open>\()|\s+|.""", re.VERBOSE | re.DOTALL)


def refusal(sql: str) -> Unsupported | None:
    """The planner's refusal of ``sql``, where the statement's words show one is coming
    (a window function, a subquery, an aggregate the engine does not run), else None."""
    if "\\" in sql or "$" in sql or "/*" in sql or TOP_N.search(sql):
        return None
    before = ""  # the last word, or "(" (an empty string after anything else)
    for token in _TOKEN.finditer(sql):
        word = token.group("word")
        if word is not None:
            if before == "(" and word.lower() == "select":
                return _refused("a subquery")
            before = word.lower()
        elif token.group("open") is not None:
            if before in AGGREGATES:
                return _refused(f"the aggregate {before}()")
            if before == "over":
                return _refused("a window function")
            before = "("
        elif not token.group().isspace():
            before = ""
    return None


def _refused(what: str) -> Unsupported:
    return Unsupported(f"the csv engine does not run {what}", engines=("duckdb",))
