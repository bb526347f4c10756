-- The quickstart query: trips per cab type over the bundled sample data.
SELECT cab_type, count(*) AS trips, round(avg(total_amount), 2) AS avg_total
FROM trips
GROUP BY cab_type
ORDER BY trips DESC
