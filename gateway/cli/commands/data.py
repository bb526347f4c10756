"""``arrowgate data taxi``: write a deterministic synthetic NYC-taxi-shaped CSV.

The real trip files cannot be downloaded on these machines; this writes the
51-column layout of DuckDB's NYC-taxi benchmark (Mark Litwintschik's
``trips`` table) with plausible values, the same bytes for the same ``--rows``
and ``--seed`` on every machine. Values come from a counter-based hash of
(row, column), computed block by block with pyarrow.compute, so memory stays
flat whatever the row count.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from gateway.cli.commands import EXIT_OK, UsageError, add_command, examples_epilog, formatter

TAXI_COLUMNS = [
    "trip_id", "vendor_id", "pickup_datetime", "dropoff_datetime", "store_and_fwd_flag",
    "rate_code_id", "pickup_longitude", "pickup_latitude", "dropoff_longitude",
    "dropoff_latitude", "passenger_count", "trip_distance", "fare_amount", "extra", "mta_tax",
    "tip_amount", "tolls_amount", "ehail_fee", "improvement_surcharge", "total_amount",
    "payment_type", "trip_type", "pickup", "dropoff", "cab_type", "precipitation",
    "snow_depth", "snowfall", "max_temperature", "min_temperature", "average_wind_speed",
    "pickup_nyct2010_gid", "pickup_ctlabel", "pickup_borocode", "pickup_boroname",
    "pickup_ct2010", "pickup_boroct2010", "pickup_cdeligibil", "pickup_ntacode",
    "pickup_ntaname", "pickup_puma", "dropoff_nyct2010_gid", "dropoff_ctlabel",
    "dropoff_borocode", "dropoff_boroname", "dropoff_ct2010", "dropoff_boroct2010",
    "dropoff_cdeligibil", "dropoff_ntacode", "dropoff_ntaname", "dropoff_puma",
]
BLOCK_ROWS = 100_000

_BOROUGHS = ["Manhattan", "Brooklyn", "Queens", "Bronx", "Staten Island"]
_NTA = [("MN17", "Midtown-Midtown South"), ("MN24", "SoHo-TriBeCa-Civic Center-Little Italy"),
        ("MN13", "Hudson Yards-Chelsea-Flatiron-Union Square"), ("QN98", "Airport"),
        ("BK38", "DUMBO-Vinegar Hill-Downtown Brooklyn-Boerum Hill"), ("MN40", "Upper East Side"),
        ("MN12", "Upper West Side"), ("BX63", "West Concourse"), ("QN31", "Hunters Point")]
_PLACES = ["Midtown", "JFK Airport", "LaGuardia Airport", "Upper East Side", "SoHo",
           "Williamsburg", "Astoria", "Harlem", "Financial District", "Chelsea"]


def register(sub: Any) -> None:
    d = add_command(
        sub, "data", help="write synthetic benchmark data",
        description="Write a deterministic synthetic data set for benchmarks and tests.",
        examples=["arrowgate data taxi --rows 1000000 --out bench/data/trips_1m.csv"],
    )
    _options(d, None)
    sets = d.add_subparsers(dest="dataset", metavar="DATASET", required=True)
    # the options again on the data set, so they may follow its name; SUPPRESS keeps
    # those given before it
    taxi = sets.add_parser(
        "taxi", help="51-column NYC-taxi-shaped trips", formatter_class=formatter,
        argument_default=argparse.SUPPRESS,
        description="Write the 51-column layout of DuckDB's NYC-taxi benchmark with plausible "
        "values: the same bytes for the same --rows and --seed on every machine.",
        epilog=examples_epilog(["arrowgate data taxi --rows 1000000 --out trips_1m.csv",
                                "arrowgate data taxi --rows 1000 --seed 7 --out small.csv"]))
    _options(taxi, argparse.SUPPRESS)
    taxi.set_defaults(run=run)


def _options(p: argparse.ArgumentParser, default: Any) -> None:
    def add(*names: str, **kwargs: Any) -> None:
        p.add_argument(*names, **kwargs, **({"default": default} if default else {}))

    add("--rows", type=int, metavar="N", help="rows to write (required)")
    add("--out", metavar="FILE", help="the CSV file to write (required)")
    add("--seed", type=int, help="changes every value (default 0)")


def run(args: argparse.Namespace) -> int:
    if args.rows is None or args.out is None:
        raise UsageError("pass --rows N and --out FILE, e.g. arrowgate data taxi --rows 1000 "
                         "--out trips.csv")
    if args.rows < 0:
        raise UsageError("--rows must be 0 or more")
    from gateway.output.writers import output_file

    with output_file(args.out) as out:
        write_taxi(out, args.rows, seed=args.seed or 0)
    noun = "row" if args.rows == 1 else "rows"
    print(f"wrote {args.rows} {noun} to {args.out} ({os.path.getsize(args.out) / 1e6:.1f} MB)",
          file=sys.stderr)
    return EXIT_OK


def write_taxi(out: Any, rows: int, *, seed: int = 0) -> None:
    """Write ``rows`` taxi rows (with a header) to a binary file object."""
    import pyarrow.csv as pacsv

    out.write((",".join(TAXI_COLUMNS) + "\n").encode())
    options = pacsv.WriteOptions(include_header=False, quoting_style="none")
    for start in range(0, rows, BLOCK_ROWS):
        table = taxi_block(start, min(BLOCK_ROWS, rows - start), seed)
        pacsv.write_csv(table, out, options)


def taxi_block(start: int, n: int, seed: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    row = pa.array(range(start, start + n), pa.uint64())

    def rand(column: int) -> Any:
        # splitmix64 of (row, column, seed): unsigned arithmetic wraps in Arrow
        x = pc.add(pc.multiply(row, pa.scalar(0x9E3779B97F4A7C15, pa.uint64())),
                   pa.scalar((column * 0xBF58476D1CE4E5B9 + seed * 0x94D049BB133111EB)
                             % 2**64, pa.uint64()))
        x = pc.multiply(pc.bit_wise_xor(x, pc.shift_right(x, pa.scalar(30, pa.uint64()))),
                        pa.scalar(0xBF58476D1CE4E5B9, pa.uint64()))
        x = pc.multiply(pc.bit_wise_xor(x, pc.shift_right(x, pa.scalar(27, pa.uint64()))),
                        pa.scalar(0x94D049BB133111EB, pa.uint64()))
        return pc.bit_wise_xor(x, pc.shift_right(x, pa.scalar(31, pa.uint64())))

    def below(column: int, limit: int) -> Any:
        return pc.cast(pc.divide(rand(column), pa.scalar(2**64 // limit + 1, pa.uint64())),
                       pa.int64())

    def pick(column: int, choices: list[Any], typ: Any = None) -> Any:
        return pc.take(pa.array(choices, typ), below(column, len(choices)))

    def money(column: int, cents: int) -> Any:
        return pc.divide(pc.cast(below(column, cents), pa.float64()), 100.0)

    def coord(column: int, base: float) -> Any:
        return pc.round(pc.add(pc.divide(pc.cast(below(column, 200_000), pa.float64()), 1e6),
                               base), 6)

    def nulls_where(column: int, percent: int, values: Any) -> Any:
        return pc.if_else(pc.less(below(column, 100), percent), pa.scalar(None, values.type),
                          values)

    # 2009-01-01 .. 2016-12-31, seconds
    pickup_s = pc.add(below(2, 8 * 365 * 86400), 1230768000)
    duration = pc.add(below(3, 3600), 60)
    pickup = pc.cast(pickup_s, pa.timestamp("s"))
    dropoff = pc.cast(pc.add(pickup_s, duration), pa.timestamp("s"))
    distance = pc.divide(pc.cast(pc.add(below(11, 1500), pc.multiply(below(12, 2), below(13, 3000))),
                                 pa.float64()), 100.0)
    fare = pc.round(pc.add(pc.multiply(distance, 2.5), 2.5), 2)
    tip = money(15, 1000)
    tolls = pc.if_else(pc.less(below(16, 100), 7), 5.54, 0.0)
    total = pc.round(pc.add(pc.add(pc.add(fare, tip), tolls), 0.8), 2)
    nta = below(38, len(_NTA))
    dnta = below(48, len(_NTA))
    codes = pa.array([c for c, _ in _NTA])
    names = pa.array([name for _, name in _NTA])
    boro = below(33, len(_BOROUGHS))
    dboro = below(43, len(_BOROUGHS))
    boroughs = pa.array(_BOROUGHS)
    columns = {
        "trip_id": pc.add(pc.cast(row, pa.int64()), 1),
        "vendor_id": pick(1, ["VTS", "CMT", "DDS", "1", "2"]),
        "pickup_datetime": pickup,
        "dropoff_datetime": dropoff,
        "store_and_fwd_flag": nulls_where(4, 60, pick(5, ["N", "N", "N", "Y"])),
        "rate_code_id": pick(6, [1, 1, 1, 1, 2, 3, 5], pa.int64()),
        "pickup_longitude": coord(7, -74.05),
        "pickup_latitude": coord(8, 40.65),
        "dropoff_longitude": coord(9, -74.05),
        "dropoff_latitude": coord(10, 40.65),
        "passenger_count": pick(14, [1, 1, 1, 1, 1, 1, 2, 2, 3, 4, 5, 6, 0], pa.int64()),
        "trip_distance": distance,
        "fare_amount": fare,
        "extra": pick(17, [0.0, 0.5, 1.0]),
        "mta_tax": pick(18, [0.5, 0.5, 0.0]),
        "tip_amount": tip,
        "tolls_amount": tolls,
        "ehail_fee": pa.nulls(n, pa.float64()),
        "improvement_surcharge": pick(19, [0.3, 0.3, 0.0]),
        "total_amount": total,
        "payment_type": pick(20, ["CSH", "CRD", "CRD", "NOC", "DIS"]),
        "trip_type": nulls_where(21, 80, pick(22, [1, 2], pa.int64())),
        "pickup": pick(23, _PLACES),
        "dropoff": pick(24, _PLACES),
        "cab_type": pick(25, ["yellow", "yellow", "yellow", "green"]),
        "precipitation": money(26, 300),
        "snow_depth": pick(27, [0.0, 0.0, 0.0, 1.2, 5.9]),
        "snowfall": pick(28, [0.0, 0.0, 0.0, 0.4]),
        "max_temperature": pc.add(below(29, 60), 30),
        "min_temperature": pc.add(below(30, 40), 10),
        "average_wind_speed": money(31, 2000),
        "pickup_nyct2010_gid": pc.add(below(32, 2165), 1),
        "pickup_ctlabel": pc.divide(pc.cast(below(34, 150000), pa.float64()), 100.0),
        "pickup_borocode": pc.add(boro, 1),
        "pickup_boroname": pc.take(boroughs, boro),
        "pickup_ct2010": pc.add(below(35, 999999), 100),
        "pickup_boroct2010": pc.add(below(36, 5999999), 1000000),
        "pickup_cdeligibil": pick(37, ["I", "E"]),
        "pickup_ntacode": pc.take(codes, nta),
        "pickup_ntaname": pc.take(names, nta),
        "pickup_puma": pc.add(below(40, 400), 3701),
        "dropoff_nyct2010_gid": pc.add(below(42, 2165), 1),
        "dropoff_ctlabel": pc.divide(pc.cast(below(44, 150000), pa.float64()), 100.0),
        "dropoff_borocode": pc.add(dboro, 1),
        "dropoff_boroname": pc.take(boroughs, dboro),
        "dropoff_ct2010": pc.add(below(45, 999999), 100),
        "dropoff_boroct2010": pc.add(below(46, 5999999), 1000000),
        "dropoff_cdeligibil": pick(47, ["I", "E"]),
        "dropoff_ntacode": pc.take(codes, dnta),
        "dropoff_ntaname": pc.take(names, dnta),
        "dropoff_puma": pc.add(below(50, 400), 3701),
    }
    assert list(columns) == TAXI_COLUMNS
    return pa.table(columns)
