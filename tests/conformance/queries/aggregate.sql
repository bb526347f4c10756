-- Aggregation: GROUP BY by name, position and expression; HAVING; DISTINCT; the taxi queries.
-- Each case is "-- name: NAME" followed by one statement ending in ";".

-- name: q01_count_by_cab
SELECT cab_type, count(*) FROM trips GROUP BY cab_type;

-- name: q02_avg_by_passengers
SELECT passenger_count, avg(total_amount) FROM trips GROUP BY passenger_count;

-- name: q03_count_by_passengers_year
SELECT passenger_count, year(pickup_datetime), count(*) FROM trips GROUP BY 1, 2;

-- name: q04_count_by_passengers_year_distance
SELECT passenger_count, year(pickup_datetime), round(trip_distance), count(*) FROM trips GROUP BY 1, 2, 3 ORDER BY 2, 4 DESC;

-- name: all_aggregates
SELECT count(*) AS n, count(passenger_count) AS n_pc, count(DISTINCT pickup_zone) AS zones, sum(total_amount) AS total, avg(tip_amount) AS avg_tip, min(trip_distance) AS shortest, max(pickup_datetime) AS latest FROM trips;

-- name: group_by_expression
SELECT round(trip_distance) AS miles, count(*) AS n, sum(fare_amount) AS fares FROM trips GROUP BY round(trip_distance) ORDER BY miles NULLS LAST;

-- name: group_by_null_key
SELECT passenger_count, count(*) AS n FROM trips GROUP BY passenger_count ORDER BY passenger_count NULLS FIRST;

-- name: having
SELECT pickup_zone, count(*) AS n FROM trips GROUP BY pickup_zone HAVING count(*) > 50 ORDER BY n DESC, pickup_zone;

-- name: order_by_aggregate_desc
SELECT payment_type, count(*) AS n FROM trips GROUP BY payment_type ORDER BY count(*) DESC;

-- name: count_distinct_by_group
SELECT cab_type, count(DISTINCT passenger_count) AS kinds, min(total_amount) AS lo, max(total_amount) AS hi FROM trips GROUP BY cab_type;

-- name: empty_result_aggregate
SELECT cab_type, count(*) AS n FROM trips WHERE total_amount < 0 GROUP BY cab_type;

-- name: global_aggregate_on_empty
SELECT count(*) AS n, sum(total_amount) AS s, avg(total_amount) AS a FROM trips WHERE total_amount < 0;
