"""dev.py on a machine without the system packages the tests need.

ARROWGATE_ASSUME_MISSING makes dev.py's check report packages missing and
ARROWGATE_SYSTEM_INSTALL=0 stops it installing them, so a machine that has
everything shows what one without them does (removing unixodbc for real would
break every other test running here).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT

ODBC = "unixodbc odbc-postgresql libsqliteodbc tdsodbc"


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "ARROWGATE_SYSTEM_INSTALL": "0", **extra}


def test_missing_packages_are_one_line_naming_them_and_the_command():
    done = subprocess.run([sys.executable, str(ROOT / "dev.py"), "system"],
                          capture_output=True, text=True, cwd=ROOT,
                          env=_env(ARROWGATE_ASSUME_MISSING=ODBC), timeout=60)
    assert done.returncode == 1
    lines = [line for line in done.stdout.splitlines() if line.startswith("missing")]
    assert len(lines) == 1, done.stdout
    assert "unixodbc odbc-postgresql libsqliteodbc tdsodbc" in lines[0]
    assert f"sudo apt-get install -y {ODBC}" in lines[0]


def test_tests_needing_a_missing_package_are_skipped_with_that_line(tmp_path):
    (tmp_path / "test_needs_odbc.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.odbc
        def test_odbc():
            import pyodbc  # fails to import without unixodbc

        def test_other():
            pass
    """))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "-c", str(ROOT / "pyproject.toml"), "-p", "tests.conftest",
         str(tmp_path / "test_needs_odbc.py")],
        capture_output=True, text=True, cwd=ROOT,
        env=_env(ARROWGATE_ASSUME_MISSING=ODBC), timeout=120)
    assert "1 passed, 1 skipped" in done.stdout, done.stdout + done.stderr
    assert f"missing system packages {ODBC} (the tests marked odbc are skipped): " \
           f"install them with: sudo apt-get install -y {ODBC}" in done.stdout


def test_without_a_c_compiler_the_build_says_so_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "setup.py", "--quiet", "build_ext",
                           "--build-temp", str(tmp_path / "t"), "--build-lib", str(tmp_path / "l")],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "CC": "/bin/false"}, timeout=120)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("arrowgate: the csv engine's scanner and the comparator's row matcher "
                           "are C and could not be compiled")
    assert "apt-get install -y gcc python3-dev" in last
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("package", ["gcc", "python3-dev"])
def test_the_install_checks_the_build_packages_first(tmp_path, package):
    done = subprocess.run([sys.executable, "-c", "import dev; dev.STAMP = dev.Path('/nonexistent');"
                           " dev.install()"], capture_output=True, text=True, cwd=ROOT,
                          env=_env(ARROWGATE_ASSUME_MISSING=package), timeout=60)
    assert done.returncode == 1
    assert done.stdout.strip() == (
        f"missing system packages {package} (the csv engine's C scanner cannot be built): "
        f"install them with: sudo apt-get install -y {package}")


def test_ci_runs_the_same_check_as_dev_py():
    script = (ROOT / ".ci" / "run").read_text()
    assert "python3 dev.py system" in script
    assert "apt-get" not in script
    assert Path(ROOT / "dev.py").read_text().count("SYSTEM_PACKAGES: dict") == 1
