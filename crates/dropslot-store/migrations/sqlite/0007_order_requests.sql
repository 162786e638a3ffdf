-- Asynchronous order requests (CONTRACT §3.5): accepted and durable before the 202, turned
-- into one order by a background worker. The order's insert and the request's completion
-- commit in one transaction, so a crash between them cannot create the order twice.
-- `next_attempt_ms` is on the system clock (Unix ms): when a queued request is due, or when
-- a claimed one's lease ends and another worker may take it over.
CREATE TABLE order_requests (
    id              INTEGER PRIMARY KEY,
    request_id      TEXT NOT NULL UNIQUE,
    client_id       INTEGER NOT NULL REFERENCES clients (id),
    mode            TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    status          TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'completed', 'failed')),
    -- The request body as accepted (canonical JSON) and the client's prices and limits it
    -- was validated under (a `ClientSettings` JSON): the worker validates and prices again
    -- with exactly these.
    payload         TEXT NOT NULL,
    terms           TEXT NOT NULL,
    drop_offs_count INTEGER NOT NULL,
    -- ISO 8601 with the pick-up city's offset, as the API shows them.
    created_at      TEXT NOT NULL,
    completed_at    TEXT,
    next_attempt_ms INTEGER NOT NULL,
    -- The claiming worker's random tag: only the lease holder may finish the request.
    claim           INTEGER,
    attempts        INTEGER NOT NULL DEFAULT 0,
    order_id        INTEGER REFERENCES orders (id),
    -- `{path: [messages]}` when it failed.
    errors_json     TEXT
);
CREATE INDEX order_requests_due ON order_requests (next_attempt_ms) WHERE status IN ('queued', 'processing');
CREATE INDEX order_requests_by_client ON order_requests (client_id, mode, id);
