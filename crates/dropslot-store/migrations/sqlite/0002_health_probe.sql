-- One row that /readyz and the check at start rewrite: proof that the database takes writes.
CREATE TABLE health_probe (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    checked_at TEXT NOT NULL
);
