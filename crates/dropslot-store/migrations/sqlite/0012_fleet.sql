-- The fleet (CONTRACT §12, issue 30): drivers, and the tokens of the courier's own staff.
--
-- A driver belongs to no client. `unique_id` (`DRV…`) is what the API shows; `depot` is a
-- warehouse code of the area file (checked by the service, not here: the file can change).
-- Shift times are minutes after local midnight in the depot's city; `weekdays` is the
-- core's list form (`mon,tue,…`, Monday first). A deleted driver keeps its row (its
-- routes will refer to it) with `deleted_at` set, and is invisible to every read.
CREATE TABLE drivers (
    id               INTEGER PRIMARY KEY,
    unique_id        TEXT NOT NULL UNIQUE,
    name             TEXT NOT NULL,
    phone            TEXT NOT NULL,
    depot            TEXT NOT NULL,
    vehicle_name     TEXT NOT NULL,
    capacity_parcels INTEGER NOT NULL CHECK (capacity_parcels > 0),
    capacity_kg      INTEGER NOT NULL CHECK (capacity_kg > 0),
    shift_start      INTEGER NOT NULL,
    shift_end        INTEGER NOT NULL CHECK (shift_end > shift_start),
    weekdays         TEXT NOT NULL,
    -- One more with every change: a change is written only over the version it read.
    version          INTEGER NOT NULL DEFAULT 1,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    deleted_at       TEXT
);
CREATE INDEX drivers_by_depot ON drivers (depot, id) WHERE deleted_at IS NULL;

-- Staff tokens: `operator` (bound to no client: the fleet and the day's plans) and `driver`
-- (bound to one driver: the driver app). Apart from `tokens`, whose rows each belong to a
-- client (its `client_id` is NOT NULL and every client read joins it), so no client query
-- can ever find a staff token. Their text starts `ds_operator_` or `ds_driver_`, which is
-- how authentication knows to look here. Hashed, listed and revoked like client tokens.
CREATE TABLE staff_tokens (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('operator', 'driver')),
    driver_id  INTEGER REFERENCES drivers (id),
    -- SHA-256 of the token; the token itself is never stored.
    hash       BLOB NOT NULL UNIQUE,
    prefix     TEXT NOT NULL UNIQUE,
    last4      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    CHECK ((kind = 'driver') = (driver_id IS NOT NULL))
);
CREATE INDEX staff_tokens_by_driver ON staff_tokens (driver_id) WHERE driver_id IS NOT NULL;
