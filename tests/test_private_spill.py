"""Each DuckDB engine spills into a folder of its own, mode 0700, removed when it closes,
and users who share the service never learn where (issue 36).

DuckDB's default was ``.tmp/`` in the working folder, one folder for every
engine of the process, and SQL may read and write DuckDB's temporary folder
whatever the file lockdown says: one user's spill file was read and
overwritten by a user limited to another engine.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import gateway
from gateway.errors import GatewayError
from gateway.statement import Principal

CONFIG = {"engines": {"one": {"type": "duckdb", "files": "sources"},
                      "two": {"type": "duckdb", "files": "sources"}}}
#: a user of the service, limited to engine two
BOB = Principal("bob", engines=frozenset({"two"}), shared=True)


def spill_folder(gw: gateway.Gateway, engine: str) -> Path:
    return Path(gw.execute("SELECT current_setting('temp_directory') AS d",
                           engine=engine).to_arrow().column(0)[0].as_py())


def test_each_engine_spills_into_a_private_folder_removed_at_close(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with gateway.connect(CONFIG) as gw:
        one, two = spill_folder(gw, "one"), spill_folder(gw, "two")
        assert one != two
        for folder in (one, two):
            assert folder.is_absolute() and folder.is_dir()
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700
            assert not folder.is_relative_to(tmp_path)  # not the working folder's .tmp/
    assert not one.exists() and not two.exists()


def test_a_user_of_another_engine_cannot_write_into_a_spill_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with gateway.connect(CONFIG) as gw:
        target = (tmp_path / spill_folder(gw, "one") / "planted.csv").resolve()
        target.parent.mkdir(exist_ok=True)  # DuckDB makes it at its first spill
        with pytest.raises(GatewayError):
            gw.execute(f"COPY (SELECT 1 AS a) TO '{target}'", engine="two",
                       principal=BOB).to_arrow()
        assert not target.exists()


def test_configured_temp_directory_is_left_as_configured(tmp_path):
    chosen = tmp_path / "spill-here"
    config = {"engines": {"one": {"type": "duckdb",
                                  "settings": {"temp_directory": str(chosen)}}}}
    with gateway.connect(config) as gw:
        assert spill_folder(gw, "one") == chosen
    assert os.path.exists(tmp_path)


@pytest.mark.parametrize("sql", [
    "SELECT current_setting('temp_directory') AS d",
    "SELECT value FROM duckdb_settings() WHERE name = 'temp_directory'",
    "SELECT * FROM duckdb_temporary_files()",
    "SELECT current_setting('home_directory') AS d",
])
def test_users_of_the_service_never_learn_the_server_folders(sql):
    with gateway.connect(CONFIG) as gw:
        with pytest.raises(GatewayError, match="server's folders") as refused:
            gw.execute(sql, engine="two", principal=BOB).to_arrow()
        assert refused.value.kind == "permission"
