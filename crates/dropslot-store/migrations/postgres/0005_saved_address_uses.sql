-- A saved address's use count and last use are read from its pick-ups instead of counters
-- updated by every order: an order from a merchant's usual address no longer locks that
-- address's row until its COMMIT, which made every order of a client from one address wait
-- for the one before it (docs/architecture.md, "Saved addresses on PostgreSQL").
-- The index also makes ON DELETE SET NULL a lookup.
CREATE INDEX pick_up_shipments_by_saved_address ON pick_up_shipments (saved_address_id, id);
ALTER TABLE saved_addresses DROP COLUMN use_count, DROP COLUMN last_used_at, DROP COLUMN last_used_offset;
