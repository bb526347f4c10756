#!/usr/bin/env python3
"""Set up and run arrowgate from a fresh clone with nothing but Python 3.11+.

    python3 dev.py demo      # install into .venv, run the quickstart on the bundled data
    python3 dev.py test      # install into .venv, run ruff, mypy, import-linter, the
                             # wheel-check below and pytest
    python3 dev.py system    # install the system packages the tests need (CI runs this)
    python3 dev.py wheel-check  # the wheel alone in a clean venv: demo, a shadowed query,
                                # each example's commands (its README.md), then again with
                                # [all]: what the suite's venv cannot show (--network: also
                                # the commands that download, e.g. DuckDB releases)

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
import time
import venv
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
_BEGAN = time.monotonic()
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".arrowgate-installed"
# the C modules (the csv engine's, the comparator's row matcher) are compiled by the install:
# a change to them reinstalls too
INPUTS = ["pyproject.toml", "setup.py", "examples/plugin_minimal/pyproject.toml",
          "plugins/gateway_csv/_scanner.c", "plugins/gateway_csv/_mapfile.h",
          "plugins/gateway_csv/_rows.h", "plugins/gateway_csv/_dialect.c",
          "gateway/verify/_row_match.c"]


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
#: What installing arrowgate needs: a compiler and Python's headers for its C modules (the
#: csv engine's scanner, the row matcher), and ensurepip for its virtual environments
#: (Debian's own python3 leaves it to python3-venv).
BUILD_PACKAGES = ("gcc", "python3-dev", "python3-venv")


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
    if package == "python3-venv":
        import importlib
        import importlib.util

        importlib.invalidate_caches()  # (apt may have just put it on disk)
        return importlib.util.find_spec("ensurepip") is not None
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
        print(f"[{since_start()}] installing system packages for {needed_for}: "
              f"{' '.join(missing)}", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "-o", "Dpkg::Use-Pty=0", *missing],
                       env=env)  # (Use-Pty=0: no progress bars in a log)
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


def since_start() -> str:
    """The time since dev.py started, as each step's line shows it (a fresh machine's
    minutes go to downloads: the log says where)."""
    seconds = int(time.monotonic() - _BEGAN)
    return f"{seconds // 60}m{seconds % 60:02d}s"


def run(*cmd: str | Path) -> None:
    print(f"+ [{since_start()}]", " ".join(str(c) for c in cmd), flush=True)
    done = subprocess.run([str(c) for c in cmd], cwd=ROOT)
    if done.returncode != 0:
        sys.exit(done.returncode)


def check_python() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs on any python3
        sys.exit(f"arrowgate needs Python 3.11 or newer; this is {sys.version.split()[0]}")


def ensure_build_packages() -> None:
    if ensure_system_packages(list(BUILD_PACKAGES), "installing arrowgate",
                              "arrowgate's C modules cannot be built, or its venv made"):
        sys.exit(1)


def make_venv(where: Path) -> None:
    """A venv with pip in ``where``; one left without pip by an earlier failure (no
    ensurepip) is made anew, and a failure leaves no half-made venv behind."""
    python = where / BIN.name / "python"
    if python.exists() and subprocess.run([str(python), "-m", "pip", "--version"],
                                          capture_output=True).returncode == 0:
        return
    print(f"creating {where}", flush=True)
    try:
        venv.create(where, with_pip=True, clear=True)
    except (OSError, subprocess.CalledProcessError, SystemExit) as exc:  # (Debian exits)
        shutil.rmtree(where, ignore_errors=True)
        sys.exit(f"could not create the virtual environment {where}: {exc}")


def install() -> None:
    digest = hashlib.sha256(b"".join((ROOT / p).read_bytes() for p in INPUTS
                                     if (ROOT / p).exists())).hexdigest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    check_python()
    ensure_build_packages()
    make_venv(VENV)
    run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PY, "-m", "pip", "install", "--quiet", "-e", ".[dev]", "-e", "examples/plugin_minimal")
    STAMP.write_text(digest)


def demo() -> None:
    # The quickstart as a wheel's user gets it (arrowgate demo): one query on arrowgate's CSV
    # scanner shadowed by DuckDB (the answer, the verdict, the latency ratio), then a small
    # corpus as a pipeline would run it.
    run(BIN / "arrowgate", "demo")


class Alongside:
    """A job on a thread of its own, waited for (its exception raised) where its result is
    needed: `dev.py test` installs the tests' system packages while pip fills the venv, the
    linters run and the wheel is checked alone, since on a fresh machine each takes about a
    minute of downloads."""

    def __init__(self, job: Any) -> None:
        import threading

        self._error: BaseException | None = None

        def work() -> None:
            try:
                job()
            except BaseException as error:  # raised again by wait()
                self._error = error

        self._thread = threading.Thread(target=work, name="dev-alongside", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def test(extra: list[str], system: Alongside | None = None) -> None:
    if system is None:
        ensure_system_packages(list(SYSTEM_PACKAGES), "the tests")
    run(BIN / "ruff", "check", "gateway", "plugins", "tests", "examples", "bench", "dev.py")
    run(BIN / "mypy")
    run(BIN / "lint-imports")
    # the wheel alone, as a user installs it, then with [all], whose odbc examples load
    # unixODBC: the system packages are waited for there
    wheel_check(before_extras=system.wait if system is not None else None)
    if system is not None:
        system.wait()
    # one worker more than the cores (at most 8): the tests wait (servers starting,
    # subprocesses, the console's pilot) for much of their time; on 2 cores the suite took
    # 7 min 53 s with 2 workers (3,497 tests) and 6 min 46 s with 3 (3,724 tests; issue 38)
    workers = ["-n", str(max(2, min(8, (os.cpu_count() or 1) + 1)))] \
        if not any(a.startswith("-n") for a in extra) else []
    run(PY, "-m", "pytest", *workers, *extra)


def wheel_check(network: bool = False, before_extras: Any = None) -> None:
    """Build the wheel and install it alone into a clean venv (pip's own cache and
    configuration, an empty arrowgate cache): run what a new user runs first, then, in the
    folder `arrowgate init NAME` writes, the commands each example's README.md lists.
    A second clean venv with every extra ([all]) runs a shadowed query and the examples
    with a command that needs an extra. Commands that need the network run only with
    --network; each skipped command is printed with why. ``before_extras`` is called
    before the second venv (`dev.py test`: the system packages may still be installing)."""
    import tempfile
    import time
    import tomllib

    commands = _example_commands_module()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="arrowgate-wheel-") as tmp:
        out = Path(tmp) / "dist"
        run(PY, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, ".")
        wheel = next(out.glob("*.whl"))
        network_needs = {"network"} if network else set()
        bare = _WheelVenv(Path(tmp), "base", str(wheel))
        bare.step(["arrowgate", "demo"])
        bare.step(["arrowgate", "query", "-e", "duck", "--shadow", "d2", "SELECT 42 AS a"])
        for name in bare.example_names():
            bare.run_example(name, commands, network_needs)
        if before_extras is not None:
            before_extras()
        full = _WheelVenv(Path(tmp), "all", f"{wheel}[all]")
        full.step(["arrowgate", "query", "-e", "duck", "--shadow", "d2", "SELECT 42 AS a"])
        extras = {f"extra:{name}" for name in tomllib.loads(
            (ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]}
        for name in full.example_names():  # those with a command that needs an extra
            if any(n.startswith("extra:") for c in bare.commands_of(name, commands)
                   for n in c.needs):
                full.run_example(name, commands, network_needs | extras, only_extras=True)
    skipped = bare.skipped + full.skipped
    print(f"wheel-check: passed in {time.monotonic() - began:.0f} s; ran "
          f"{bare.ran + full.ran} example commands, skipped {skipped}"
          + ("" if network else " (--network runs those that need the network)"), flush=True)


def _example_commands_module() -> Any:
    """gateway/cli/example_commands.py (standard library only), loaded without gateway's imports."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("arrowgate_example_commands",
                                                  ROOT / "gateway" / "cli" / "example_commands.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


class _WheelVenv:
    """A clean venv holding the wheel (and the extras in ``requirement``), with a folder to
    work in and an empty arrowgate cache."""

    def __init__(self, tmp: Path, name: str, requirement: str) -> None:
        import time

        self.began = time.monotonic()
        self.dir, self.work = tmp / f"venv-{name}", tmp / f"work-{name}"
        self.name, self.ran, self.skipped = name, 0, 0
        print(f"wheel-check: a clean venv with {Path(requirement).name}", flush=True)
        make_venv(self.dir)
        self.bin = self.dir / BIN.name
        # --no-compile: byte-compiling every module of [all] (pyspark's thousands) took most
        # of its install; Python compiles what it imports anyway
        run(self.bin / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
            "--no-compile", requirement)
        self.work.mkdir()
        (self.work / "arrowgate.toml").write_text(
            'default_engine = "duck"\n[engines.duck]\ntype = "duckdb"\n'
            '[engines.d2]\ntype = "duckdb"\n')
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "ARROWGATE_CONFIG", "PYTHONHOME")}
        self.env = {**env, "PATH": f"{self.bin}{os.pathsep}{env.get('PATH', '')}",
                    "VIRTUAL_ENV": str(self.dir), "ARROWGATE_HOME": str(tmp / "home")}

    def clock(self) -> str:
        """Seconds since this venv was begun (its install included)."""
        import time

        return f"{time.monotonic() - self.began:.0f}s"

    def step(self, argv: list[str], cwd: Path | None = None) -> None:
        print(f"+ [{self.name} {self.clock()}] " + " ".join(argv), flush=True)
        done = subprocess.run([str(self.bin / argv[0]), *argv[1:]], cwd=cwd or self.work,
                              env=self.env)
        if done.returncode != 0:
            sys.exit(f"wheel-check: `{' '.join(argv)}` failed from the wheel "
                     f"(exit {done.returncode})")

    def example_names(self) -> list[str]:
        listed = subprocess.run([str(self.bin / "python"), "-c",
                                 "from gateway.cli.commands.init import example_names;"
                                 "print(*example_names())"],
                                env=self.env, capture_output=True, text=True, check=True)
        return listed.stdout.split()

    def commands_of(self, name: str, commands: Any) -> list[Any]:
        folder = self.work / name
        if not folder.exists():
            self.step(["arrowgate", "init", name])
        readme = folder / "README.md"
        if not readme.is_file():
            sys.exit(f"wheel-check: the example {name} has no README.md listing its commands")
        listed: list[Any] = commands.read_commands(readme.read_text())
        return listed

    def run_example(self, name: str, commands: Any, at_hand: set[str],
                    only_extras: bool = False) -> None:
        """Run the example's commands whose needs are ``at_hand`` in the folder `init`
        wrote; ``only_extras``: only those that need an extra, and the services (background
        commands) they talk to, as the base venv ran the rest."""
        folder = self.work / name
        listed = self.commands_of(name, commands)
        if not listed:
            sys.exit(f"wheel-check: {name}/README.md lists no commands under "
                     f"{commands.HEADING!r}")
        jobs: list[subprocess.Popen[bytes] | None] = []
        try:
            for command in listed:
                if only_extras and not command.background and command.stops_job is None \
                        and not any(n.startswith("extra:") for n in command.needs):
                    continue
                missing = command.missing(at_hand)
                job = command.stops_job
                if job is not None and (job > len(jobs) or jobs[job - 1] is None):
                    missing = [f"background command %{job} (it was skipped)"]
                if missing:
                    self.skipped += 1
                    words = [f"the {m[6:]} extra" if m.startswith("extra:") else m
                             for m in missing]
                    print(f"- [{self.name} {self.clock()}] {name}: skipped `{command.text}`: "
                          f"needs {' and '.join(words)}: {command.why or 'see README.md'}",
                          flush=True)
                    if command.background:
                        jobs.append(None)
                    continue
                self.ran += 1
                print(f"+ [{self.name} {self.clock()}] {name}: {command.text}", flush=True)
                if command.background:
                    jobs.append(_start_service(command.text[:-1].strip(), folder, self.env))
                elif job is not None:
                    _stop_service(jobs[job - 1])
                    jobs[job - 1] = None
                else:
                    done = subprocess.run(command.text, shell=True, cwd=folder, env=self.env)
                    if done.returncode != command.exit_code:
                        sys.exit(f"wheel-check: the example {name}'s `{command.text}` exited "
                                 f"{done.returncode} (README.md says {command.exit_code})")
        finally:
            for proc in jobs:
                _stop_service(proc)


def _start_service(text: str, folder: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start a background command and wait for its first line on stderr (a service's
    "listening on ..."), which is echoed with the rest of its output."""
    import threading

    proc = subprocess.Popen(text, shell=True, cwd=folder, env=env, stderr=subprocess.PIPE,
                            start_new_session=True)
    ready = threading.Event()

    def echo() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write("  | " + line.decode(errors="replace"))
            sys.stderr.flush()
            ready.set()
        ready.set()

    threading.Thread(target=echo, daemon=True).start()
    ready.wait(120)
    if proc.poll() is not None:
        sys.exit(f"wheel-check: `{text}` exited {proc.returncode} before it served")
    return proc


def _stop_service(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM to the background command's process group, as `kill %N` would send."""
    import signal

    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in ("demo", "test", "install", "system",
                                                "wheel-check"):
        sys.exit(__doc__)
    if sys.argv[1] == "system":
        sys.exit(1 if ensure_system_packages(list(BUILD_PACKAGES) + list(SYSTEM_PACKAGES),
                                             "the tests", "the build or some tests need them")
                 else 0)
    system = None
    if sys.argv[1] == "test":
        # the compiler first (pip builds the C modules), then the tests' packages while pip
        # installs (apt holds one lock: the two cannot overlap each other)
        check_python()
        ensure_build_packages()
        system = Alongside(lambda: ensure_system_packages(list(SYSTEM_PACKAGES), "the tests"))
    install()
    if sys.argv[1] == "demo":
        demo()
    elif sys.argv[1] == "test":
        test(sys.argv[2:], system)
    elif sys.argv[1] == "wheel-check":
        wheel_check(network="--network" in sys.argv[2:])


if __name__ == "__main__":
    main()
