-- Recipient notifications (CONTRACT §14, docs/notifications.md). One row per (drop-off
-- shipment, trigger, channel), written in the transaction of the change that causes it; the
-- unique key is what makes a retried change or a second process unable to enqueue twice.
-- `recipient` is kept in plain text only because the sender needs it; the opt-out check goes
-- by `recipient_hash` (SHA-256 of the normalised address or number).
CREATE TABLE notifications (
    id                 INTEGER PRIMARY KEY,
    client_id          INTEGER NOT NULL,
    mode               TEXT NOT NULL,
    drop_off_id        INTEGER NOT NULL,
    shipment_unique_id TEXT NOT NULL,
    trigger_kind       TEXT NOT NULL,
    channel            TEXT NOT NULL,
    recipient          TEXT NOT NULL,
    recipient_hash     TEXT NOT NULL,
    -- pending, sending, sent, failed, uncertain, opted_out, not_configured, test_mode, disabled
    state              TEXT NOT NULL,
    -- The facts the texts are rendered from at send time (date, slot, receiver, next step).
    facts_json         TEXT NOT NULL,
    -- The e-mail's Message-ID, fixed when enqueued: every attempt sends the same one.
    message_id         TEXT NOT NULL,
    attempts           INTEGER NOT NULL DEFAULT 0,
    last_error         TEXT,
    next_attempt_ms    INTEGER NOT NULL,
    lease_until_ms     INTEGER NOT NULL DEFAULT 0,
    created_at         TEXT NOT NULL,
    sent_at            TEXT
);
CREATE UNIQUE INDEX notifications_once ON notifications (drop_off_id, trigger_kind, channel);
CREATE INDEX notifications_due ON notifications (next_attempt_ms) WHERE state IN ('pending', 'sending');
CREATE INDEX notifications_by_shipment ON notifications (shipment_unique_id);

-- Every recipient ever written to, by hash: its unguessable opt-out token, and when it opted
-- out. No plaintext address or number is kept here.
CREATE TABLE notification_recipients (
    recipient_hash TEXT PRIMARY KEY,
    opt_out_token  TEXT NOT NULL UNIQUE,
    opted_out_at   TEXT
);

-- A client's settings per mode (absent = all on, no sender name).
CREATE TABLE notification_settings (
    client_id     INTEGER NOT NULL,
    mode          TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (client_id, mode)
);
