-- The cache epoch (issue 13): one counter that every change to what the read caches hold (a
-- token revoked, a client's terms changed, a saved address deleted) bumps in the change's own
-- transaction. A request reads it once; a cached principal or saved address is used only
-- while the counter is what it was when the value was read, so a revocation fails the very
-- next request in every process. PostgreSQL only: SQLite keeps its epoch in a file.
CREATE TABLE cache_epoch (
    id SMALLINT PRIMARY KEY CHECK (id = 1),
    n  BIGINT NOT NULL
);
INSERT INTO cache_epoch (id, n) VALUES (1, 0);
