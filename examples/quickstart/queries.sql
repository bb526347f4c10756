-- The quickstart corpus: questions about the bundled trips, shadowed on DuckDB by the demo.
-- Each case is "-- name: NAME" followed by one statement ending in ";".

-- name: trips_per_cab
SELECT cab_type, count(*) AS trips, round(avg(total_amount), 2) AS avg_total
FROM trips GROUP BY cab_type ORDER BY trips DESC;

-- name: riders_by_year
SELECT passenger_count, year(pickup_datetime) AS year, count(*) AS trips
FROM trips GROUP BY 1, 2 ORDER BY 2, 3 DESC, 1 NULLS LAST;

-- name: tipping_by_payment
SELECT payment_type, count(*) AS trips, sum(tip_amount) AS tips
FROM trips WHERE total_amount > 10 GROUP BY payment_type HAVING count(*) > 5 ORDER BY tips DESC;

-- name: longest_trips
SELECT trip_id, pickup_zone, trip_distance FROM trips
WHERE trip_distance IS NOT NULL ORDER BY trip_distance DESC, trip_id LIMIT 5;

-- name: trips_per_borough
SELECT z.borough, count(*) AS trips FROM trips t JOIN zones z ON t.pickup_zone = z.zone
GROUP BY z.borough ORDER BY trips DESC;
