-- The cache epoch (issue 13). PostgreSQL keeps it in a table (its 0008); SQLite keeps it in
-- a file beside the database (`<database>-epoch`, store/sqlite/epoch.rs), so this version
-- changes nothing here. It exists so that both backends number and name their migrations
-- alike (`dropslot copy` and the operations guide rely on it).
SELECT 1;
