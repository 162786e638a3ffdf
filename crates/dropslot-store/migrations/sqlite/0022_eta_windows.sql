-- What recipients were told (CONTRACT §17): every ETA window a drop-off's `stop_etas` row held,
-- appended in the transaction that writes `stop_etas` and only when the window changed, so
-- that the day's report can tell which window was current at any moment (the one told to the
-- recipient by the tracking page, webhooks and messages, which read `stop_etas`). Times are
-- Unix milliseconds; `at_ms` is when the window became current.
CREATE TABLE eta_windows (
    id                 INTEGER PRIMARY KEY,
    shipment_unique_id TEXT NOT NULL,
    from_ms            BIGINT NOT NULL,
    to_ms              BIGINT NOT NULL,
    at_ms              BIGINT NOT NULL
);
CREATE INDEX eta_windows_by_shipment ON eta_windows (shipment_unique_id, id);
