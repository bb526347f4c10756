-- The taxi queries (Q01-Q04) over the trips source, for comparing DuckDB releases.
-- Each statement carries "-- name: NAME"; the same SQL runs on every release.

-- name: q01_count_by_cab
SELECT cab_type, count(*) FROM trips GROUP BY cab_type;

-- name: q02_avg_by_passengers
SELECT passenger_count, avg(total_amount) FROM trips GROUP BY passenger_count;

-- name: q03_count_by_passengers_year
SELECT passenger_count, year(pickup_datetime), count(*) FROM trips GROUP BY 1, 2;

-- name: q04_count_by_passengers_year_distance
SELECT passenger_count, year(pickup_datetime), round(trip_distance), count(*) FROM trips GROUP BY 1, 2, 3 ORDER BY 2, 4 DESC;
