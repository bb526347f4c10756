"""Loading and checking ``arrowgate.toml``.

The file is found at ``--config``, then ``$ARROWGATE_CONFIG``, then
``./arrowgate.toml``; without any, the gateway runs an in-memory default with
one DuckDB engine. A dict with the same structure as the file works too.

Every mistake is a :class:`gateway.errors.ConfigError` that names the file,
the dotted key, what was wrong and what is allowed. ``${VAR}`` in a string
value is replaced from the environment (``$${`` writes a literal ``${``).

Named data sources (``[sources.NAME]``: files, globs and folders declared once)
are mounted into every engine that can read them, under their name, so the same
SQL text (``SELECT ... FROM trips``) runs on every engine (:class:`Source`).

Where arrowgate keeps what it caches between processes (:func:`cache_dir`):
``$ARROWGATE_HOME``, else ``$XDG_CACHE_HOME/arrowgate``, else
``~/.cache/arrowgate``. The duckdb plugin keeps its installed DuckDB versions
there, the csv engine its sniffed layouts (``sniff/``).
"""

from __future__ import annotations

import math
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from gateway.engine import Engine, Option
from gateway.errors import ConfigError, not_utf8
from gateway.masking import MASK, mask, remember, secret_values
from gateway.records import FrozenRecord, Record

# -- sources ----------------------------------------------------------------------------
FORMATS = ("csv", "parquet")

#: The keys a ``[sources.NAME]`` section accepts.
SOURCE_OPTIONS: dict[str, Option] = {
    "path": Option((str,), required=True, help="a file, a glob (data/*.csv) or a folder"),
    "format": Option((str,), choices=FORMATS, help="csv or parquet; default from the extension"),
    "delimiter": Option((str,), help="CSV field delimiter; sniffed when absent"),
    "quote": Option((str,), help="CSV quote character"),
    "escape": Option((str,), help="CSV escape character"),
    "header": Option((bool,), help="whether the first CSV line names the columns"),
    "null": Option((str, list), help="string(s) read as NULL"),
    "columns": Option((dict,), help="column name -> SQL type, overriding sniffed types"),
    "timestamp_format": Option((str,), help="strftime format of timestamp columns"),
    "encoding": Option((str,), help="text encoding of a CSV file: utf-8 (default, BOM "
                       "allowed), latin-1, utf-16, or any encoding Python knows"),
    "compression": Option((str,), choices=("auto", "none", "gzip", "zstd"),
                          help="compression of a CSV file; auto looks at the file's first bytes"),
    "on_error": Option((str,), choices=("error", "skip"), default="error",
                       help="what to do with a malformed row"),
}


class Source(FrozenRecord):
    """One named data source.

    Attributes:
        name: the table name it is mounted under.
        path: the absolute path as written (a file, a glob or a folder).
        format: ``csv`` or ``parquet``.
        options: the remaining keys of the section (delimiter, header, ...).
    """

    __slots__ = ("name", "path", "format", "options")
    name: Final[str]
    path: Final[str]
    format: Final[str]
    options: Final[dict[str, Any]]

    def __init__(self, name: str, path: str, format: str,
                 options: dict[str, Any] | None = None) -> None:
        self.name, self.path, self.format = name, path, format
        self.options = {} if options is None else options

    @property
    def is_glob(self) -> bool:
        """A pattern, unless a file or folder of that very name exists
        (``[avalon]_daily-avg.csv`` is a file of DuckDB's corpus)."""
        return any(ch in self.path for ch in "*?[") and not Path(self.path).exists()

    @property
    def is_folder(self) -> bool:
        return Path(self.path).is_dir()

    def scan_pattern(self) -> str:
        """The path an engine should scan: a folder becomes ``folder/*.<format>``."""
        if self.is_folder:
            return str(Path(self.path) / f"*.{self.format}")
        return self.path

    def files(self) -> list[str]:
        """The files this source currently covers, sorted."""
        pattern = self.scan_pattern()
        if Path(pattern).is_file():
            return [pattern]
        if any(ch in pattern for ch in "*?["):
            import glob  # (a source of one file needs no glob)

            return sorted(glob.glob(pattern, recursive=True))
        return []


def not_regular(source: Source) -> tuple[str, str] | None:
    """The first path of ``source`` that is neither a regular file nor a folder, and what it
    is (``a named pipe (FIFO)``, ``a character device``, ...), or None.

    Reading a FIFO or a device never ends (``/dev/zero``) or waits for a writer,
    and DuckDB reads every source while it binds any query, ``SELECT 1`` included.
    """
    paths = [source.path] if not source.is_glob else []
    paths += source.files()
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # a missing path has its own error
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            return path, _file_kind(mode)
    return None


def special_file(path: str) -> str | None:
    """What ``path`` is (``a named pipe (FIFO)``, ...) when it exists and is neither a
    regular file nor a folder: opening it would wait for a writer, or never end."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else _file_kind(mode)


#: the quoted texts of a statement (string literals, quoted identifiers), which may name files
_QUOTED = re.compile(r"'((?:[^']|'')*)'|\"((?:[^\"]|\"\")*)\"")


def named_special_file(sql: str) -> tuple[str, str] | None:
    """The first quoted text of ``sql`` naming a FIFO or device (``FROM 'p.csv'``), and what
    it is, or None. DuckDB opens such a path while it binds, past any timeout or cancel."""
    for match in _QUOTED.finditer(sql):
        text = match.group(1) if match.group(1) is not None else match.group(2)
        if 0 < len(text) < 4096:
            kind = special_file(os.path.expanduser(text.replace("''", "'").replace('""', '"')))
            if kind is not None:
                return text, kind
    return None


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def infer_format(path: str) -> str | None:
    """``csv`` or ``parquet`` from a path's extension (``.csv.gz`` counts as csv)."""
    lower = path.lower()
    for suffix, fmt in ((".parquet", "parquet"), (".pq", "parquet"), (".csv", "csv"),
                        (".tsv", "csv"), (".csv.gz", "csv"), (".txt", "csv")):
        if lower.endswith(suffix):
            return fmt
    return None


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (how a statement names a source safely)."""
    return '"' + name.replace('"', '""') + '"'


# -- the configuration ------------------------------------------------------------------
DEFAULT_FILE = "arrowgate.toml"
DEFAULT_ENGINE_NAME = "duckdb"
TOP_LEVEL_KEYS = ("default_engine", "engines", "sources", "shadow", "serve", "tui")

_ENV_REF = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


class EngineConfig(Record):
    """One ``[engines.NAME]`` section, checked against its engine type.

    Attributes:
        secret_keys: keys whose values must never be printed (its ``repr`` masks them).
        from_env: keys whose values came from ``${VAR}`` (the values themselves are
            registered with :func:`gateway.masking.remember` and masked when printed).
    """

    __slots__ = ("name", "type", "options", "secret_keys", "from_env")

    def __init__(self, name: str, type: str, options: dict[str, Any],
                 secret_keys: frozenset[str] = frozenset(),
                 from_env: frozenset[str] = frozenset()) -> None:
        self.name, self.type, self.options = name, type, options
        self.secret_keys, self.from_env = secret_keys, from_env

    def __repr__(self) -> str:
        return (f"EngineConfig(name={self.name!r}, type={self.type!r}, "
                f"options={self.printable_options()!r})")

    def printable_options(self) -> dict[str, Any]:
        """The options with secrets masked, safe to show a user."""
        return {k: MASK if k in self.secret_keys and v not in (None, "", {}, []) else mask(v)
                for k, v in self.options.items()}


class GatewayConfig(Record):
    """A checked configuration.

    Attributes:
        serve: the unchecked ``[serve]`` section; ``arrowgate serve`` checks it
            (gateway.flight.serve_config).
        tui: the unchecked ``[tui]`` section; ``arrowgate tui`` checks it (gateway.tui.console).
        base_dir: the folder relative paths are resolved against (the working one
            when not given).
    """

    __slots__ = ("path", "engines", "sources", "default_engine", "shadow", "serve", "tui",
                 "base_dir")

    def __init__(self, path: str, engines: dict[str, EngineConfig], sources: dict[str, Source],
                 default_engine: str, shadow: dict[str, Any] | None = None,
                 serve: dict[str, Any] | None = None, tui: dict[str, Any] | None = None,
                 base_dir: Path | None = None) -> None:
        self.path, self.engines, self.sources, self.default_engine = \
            path, engines, sources, default_engine
        self.shadow: dict[str, Any] = {} if shadow is None else shadow
        self.serve: dict[str, Any] = {} if serve is None else serve
        self.tui: dict[str, Any] = {} if tui is None else tui
        self.base_dir = Path.cwd() if base_dir is None else base_dir

    def __repr__(self) -> str:
        # names, not sections: [serve] holds users' password hashes and token digests
        return (f"GatewayConfig(path={self.path!r}, engines={list(self.engines)!r}, "
                f"sources={list(self.sources)!r}, default_engine={self.default_engine!r})")


def find_config_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The configuration file to use, or None for the in-memory default.

    Raises:
        ConfigError: ``explicit`` or ``$ARROWGATE_CONFIG`` names a missing file.
    """
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError("configuration file not found", path=str(path),
                              hint="check the path given to --config")
        return path
    env = os.environ.get("ARROWGATE_CONFIG")
    if env:
        path = Path(env)
        if not path.is_file():
            raise ConfigError("configuration file not found", path=str(path),
                              hint="ARROWGATE_CONFIG names a file that does not exist")
        return path
    local = Path(DEFAULT_FILE)
    return local if local.is_file() else None


def read_toml(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(not_utf8(data, exc), path=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", path=str(path),
                          hint="fix the syntax at the line shown") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror}", path=str(path)) from None


def default_config() -> dict[str, Any]:
    """The in-memory default: one DuckDB engine, no sources."""
    return {"engines": {DEFAULT_ENGINE_NAME: {"type": "duckdb"}}}


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any] | None,
    engine_types: Mapping[str, type[Engine]],
) -> GatewayConfig:
    """Read and check a configuration.

    Args:
        source: a path to a TOML file, a dict of the same structure, or None
            for the in-memory default.
        engine_types: the installed engine classes by type name.

    Raises:
        ConfigError: any mistake in the configuration.
    """
    if source is None:
        return _check(default_config(), "<default>", Path.cwd(), engine_types)
    if isinstance(source, Mapping):
        return _check(dict(source), "<dict>", Path.cwd(), engine_types)
    path = Path(source)
    if not path.is_file():
        raise ConfigError("configuration file not found", path=str(path))
    return _check(read_toml(path), str(path), path.resolve().parent, engine_types)


def _check(
    raw: dict[str, Any], label: str, base: Path, engine_types: Mapping[str, type[Engine]]
) -> GatewayConfig:
    def fail(key: str, message: str, hint: str | None = None) -> ConfigError:
        return ConfigError(message, path=label, key=key, hint=hint)

    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            raise fail(key, "unknown key", "allowed at the top level: " + ", ".join(TOP_LEVEL_KEYS))

    engines_raw = raw.get("engines", {})
    if not isinstance(engines_raw, Mapping):
        raise fail("engines", "must be a table of [engines.NAME] sections")
    if not engines_raw:
        raise fail("engines", "no engine is declared",
                   'add a section such as [engines.duck] with type = "duckdb"')

    engines: dict[str, EngineConfig] = {}
    for name, section in engines_raw.items():
        engines[name] = _check_engine(name, section, fail, engine_types)

    sources_raw = raw.get("sources", {})
    if not isinstance(sources_raw, Mapping):
        raise fail("sources", "must be a table of [sources.NAME] sections")
    sources = {name: _check_source(name, sec, fail, base) for name, sec in sources_raw.items()}

    default = raw.get("default_engine")
    if default is None:
        default = next(iter(engines))
    elif not isinstance(default, str):
        raise fail("default_engine", f"must be a string, not {_tname(default)}")
    elif default not in engines:
        raise fail("default_engine", f"names no declared engine: {default!r}",
                   "declared engines: " + ", ".join(engines))

    shadow = raw.get("shadow", {})
    if not isinstance(shadow, Mapping):
        raise fail("shadow", "must be a table")

    sections = {}
    for key in ("serve", "tui"):
        sections[key] = raw.get(key, {})
        if not isinstance(sections[key], Mapping):
            raise fail(key, "must be a table")

    return GatewayConfig(path=label, engines=engines, sources=sources, default_engine=default,
                         shadow=dict(shadow), serve=dict(sections["serve"]),
                         tui=dict(sections["tui"]), base_dir=base)


def _check_engine(name: str, section: Any, fail: Any,
                  engine_types: Mapping[str, type[Engine]]) -> EngineConfig:
    prefix = f"engines.{name}"
    if not _NAME.match(name):
        raise fail(f"engines.{name!r}", "an engine name must be letters, digits and underscores",
                   "it names the engine in --engine, listings and shadow records")
    if not isinstance(section, Mapping):
        raise fail(prefix, f"must be a table, not {_tname(section)}")
    type_name = section.get("type")
    if type_name is None:
        raise fail(f"{prefix}.type", "missing",
                   "installed engine types: " + ", ".join(sorted(engine_types)))
    if type_name not in engine_types:
        raise fail(f"{prefix}.type", f"unknown engine type {type_name!r}",
                   "installed engine types: " + ", ".join(sorted(engine_types)))
    cls = engine_types[type_name]
    values = {k: v for k, v in section.items() if k != "type"}
    options, from_env = check_options(prefix, values, cls.all_options(), fail)
    secret = frozenset(k for k, opt in cls.all_options().items() if opt.secret)
    return EngineConfig(name=name, type=type_name, options=options, secret_keys=secret,
                        from_env=from_env)


def _check_source(name: str, section: Any, fail: Any, base: Path) -> Source:
    prefix = f"sources.{name}"
    if not _NAME.match(name):
        raise fail(f"sources.{name!r}", "a source name must be letters, digits and underscores",
                   "it becomes a table name in SQL")
    if not isinstance(section, Mapping):
        raise fail(prefix, f"must be a table with at least path = ..., not {_tname(section)}")
    options, _ = check_options(prefix, dict(section), SOURCE_OPTIONS, fail)
    raw_path = os.path.expanduser(options.pop("path"))
    path = os.path.normpath(raw_path if os.path.isabs(raw_path) else str(base / raw_path))
    fmt = options.pop("format") or infer_format(path)
    if fmt is None:
        if Path(path).is_dir():
            fmt = "csv"
        else:
            raise fail(f"{prefix}.format", f"cannot tell the format of {raw_path!r}",
                       'set format = "csv" or "parquet"')
    encoding = options.get("encoding")
    if encoding is not None:
        import codecs

        try:
            codecs.lookup(encoding)
        except LookupError:
            raise fail(f"{prefix}.encoding", f"no text encoding is named {encoding!r}",
                       "e.g. utf-8, latin-1, utf-16, shift_jis") from None
    source = Source(name=name, path=path, format=fmt,
                    options={k: v for k, v in options.items() if v is not None})
    if not source.is_glob and not Path(path).exists():
        raise fail(f"{prefix}.path", f"no such file or folder: {path}",
                   "paths are relative to the configuration file's folder")
    odd = not_regular(source)
    if odd is not None:
        raise fail(f"{prefix}.path", f"{odd[0]} is {odd[1]}, not a file or folder",
                   "a source is a regular file, a folder, or a glob of regular files")
    return source


def check_options(prefix: str, values: Mapping[str, Any], spec: Mapping[str, Option],
                   fail: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """Check the section ``prefix`` (``values``) against ``spec``: its values with the
    defaults filled in, and the keys whose value came from ``${VAR}``. ``fail(key,
    message, hint)`` makes the error raised (a :class:`~gateway.errors.ConfigError`
    naming the file); the shadow, capture, serve and tui sections are checked here too."""
    out: dict[str, Any] = {}
    from_env: set[str] = set()
    for key, value in values.items():
        if key not in spec:
            allowed = ", ".join(sorted(spec)) or "none"
            raise fail(f"{prefix}.{key}", "unknown key", f"allowed: {allowed}")
        opt = spec[key]
        expanded = expand_env(value, f"{prefix}.{key}", fail)
        if expanded is not value:
            from_env.add(key)
        value = expanded
        if not _type_ok(value, opt.types):
            raise fail(f"{prefix}.{key}",
                       f"must be {opt.type_names()}, not {_tname(value)}", opt.help or None)
        if opt.secret:
            remember(*secret_values(value))
        if isinstance(value, float) and not math.isfinite(value):
            raise fail(f"{prefix}.{key}", f"{value!r} is not a finite number",
                       opt.help or "give a number of seconds, bytes or rows")
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and not _in_range(value, opt):
            raise fail(f"{prefix}.{key}", f"{value!r} is out of range",
                       f"allowed: {_range_text(opt)}" + (f"; {opt.help}" if opt.help else ""))
        if opt.choices and value not in opt.choices:
            shown = "the value" if opt.secret else repr(mask(value))
            raise fail(f"{prefix}.{key}", f"{shown} is not allowed",
                       "allowed: " + ", ".join(map(str, opt.choices)))
        out[key] = value
    for key, opt in spec.items():
        if key not in out:
            if opt.required:
                raise fail(f"{prefix}.{key}", "missing", opt.help or None)
            out[key] = opt.default
    return out, frozenset(from_env)


def _in_range(value: float, opt: Option) -> bool:
    if opt.minimum is not None and value < opt.minimum:
        return False
    return opt.exclusive_minimum is None or value > opt.exclusive_minimum


def _range_text(opt: Option) -> str:
    if opt.exclusive_minimum is not None:
        return f"a number greater than {opt.exclusive_minimum:g}"
    return f"{opt.minimum:g} or more"


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, types)


def _tname(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            dict: "a table", list: "an array"}.get(type(value), type(value).__name__)


def expand_env(value: Any, key: str, fail: Any) -> Any:
    """Replace ``${VAR}`` in strings (recursively in tables and arrays).

    Every substituted value is registered with :func:`gateway.masking.remember`,
    so it is masked wherever it is printed.
    """
    if isinstance(value, str):
        if "$" not in value:
            return value

        def sub(match: re.Match[str]) -> str:
            if match.group(0) == "$${":
                return "${"
            var = match.group(1)
            if var not in os.environ:
                raise fail(key, f"environment variable {var} is not set",
                           f"export {var}=... or write the value in the file")
            remember(os.environ[var])
            return os.environ[var]

        return _ENV_REF.sub(sub, value)
    if isinstance(value, dict):
        new = {k: expand_env(v, f"{key}.{k}", fail) for k, v in value.items()}
        return value if all(new[k] is value[k] for k in value) else new
    if isinstance(value, list):
        items = [expand_env(v, f"{key}[{i}]", fail) for i, v in enumerate(value)]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


# -- the cache --------------------------------------------------------------------------
def cache_dir() -> Path:
    """The arrowgate cache: ``$ARROWGATE_HOME``, else the XDG cache folder."""
    home = os.environ.get("ARROWGATE_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "arrowgate"


def private_dir(path: Path) -> bool:
    """Make ``path`` (and its parents) if missing, private to this user (0700), and
    say whether it is safe to read what this process wrote there earlier: a
    folder this user owns that no one else may write to. False on any error (a
    read-only home, a folder another user owns, Windows): the caller does without."""
    if not hasattr(os, "geteuid"):
        return False  # (Windows: no owner and mode to check; its caller does without)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() \
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
