"""Harlequin with harlequin-adbc, driven headless against `arrowgate serve`: a user's work
is kept, though the adapter connects with autocommit off and never commits.

Harlequin brings its own Textual, so it lives in a virtualenv of its own, made on first
use under ~/.cache/arrowgate (about a minute); without a package index it is skipped.
"""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import adbc_driver_flightsql.dbapi as dbapi
import pytest

from tests.flight_support import serving

DRIVER = Path(__file__).parent / "fixtures" / "harlequin" / "drive.py"
VENV = Path.home() / ".cache" / "arrowgate" / "harlequin-venv"
PACKAGES = ["harlequin==2.*", "harlequin-adbc", "adbc-driver-flightsql"]


@pytest.fixture(scope="module")
def harlequin_python() -> Path:
    python = VENV / "bin" / "python"
    ready = VENV / ".installed"
    if not ready.exists():
        venv.create(VENV, with_pip=True, clear=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PACKAGES],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.skip("Harlequin could not be installed (no package index?): "
                        + done.stderr.strip().splitlines()[-1][:200])
        ready.write_text(" ".join(PACKAGES))
    return python


def drive(python: Path, location: str, home: Path, *statements: str) -> None:
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_DATA_HOME": str(home / ".data")}
    done = subprocess.run([str(python), str(DRIVER), location, *statements],
                          capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("ran:") == len(statements)


@pytest.mark.slow
def test_a_harlequin_users_work_is_kept(harlequin_python, tmp_path):
    with serving() as server:
        drive(harlequin_python, server.location, tmp_path,
              "CREATE TABLE kept_by_harlequin AS SELECT 42 AS answer",
              "SELEC typo",  # wedged the session at 'transaction is aborted' before
              "INSERT INTO kept_by_harlequin VALUES (43)")
        with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute("SELECT answer FROM kept_by_harlequin ORDER BY answer")
            assert cur.fetchall() == [(42,), (43,)]


def test_with_transactions_on_harlequin_loses_what_it_never_commits(harlequin_python, tmp_path):
    """Why transactions are off by default: the same session, with them on."""
    with serving(transactions=True) as server:
        drive(harlequin_python, server.location, tmp_path,
              "CREATE TABLE lost_by_harlequin AS SELECT 42 AS answer")
        with dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur, \
                pytest.raises(dbapi.Error, match="lost_by_harlequin"):
            cur.execute("SELECT answer FROM lost_by_harlequin")

