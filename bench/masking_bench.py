#!/usr/bin/env python3
"""How long masking takes per statement (gateway.masking.mask_text runs on every statement
a capture writes, every error message and every store record).

    .venv/bin/python bench/masking_bench.py

Statements: a short query, a query of about 9 KB with no key naming a credential, the same
with one ``api_key = '...'``, and a ``CREATE SECRET``. One warm-up, then the median and
min-max of 7 rounds of 1,000 calls each, in microseconds per call.
"""

from __future__ import annotations

import statistics
import time

from gateway.masking import mask_text

LONG = "SELECT " + ", ".join(f"col_{i} + {i} AS c{i}" for i in range(400)) + \
    " FROM t WHERE x = 'abc'"
STATEMENTS = {
    "short query": "SELECT o.id, o.total FROM orders o WHERE o.customer_id = 42 "
                   "AND o.created > '2026-01-01' ORDER BY o.total DESC LIMIT 10",
    "9 KB query": LONG,
    "9 KB query with a key": LONG + " AND api_key = 'k3y-value'",
    "CREATE SECRET": "CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 'abc', REGION 'eu')",
}


def main() -> None:
    for name, sql in STATEMENTS.items():
        mask_text(sql)
        rounds = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(1000):
                mask_text(sql)
            rounds.append((time.perf_counter() - start) / 1000 * 1e6)
        print(f"{name:<24} {len(sql):>6} chars  median {statistics.median(rounds):8.1f} us"
              f"  (min {min(rounds):.1f}, max {max(rounds):.1f})")


if __name__ == "__main__":
    main()
