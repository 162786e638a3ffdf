-- The cost of the live-ETA join on a shipment read (docs/performance.md, "Live ETA"): the
-- read-by-id shape of postgres/reads.rs with and without the LEFT JOIN on stop_etas, over
-- 200,000 shipments of which one in ten has an ETA, 20,000 reads each inside the server.
-- Run: psql "$DATABASE_URL" -f scripts/eta-join-bench.sql
DROP TABLE IF EXISTS bench_d, bench_e;
CREATE TABLE bench_d (id BIGINT PRIMARY KEY, unique_id TEXT NOT NULL UNIQUE, payload TEXT);
CREATE TABLE bench_e (shipment_unique_id TEXT PRIMARY KEY, arrival_ms BIGINT, from_ms BIGINT, to_ms BIGINT, late INT, stops_before INT);
INSERT INTO bench_d SELECT i, 'DS' || lpad(i::text, 17, '0'), repeat('x', 200) FROM generate_series(1, 200000) i;
INSERT INTO bench_e SELECT 'DS' || lpad(i::text, 17, '0'), i, i, i, 0, 1 FROM generate_series(1, 200000, 10) i;
ANALYZE bench_d; ANALYZE bench_e;
DO $$
DECLARE t0 timestamptz; r record; n int := 20000; a float; b float;
BEGIN
  t0 := clock_timestamp();
  FOR i IN 1..n LOOP
    SELECT d.id, d.unique_id, d.payload INTO r FROM unnest(ARRAY[(i * 7 % 200000) + 1]::bigint[]) WITH ORDINALITY AS w (id, ord) JOIN bench_d d ON d.id = w.id;
  END LOOP;
  a := extract(epoch from clock_timestamp() - t0) * 1e6 / n;
  t0 := clock_timestamp();
  FOR i IN 1..n LOOP
    SELECT d.id, d.unique_id, d.payload, e.arrival_ms, e.from_ms, e.to_ms, e.late, e.stops_before INTO r FROM unnest(ARRAY[(i * 7 % 200000) + 1]::bigint[]) WITH ORDINALITY AS w (id, ord) JOIN bench_d d ON d.id = w.id LEFT JOIN bench_e e ON e.shipment_unique_id = d.unique_id;
  END LOOP;
  b := extract(epoch from clock_timestamp() - t0) * 1e6 / n;
  RAISE NOTICE 'without join: % us/read, with join: % us/read', round(a::numeric, 2), round(b::numeric, 2);
END $$;
DROP TABLE bench_d, bench_e;
