-- Shipment lifecycle (issue 8): numbered events, delivery-attempt terms per shipment, and the
-- sandbox's "moved once" mark.

-- Each event gets its shipment's sequence number (1, 2, 3 … with no gaps), the delivery
-- attempt it concerns and, for `delivered`, its proof (`proof_json`, already present).
ALTER TABLE shipment_events ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE shipment_events ADD COLUMN attempt BIGINT;
UPDATE shipment_events e SET seq = n.seq
FROM (SELECT id, row_number() OVER (PARTITION BY shipment_kind, shipment_id ORDER BY id) AS seq
      FROM shipment_events) n
WHERE n.id = e.id;
DROP INDEX shipment_events_by_shipment;
CREATE UNIQUE INDEX shipment_events_by_seq ON shipment_events (shipment_kind, shipment_id, seq);

-- The maximum of delivery attempts the shipment was ordered with (the client's term then),
-- like the prices on `shipment_orders`; and whether a sandbox scenario has moved it (final
-- for the sandbox from then on).
ALTER TABLE drop_off_shipments ADD COLUMN max_attempts BIGINT NOT NULL DEFAULT 3;
ALTER TABLE drop_off_shipments ADD COLUMN sandbox_moved BOOLEAN NOT NULL DEFAULT FALSE;
-- The sandbox's `date` selector.
CREATE INDEX drop_off_shipments_by_date ON drop_off_shipments (client_id, mode, scheduled_date);
