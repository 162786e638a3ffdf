-- Issue 49: the webhook queue without foreign keys. Each delivery row checked its message and
-- its endpoint, and each attempt row its delivery, through a trigger that runs a locking
-- lookup per row (`SELECT … FOR KEY SHARE`): two of them for every delivery queued and one for
-- every attempt recorded, every endpoint row share-locked by every transaction that queues to
-- it. Without them the ops fan-out ran 1.045-1.063x as fast, paired (docs/architecture.md).
--
-- What the keys guarded is kept by construction: a message and its deliveries are written in
-- one statement (or one transaction that has just read the message), an attempt by the
-- transaction that moves its delivery, and no message, delivery, attempt, endpoint or client
-- row is ever deleted (an endpoint's deletion only marks it). The other tables keep theirs.
-- SQLite keeps these too: there a key is one lookup in the writer's own b-tree (its 0027 is
-- empty).
ALTER TABLE webhook_deliveries
    DROP CONSTRAINT IF EXISTS webhook_deliveries_message_id_fkey,
    DROP CONSTRAINT IF EXISTS webhook_deliveries_endpoint_id_fkey;
ALTER TABLE webhook_attempts DROP CONSTRAINT IF EXISTS webhook_attempts_delivery_id_fkey;
ALTER TABLE webhook_messages DROP CONSTRAINT IF EXISTS webhook_messages_client_id_fkey;
