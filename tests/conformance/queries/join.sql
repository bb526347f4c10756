-- Joins between two sources. Engines without join support mark these as known gaps.
-- Each case is "-- name: NAME" followed by one statement ending in ";".

-- name: join_inner
SELECT z.borough, count(*) AS n FROM trips t JOIN zones z ON t.pickup_zone = z.zone GROUP BY z.borough;

-- name: join_left_unmatched
SELECT z.zone, count(t.trip_id) AS n FROM zones z LEFT JOIN trips t ON t.pickup_zone = z.zone GROUP BY z.zone;

-- name: subquery_in
SELECT trip_id FROM trips WHERE pickup_zone IN (SELECT zone FROM zones WHERE is_airport);
