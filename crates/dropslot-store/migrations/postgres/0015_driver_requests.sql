-- The driver app's actions (CONTRACT §13): each carries an Idempotency-Key, and a replay answers
-- as the first time. The record is written in the move's own transaction, so an action is taken
-- once even when the phone sends it again after a lost answer.
CREATE TABLE driver_requests (
    driver_id          TEXT NOT NULL,
    key                TEXT NOT NULL,
    -- SHA-256 of the request's canonical body and path: the same key with another request is refused.
    request_hash       TEXT NOT NULL,
    shipment_unique_id TEXT NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (driver_id, key)
);
