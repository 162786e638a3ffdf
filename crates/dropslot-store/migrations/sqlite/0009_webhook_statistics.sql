-- Issue 27. PostgreSQL's 0009 sets when autovacuum first analyses the webhook tables, so its
-- planner keeps to their indexes from the first run. SQLite has no autovacuum statistics to
-- tune (its planner picks these tables' indexes without them), so this version changes nothing
-- here. It exists so that both backends number and name their migrations alike.
SELECT 1;
