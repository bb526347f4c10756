"""A local Spark Connect server for tests, and the pytest fixture that shares it.

The server is pyspark's own (its ``jars/`` carry Spark Connect): a JVM running
``SparkConnectServer`` in ``local[2]`` mode, listening on a free loopback
port, with its warehouse, scratch space and log in a temp folder. It takes
tens of seconds and about 1 GB to start, so one server serves the whole test
run: pytest-xdist's workers share it (the first one starts it; each worker
registers in its folder, and the last one to leave stops it). A server left by
a killed run is stopped by the next one.

Registered as a pytest plugin by ``tests/conftest.py``. Without Java (dev.py's
``default-jre-headless``: the tests marked ``spark`` are skipped with that line)
or pyspark (the ``spark`` extra), the ``spark`` fixture skips with the reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hang_guard import HANG_GUARD
from tests.pg import free_port

PREFIX = "arrowgate-spark-"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: a JVM on a loaded 2-core machine takes most of a minute: the start has its own guard
START_GUARD = 5 * HANG_GUARD


@dataclass(frozen=True)
class SparkServer:
    """One running server.

    Attributes:
        remote: the Spark Connect URL (``sc://127.0.0.1:PORT``), the engine's ``remote``.
        folder: the temp folder holding the warehouse and ``server.log``.
        seconds: how long the start took (launch to listening).
    """

    remote: str
    folder: Path
    pid: int
    seconds: float

    def stop(self) -> None:
        """Stop the server (its JVM and the script before it)."""
        _stop(self.pid)


def find_pyspark() -> Path | None:
    """pyspark's installed folder (holding ``bin/`` and ``jars/``), or None."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    home = Path(spec.origin).parent
    return home if (home / "jars").is_dir() and (home / "bin" / "spark-submit").is_file() \
        else None


def start_server(home: Path, folder: Path, *, for_tests: bool = True,
                 driver_memory: str = "1g", conf: dict[str, str] | None = None) -> SparkServer:
    """Launch a server in ``folder`` on a free port and wait until it listens.

    Args:
        for_tests: set the JVM and Spark for small data and a short life (below); False
            keeps Spark's and the JVM's defaults, as a benchmark wants.
        driver_memory: the JVM's heap (``local[2]`` runs everything in the driver).
        conf: more ``--conf`` settings, after the others.

    Raises:
        RuntimeError: the JVM exited or did not listen in time (its log's tail is the message).
    """
    port = free_port()
    log = folder / "server.log"
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(folder), "SPARK_CONF_DIR": str(folder / "conf")}
    env.pop("PYSPARK_PYTHON", None)
    (folder / "conf").mkdir(exist_ok=True)
    cmd = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS,
           "--name", "arrowgate tests", "--master", "local[2]", "--driver-memory", driver_memory,
           "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", "spark.ui.enabled=false",
           "--conf", "spark.sql.catalogImplementation=in-memory",
           "--conf", f"spark.sql.warehouse.dir={folder / 'warehouse'}",
           "--conf", f"spark.local.dir={folder / 'scratch'}"]
    java = f"-Djava.io.tmpdir={folder}"
    if for_tests:
        # the tests' data is small and each query runs once: 200 shuffle partitions (the
        # default) cost seconds per query on 2 cores, and so does compiling each plan to
        # Java (whole-stage code generation) and the JIT's top tier, on a JVM this short-lived
        cmd += ["--conf", "spark.sql.shuffle.partitions=2",
                "--conf", "spark.sql.codegen.wholeStage=false"]
        java += " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    cmd += ["--conf", f"spark.driver.extraJavaOptions={java}"]
    for key, value in (conf or {}).items():
        cmd += ["--conf", f"{key}={value}"]
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(cmd, cwd=folder, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        if process.poll() is not None or time.monotonic() - started > START_GUARD:
            _stop(process.pid)
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the Spark Connect server did not start: {tail}")
        time.sleep(0.5)
    return SparkServer(f"sc://127.0.0.1:{port}", folder, process.pid,
                       round(time.monotonic() - started, 1))


def _stop(pid: int) -> None:
    """Stop the server's process group (the JVM and the script before it)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + HANG_GUARD / 4
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie child of ours has exited
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


def _run_folder() -> Path:
    """The folder shared by this run's processes: xdist's workers have one run id."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    return Path(tempfile.gettempdir()) / f"{PREFIX}{run}"


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _users(folder: Path) -> set[int]:
    """The registered processes still running."""
    return {int(p.name[5:]) for p in folder.glob("user-*") if _alive(int(p.name[5:]))}


def reap_stale_servers() -> None:
    """Stop servers whose every user process is gone (a run killed before its teardown)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        if folder == _run_folder() or not (folder / "lock").exists():
            continue
        with _locked(folder):
            if _users(folder):
                continue
            state = folder / "server.json"
            if state.exists():
                _stop(json.loads(state.read_text())["pid"])
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def shared_server(home: Path) -> Iterator[SparkServer]:
    """This run's server, started by the first process that asks; stopped by the last to leave."""
    folder = _run_folder()
    folder.mkdir(exist_ok=True)
    me = folder / f"user-{os.getpid()}"
    with _locked(folder):
        state = folder / "server.json"
        server = None
        if state.exists():
            known = json.loads(state.read_text())
            server = SparkServer(**{**known, "folder": Path(known["folder"])})
            if not _alive(server.pid):
                server = None
        if server is None:
            server = start_server(home, folder)
            state.write_text(json.dumps({**server.__dict__, "folder": str(server.folder)}))
        me.touch()
    try:
        yield server
    finally:
        with _locked(folder):
            me.unlink(missing_ok=True)
            last = not _users(folder)
            if last:
                _stop(server.pid)
                (folder / "server.json").unlink(missing_ok=True)
        if last:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkServer]:
    """A running Spark Connect server, shared by the test run and stopped at its end.

    Skips when Java or pyspark is missing (with the line saying what to install).
    """
    from gateway.errors import install_extra

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java for the Spark Connect server: apt-get install -y "
                    "default-jre-headless (dev.py system does it as root)")
    home = find_pyspark()
    if home is None:
        pytest.skip(f"pyspark is not installed: {install_extra('spark')}")
    reap_stale_servers()
    with shared_server(home) as server:
        print(f"\nSpark Connect server {server.remote} (started in {server.seconds} s)")
        yield server
