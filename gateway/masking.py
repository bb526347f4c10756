"""Masking secrets in whatever arrowgate prints or stores.

:func:`mask` is the one function every printer uses: ``arrowgate engines``,
error messages, ``lake check``, configuration errors and the shadow store's
evidence. It hides two kinds of secret:

- values the gateway knows are secret: every value substituted from
  ``${VAR}`` and every option declared ``secret``, registered with
  :func:`remember` when the configuration loads;
- passwords written in the text itself: URI userinfo
  (``postgresql://user:PASS@host``), libpq ``key=value`` pairs (bare, or
  quoted with ``'`` and ``\\`` escapes), ODBC/ADO pairs (bare up to ``;``, or
  braced with ``}}`` escapes), and JSON or Python ``"key": "value"`` pairs,
  for keys named password, passwd, pwd, sslpassword, token, secret or key
  (``api_key``, ``s3_secret_access_key``, ...).

Known values are registered process-wide, because errors are printed far from
the configuration that holds them (the CLI's last line, a Flight status, a
store written by a background thread).
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

MASK = "***"

#: A known value shorter than this is masked where it is a whole option, but
#: not searched for inside text: replacing every "1" or "on" in a message would
#: garble it and hide nothing worth hiding.
MIN_SEARCHED = 4

_known: set[str] = set()
_lock = threading.Lock()

_KEY = r"[A-Za-z0-9_.-]*(?:password|passwd|pwd|secret|token|key)"
_VALUE = (r"'(?:[^'\\]|\\.)*'?"          # libpq quoting, with \' and \\ escapes
          r'|"(?:[^"\\]|\\.)*"?'         # JSON / double quotes
          r"|\{(?:[^}]|\}\})*\}?"        # ODBC braces, }} is a literal }
          # bare: up to whitespace, ';' or '&'; words after a space belong to the
          # value when no '=' follows them before the next ';' (ADO allows spaces)
          r"|[^\s;&'\"{,)]*(?:[ \t]+[^\s;=&'\"]+)*(?=[ \t]*(?:;|$))"
          r"|[^\s;&'\"{,)]*")
# compiled on first use (:func:`_compiled`): every module imports this one through
# gateway.errors, and compiling them cost a one-row query 1-4 ms
_SECRET_KEY = rf"(?i){_KEY}"
_PAIR = rf"(?im)(?<![A-Za-z0-9])({_KEY})(\s*=\s*)({_VALUE})"
_QUOTED_PAIR = rf"(?i)([\"']{_KEY}[\"']\s*:\s*)(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')"
# //user:password@ -- the password runs to the last '@' before whitespace or a quote
_USERINFO = r"(//[^\s/:@'\"]*:)([^\s'\"]*)(@)"


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def remember(*values: Any) -> None:
    """Register values that must never be printed (strings; other types are ignored)."""
    with _lock:
        for value in values:
            if isinstance(value, str) and value:
                _known.add(value)


def is_secret_key(name: str) -> bool:
    """Whether a key's name says its value is a credential (``password``, ``api_key``, ...)."""
    return _compiled(_SECRET_KEY).fullmatch(name) is not None


def secret_values(value: Any) -> list[str]:
    """The strings inside an option declared secret: the value itself, or in a table (at
    any depth) the values of keys that name a secret (``password``, ``secret``, ...)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            if isinstance(item, dict):
                found += secret_values(item)
            elif isinstance(item, str) and is_secret_key(str(key)):
                found.append(item)
        return found
    return []


def mask(value: Any) -> Any:
    """``value`` with every secret replaced by ``***`` (strings, and recursively dicts and lists)."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(mask(v) for v in value)
    return value


def mask_text(text: str) -> str:
    """One string with known secrets and written-in passwords masked."""
    if not text:
        return text
    with _lock:
        if text in _known:
            return MASK
        values = sorted((v for v in _known if len(v) >= MIN_SEARCHED), key=len, reverse=True)
    for value in values:
        for form in _forms(value):
            if form in text:
                text = text.replace(form, MASK)
    text = _compiled(_USERINFO).sub(lambda m: m.group(1) + MASK + m.group(3), text)
    text = _compiled(_QUOTED_PAIR).sub(
        lambda m: m.group(1) + m.group(2)[0] + MASK + m.group(2)[0], text)
    return _compiled(_PAIR).sub(_mask_pair, text)


def _mask_pair(match: re.Match[str]) -> str:
    value = match.group(3)
    if value == MASK or not value:
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{MASK}"


def _forms(value: str) -> list[str]:
    """The ways a secret is written where it may be echoed: as is, SQL-quoted, URL-encoded."""
    from urllib.parse import quote  # (with ipaddress: 2-3 ms of every command's start)

    forms = [value, value.replace("'", "''"), quote(value, safe=""),
             value.replace("\\", "\\\\").replace("'", "\\'"), value.replace("}", "}}")]
    return list(dict.fromkeys(f for f in forms if len(f) >= MIN_SEARCHED))
