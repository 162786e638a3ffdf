-- One row that /readyz and the check at start rewrite: proof that the database takes writes.
CREATE TABLE health_probe (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    checked_at TIMESTAMPTZ NOT NULL
);
