"""Custom DuckDB builds given as ``path``: a wheel, a folder, or a shared library."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import uuid
import zipfile
from pathlib import Path

from gateway.errors import ConfigError
from gateway_duckdb.install import ENTRYPOINT, MARKER, cache_dir, find_library

_NOT_A_BUILD_HINT = ("give a duckdb wheel (.whl), a folder holding the duckdb package, or a "
                     "DuckDB shared library that exports duckdb_adbc_init")


def resolve_build(path: str, engine: str) -> Path:
    """The shared library to load for ``path``, after checking it is a DuckDB build.

    A wheel is unpacked once into the cache (by its content hash).

    Raises:
        ConfigError: the path is missing or holds no DuckDB library.
    """
    key = f"engines.{engine}.path"
    given = Path(path).expanduser()
    if not given.exists():
        raise ConfigError(f"{given} does not exist", key=key, hint=_NOT_A_BUILD_HINT)
    if given.is_dir():
        library = find_library(given)
        if library is None:
            raise ConfigError(f"{given} holds no DuckDB build (no _duckdb library in it)",
                              key=key, hint=_NOT_A_BUILD_HINT)
    elif given.suffix == ".whl":
        library = find_library(_unpack_wheel(given, key))
        if library is None:
            raise ConfigError(f"{given} is a wheel without a _duckdb library", key=key,
                              hint=_NOT_A_BUILD_HINT)
    else:
        library = given
    check_library(library, key)
    return library


def check_library(library: Path, key: str) -> None:
    """Raise ConfigError unless ``library`` loads and exports the DuckDB ADBC entry point."""
    try:
        handle = ctypes.CDLL(str(library), mode=os.RTLD_LOCAL)
    except OSError as exc:
        raise ConfigError(f"{library} is not a loadable shared library: {exc}", key=key,
                          hint=_NOT_A_BUILD_HINT) from None
    if not hasattr(handle, ENTRYPOINT):
        raise ConfigError(f"{library} does not export {ENTRYPOINT}, so it is not a DuckDB build",
                          key=key, hint=_NOT_A_BUILD_HINT)


def _unpack_wheel(wheel: Path, key: str) -> Path:
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()[:16]
    target = cache_dir() / "duckdb" / "custom" / digest
    if (target / MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.parent / f"{digest}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(partial)
        (partial / MARKER).write_text(f"{wheel}\n")
        for so in partial.rglob("*.so"):
            so.chmod(0o755)
        try:
            os.replace(partial, target)
        except OSError:
            if not (target / MARKER).is_file():  # another process won the race with a valid copy
                raise
    except (zipfile.BadZipFile, OSError) as exc:
        raise ConfigError(f"cannot unpack the wheel {wheel}: {exc}", key=key,
                          hint=_NOT_A_BUILD_HINT) from None
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
    return target
