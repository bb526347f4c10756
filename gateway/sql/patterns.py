"""SQL ``LIKE`` patterns, as catalog listings (Flight SQL's filters) use them."""

from __future__ import annotations

import re
from typing import Any


def like_matcher(pattern: str | None) -> Any:
    """A predicate for SQL ``LIKE`` (``%``, ``_``, ``\\`` escapes), case-sensitive; None: all."""
    if pattern is None or pattern == "%":
        return lambda name: True
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    regex = re.compile("".join(out), re.DOTALL)
    return lambda name: regex.fullmatch(name) is not None
