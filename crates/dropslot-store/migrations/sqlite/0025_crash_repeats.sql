-- Recipient messages at least once across a crash (docs/notifications.md): a message left
-- `sending` by a process that died while handing it over is sent again, with its Message-ID,
-- once per crash; this counts those repeats (listed as `repeated_after_crash`).
ALTER TABLE notifications ADD COLUMN repeated_after_crash BIGINT NOT NULL DEFAULT 0;
