-- Dashboard sessions (issue 11): one row per signed-in browser. The cookie holds 32 random
-- bytes; only their SHA-256 is stored, like a token's. A session speaks for its token, so
-- revoking the token ends it (every read joins the token and requires it unrevoked).
-- Times are Unix milliseconds on the request clock.
CREATE TABLE dashboard_sessions (
    id           INTEGER PRIMARY KEY,
    hash         BLOB NOT NULL UNIQUE,
    token_id     INTEGER NOT NULL REFERENCES tokens (id),
    -- The token every form of this session carries.
    csrf         TEXT NOT NULL,
    created_ms   INTEGER NOT NULL,
    -- Moved forward at most once a minute; a session idle past the limit is over.
    last_seen_ms INTEGER NOT NULL
);
CREATE INDEX dashboard_sessions_by_token ON dashboard_sessions (token_id);
