-- As SQLite's: claims are fair (docs/events.md, "Fair delivery"): each endpoint's first due
-- messages are read in its own order, and the messages in flight (leased) are counted per endpoint.
DROP INDEX webhook_deliveries_due;
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until) WHERE state = 'pending' AND lease_until IS NOT NULL;
