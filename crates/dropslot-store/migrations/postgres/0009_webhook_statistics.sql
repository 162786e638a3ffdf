-- Issue 27: the webhook tables' statistics from the first run. Every statement keeps its plan
-- per pooled connection (store/postgres/sql.rs), and the plan rests on the statistics of the
-- moment it was made. Autovacuum analyses (and vacuums, which also records a table's size) a
-- table after 50 changes: on a fresh database that is a table of a page or two, and every plan
-- made on those statistics reads the table whole (a sequential scan is the cheapest read of
-- one page), then keeps doing so as the table grows, until the next analyse at least a minute
-- later. Until a table is first analysed, the planner sizes it from its current pages, at least
-- ten, and looks rows up by their indexes.
--
-- So the first analyse and vacuum of each table wait until it is large enough for its
-- statistics to choose the indexes (measured with EXPLAIN, docs/performance.md "Issue 27"):
-- about 2,000 deliveries (each is written about three times: queued, leased, recorded), 2,000
-- messages, 2,000 attempts. Later analyses of the deliveries follow their growth more closely
-- than the default 10 %. No index was missing: each claim, lease, promotion and stream lookup
-- has one (0004) once the planner is not misled. Storage parameters only; nothing is rewritten.
ALTER TABLE webhook_deliveries SET (
    autovacuum_analyze_threshold = 6000,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_threshold = 6000,
    autovacuum_vacuum_insert_threshold = 6000
);
ALTER TABLE webhook_messages SET (
    autovacuum_analyze_threshold = 2000,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_threshold = 2000
);
ALTER TABLE webhook_attempts SET (
    autovacuum_analyze_threshold = 2000,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_threshold = 2000
);
