"""A short run of bench/shared_lake_bench.py: two ``arrowgate serve`` processes on one
DuckLake (a PostgreSQL catalog, one data folder), four clients through the Flight
service mixing inserts, deletes, transfers (updates of the same rows) and reads. No
committed write may be lost or applied twice, and every read must see a committed
state. The long run (1, 2 and 3 gateways, 16 clients) is in docs/scale-out.md.
"""

from __future__ import annotations

import pytest

from bench.shared_lake_bench import measure

pytestmark = pytest.mark.postgres


def test_two_gateways_four_clients_lose_no_write_and_read_only_committed_states(
        postgres, tmp_path):
    result = measure(postgres, tmp_path, gateways=2, clients=4, seconds=4, accounts=4,
                     retries=20, seed=40)
    assert result["services_alive"]
    assert result["problems"] == [], result
    assert result["unknown"] == 0 and not result["errors"], result
    done = result["done"]
    assert done.get("transfer", 0) >= 1 and done.get("read", 0) >= 1, result
    # every conflict the clients met was a commit race the gateway named as one
    assert all("kind constraint" in m and "conflicted with another writer" in m
               for m in result["conflict_messages"]), result
