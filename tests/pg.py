"""A throwaway PostgreSQL cluster for tests, and the pytest fixtures that share it.

The server refuses to run as root, and tests often do: as root, ``initdb``
and ``pg_ctl`` run through ``runuser -u postgres --`` on a temp folder owned
by that user. The cluster listens on 127.0.0.1 at a free port (password
authentication) and on a Unix socket in its folder (trust), is created and
started once per test session (about 1 s) and stopped at the end.

Registered as a pytest plugin by ``tests/conftest.py``, so any test (the
conformance suite included) can ask for the ``postgres`` fixture.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hang_guard import HANG_GUARD

SUPERUSER = "postgres"
PREFIX = "arrowgate-pg-"
#: A file in each cluster's folder holding the pid of the process that made it.
OWNER = "owner"


def find_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (``$ARROWGATE_PG_BIN`` first), or None."""
    explicit = os.environ.get("ARROWGATE_PG_BIN")
    candidates = [explicit] if explicit else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresCluster:
    """One running cluster.

    Attributes:
        folder: the temp folder holding the data directory and the socket.
        port: the TCP port on 127.0.0.1 (also the socket's port number).
        password: the superuser's password for TCP connections.
    """

    folder: Path
    port: int
    password: str
    bin_dir: Path

    @property
    def socket_dir(self) -> Path:
        return self.folder

    def dsn(self, dbname: str = "postgres", *, password: bool = True) -> str:
        """A libpq keyword DSN over TCP (with the password unless ``password=False``)."""
        parts = [f"dbname={dbname}", "host=127.0.0.1", f"port={self.port}", f"user={SUPERUSER}"]
        if password:
            parts.append(f"password={self.password}")
        return " ".join(parts)

    def uri(self, dbname: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{dbname}"

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        """Run SQL with ``psql`` over the trusted socket; returns its unaligned output."""
        done = subprocess.run(
            [str(self.bin_dir / "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1",
             "-h", str(self.socket_dir), "-p", str(self.port), "-U", SUPERUSER,
             "-d", dbname, "-c", sql],
            capture_output=True, text=True, timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def create_database(self, name: str) -> str:
        """Create an empty database and return its TCP DSN."""
        self.psql(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def stop(self) -> None:
        _as_postgres([str(self.bin_dir / "pg_ctl"), "-D", str(self.folder / "data"),
                      "-m", "immediate", "-w", "stop"], check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


def _as_postgres(cmd: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", SUPERUSER, "--", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): "
                           f"{done.stderr.strip() or done.stdout.strip()}")
    return done


def start_cluster(bin_dir: Path, *, durable: bool = False) -> PostgresCluster:
    """initdb a cluster in a new temp folder and start it on a free port.

    Tests run with ``fsync=off`` (nothing here must survive a crash); a
    benchmark passes ``durable=True`` so commits cost what they cost in use.

    Raises:
        RuntimeError: initdb or pg_ctl failed (their output is in the message).
    """
    folder = Path(tempfile.mkdtemp(prefix=PREFIX))
    (folder / OWNER).write_text(f"{os.getpid()}\n")
    if os.geteuid() == 0:
        shutil.chown(folder, SUPERUSER, SUPERUSER)
    password = secrets.token_hex(12)
    pwfile = folder / "pw"
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(pwfile, SUPERUSER, SUPERUSER)
    try:
        _as_postgres([str(bin_dir / "initdb"), "-D", str(folder / "data"), "-U", SUPERUSER,
                      "--auth-local=trust", "--auth-host=scram-sha-256",
                      f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"])
        pwfile.unlink()
        last = ""
        for _ in range(5):
            port = free_port()
            options = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 "
                       f"-c fsync={'on' if durable else 'off'} -c max_connections=200")
            done = _as_postgres([str(bin_dir / "pg_ctl"), "-D", str(folder / "data"),
                                 "-l", str(folder / "server.log"), "-o", options, "-w",
                                 "start"], check=False)
            if done.returncode == 0:
                cluster = PostgresCluster(folder, port, password, bin_dir)
                _wait_ready(cluster)
                return cluster
            last = _read(folder / "server.log") or done.stderr
        raise RuntimeError(f"pg_ctl start failed five times: {last.strip()[-2000:]}")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def reap_stale_clusters(bin_dir: Path) -> list[Path]:
    """Stop clusters whose creating process is gone (a test run killed before its teardown).

    Only folders this module made and whose ``owner`` process no longer
    exists are touched; a live session's cluster is left alone.
    """
    reaped = []
    for owner in Path(tempfile.gettempdir()).glob(f"{PREFIX}*/{OWNER}"):
        try:
            pid = int(owner.read_text().strip())
            os.kill(pid, 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            continue
        folder = owner.parent
        if (folder / "data").is_dir():
            _as_postgres([str(bin_dir / "pg_ctl"), "-D", str(folder / "data"), "-m",
                          "immediate", "-w", "stop"], check=False)
        shutil.rmtree(folder, ignore_errors=True)
        reaped.append(folder)
    return reaped


def _wait_ready(cluster: PostgresCluster) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while True:
        try:
            cluster.psql("SELECT 1")
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _read(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")
    return ""


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A running throwaway cluster, shared by the session and stopped at its end.

    Fails (does not skip) when the server binaries are missing: ``.ci/run``
    installs them, and a machine without them cannot run these tests honestly.
    """
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.fail("PostgreSQL server binaries not found: apt-get install -y postgresql, "
                    "or point ARROWGATE_PG_BIN at the folder holding initdb and pg_ctl")
    reap_stale_clusters(bin_dir)
    cluster = start_cluster(bin_dir)
    try:
        yield cluster
    finally:
        cluster.stop()
