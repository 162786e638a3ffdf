-- Proof-of-delivery files (CONTRACT §13): a signature or photo the driver app uploads before
-- the delivery that names it. The image lives here, in the database, so a backup or a copy
-- carries it and no second store has to be kept in step. `token` is the last part of the
-- proof's URL; it is kept as is (not hashed) because a replayed upload must answer the same
-- URL, and it only guards the bytes stored beside it. A proof is attached (shipment and
-- client set) in the transaction of the move that names it; an unattached one is deleted
-- after 2 days by the service's upkeep.
CREATE TABLE proofs (
    token              TEXT PRIMARY KEY,
    driver_id          TEXT NOT NULL,
    -- The upload's Idempotency-Key and the SHA-256 of its bytes: a replay answers the same URL.
    key                TEXT NOT NULL,
    request_hash       TEXT NOT NULL,
    content_type       TEXT NOT NULL,
    bytes              BLOB NOT NULL,
    size               INTEGER NOT NULL,
    created_ms         INTEGER NOT NULL,
    shipment_unique_id TEXT,
    client_id          INTEGER
);
CREATE UNIQUE INDEX proofs_by_key ON proofs (driver_id, key);
CREATE INDEX proofs_unattached ON proofs (driver_id, created_ms) WHERE shipment_unique_id IS NULL;
CREATE INDEX proofs_by_shipment ON proofs (shipment_unique_id) WHERE shipment_unique_id IS NOT NULL;
