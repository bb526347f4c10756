-- Basic projection, filtering, ordering and limits over the bundled trips data.
-- Each case is "-- name: NAME" followed by one statement ending in ";".

-- name: select_literal
SELECT 42 AS answer, 'x' AS letter, 1.5 AS half, NULL AS nothing;

-- name: count_star
SELECT count(*) AS n FROM trips;

-- name: projection_filter
SELECT trip_id, cab_type, total_amount FROM trips WHERE total_amount > 30;

-- name: filter_and_or_not
SELECT trip_id FROM trips WHERE (cab_type = 'green' OR vendor_id = 2) AND NOT payment_type = 'cash';

-- name: filter_in_between
SELECT trip_id, passenger_count FROM trips WHERE passenger_count IN (1, 3, 5) AND trip_distance BETWEEN 1 AND 4;

-- name: filter_like
SELECT trip_id, pickup_zone FROM trips WHERE pickup_zone LIKE '%Airport%' OR pickup_zone LIKE 'S_Ho%';

-- name: filter_is_null
SELECT trip_id FROM trips WHERE passenger_count IS NULL OR trip_distance IS NULL;

-- name: order_by_limit
SELECT trip_id, total_amount FROM trips ORDER BY total_amount DESC, trip_id LIMIT 10;

-- name: order_by_nulls_first
SELECT trip_id, passenger_count FROM trips ORDER BY passenger_count NULLS FIRST, trip_id LIMIT 15;

-- name: limit_offset
SELECT trip_id FROM trips ORDER BY trip_id LIMIT 5 OFFSET 100;

-- name: arithmetic
SELECT trip_id, fare_amount + tip_amount AS paid, total_amount - fare_amount AS extras, trip_distance * 1.60934 AS km FROM trips WHERE trip_id <= 50;

-- name: integer_division
SELECT trip_id, trip_id / 7 AS q, trip_id % 7 AS r FROM trips WHERE trip_id <= 20;

-- name: case_coalesce_cast
SELECT trip_id, CASE WHEN tip_amount = 0 THEN 'none' WHEN tip_amount < 2 THEN 'small' ELSE 'big' END AS tip_band, COALESCE(passenger_count, 0) AS riders, CAST(total_amount AS INTEGER) AS whole FROM trips;

-- name: string_functions
SELECT trip_id, lower(cab_type) AS lo, upper(pickup_zone) AS up, length(pickup_zone) AS len, substr(pickup_zone, 1, 3) AS pre, trim('  ' || cab_type || '  ') AS trimmed FROM trips WHERE trip_id <= 30;

-- name: numeric_functions
SELECT trip_id, round(total_amount) AS r0, round(total_amount, 1) AS r1, abs(tip_amount - 1) AS a, floor(trip_distance) AS f, ceil(trip_distance) AS c FROM trips WHERE trip_id <= 40;

-- name: timestamp_parts
SELECT trip_id, year(pickup_datetime) AS y, month(pickup_datetime) AS m, day(pickup_datetime) AS d, hour(pickup_datetime) AS h FROM trips WHERE trip_id <= 40;

-- name: date_trunc_strftime
SELECT trip_id, date_trunc('month', pickup_datetime) AS month_start, strftime(pickup_datetime, '%Y-%m') AS ym FROM trips WHERE trip_id <= 40;
