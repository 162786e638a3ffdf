-- Issue 44: when a delivery fails (CONTRACT §15).
--
-- A client's attempts policy per mode (absent = the `[attempts]` defaults).
CREATE TABLE attempt_policies (
    client_id           BIGINT NOT NULL,
    mode                TEXT NOT NULL,
    max_attempts        BIGINT NOT NULL CHECK (max_attempts BETWEEN 1 AND 10),
    after_failure       TEXT NOT NULL,
    max_return_attempts BIGINT NOT NULL CHECK (max_return_attempts BETWEEN 1 AND 10),
    updated_at          TEXT NOT NULL,
    PRIMARY KEY (client_id, mode)
);

-- A return to the merchant: the pick-up slot it is booked into (its place is counted in
-- `slot_fill` as one pick-up stop), and the failed return attempts so far. The recipient's
-- delivery instruction (≤ 500 characters), shown to the driver and on the run sheet.
ALTER TABLE drop_off_shipments ADD COLUMN return_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE drop_off_shipments ADD COLUMN return_date TEXT;
ALTER TABLE drop_off_shipments ADD COLUMN return_slot_code TEXT;
ALTER TABLE drop_off_shipments ADD COLUMN return_slot_name TEXT;
ALTER TABLE drop_off_shipments ADD COLUMN return_start_at TEXT;
ALTER TABLE drop_off_shipments ADD COLUMN return_end_at TEXT;
ALTER TABLE drop_off_shipments ADD COLUMN instruction TEXT;
-- A pick-up plan reads the returns due on its date.
CREATE INDEX drop_off_shipments_returns ON drop_off_shipments (return_date) WHERE return_date IS NOT NULL;
