-- Publishable keys (`pk_test_…`, `pk_live_…`): a client's key for its checkout page, which
-- reaches `GET /slots` only, from the origins listed with it (CORS). Apart from `tokens`, so
-- no client-token read can ever find one: their text starts `pk_`, which is how
-- authentication knows to look here. Hashed, listed and revoked like the other tokens.
CREATE TABLE publishable_keys (
    id         INTEGER PRIMARY KEY,
    client_id  INTEGER NOT NULL REFERENCES clients (id),
    mode       TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    -- SHA-256 of the key; the key itself is never stored.
    hash       BLOB NOT NULL UNIQUE,
    prefix     TEXT NOT NULL UNIQUE,
    last4      TEXT NOT NULL,
    -- The allowed origins (`https://shop.example`), one a line, as the core normalised them.
    origins    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE INDEX publishable_keys_by_client ON publishable_keys (client_id);
