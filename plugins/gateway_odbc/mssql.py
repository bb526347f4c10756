"""Microsoft's ODBC Driver 18 for SQL Server, from the ``mssql-python-odbc`` package.

The package ships ``libmsodbcsql-18.*.so`` per Linux family (and its own
``libodbcinst``), but registers nothing. unixODBC finds drivers by name in the
``odbcinst.ini`` of the folder ``$ODBCSYSINI`` names, so :func:`register`
writes one in a private folder, with the system file's drivers copied in
(``PostgreSQL Unicode`` keeps working in the same process), and points
``ODBCSYSINI`` at it. No system file is touched. unixODBC reads ``ODBCSYSINI``
once per process, at its first use, so the odbc engine also names the library
by its path in ``DRIVER=``, which works whenever the engine starts.
"""

from __future__ import annotations

import os
import platform
import subprocess
import tempfile
from pathlib import Path

from gateway.drivers.odbc import DEFAULT_MSSQL_DRIVER
from gateway.errors import ConfigError

#: Linux families the package ships a build for, by ID / ID_LIKE of /etc/os-release.
_FAMILIES = {"debian": "debian_ubuntu", "ubuntu": "debian_ubuntu", "rhel": "rhel",
             "fedora": "rhel", "centos": "rhel", "suse": "suse", "opensuse": "suse",
             "alpine": "alpine"}


def find_driver(package_dir: Path | None = None) -> Path:
    """The driver library for this machine inside the installed ``mssql-python-odbc``.

    Raises:
        ConfigError: the package is not installed, or has no build for this system.
    """
    if package_dir is None:
        try:
            import mssql_python_odbc
        except ImportError:
            raise ConfigError("driver = \"mssql\" needs Microsoft's ODBC Driver 18, from the "
                              "mssql-python-odbc package, which is not installed",
                              hint="pip install mssql-python-odbc (of arrowgate's odbc extra)"
                              ) from None
        package_dir = Path(mssql_python_odbc.__file__).parent
    arch = platform.machine().replace("aarch64", "arm64").replace("amd64", "x86_64")
    base = package_dir / "libs" / "linux"
    for family in _families():
        found = sorted((base / family / arch / "lib").glob("libmsodbcsql-18*.so*"))
        if found:
            return found[-1]
    available = sorted(p.relative_to(base).as_posix() for p in base.glob("*/*/lib"))
    raise ConfigError(f"mssql-python-odbc has no ODBC Driver 18 build for this system "
                      f"({' '.join(_families())} on {arch}); it has: "
                      f"{', '.join(available) or 'none'}",
                      hint="install Microsoft's msodbcsql18 package and set "
                           "driver = \"ODBC Driver 18 for SQL Server\"")


def _families() -> list[str]:
    ids: list[str] = []
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            key, _, value = line.partition("=")
            if key in ("ID", "ID_LIKE"):
                ids += value.strip('"').split()
    except OSError:
        pass
    out = [_FAMILIES[i] for i in ids if i in _FAMILIES]
    return list(dict.fromkeys([*out, "debian_ubuntu", "rhel", "suse"]))


def system_odbcinst() -> Path | None:
    """The odbcinst.ini unixODBC reads when ``ODBCSYSINI`` is not set."""
    try:
        done = subprocess.run(["odbcinst", "-j"], capture_output=True, text=True, timeout=10,
                              env={k: v for k, v in os.environ.items() if k != "ODBCSYSINI"})
    except (OSError, subprocess.TimeoutExpired):
        return Path("/etc/odbcinst.ini") if Path("/etc/odbcinst.ini").is_file() else None
    for line in done.stdout.splitlines():
        if line.startswith("DRIVERS"):
            path = Path(line.split(":", 1)[1].strip())
            return path if path.is_file() else None
    return None


def register(library: Path, name: str = DEFAULT_MSSQL_DRIVER, folder: Path | None = None) -> Path:
    """Register ``library`` as driver ``name`` through an odbcinst.ini under ``ODBCSYSINI``.

    Returns the folder ``ODBCSYSINI`` now points at. Drivers already registered
    (the system's, or an earlier ``ODBCSYSINI``'s) are kept.
    """
    current = os.environ.get("ODBCSYSINI")
    if current and (Path(current) / "odbcinst.ini").is_file():
        text = (Path(current) / "odbcinst.ini").read_text()
        if f"[{name}]" in text and str(library) in text:
            return Path(current)
        base = text
    else:
        system = system_odbcinst()
        base = system.read_text() if system else ""
    folder = folder or Path(tempfile.mkdtemp(prefix="arrowgate-odbcinst-"))
    entry = f"[{name}]\nDescription=Microsoft ODBC Driver 18 for SQL Server\nDriver={library}\n"
    kept = _without_section(base, name)
    (folder / "odbcinst.ini").write_text(kept.rstrip() + ("\n\n" if kept.strip() else "") + entry)
    (folder / "odbc.ini").touch()
    os.environ["ODBCSYSINI"] = str(folder)
    return folder


def _without_section(text: str, name: str) -> str:
    out, skipping = [], False
    for line in text.splitlines():
        if line.strip().startswith("["):
            skipping = line.strip() == f"[{name}]"
        if not skipping:
            out.append(line)
    return "\n".join(out)
