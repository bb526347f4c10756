"""dev.py on a machine without the system packages the tests need.

ARROWGATE_ASSUME_MISSING makes dev.py's check report packages missing and
ARROWGATE_SYSTEM_INSTALL=0 stops it installing them, so a machine that has
everything shows what one without them does (removing unixodbc for real would
break every other test running here).
"""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("package", ["gcc", "python3-dev", "python3-venv"])
def test_the_install_checks_the_build_packages_first(tmp_path, package):
    done = subprocess.run([sys.executable, "-c", "import dev; dev.STAMP = dev.Path('/nonexistent');"
                           " dev.install()"], capture_output=True, text=True, cwd=ROOT,
                          env=_env(ARROWGATE_ASSUME_MISSING=package), timeout=60)
    assert done.returncode == 1
    assert done.stdout.strip() == (
        f"missing system packages {package} (arrowgate's C modules cannot be built, or its "
        f"venv made): "
        f"install them with: sudo apt-get install -y {package}")


def test_a_venv_left_without_pip_is_made_anew(tmp_path):
    """Debian's own python3 makes a venv without pip when python3-venv is missing, and exits;
    the next run (python3-venv installed) must not take that venv for a made one."""
    import venv

    import dev

    venv.create(tmp_path / "v", with_pip=False)
    python = tmp_path / "v" / dev.BIN.name / "python"
    assert subprocess.run([str(python), "-m", "pip", "--version"],
                          capture_output=True).returncode != 0
    dev.make_venv(tmp_path / "v")
    assert subprocess.run([str(python), "-m", "pip", "--version"],
                          capture_output=True).returncode == 0


def test_ci_runs_the_same_check_as_dev_py():
    script = (ROOT / ".ci" / "run").read_text()
    assert "python3 dev.py system" in script
    assert "apt-get" not in script
    assert Path(ROOT / "dev.py").read_text().count("SYSTEM_PACKAGES: dict") == 1


def test_the_tests_system_packages_install_while_pip_the_linters_and_the_wheel_alone_run():
    """On a fresh machine apt's downloads and pip's each take about a minute: `dev.py test`
    runs them at once, goes on with the linters and the wheel alone (no system package
    needed), and waits for apt only before the wheel's [all] venv (odbc examples) and
    pytest. Here apt's stand-in waits for the wheel alone: in turn, it would never end."""
    code = textwrap.dedent("""
        import json, sys, threading
        from pathlib import Path
        import dev
        bare_started, order = threading.Event(), []
        def system(packages, needed_for, consequence=None):
            if needed_for == "the tests":
                order.append("apt started")
                if not bare_started.wait(30):  # a hang guard: the stand-ins are instant
                    raise RuntimeError("pip, the linters or the wheel-check waited for apt")
                order.append("apt done")
            return []
        def run(*cmd):
            order.append("pytest" if "pytest" in map(str, cmd) else Path(str(cmd[0])).name)
        def wheel_check(network=False, before_extras=None):
            order.append("wheel alone")
            bare_started.set()
            before_extras()
            order.append("wheel with [all]")
        dev.ensure_system_packages, dev.run, dev.wheel_check = system, run, wheel_check
        dev.install = lambda: order.append("pip")
        sys.argv = ["dev.py", "test"]
        dev.main()
        print(json.dumps(order))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    order = json.loads(done.stdout)
    assert order.index("apt started") < order.index("pip") < order.index("apt done")
    assert [step for step in order if step not in ("apt started", "pip")] == [
        "ruff", "mypy", "lint-imports", "wheel alone", "apt done", "wheel with [all]", "pytest"]


def test_an_error_of_the_system_install_is_raised_where_it_is_waited_for():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dev_alongside", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)

    def failing() -> None:
        raise OSError("apt-get: no such file")

    job = dev.Alongside(failing)
    with pytest.raises(OSError, match="no such file"):
        job.wait()


def test_the_tests_marked_slow_are_handed_out_first(tmp_path):
    (tmp_path / "test_order.py").write_text(textwrap.dedent("""
        import pytest

        def test_quick():
            pass

        @pytest.mark.slow
        def test_long():
            pass
    """))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
         "-c", str(ROOT / "pyproject.toml"), "-p", "tests.conftest",
         str(tmp_path / "test_order.py")],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    names = [line.split("::")[-1] for line in done.stdout.splitlines() if "::" in line]
    assert names == ["test_long", "test_quick"], done.stdout + done.stderr
