-- "New time" and "next stop" messages (CONTRACT §16, docs/notifications.md). A message is
-- now keyed by (shipment, trigger, channel, occasion): the occasion is empty for the triggers
-- sent once ever, `{date}#{n}` for the n-th `new_time` of a day (n <= 2), `{date}` for a
-- day's `next_stop`; so a retried re-timing or a second process cannot enqueue one twice.
ALTER TABLE notifications ADD COLUMN occasion TEXT NOT NULL DEFAULT '';
DROP INDEX notifications_once;
CREATE UNIQUE INDEX notifications_once ON notifications (drop_off_id, trigger_kind, channel, occasion);

-- The window a drop-off's recipient was last told for its day (Unix milliseconds), and how
-- many `new_time` messages told one; written with the live ETAs, in their transaction.
CREATE TABLE told_etas (
    drop_off_id    BIGINT NOT NULL,
    scheduled_date TEXT NOT NULL,
    from_ms        BIGINT NOT NULL,
    to_ms          BIGINT NOT NULL,
    new_times      INTEGER NOT NULL,
    PRIMARY KEY (drop_off_id, scheduled_date)
);
