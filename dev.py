#!/usr/bin/env python3
"""Set up and run arrowgate from a fresh clone with nothing but Python 3.11+.

    python3 dev.py demo      # install into .venv, run the quickstart on the bundled data
    python3 dev.py test      # install into .venv, run ruff, mypy, import-linter, the
                             # wheel-check below and pytest
    python3 dev.py system    # install the system packages the tests need (CI runs this)
    python3 dev.py wheel-check  # the wheel alone in a clean venv: demo, a shadowed query,
                                # init of each example (what the suite's venv cannot show)

The virtual environment is made once in .venv and refreshed when
pyproject.toml changes. The system packages (SYSTEM_PACKAGES) are installed
with apt-get when this runs as root on a machine that has it; elsewhere one
line names the missing ones and the command, and the tests that need them are
skipped with that line as the reason (tests/conftest.py asks this module).

ARROWGATE_ASSUME_MISSING="pkg pkg" makes the check report those packages
missing, and ARROWGATE_SYSTEM_INSTALL=0 stops it installing anything: together
they show, on a machine that has everything, what a machine without them does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".arrowgate-installed"
# the csv engine's C modules are compiled by the install: a change to them reinstalls too
INPUTS = ["pyproject.toml", "setup.py", "examples/plugin_minimal/pyproject.toml",
          "plugins/gateway_csv/_scanner.c", "plugins/gateway_csv/_mapfile.h",
          "plugins/gateway_csv/_dialect.c"]


#: The Debian packages the tests need, each with what needs it and the pytest marker of
#: the tests that are skipped without it.
SYSTEM_PACKAGES: dict[str, tuple[str, str]] = {
    "postgresql": ("postgres", "a throwaway PostgreSQL server for the adbc, odbc and ducklake tests"),
    "unixodbc": ("odbc", "the odbc engine (pyodbc and arrow-odbc load libodbc.so.2)"),
    "odbc-postgresql": ("odbc", "the odbc engine's tests against PostgreSQL (psqlODBC)"),
    "libsqliteodbc": ("odbc", "the odbc engine's tests against SQLite"),
    "tdsodbc": ("odbc", "the odbc engine's SQL Server driver (FreeTDS)"),
    "gcc-mingw-w64-x86-64": ("mingw", "compile-checks the csv scanner's Windows file code"),
    "tmux": ("tmux", "the console's real-terminal tests (a hostile answer, quitting mid-query)"),
    "default-jre-headless": ("spark", "Java for the local Spark Connect server of the spark "
                             "engine's tests (tests/spark.py)"),
}
#: What building the csv engine's C scanner needs: a compiler and Python's headers.
BUILD_PACKAGES = ("gcc", "python3-dev")


def _assumed_missing() -> set[str]:
    return set(os.environ.get("ARROWGATE_ASSUME_MISSING", "").replace(",", " ").split())


def _installed(package: str) -> bool:
    if package in _assumed_missing():
        return False
    if package == "postgresql":  # the server binaries, wherever they are (tests/pg.py)
        return bool(shutil.which("initdb") or list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
                    or os.environ.get("ARROWGATE_PG_BIN"))
    if package == "gcc-mingw-w64-x86-64":
        return shutil.which("x86_64-w64-mingw32-gcc") is not None
    if package == "tmux":
        return shutil.which("tmux") is not None
    if package == "default-jre-headless":  # any Java will do (openjdk-17-jre-headless here)
        return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))
    if package == "gcc":
        compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
        return shutil.which(compiler.split()[0]) is not None
    if package == "python3-dev":
        return (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file()
    if shutil.which("dpkg-query") is None:  # not Debian: trust the libraries themselves
        return package != "unixodbc" or _loads("odbc")
    done = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status}", package],
                          capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.strip() == "installed"


def _loads(library: str) -> bool:
    import ctypes.util

    return ctypes.util.find_library(library) is not None


def missing_system_packages(packages: list[str] | None = None) -> list[str]:
    """The packages of ``packages`` (default: SYSTEM_PACKAGES) that are not installed."""
    return [p for p in (packages or list(SYSTEM_PACKAGES)) if not _installed(p)]


def install_command(packages: list[str]) -> str:
    return "apt-get install -y " + " ".join(packages)


def missing_line(packages: list[str], consequence: str) -> str:
    """The one line that names missing packages, what that means, and the command."""
    return (f"missing system packages {' '.join(packages)} ({consequence}): "
            f"install them with: sudo {install_command(packages)}")


def tests_skipped(packages: list[str]) -> str:
    markers = sorted({SYSTEM_PACKAGES[p][0] for p in packages if p in SYSTEM_PACKAGES})
    return "the tests marked " + ", ".join(markers) + " are skipped"


def can_install() -> bool:
    return (os.environ.get("ARROWGATE_SYSTEM_INSTALL", "1") != "0" and shutil.which("apt-get")
            is not None and hasattr(os, "geteuid") and os.geteuid() == 0)


def ensure_system_packages(packages: list[str], needed_for: str,
                           consequence: str | None = None) -> list[str]:
    """Install what is missing of ``packages`` when this can (root and apt-get).

    Returns the packages still missing, after printing the one line about them.
    """
    missing = missing_system_packages(packages)
    if missing and can_install():
        print(f"installing system packages for {needed_for}: {' '.join(missing)}", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], env=env)
        missing = missing_system_packages(missing)
    if missing:
        print(missing_line(missing, consequence or tests_skipped(missing)), flush=True)
    return missing


def skip_reasons() -> dict[str, str]:
    """For each pytest marker whose tests cannot run here, the reason they are skipped."""
    by_marker: dict[str, list[str]] = {}
    for package in missing_system_packages():
        by_marker.setdefault(SYSTEM_PACKAGES[package][0], []).append(package)
    return {marker: missing_line(packages, tests_skipped(packages))
            for marker, packages in by_marker.items()}


def run(*cmd: str | Path) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    done = subprocess.run([str(c) for c in cmd], cwd=ROOT)
    if done.returncode != 0:
        sys.exit(done.returncode)


def install() -> None:
    digest = hashlib.sha256(b"".join((ROOT / p).read_bytes() for p in INPUTS
                                     if (ROOT / p).exists())).hexdigest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs on any python3
        sys.exit(f"arrowgate needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if ensure_system_packages(list(BUILD_PACKAGES), "building the csv engine's C scanner",
                              "the csv engine's C scanner cannot be built"):
        sys.exit(1)
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        venv.create(VENV, with_pip=True)
    run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PY, "-m", "pip", "install", "--quiet", "-e", ".[dev]", "-e", "examples/plugin_minimal")
    STAMP.write_text(digest)


def demo() -> None:
    # The quickstart as a wheel's user gets it (arrowgate demo): one query on arrowgate's CSV
    # scanner shadowed by DuckDB (the answer, the verdict, the latency ratio), then a small
    # corpus as a pipeline would run it.
    run(BIN / "arrowgate", "demo")


def test(extra: list[str]) -> None:
    ensure_system_packages(list(SYSTEM_PACKAGES), "the tests")
    run(BIN / "ruff", "check", "gateway", "plugins", "tests", "examples", "bench", "dev.py")
    run(BIN / "mypy")
    run(BIN / "lint-imports")
    wheel_check()  # ~35 s: the wheel alone, as a user installs it
    workers = ["-n", "2"] if not any(a.startswith("-n") for a in extra) else []
    run(PY, "-m", "pytest", *workers, *extra)


def wheel_check() -> None:
    """Build the wheel, install it with no extras into a clean venv (pip's own cache and
    configuration), and run what a new user runs first."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="arrowgate-wheel-") as tmp:
        out, env_dir, work = Path(tmp) / "dist", Path(tmp) / "venv", Path(tmp) / "work"
        run(PY, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, ".")
        venv.create(env_dir, with_pip=True)
        bin_dir = env_dir / BIN.name
        run(bin_dir / "python", "-m", "pip", "install", "-q", next(out.glob("*.whl")))
        work.mkdir()
        arrowgate = str(bin_dir / "arrowgate")
        (work / "arrowgate.toml").write_text('default_engine = "duck"\n[engines.duck]\n'
                                              'type = "duckdb"\n[engines.d2]\ntype = "duckdb"\n')
        steps = [[arrowgate, "demo"],
                 [arrowgate, "query", "-e", "duck", "--shadow", "d2", "SELECT 42 AS a"]]
        examples = sorted(p.name for p in (ROOT / "examples").iterdir()
                          if p.is_dir() and p.name != "data")
        steps += [[arrowgate, "init", name] for name in examples]
        for step in steps:
            print("+", " ".join(step[1:]), flush=True)
            if subprocess.run(step, cwd=work).returncode != 0:
                sys.exit(f"wheel-check: `arrowgate {' '.join(step[1:])}` failed from the wheel")


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in ("demo", "test", "install", "system",
                                                "wheel-check"):
        sys.exit(__doc__)
    if sys.argv[1] == "system":
        sys.exit(1 if ensure_system_packages(list(BUILD_PACKAGES) + list(SYSTEM_PACKAGES),
                                             "the tests", "the build or some tests need them")
                 else 0)
    install()
    if sys.argv[1] == "demo":
        demo()
    elif sys.argv[1] == "test":
        test(sys.argv[2:])
    elif sys.argv[1] == "wheel-check":
        wheel_check()


if __name__ == "__main__":
    main()
