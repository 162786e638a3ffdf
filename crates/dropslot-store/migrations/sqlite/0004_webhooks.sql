-- Webhooks (issue 9): endpoints, the transactional outbox (messages and their deliveries,
-- written in the transaction of the change that causes them) and the attempt log.
-- Scheduling columns are Unix milliseconds on the system clock.

CREATE TABLE webhook_endpoints (
    id                  INTEGER PRIMARY KEY,
    client_id           INTEGER NOT NULL REFERENCES clients (id),
    mode                TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    url                 TEXT NOT NULL,
    -- JSON array of event kinds, or ["*"].
    events_json         TEXT NOT NULL,
    description         TEXT NOT NULL,
    enabled             INTEGER NOT NULL,
    -- Why the service disabled it (410 Gone, failing for days); NULL when enabled or
    -- disabled by the client.
    disabled_reason     TEXT,
    auth_header_name    TEXT,
    auth_header_value   TEXT,
    -- `whsec_…`; during a rotation the previous secret also signs until it expires.
    secret              TEXT NOT NULL,
    previous_secret     TEXT,
    previous_expires_ms INTEGER,
    -- The first failure since the last success (NULL while healthy).
    failing_since_ms    INTEGER,
    last_success_ms     INTEGER,
    last_error          TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    deleted_at          TEXT
);
CREATE INDEX webhook_endpoints_by_client ON webhook_endpoints (client_id, mode, id);

-- One event, rendered once: its body is what every delivery and retry sends.
CREATE TABLE webhook_messages (
    id          INTEGER PRIMARY KEY,
    -- `webhook-id`: random, stable across retries and resends.
    webhook_id  TEXT NOT NULL,
    client_id   INTEGER NOT NULL REFERENCES clients (id),
    mode        TEXT NOT NULL,
    event       TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

-- One message to one endpoint. `ordering_key` (the drop-off shipment) orders a stream: only
-- the oldest unfinished delivery of an (endpoint, key) is `pending`, later ones `waiting`.
-- A claimed delivery stays `pending` with `next_attempt_ms` moved to its lease's end.
CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY,
    message_id      INTEGER NOT NULL REFERENCES webhook_messages (id),
    endpoint_id     INTEGER NOT NULL REFERENCES webhook_endpoints (id),
    ordering_key    INTEGER,
    state           TEXT NOT NULL CHECK (state IN ('waiting', 'pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms INTEGER NOT NULL,
    claim           INTEGER,
    queued_ms       INTEGER NOT NULL,
    finished_ms     INTEGER,
    last_status     INTEGER,
    last_error      TEXT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_ms) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_stream ON webhook_deliveries (endpoint_id, ordering_key, id)
    WHERE state IN ('waiting', 'pending');
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, id);

CREATE TABLE webhook_attempts (
    id          INTEGER PRIMARY KEY,
    delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries (id),
    attempt     INTEGER NOT NULL,
    at          TEXT NOT NULL,
    -- The HTTP status, or NULL when no response came (connection refused, timeout).
    status      INTEGER,
    latency_ms  INTEGER NOT NULL,
    -- The response body's first 1 KB.
    response    TEXT,
    error       TEXT
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_id, id);
