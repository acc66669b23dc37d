-- As SQLite's: a change writes only its event, with the endpoints subscribed when it
-- committed, and the worker makes the deliveries. Events still to be made into deliveries are
-- found by the partial index, not by a mark: ids are taken before commit, so a lower id can
-- commit after a higher one. The delivery row, its three index entries and its two foreign-key
-- checks had made a subscribed create cost the server a third more.
ALTER TABLE webhook_events
  ADD COLUMN endpoints  bigint[] NOT NULL DEFAULT '{}',
  ADD COLUMN fanned_out boolean  NOT NULL DEFAULT true; -- the events already here have their deliveries
ALTER TABLE webhook_events ALTER COLUMN fanned_out SET DEFAULT false;
CREATE INDEX webhook_events_fan_out ON webhook_events (id) WHERE NOT fanned_out;
