#!/usr/bin/env python3
"""An application's traffic, played against `arrowgate serve` through the ADBC Flight SQL
driver: dashboards, lookups with parameters, and the arithmetic a billing report does.

    python examples/upgrade/app.py grpc://127.0.0.1:31338 --statements 300

Some of what it asks answers differently on DuckDB 2.0.1 than on 1.5.5 (rounding of
doubles, integer division and modulo by zero); the replay of its capture finds them.
"""

from __future__ import annotations

import argparse
import random

import adbc_driver_flightsql.dbapi as dbapi

#: (weight, statement, parameter maker or None)
WORKLOAD = [
    (30, "SELECT cab_type, count(*) AS trips FROM trips GROUP BY cab_type ORDER BY cab_type",
     None),
    (20, "SELECT cab_type, round(avg(fare_amount), 1) AS avg_fare FROM trips "
         "GROUP BY cab_type ORDER BY cab_type", None),
    (20, "SELECT count(*) AS n FROM trips WHERE passenger_count = ?",
     lambda rng: (rng.randint(0, 6),)),
    (10, "SELECT round(?::DOUBLE, 1) AS shown", lambda rng: (rng.choice([19.45, 2.25, 7.35]),)),
    (10, "SELECT ?::INTEGER // ?::INTEGER AS per_seat, ?::INTEGER % ?::INTEGER AS rest",
     lambda rng: (lambda a, b: (a, b, a, b))(rng.randint(1, 9), rng.choice([0, 2, 3]))),
    (10, "SELECT max(trip_distance) AS longest FROM trips", None),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("uri", help="the service, e.g. grpc://127.0.0.1:31338")
    parser.add_argument("--statements", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    weights = [w for w, _, _ in WORKLOAD]
    failed = 0
    with dbapi.connect(args.uri, autocommit=True) as conn, conn.cursor() as cur:
        for _ in range(args.statements):
            _, sql, make = rng.choices(WORKLOAD, weights)[0]
            try:
                cur.execute(sql, make(rng) if make else None)
                cur.fetchall()
            except dbapi.Error:
                failed += 1
    print(f"{args.statements} statements sent, {failed} failed")


if __name__ == "__main__":
    main()
