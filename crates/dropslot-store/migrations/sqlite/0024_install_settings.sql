-- What an install chose once and keeps across upgrades (docs/operations.md, "Fleet capacity:
-- choosing a mode"): `capacity_mode`, the mode of a depot whose `[capacity] mode` is not
-- configured. Written at the first start of a version that knows it: `fleet` on a database
-- with no client yet (a new install), `limits` on one already in use (an upgrade keeps what it
-- sold on). Never rewritten by the service.
CREATE TABLE install_settings (
    key   TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);
