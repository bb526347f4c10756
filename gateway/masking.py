"""Masking secrets in whatever arrowgate prints or stores.

:func:`mask` is the one function every printer uses: ``arrowgate engines``,
error messages, ``lake check``, configuration errors and the shadow store's
evidence. It hides two kinds of secret:

- values the gateway knows are secret: every value substituted from
  ``${VAR}`` and every option declared ``secret``, registered with
  :func:`remember` when the configuration loads;
- credentials written in the text itself, found from where they stand rather
  than from what they look like:

  - the value of every option of ``CREATE SECRET (...)`` but the few that
    name no credential (``TYPE``, ``PROVIDER``, ``SCOPE``, ``REGION``, ...):
    an option the list does not know is masked;
  - the value after a key that names a credential (password, passwd, pwd,
    secret, token, key, key_id, sig, signature, credential, and names ending
    so: ``api_key``, ``BEARER_TOKEN``, ``X-Amz-Signature``), whatever joins
    them: ``=`` (libpq pairs, bare or quoted with ``'`` and ``\\`` escapes;
    ODBC/ADO pairs, bare up to ``;`` or braced with ``}}`` escapes; URL query
    parameters, SAS ``sig=``), ``:=`` and ``=>`` (named arguments), ``:``
    (JSON, Python), or blanks before a quoted literal (``PASSWORD '...'``,
    ``IDENTIFIED BY '...'``);
  - URI userinfo: ``postgresql://user:PASS@host``, and ``https://TOKEN@host``
    (a userinfo without a password is a token as often as a name);
  - an ``Authorization`` header's credentials and a ``Bearer`` token;
  - PEM private key blocks, and tokens whose shape names them (AWS access key
    ids, GitHub, GitLab and Slack tokens, JWTs), wherever they stand.

Known values are registered process-wide, because errors are printed far from
the configuration that holds them (the CLI's last line, a Flight status, a
store written by a background thread).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator
from typing import Any

MASK = "***"

#: A known value shorter than this is masked where it is a whole option, but
#: not searched for inside text: replacing every "1" or "on" in a message would
#: garble it and hide nothing worth hiding.
MIN_SEARCHED = 4

_known: set[str] = set()
_lock = threading.Lock()

_KEY = (r"[A-Za-z0-9_.-]*(?:password|passwd|pwd|secret|token|key|key_id|sig|signature"
        r"|credential|credentials)")
_VALUE = (r"''(?:[^']|'(?!'))*(?:'')?"    # libpq quoting inside a SQL literal: ''x y''
          r"|'(?:[^'\\]|\\.)*'?"          # libpq quoting, with \' and \\ escapes
          r'|"(?:[^"\\]|\\.)*"?'         # JSON / double quotes
          r"|\{(?:[^}]|\}\})*\}?"        # ODBC braces, }} is a literal }
          # bare: up to whitespace, ';' or '&'; words after a space belong to the
          # value when no '=' follows them before the next ';' (ADO allows spaces)
          r"|[^\s;&'\"{,)]*(?:[ \t]+[^\s;=&'\"]+)*(?=[ \t]*(?:;|$))"
          r"|[^\s;&'\"{,)]*")
# compiled on first use (:func:`_compiled`): every module imports this one through
# gateway.errors, and compiling them cost a one-row query 1-4 ms
_SECRET_KEY = rf"(?i){_KEY}"
_PAIR = rf"(?im)(?<![A-Za-z0-9_.-])({_KEY})(\s*(?::=|=>|=)\s*)({_VALUE})"
_QUOTED_PAIR = rf"(?i)([\"']{_KEY}[\"']\s*:\s*)(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')"
# //user:password@ -- the password runs to the last '@' before whitespace or a quote
_USERINFO = r"(//[^\s/:@'\"]*:)([^\s'\"]*)(@)"
# the words a key naming a credential ends with: where none is, no pair can be
_KEY_WORDS = ("pass", "pwd", "secret", "token", "key", "sig", "credential", "identified")
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_TOKEN_PREFIXES = ("AKIA", "ASIA", "gh", "github_pat_", "glpat-", "xox", "eyJ")
# //TOKEN@host: a userinfo without a password, in a URL with a scheme
_BARE_USERINFO = r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://)([^\s/:@'\"?#]+)(@)"
# a key naming a credential, blanks, then a quoted literal: PASSWORD 'x', IDENTIFIED BY 'x'
_KEYWORD_LITERAL = (rf"(?i)(?<![A-Za-z0-9_.-])({_KEY}|IDENTIFIED\s+BY)(\s+)"
                    r"('(?:[^']|'')*'?|\"(?:[^\"]|\"\")*\"?)")
_AUTHORIZATION = (r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?(?:[a-z-]+\s+)?)"
                  r"([^\s\"',;]+)|(\bbearer\s+)([A-Za-z0-9._~+/=-]{6,})")
_PEM = r"(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
_TOKEN_SHAPES = (r"\b(?:(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}"
                 r"|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
                 r"|xox[abposr]-[A-Za-z0-9-]{10,}"
                 r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+)")
_CREATE_SECRET = r"(?is)\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:PERSISTENT\s+|TEMP(?:ORARY)?\s+)?SECRET\b"
#: the options of CREATE SECRET whose values name no credential; every other one is masked
SECRET_OPTIONS_SHOWN = frozenset({
    "TYPE", "PROVIDER", "SCOPE", "REGION", "ENDPOINT", "URL_STYLE", "USE_SSL", "CHAIN",
    "URL_COMPATIBILITY_MODE", "ACCOUNT_NAME", "HOST", "PORT", "DATABASE", "DBNAME", "USER",
    "USERNAME", "SCHEMA", "PROFILE", "VALIDATION", "REFRESH", "HTTP_PROXY", "VERIFY_SSL",
    "KMS_KEY_ID", "REQUESTER_PAYS", "ROLE_ARN", "EXTRA_HTTP_HEADERS_KEYS"})


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
    lowered = text.lower()
    if "secret" in lowered and "create" in lowered:
        text = _mask_secret_options(text)
    if "-----begin" in lowered:
        text = _compiled(_PEM).sub(MASK, text)
    if "@" in text:
        text = _compiled(_USERINFO).sub(lambda m: m.group(1) + MASK + m.group(3), text)
        text = _compiled(_BARE_USERINFO).sub(_mask_bare_userinfo, text)
    if "authorization" in lowered or "bearer" in lowered:
        text = _compiled(_AUTHORIZATION).sub(_mask_authorization, text)
    if any(prefix in text for prefix in _TOKEN_PREFIXES):
        text = _compiled(_TOKEN_SHAPES).sub(MASK, text)
    return _mask_pairs(text)


def _mask_pairs(text: str) -> str:
    """The values after keys that name a credential masked. The keys are found by their
    last word (:data:`_KEY_WORDS`, a plain substring search), and the patterns tried only
    where a key starts: a regular expression tried at every place of a long statement
    cost milliseconds."""
    lowered = text.lower()
    starts: set[int] = set()
    for word in _KEY_WORDS:
        at = lowered.find(word)
        while at >= 0:
            start = at
            while start > 0 and text[start - 1] in _KEY_CHARS:
                start -= 1
            starts.add(start)
            at = lowered.find(word, at + len(word))
    if not starts:
        return text
    keyword, pair, quoted = (_compiled(_KEYWORD_LITERAL), _compiled(_PAIR),
                             _compiled(_QUOTED_PAIR))
    out, done = [], 0
    for start in sorted(starts):
        if start < done:
            continue
        if start > 0 and text[start - 1] in "\"'" and start - 1 >= done and \
                (found := quoted.match(text, start - 1)) is not None:
            value = found.group(2)
            out += [text[done:start - 1], found.group(1), value[0], MASK, value[0]]
        elif (found := keyword.match(text, start)) is not None:
            out += [text[done:start], _mask_keyword_literal(found)]
        elif (found := pair.match(text, start)) is not None:
            out += [text[done:start], _mask_pair(found)]
        else:
            continue
        done = found.end()
    out.append(text[done:])
    return "".join(out)


def _mask_bare_userinfo(match: re.Match[str]) -> str:
    return match.group(0) if match.group(2) == MASK else match.group(1) + MASK + match.group(3)


def _mask_authorization(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        return match.group(1) + MASK
    return match.group(3) + MASK


def _mask_keyword_literal(match: re.Match[str]) -> str:
    quote = match.group(3)[0]
    return f"{match.group(1)}{match.group(2)}{quote}{MASK}{quote}"


def _mask_secret_options(text: str) -> str:
    """Every ``CREATE SECRET`` in ``text`` with the values of its options masked, but those
    of :data:`SECRET_OPTIONS_SHOWN`: the option list is read from its structure (quotes,
    nested brackets, commas), so an option the list does not know is masked too."""
    out, at = [], 0
    for found in _compiled(_CREATE_SECRET).finditer(text):
        if found.start() < at:
            continue
        opening = text.find("(", found.end())
        if opening < 0:
            break
        closing = _closing(text, opening)
        out.append(text[at:opening + 1])
        out.append(",".join(_mask_option(item) for item in _top_level(text[opening + 1:closing])))
        at = closing
    out.append(text[at:])
    return "".join(out)


_OPTION = re.compile(r"(\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*(?:=\s*)?)(.*)", re.DOTALL)


def _mask_option(item: str) -> str:
    found = _OPTION.fullmatch(item)
    if found is None or not found.group(4).strip():
        return item
    if found.group(2).upper() in SECRET_OPTIONS_SHOWN:
        return item
    value = found.group(4)
    tail = value[len(value.rstrip()):]
    quote = value.lstrip()[0]
    shown = f"{quote}{MASK}{quote}" if quote in "'\"" else MASK
    return f"{found.group(1)}{found.group(2)}{found.group(3)}{shown}{tail}"


def _closing(text: str, opening: int) -> int:
    """Where the bracket opened at ``opening`` closes (quotes skipped), or the text's end."""
    depth = 0
    for i, c in _unquoted(text, opening):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _top_level(body: str) -> list[str]:
    """``body`` split at its commas outside quotes and brackets."""
    items, depth, start = [], 0, 0
    for i, c in _unquoted(body, 0):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    items.append(body[start:])
    return items


def _unquoted(text: str, start: int) -> Iterator[tuple[int, str]]:
    """The places and characters of ``text`` from ``start`` on, quoted literals skipped
    (``''`` inside one is a quote)."""
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            end = text.find(c, i + 1)
            while end >= 0 and end + 1 < n and text[end + 1] == c:
                end = text.find(c, end + 2)
            i = n if end < 0 else end + 1
            continue
        yield i, c
        i += 1


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
