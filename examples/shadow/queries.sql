-- A small shadow corpus over the bundled trips data: csv (primary) vs DuckDB (reference).
-- Each statement may carry "-- name: NAME"; "-- arrowgate: rel_tol=..." loosens one query.

-- name: trips_by_cab
SELECT cab_type, count(*) AS n FROM trips GROUP BY cab_type ORDER BY n DESC;

-- name: fare_by_passengers
SELECT passenger_count, avg(total_amount) AS avg_total FROM trips GROUP BY passenger_count;

-- name: rounded_distance
SELECT round(trip_distance) AS miles, count(*) AS n FROM trips GROUP BY round(trip_distance) ORDER BY miles NULLS LAST;

-- name: payment_counts
SELECT payment_type, count(*) AS n FROM trips GROUP BY payment_type ORDER BY count(*) DESC;

-- name: biggest_fares
SELECT trip_id, total_amount FROM trips ORDER BY total_amount DESC, trip_id LIMIT 10;

-- name: null_passengers
SELECT passenger_count, count(*) AS n FROM trips GROUP BY passenger_count ORDER BY passenger_count NULLS FIRST;
