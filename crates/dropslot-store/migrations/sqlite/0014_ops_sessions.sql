-- Dispatcher sessions (`/ops` pages, CONTRACT §12): one row per signed-in browser, like
-- `dashboard_sessions` but for an operator's staff token. Apart from the dashboard's, whose
-- rows name a client token (and every dashboard read joins a client), so a dashboard cookie
-- can never open `/ops` nor the other way round. Only the cookie's SHA-256 is stored; every
-- read joins the token and requires it unrevoked, so revoking the token ends the session.
-- Times are Unix milliseconds on the request clock.
CREATE TABLE ops_sessions (
    id             INTEGER PRIMARY KEY,
    hash           BLOB NOT NULL UNIQUE,
    staff_token_id INTEGER NOT NULL REFERENCES staff_tokens (id),
    -- The token every form of this session carries.
    csrf           TEXT NOT NULL,
    created_ms     INTEGER NOT NULL,
    -- Moved forward at most once a minute; a session idle past the limit is over.
    last_seen_ms   INTEGER NOT NULL
);
CREATE INDEX ops_sessions_by_token ON ops_sessions (staff_token_id);
