-- Deleting a saved address sets its pick-ups' saved_address_id to NULL (ON DELETE SET NULL):
-- an index lookup with this index instead of a scan of every pick-up.
CREATE INDEX pick_up_shipments_by_saved_address ON pick_up_shipments (saved_address_id);
