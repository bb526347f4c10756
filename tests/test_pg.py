"""The throwaway PostgreSQL cluster of ``tests/pg.py``: a killed run's cluster is reaped, a live one kept."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.pg import find_bin_dir, reap_stale_clusters

ORPHAN = """
import sys
from tests.pg import find_bin_dir, start_cluster
cluster = start_cluster(find_bin_dir())
print(cluster.folder, cluster.port)
"""  # exits without stopping the cluster, like a test run killed by a timeout


@pytest.mark.postgres
def test_a_cluster_whose_owner_died_is_reaped_and_a_live_one_is_kept(postgres):
    done = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=True)
    folder, port = done.stdout.split()
    with socket.create_connection(("127.0.0.1", int(port)), timeout=5):
        pass  # the orphan is running
    bin_dir = find_bin_dir()
    assert bin_dir is not None
    reaped = [str(f) for f in reap_stale_clusters(bin_dir)]
    assert folder in reaped
    assert str(postgres.folder) not in reaped
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(port)), timeout=5).close()
    assert postgres.psql("SELECT 1") == "1"
