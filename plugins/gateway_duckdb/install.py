"""Managed DuckDB installs: one folder per version under the arrowgate cache.

``ensure_installed("1.5.5", ["ducklake"])`` returns an :class:`Installation`
whose ``library`` is the wheel's ``_duckdb*.so`` (every duckdb wheel is also an
ADBC driver, entry point ``duckdb_adbc_init``) and whose ``extensions`` are the
loadable ``.duckdb_extension`` files built for that exact version.

Layout, under :func:`cache_dir` (``$ARROWGATE_HOME``, else
``$XDG_CACHE_HOME/arrowgate``, else ``~/.cache/arrowgate``)::

    duckdb/1.5.5/core/             pip install --target of duckdb==1.5.5
    duckdb/1.5.5/ext/ducklake/     pip install --target of its extension package
    duckdb/1.5.5.lock              serialises installers of that version

Every folder is built beside its final place (``*.partial-<pid>-<random>``)
and renamed into place only once pip has finished and the result was checked,
so an interrupted install never leaves a folder that looks valid; a file lock
makes a second process wait for the first and then reuse its install.

Extensions cannot be downloaded by DuckDB at run time here: PyPI ships them as
packages built for one exact duckdb version (``duckdb-ext-<name>`` for 1.3 and
1.4, ``duckdb-extension-<name>`` for 1.5.0 to 1.5.5, none for 1.5.6 or 2.x).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gateway.config import cache_dir
from gateway.errors import ConfigError

#: The file written last into a finished folder; a folder without it is not an install.
MARKER = ".arrowgate-install.json"
ENTRYPOINT = "duckdb_adbc_init"
_VERSION = re.compile(r"\A\d+\.\d+\.\d+\Z")


@dataclass(frozen=True)
class _ExtensionPackages:
    """Where one extension comes from, per duckdb release line."""

    #: the DuckDB name (``LOAD name``) and the file's stem
    name: str
    #: package for 1.3.x and 1.4.x (versioned ``<duckdb version>.<date>``)
    ext_package: str
    ext_versions: tuple[str, ...]
    #: package for 1.5.x (versioned exactly like duckdb)
    extension_package: str
    extension_versions: tuple[str, ...]


_V15 = tuple(f"1.5.{i}" for i in range(6))
_V14 = tuple(f"1.4.{i}" for i in range(5))
_V13 = tuple(f"1.3.{i}" for i in range(3))
_V12 = tuple(f"1.2.{i}" for i in range(3))

#: The extensions an install can carry, by DuckDB name (from the package
#: index's listings; the 1.5 postgres/sqlite files come from the ``-scanner``
#: packages because theirs carry the entry point DuckDB expects).
EXTENSIONS: dict[str, _ExtensionPackages] = {
    "ducklake": _ExtensionPackages("ducklake", "duckdb-ext-ducklake", _V13 + _V14,
                                   "duckdb-extension-ducklake", _V15),
    "postgres_scanner": _ExtensionPackages("postgres_scanner", "duckdb-ext-postgres",
                                           _V12 + _V13 + _V14,
                                           "duckdb-extension-postgres-scanner", _V15),
    "sqlite_scanner": _ExtensionPackages("sqlite_scanner", "duckdb-ext-sqlite",
                                         _V12 + _V13 + _V14,
                                         "duckdb-extension-sqlite-scanner", _V15),
}
#: Other names DuckDB accepts for the same extensions.
ALIASES = {"postgres": "postgres_scanner", "sqlite": "sqlite_scanner", "sqlite3": "sqlite_scanner"}


@dataclass(frozen=True)
class Installation:
    """One DuckDB build ready to load.

    Attributes:
        version: the DuckDB version (``1.5.5``), as ``SELECT version()`` reports it without ``v``.
        root: the folder holding the ``duckdb`` package (for a bare shared
            library given as ``path``, the library's folder).
        library: the ``_duckdb*.so`` to load as an ADBC driver (entry point
            ``duckdb_adbc_init``).
        extensions: extension name -> loadable ``.duckdb_extension`` file for this version.
    """

    version: str
    root: Path
    library: Path
    extensions: dict[str, Path] = field(default_factory=dict)


def canonical_extension(name: str) -> str:
    """The DuckDB name of an extension (``postgres`` -> ``postgres_scanner``).

    Raises:
        ConfigError: not an extension arrowgate can install.
    """
    key = ALIASES.get(name.lower(), name.lower())
    if key not in EXTENSIONS:
        raise ConfigError(f"unknown DuckDB extension {name!r}",
                          hint="installable extensions: " + ", ".join(EXTENSIONS))
    return key


def extension_versions(name: str) -> list[str]:
    """The DuckDB versions for which the extension ``name`` can be installed."""
    pk = EXTENSIONS[canonical_extension(name)]
    return list(pk.ext_versions + pk.extension_versions)


def available_extensions(version: str) -> list[str]:
    """The extensions that exist for exactly this DuckDB version."""
    return [n for n in EXTENSIONS if version in extension_versions(n)]


def _requirement(name: str, version: str) -> str:
    pk = EXTENSIONS[name]
    if version in pk.extension_versions:
        return f"{pk.extension_package}=={version}"
    if version in pk.ext_versions:
        return f"{pk.ext_package}=={version}.*"
    versions = extension_versions(name)
    raise ConfigError(
        f"the DuckDB extension {name!r} does not exist for DuckDB {version}",
        hint=f"versions that have it: {', '.join(versions)}; pick one of them with version = "
        "\"...\" or drop the extension",
    )


def check_extensions(version: str, extensions: Sequence[str]) -> list[str]:
    """The DuckDB names of ``extensions``, after checking each exists for ``version``.

    Raises:
        ConfigError: an unknown extension, or one not built for that version.
    """
    names = [canonical_extension(e) for e in extensions]
    for name in names:
        _requirement(name, version)
    return names


def find_library(folder: Path) -> Path | None:
    """The ``_duckdb*.so`` of a folder holding the ``duckdb`` package, or None."""
    for pattern in ("_duckdb*.so", "duckdb/_duckdb*.so", "_duckdb*.pyd", "_duckdb*.dylib"):
        found = sorted(folder.glob(pattern))
        if found:
            return found[0]
    return None


def _find_extension_file(folder: Path, name: str) -> Path | None:
    found = sorted(folder.rglob(f"{name}.duckdb_extension"))
    return found[0] if found else None


def installed(version: str) -> Installation | None:
    """The finished install of ``version`` (with whichever extensions it has), or None."""
    core = cache_dir() / "duckdb" / version / "core"
    if not (core / MARKER).is_file():
        return None
    library = find_library(core)
    if library is None:
        return None
    return Installation(version, core, library, installed_extensions(version))


def installed_extensions(version: str) -> dict[str, Path]:
    """The extensions installed for ``version`` (name -> file), with or without its core."""
    base = cache_dir() / "duckdb" / version
    exts: dict[str, Path] = {}
    for name in EXTENSIONS:
        folder = base / "ext" / name
        if (folder / MARKER).is_file() and (f := _find_extension_file(folder, name)):
            exts[name] = f
    return exts


def installed_versions() -> list[str]:
    """The versions with a finished install in the cache, oldest first."""
    top = cache_dir() / "duckdb"
    if not top.is_dir():
        return []
    found = [p.name for p in top.iterdir() if (p / "core" / MARKER).is_file()]
    return sorted(found, key=lambda v: tuple(int(x) for x in v.split(".")))


def _checked_version(version: str) -> str:
    version = version.strip().removeprefix("v")
    if not _VERSION.match(version):
        raise ConfigError(f"{version!r} is not a DuckDB version",
                          hint='write an exact release such as version = "1.5.5"')
    return version


def ensure_installed(version: str, extensions: Sequence[str] = (), *,
                     progress: bool = False) -> Installation:
    """Install DuckDB ``version`` and ``extensions`` into the cache unless already there.

    Args:
        version: an exact release, ``1.5.5``.
        extensions: DuckDB extension names (``ducklake``, ``postgres_scanner``,
            ``sqlite_scanner``; ``postgres`` and ``sqlite`` are accepted too).
        progress: print one line per step on stderr.

    Returns:
        The installation, with at least the extensions asked for.

    Raises:
        ConfigError: the version is not a release pip offers, or an extension
            does not exist for it (the message names the versions that have it).
    """
    version = _checked_version(version)
    wanted = [canonical_extension(e) for e in extensions]
    have = installed(version)
    if have is not None and all(n in have.extensions for n in wanted):
        return have
    _install(version, wanted, core=True, progress=progress)
    done = installed(version)
    if done is None or any(n not in done.extensions for n in wanted):
        base = cache_dir() / "duckdb" / version
        raise ConfigError(f"the install of DuckDB {version} in {base} is incomplete",
                          hint=f"delete {base} and try again")
    return done


def ensure_extensions(version: str, extensions: Sequence[str], *,
                      progress: bool = False) -> dict[str, Path]:
    """Install only the extension packages built for ``version`` into the cache, for a
    DuckDB that is already at hand (the running interpreter's module, a custom build):
    no second copy of DuckDB itself is downloaded.

    Returns:
        extension name -> loadable file, for at least the extensions asked for.

    Raises:
        ConfigError: as :func:`ensure_installed`.
    """
    version = _checked_version(version)
    wanted = [canonical_extension(e) for e in extensions]
    have = installed_extensions(version)
    if all(n in have for n in wanted):
        return have
    _install(version, wanted, core=False, progress=progress)
    done = installed_extensions(version)
    missing = [n for n in wanted if n not in done]
    if missing:
        base = cache_dir() / "duckdb" / version / "ext"
        raise ConfigError(f"the install of {', '.join(missing)} for DuckDB {version} in "
                          f"{base} is incomplete", hint=f"delete {base} and try again")
    return done


def _install(version: str, wanted: list[str], *, core: bool, progress: bool) -> None:
    requirements = {name: _requirement(name, version) for name in wanted}
    base = cache_dir() / "duckdb" / version
    base.parent.mkdir(parents=True, exist_ok=True)
    with _locked(base.parent / f"{version}.lock"):
        steps = [("core", f"duckdb=={version}")] if core else []
        steps += [(f"ext/{n}", r) for n, r in requirements.items()]
        try:
            for i, (sub, requirement) in enumerate(steps, 1):
                target = base / sub
                if (target / MARKER).is_file():
                    continue
                if progress:
                    print(f"arrowgate: installing {requirement} [{i}/{len(steps)}] into {target}",
                          file=sys.stderr, flush=True)
                _pip_install_atomically(requirement, target, version)
        finally:
            _remove_empty(base)


def _remove_empty(base: Path) -> None:
    for folder in (base / "ext", base):
        try:
            folder.rmdir()
        except OSError:  # not empty, or not there: both fine
            pass


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pip_install_atomically(requirement: str, target: Path, version: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f"{target.name}.partial-*"):
        # left by an interrupted install; we hold the lock, so no one is writing it
        shutil.rmtree(stale, ignore_errors=True)
    partial = target.parent / f"{target.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--no-deps", "--no-compile", "--target", str(partial), requirement]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise _pip_error(requirement, version, done.stderr)
        _check_install(partial, requirement)
        (partial / MARKER).write_text(json.dumps({"requirement": requirement}) + "\n")
        os.replace(partial, target)
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)


def _check_install(folder: Path, requirement: str) -> None:
    if requirement.startswith("duckdb=="):
        if find_library(folder) is None:
            raise ConfigError(f"pip installed {requirement} but no _duckdb library is in it",
                              hint="this platform may have no wheel for that version")
        return
    name = next(n for n, pk in EXTENSIONS.items()
                if requirement.split("=")[0] in (pk.ext_package, pk.extension_package))
    if _find_extension_file(folder, name) is None:
        raise ConfigError(f"pip installed {requirement} but it holds no {name}.duckdb_extension",
                          hint="this platform may have no build of that extension")


def _pip_error(requirement: str, version: str, stderr: str) -> ConfigError:
    listed = re.search(r"\(from versions: ([^)]*)\)", stderr)
    if requirement.startswith("duckdb==") and listed is not None:
        offered = [v.strip() for v in listed.group(1).split(",")
                   if _VERSION.match(v.strip()) and not v.strip().startswith("0.")]
        return ConfigError(f"DuckDB {version} is not a release pip can install",
                           hint="releases offered: " + ", ".join(offered[-12:]))
    last = [ln for ln in stderr.strip().splitlines() if ln.startswith("ERROR")] or \
        stderr.strip().splitlines()[-1:]
    return ConfigError(f"pip could not install {requirement}: " + " ".join(last)[:500],
                       hint="check the network or the package index pip is configured with")
