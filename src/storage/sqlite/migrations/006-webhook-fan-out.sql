-- A change writes only its event, with the endpoints subscribed when it committed; the worker turns
-- the events past webhook_fan_out's mark into deliveries as it claims, many in one transaction. Each
-- page a transaction dirties is written to the WAL at its commit, so a delivery row and its index
-- entries written by every create had doubled the cost of a create with a subscriber.
ALTER TABLE webhook_events ADD COLUMN endpoints TEXT NOT NULL DEFAULT '[]'; -- a JSON array of endpoint ids

CREATE TABLE webhook_fan_out (
  id            INTEGER PRIMARY KEY CHECK (id = 1),
  last_event_id INTEGER NOT NULL -- every event up to this one has its deliveries
);
INSERT INTO webhook_fan_out (id, last_event_id) SELECT 1, coalesce(max(id), 0) FROM webhook_events;
