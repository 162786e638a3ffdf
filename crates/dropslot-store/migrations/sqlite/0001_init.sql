-- dropslot schema v1 (SQLite). Money columns are integer minor units (cents); internal
-- instants are RFC 3339 UTC text; displayed slot times keep their local offset.

CREATE TABLE clients (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    -- Negotiated overrides (price list, limits) as JSON; NULL = configuration defaults.
    settings_json TEXT,
    created_at    TEXT NOT NULL
);

CREATE TABLE tokens (
    id         INTEGER PRIMARY KEY,
    client_id  INTEGER NOT NULL REFERENCES clients (id),
    kind       TEXT NOT NULL CHECK (kind IN ('test', 'live', 'ops')),
    -- SHA-256 of the token; the token itself is never stored.
    hash       BLOB NOT NULL UNIQUE,
    prefix     TEXT NOT NULL UNIQUE,
    last4      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE INDEX tokens_by_client ON tokens (client_id);

CREATE TABLE saved_addresses (
    id           INTEGER PRIMARY KEY,
    client_id    INTEGER NOT NULL REFERENCES clients (id),
    mode         TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    text         TEXT NOT NULL,
    normalized   TEXT NOT NULL,
    use_count    INTEGER NOT NULL DEFAULT 1,
    created_at   TEXT NOT NULL,
    last_used_at TEXT NOT NULL
);
CREATE UNIQUE INDEX saved_addresses_by_text ON saved_addresses (client_id, mode, normalized);

CREATE TABLE orders (
    id         INTEGER PRIMARY KEY,
    unique_id  TEXT NOT NULL UNIQUE,
    client_id  INTEGER NOT NULL REFERENCES clients (id),
    mode       TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    created_at TEXT NOT NULL
);
CREATE INDEX orders_by_client ON orders (client_id, mode, id);

CREATE TABLE pick_up_shipments (
    id               INTEGER PRIMARY KEY,
    unique_id        TEXT NOT NULL UNIQUE,
    order_id         INTEGER NOT NULL REFERENCES orders (id),
    client_id        INTEGER NOT NULL REFERENCES clients (id),
    mode             TEXT NOT NULL,
    saved_address_id INTEGER REFERENCES saved_addresses (id) ON DELETE SET NULL,
    status           TEXT NOT NULL,
    scheduled_date   TEXT NOT NULL,
    slot_code        TEXT NOT NULL,
    slot_name        TEXT NOT NULL,
    start_at         TEXT NOT NULL,
    end_at           TEXT NOT NULL,
    address_json     TEXT NOT NULL,
    label_token      TEXT NOT NULL UNIQUE
);
CREATE INDEX pick_up_shipments_by_order ON pick_up_shipments (order_id);

CREATE TABLE shipment_orders (
    id                    INTEGER PRIMARY KEY,
    unique_id             TEXT NOT NULL UNIQUE,
    order_id              INTEGER NOT NULL REFERENCES orders (id),
    client_id             INTEGER NOT NULL REFERENCES clients (id),
    mode                  TEXT NOT NULL,
    -- The terms the shipment was priced on, so a deletion re-prices it the same way.
    min_price             INTEGER NOT NULL,
    tax_bp                INTEGER NOT NULL,
    actual_total_price    INTEGER NOT NULL,
    actual_total_tax      INTEGER NOT NULL,
    actual_price_with_tax INTEGER NOT NULL,
    total_price           INTEGER NOT NULL,
    total_tax             INTEGER NOT NULL,
    price_with_tax        INTEGER NOT NULL
);
CREATE INDEX shipment_orders_by_order ON shipment_orders (order_id);

CREATE TABLE drop_off_shipments (
    id                  INTEGER PRIMARY KEY,
    -- Also the tracking code.
    unique_id           TEXT NOT NULL UNIQUE,
    shipment_order_id   INTEGER NOT NULL REFERENCES shipment_orders (id),
    pick_up_shipment_id INTEGER NOT NULL REFERENCES pick_up_shipments (id),
    client_id           INTEGER NOT NULL REFERENCES clients (id),
    mode                TEXT NOT NULL,
    status              TEXT NOT NULL,
    attempts            INTEGER NOT NULL DEFAULT 0,
    scheduled_date      TEXT NOT NULL,
    slot_code           TEXT NOT NULL,
    slot_name           TEXT NOT NULL,
    start_at            TEXT NOT NULL,
    end_at              TEXT NOT NULL,
    zone_code           TEXT NOT NULL,
    warehouse           TEXT NOT NULL,
    city                TEXT NOT NULL,
    address_json        TEXT NOT NULL,
    label_token         TEXT NOT NULL UNIQUE
);
CREATE INDEX drop_off_shipments_by_pick_up ON drop_off_shipments (pick_up_shipment_id);
CREATE INDEX drop_off_shipments_by_shipment_order ON drop_off_shipments (shipment_order_id);

CREATE TABLE parcels (
    id                   INTEGER PRIMARY KEY,
    drop_off_shipment_id INTEGER NOT NULL REFERENCES drop_off_shipments (id),
    client_id            INTEGER NOT NULL REFERENCES clients (id),
    mode                 TEXT NOT NULL,
    position             INTEGER NOT NULL,
    pick_up_code         TEXT NOT NULL UNIQUE,
    custom_code          TEXT,
    size_code            TEXT NOT NULL,
    weight_mg            INTEGER NOT NULL,
    price                INTEGER NOT NULL,
    label_token          TEXT NOT NULL UNIQUE,
    deleted_at           TEXT
);
CREATE INDEX parcels_by_drop_off ON parcels (drop_off_shipment_id, position);
-- A custom code is unique per client and mode among parcels that are not deleted: the
-- database, not the application, decides concurrent races.
CREATE UNIQUE INDEX parcels_live_custom_code ON parcels (client_id, mode, custom_code)
    WHERE custom_code IS NOT NULL AND deleted_at IS NULL;

-- Every status change of a shipment, in order (the tracking timeline; webhooks read it).
CREATE TABLE shipment_events (
    id              INTEGER PRIMARY KEY,
    shipment_kind   TEXT NOT NULL CHECK (shipment_kind IN ('pick_up', 'drop_off')),
    shipment_id     INTEGER NOT NULL,
    status          TEXT NOT NULL,
    previous_status TEXT,
    at              TEXT NOT NULL,
    actor           TEXT NOT NULL,
    reason          TEXT,
    proof_json      TEXT
);
CREATE INDEX shipment_events_by_shipment ON shipment_events (shipment_kind, shipment_id, id);

CREATE TABLE idempotency_keys (
    client_id    INTEGER NOT NULL REFERENCES clients (id),
    mode         TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status       INTEGER NOT NULL,
    body         TEXT NOT NULL,
    -- Unix seconds, for the 24 h window.
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (client_id, mode, key)
);
